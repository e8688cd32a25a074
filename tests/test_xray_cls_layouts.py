"""``xray/cls`` native ground-truth layouts on fixtures that reproduce each published file exactly.

Each fixture follows the release's own file: CheXpert ``valid.csv`` / ``train.csv`` (``Path``, ``Sex``, ``Age``,
``Frontal/Lateral``, ``AP/PA`` then the 14 findings, values ``1.0`` / ``0.0`` / ``-1.0`` / blank) and the test
set's ``groundtruth.csv`` (``Study``, 0/1; rajpurkarlab/cheXpert-test-set-labels), MIMIC-CXR-JPG's
``mimic-cxr-2.0.0-chexpert.csv`` (``subject_id, study_id`` + 14 findings in alphabetical order), ChestX-ray14's
``Data_Entry_2017.csv`` (its header with the split bracketed columns and the trailing comma) with
``test_list.txt``, MURA's header-less ``valid_labeled_studies.csv``. Values are checked against sklearn on
arrays converted by hand from the same rows (blank -> 0, -1 left out) and numpy's max / mean for pooling.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from trackeval.api import load_config
from trackeval.benchmarks import xray
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.metrics.classification import cohen_kappa

CHEXPERT_FINDINGS = [
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
    "Support Devices",
]  # fmt: skip
CHEXPERT_HEADER = ["Path", "Sex", "Age", "Frontal/Lateral", "AP/PA", *CHEXPERT_FINDINGS]
MIMIC_FINDINGS = sorted(CHEXPERT_FINDINGS)  # mimic-cxr-2.0.0-chexpert.csv lists them alphabetically
NIH_HEADER = (
    "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position,"
    "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],"
)
COMPETITION = ["Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion"]
RNG_VALUES = ("1.0", "0.0", "-1.0", "")


def _cfg(*extra: str):
    return load_config(None, ["bootstrap.n_resamples=50", "xray.cls.min_positives=1", *extra])


def _run(gt: Path, pred: Path, *extra: str, forced: str | None = None, readers: tuple[Path, ...] = ()):
    return xray.evaluate("cls", TaskInputs(gt, pred, format=forced, readers=readers), _cfg(*extra))


def _auc(result, token: str) -> float:
    return result.aggregates[f"xray/cls/auroc/by_finding/{token}"].value


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _fmt(x: float) -> str:
    return f"{x:.6f}"


# ---------------------------------------------------------------- CheXpert train.csv / valid.csv (Path rows)


def _chexpert_valid(tmp_path: Path, n_studies: int = 40) -> tuple[Path, list[str], np.ndarray, list[int]]:
    """A valid.csv: studies of 1 to 3 views (the same label row on each view, as CheXpert labels are per study),
    label spellings drawn from 1.0 / 0.0 / -1.0 / blank. Returns the file, each study's folder, the coded labels
    per study (1, 0, -1, NaN for blank) and the number of views per study."""
    rng = np.random.default_rng(3)
    lines, studies, codes, views = [",".join(CHEXPERT_HEADER)], [], [], []
    for s in range(n_studies):
        study = f"CheXpert-v1.0-small/valid/patient{64541 + s:05d}/study1"
        values = [RNG_VALUES[k] for k in rng.integers(0, 4, len(CHEXPERT_FINDINGS))]
        n_views = int(rng.integers(1, 4))
        sex = ("Female", "Male")[s % 2]
        for v in range(n_views):
            kind, ap = ("Frontal", ("AP", "PA")[s % 2]) if v == 0 else ("Lateral", "")
            lines.append(",".join([f"{study}/view{v + 1}_{kind.lower()}.jpg", sex, str(50 + s), kind, ap, *values]))
        studies.append(study)
        codes.append([float(x) if x else math.nan for x in values])
        views.append(n_views)
    return _write(tmp_path / "valid.csv", lines), studies, np.array(codes), views


def _image_scores(studies: list[str], views: list[int], findings: list[str], seed: int) -> dict[str, np.ndarray]:
    """Per image path: scores of ``findings``."""
    rng = np.random.default_rng(seed)
    return {
        f"CheXpert-v1.0/valid/{'/'.join(study.split('/')[-2:])}/view{v + 1}_{'frontal' if v == 0 else 'lateral'}.jpg": (
            rng.random(len(findings))
        )
        for study, n in zip(studies, views, strict=True)
        for v in range(n)
    }


def test_chexpert_path_rows_pool_per_image_scores_to_the_study_by_max(tmp_path: Path) -> None:
    gt, studies, codes, views = _chexpert_valid(tmp_path)
    images = _image_scores(studies, views, COMPETITION, seed=4)
    pred = _write(tmp_path / "pred.csv", ["Path," + ",".join(COMPETITION)] + [
        ",".join([p, *map(_fmt, s)]) for p, s in images.items()
    ])  # fmt: skip
    result = _run(gt, pred)
    pooled = np.array([
        np.max([np.round(s, 6) for p, s in images.items() if "/".join(p.split("/")[-3:-1]) in study], axis=0)
        for study in studies
    ])  # fmt: skip
    assert result.config["format"] == {"ground_truth": "chexpert", "predictions": "chexpert"}
    aucs = []
    for j, f in enumerate(COMPETITION):
        c = codes[:, CHEXPERT_FINDINGS.index(f)]
        y = np.where(np.isnan(c), 0.0, c)  # blank = not mentioned = negative
        keep = y != -1  # uncertain: left out (xray.cls.uncertain=ignore)
        aucs.append(roc_auc_score(y[keep], pooled[keep, j]))
        assert _auc(result, f.lower().replace(" ", "_")) == pytest.approx(aucs[-1], abs=1e-12)
    assert result.aggregates["xray/cls/auroc"].value == pytest.approx(np.mean(aucs), abs=1e-12)
    assert [c.case_id for c in result.cases] == studies
    assert {c.subject_id for c in result.cases} == {s.split("/")[-2] for s in studies}
    first = result.cases[0]  # patient64541: Female, AP frontal; its views decide the view group
    assert first.groups["sex"] == "female" and first.groups["projection"] == "ap"
    assert first.groups["view"] == ("frontal" if views[0] == 1 else "frontal_lateral")
    assert any("without predictions" in w and "Support Devices" in w for w in result.warnings)


def test_chexpert_pool_mean_and_blank_uncertain_override(tmp_path: Path) -> None:
    gt, studies, codes, views = _chexpert_valid(tmp_path)
    images = _image_scores(studies, views, ["Edema"], seed=5)
    pred = _write(tmp_path / "pred.csv", ["Path,Edema"] + [f"{p},{_fmt(s[0])}" for p, s in images.items()])
    result = _run(gt, pred, "xray.cls.pool=mean", "xray.cls.blank=uncertain")
    pooled = np.array([
        np.mean([round(s[0], 6) for p, s in images.items() if "/".join(p.split("/")[-3:-1]) in study])
        for study in studies
    ])  # fmt: skip
    c = codes[:, CHEXPERT_FINDINGS.index("Edema")]
    keep = ~np.isnan(c) & (c != -1)  # blank now uncertain: left out with the -1
    assert _auc(result, "edema") == pytest.approx(roc_auc_score(c[keep], pooled[keep]), abs=1e-12)
    assert result.summary["n_uncertain_labels"] == int((~keep).sum())


def test_chexpert_study_labels_must_agree_across_views(tmp_path: Path) -> None:
    row = ["CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg", "Female", "68", "Frontal", "AP"]
    other = ["CheXpert-v1.0-small/train/patient00001/study1/view2_lateral.jpg", "Female", "68", "Lateral", ""]
    blank = [""] * 14
    gt = _write(tmp_path / "train.csv", [",".join(CHEXPERT_HEADER), ",".join(row + ["1.0", *blank[1:]]),
                                         ",".join(other + blank)])  # fmt: skip
    pred = _write(tmp_path / "pred.csv", ["Study,No Finding", "CheXpert-v1.0/train/patient00001/study1,0.5"])
    with pytest.raises(InputError, match=r"labels of study 'patient00001/study1' differ between lines 2 and 3"):
        _run(gt, pred)


# ---------------------------------------------------------------- CheXpert test groundtruth.csv (Study rows)


def _groundtruth(tmp_path: Path, n: int = 60, seed: int = 6) -> tuple[Path, list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, (n, len(CHEXPERT_FINDINGS)))
    studies = [f"CheXpert-v1.0/test/patient{64741 + i}/study1" for i in range(n)]
    lines = ["Study," + ",".join(CHEXPERT_FINDINGS)] + [
        ",".join([s, *map(str, row)]) for s, row in zip(studies, labels, strict=True)
    ]
    path = tmp_path / "CheXpert" / "groundtruth.csv"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")  # the release's file ends without a newline
    return path, studies, labels


def test_groundtruth_study_rows_and_five_competition_findings(tmp_path: Path) -> None:
    gt, studies, labels = _groundtruth(tmp_path)
    scores = np.random.default_rng(7).random((len(studies), len(COMPETITION)))
    pred = _write(tmp_path / "pred.csv", ["Study," + ",".join(COMPETITION)] + [
        ",".join([s, *map(_fmt, row)]) for s, row in zip(studies, scores, strict=True)
    ])  # fmt: skip
    result = _run(gt, pred)
    expected = [roc_auc_score(labels[:, CHEXPERT_FINDINGS.index(f)], np.round(scores[:, j], 6))
                for j, f in enumerate(COMPETITION)]  # fmt: skip
    assert result.aggregates["xray/cls/auroc"].value == pytest.approx(np.mean(expected), abs=1e-12)
    assert result.summary["n_findings"] == 5
    assert not any("pneumothorax" in k for k in result.aggregates)
    native = sha256_files(gt)
    assert result.data.ground_truth_digest != native  # the layout is part of the data's identity


def test_findings_config_selects_and_checks(tmp_path: Path) -> None:
    gt, studies, _ = _groundtruth(tmp_path)
    pred = _write(tmp_path / "pred.csv", ["Study,Edema,Atelectasis"] + [f"{s},0.2,0.{i % 9}" for i, s in
                                                                        enumerate(studies)])  # fmt: skip
    only = _run(gt, pred, "xray.cls.findings=[Edema]")
    assert only.summary["n_findings"] == 1 and "xray/cls/auroc/by_finding/edema" in only.aggregates
    with pytest.raises(InputError, match=r"xray.cls.findings \['Fracture'\] not in the columns"):
        _run(gt, pred, "xray.cls.findings=[Fracture]")
    bad = _write(tmp_path / "bad.csv", ["Study,Edemma"] + [f"{s},0.2" for s in studies])
    with pytest.raises(InputError, match=r"unknown finding column\(s\) \['Edemma'\]"):
        _run(gt, bad)


# ---------------------------------------------------------------- MIMIC-CXR-JPG chexpert labels


def test_mimic_chexpert_csv_pools_dicom_rows_and_clusters_by_subject(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    rows, codes, subjects, studies = [], [], [], []
    for i in range(40):
        values = [RNG_VALUES[k] for k in rng.integers(0, 4, 14)]
        subject, study = str(10000032 + i // 2), str(50414267 + i)
        rows.append(",".join([subject, study, *values]))
        codes.append([float(x) if x else 0.0 for x in values])  # blank = negative
        subjects.append(subject)
        studies.append(study)
    gt = _write(tmp_path / "mimic-cxr-2.0.0-chexpert.csv", ["subject_id,study_id," + ",".join(MIMIC_FINDINGS), *rows])
    images = {(st, f"{k:08x}-dicom"): rng.random() for st in studies for k in range(1 + int(st) % 2)}
    pred = _write(tmp_path / "pred.csv", ["dicom_id,study_id,Edema"] + [f"{d},{st},{_fmt(v)}" for (st, d), v in
                                                                        images.items()])  # fmt: skip
    result = _run(gt, pred)
    pooled = np.array([max(round(v, 6) for (st, _), v in images.items() if st == s) for s in studies])
    y = np.array(codes)[:, MIMIC_FINDINGS.index("Edema")]
    keep = y != -1
    assert _auc(result, "edema") == pytest.approx(roc_auc_score(y[keep], pooled[keep]), abs=1e-12)
    assert [c.subject_id for c in result.cases] == subjects
    assert result.config["format"] == {"ground_truth": "mimic-cxr", "predictions": "mimic-cxr"}


# ---------------------------------------------------------------- NIH ChestX-ray14 Data_Entry_2017.csv


NIH = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax",
       "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia"]  # fmt: skip


def test_nih_data_entry_with_test_list(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    lines, labels, names = [NIH_HEADER], {}, []
    for i in range(80):
        name = f"{i // 3 + 1:08d}_{i % 3:03d}.png"
        found = [f for f in NIH if rng.random() < 0.3] or ["No Finding"]
        lines.append(f"{name},{'|'.join(found)},{i % 3},{i // 3 + 1},58,{'MF'[i % 2]},{('PA', 'AP')[i % 2]},"
                     "2682,2749,0.14300000000000002,0.14300000000000002,")  # fmt: skip
        labels[name] = [float(f in found) for f in NIH]
        names.append(name)
    gt = _write(tmp_path / "Data_Entry_2017.csv", lines)
    test_names = names[20:]
    _write(tmp_path / "test_list.txt", test_names)
    scores = {n: rng.random(2) for n in test_names}
    pred = _write(tmp_path / "pred.csv", ["Image Index,Effusion,Mass"] + [
        f"images_001/images/{n},{_fmt(s[0])},{_fmt(s[1])}" for n, s in scores.items()
    ])  # fmt: skip
    result = _run(gt, pred)
    for j, f in enumerate(["Effusion", "Mass"]):
        y = np.array([labels[n][NIH.index(f)] for n in test_names])
        s = np.array([round(scores[n][j], 6) for n in test_names])
        assert _auc(result, f.lower()) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert [c.case_id for c in result.cases] == test_names
    assert result.cases[0].subject_id == str(20 // 3 + 1)
    assert result.cases[0].groups == {"sex": "m", "projection": "pa"}
    assert result.data.n_cases == 60
    _write(tmp_path / "test_list.txt", [*test_names, "99999999_000.png"])
    with pytest.raises(InputError, match=r"1 listed image\(s\) not in Data_Entry_2017.csv.*test_list.txt"):
        _run(gt, pred)


def test_nih_unknown_finding_label_names_the_line(tmp_path: Path) -> None:
    gt = _write(tmp_path / "Data_Entry_2017.csv", [NIH_HEADER, "00000001_000.png,Cardiomegally,0,1,58,M,PA,1,1,1,1,"])
    pred = _write(tmp_path / "pred.csv", ["Image Index,Cardiomegaly", "00000001_000.png,0.5"])
    with pytest.raises(InputError, match=r"finding 'Cardiomegally' on line 2"):
        _run(gt, pred)


# ---------------------------------------------------------------- MURA


def _mura(tmp_path: Path, n: int = 40) -> tuple[Path, list[str], np.ndarray, dict[str, float]]:
    rng = np.random.default_rng(10)
    parts = ("XR_WRIST", "XR_ELBOW", "XR_SHOULDER")
    studies, labels, images = [], [], {}
    for i in range(n):
        y = int(rng.integers(0, 2))
        study = (
            f"MURA-v1.1/valid/{parts[i % 3]}/patient{11185 + i // 2}/study{1 + i % 2}_{('negative', 'positive')[y]}/"
        )
        studies.append(study)
        labels.append(y)
        for k in range(int(rng.integers(1, 4))):
            images[f"{study}image{k + 1}.png"] = float(np.clip(0.35 * y + rng.random() * 0.7, 0, 1))
    gt = tmp_path / "valid_labeled_studies.csv"
    gt.write_text("".join(f"{s},{y}\n" for s, y in zip(studies, labels, strict=True)), encoding="utf-8")
    return gt, studies, np.array(labels), images


def test_mura_studies_pool_images_by_mean_and_report_kappa(tmp_path: Path) -> None:
    gt, studies, y, images = _mura(tmp_path)
    pred = tmp_path / "predictions.csv"
    pred.write_text("".join(f"{p},{_fmt(v)}\n" for p, v in images.items()), encoding="utf-8")
    result = _run(gt, pred)
    pooled = np.array([np.mean([round(v, 6) for p, v in images.items() if p.startswith(s)]) for s in studies])
    assert _auc(result, "abnormal") == pytest.approx(roc_auc_score(y, pooled), abs=1e-12)
    expected = cohen_kappa_score(y, (pooled >= 0.5).astype(int))
    assert result.aggregates["xray/cls/kappa"].value == pytest.approx(expected, abs=1e-12)
    assert result.aggregates["xray/cls/kappa/by_finding/abnormal"].value == pytest.approx(expected, abs=1e-12)
    strict = _run(gt, pred, "xray.cls.decision_threshold=0.7")
    assert strict.aggregates["xray/cls/kappa"].value == pytest.approx(
        cohen_kappa_score(y, (pooled >= 0.7).astype(int)), abs=1e-12
    )
    assert result.cases[0].groups == {"body_part": "xr_wrist"}
    assert result.cases[0].subject_id == "patient11185"
    assert result.config["format"] == {"ground_truth": "mura", "predictions": "mura"}


def test_kappa_is_only_reported_for_mura(tmp_path: Path) -> None:
    gt, studies, _ = _groundtruth(tmp_path)
    pred = _write(tmp_path / "pred.csv", ["Study,Edema"] + [f"{s},0.{i % 9}" for i, s in enumerate(studies)])
    assert not any("kappa" in k for k in _run(gt, pred).aggregates)


@pytest.mark.parametrize("seed", range(20))
def test_cohen_kappa_kernel_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    y, s, t = rng.integers(0, 2, n), rng.random(n), float(rng.random())
    expected = cohen_kappa_score(y, (s >= t).astype(int)) if len(set(y) | set(s >= t)) > 1 else math.nan
    got = cohen_kappa(y, s, t)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- detection, --format, digests


def test_a_file_in_no_layout_names_the_file_and_every_layout(tmp_path: Path) -> None:
    gt = _write(tmp_path / "labels.csv", ["case,finding", "a,1"])
    pred = _write(tmp_path / "pred.csv", ["image_id,finding", "a,0.5"])
    with pytest.raises(InputError) as err:
        _run(gt, pred)
    text = str(err.value)
    assert "\n" not in text and "labels.csv" in text
    for name in ("generic", "chexpert", "mimic-cxr", "nih", "mura"):
        assert name in text


def test_format_forces_the_layout(tmp_path: Path) -> None:
    gt, studies, labels = _groundtruth(tmp_path)
    pred = _write(tmp_path / "pred.csv", ["image_id,Edema"] + [f"{s},0.{i % 9}" for i, s in enumerate(studies)])
    with pytest.raises(InputError, match=r"missing required column\(s\) \['image_id'\]"):
        _run(gt, pred, forced="generic")
    with pytest.raises(InputError, match=r"unknown format 'chexpertt'; expected one of \['generic', 'chexpert'"):
        _run(gt, pred, forced="chexpertt")
    forced = _run(gt, pred, forced="chexpert")  # generic-keyed predictions matched to studies by key
    assert forced.config["format"] == {"ground_truth": "chexpert", "predictions": "generic"}
    y = labels[:, CHEXPERT_FINDINGS.index("Edema")]
    s = np.array([i % 9 / 10 for i in range(len(studies))])
    assert _auc(forced, "edema") == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_generic_layout_keeps_its_digest_and_records_its_format(tmp_path: Path) -> None:
    gt = _write(tmp_path / "labels.csv", ["image_id,a", *(f"x{i},{i % 2}" for i in range(12))])
    pred = _write(tmp_path / "scores.csv", ["image_id,a", *(f"x{i},0.{i % 7}" for i in range(12))])
    result = _run(gt, pred)
    assert result.data.ground_truth_digest == sha256_files(gt)
    assert result.config["format"] == {"ground_truth": "generic", "predictions": "generic"}
    missing = _write(tmp_path / "two.csv", ["image_id,a,b", *(f"x{i},{i % 2},1" for i in range(12))])
    with pytest.raises(InputError, match=r"finding column\(s\) \['b'\] missing"):  # generic: strict as before
        _run(missing, pred)


def test_chexpert_groups_reach_the_worst_group_guard(tmp_path: Path) -> None:
    from trackeval.gate.decide import compare_unit
    from trackeval.gate.policy import resolve_policies

    gt, studies, _, views = _chexpert_valid(tmp_path, 60)
    results = []
    for seed in (4, 5):
        images = _image_scores(studies, views, COMPETITION, seed)
        rows = [",".join([p, *map(_fmt, s)]) for p, s in images.items()]
        results.append(_run(gt, _write(tmp_path / f"p{seed}.csv", ["Path," + ",".join(COMPETITION), *rows])))
    gate = _cfg().gate
    policy = resolve_policies(gate, list(xray.SPECS))["xray/cls"]
    comparison = compare_unit(results[0], results[1], policy, gate, ("candidate", "baseline"))
    assert comparison.problems == []
    keys = {r.key for r in comparison.rows}
    assert {"xray/cls/auroc/by_sex/female", "xray/cls/auroc/by_sex/male", "xray/cls/auroc/by_projection/ap"} <= keys
    assert "xray/cls/auroc/by_view/frontal" in keys


def test_validation_split_in_a_native_layout_sets_the_thresholds(tmp_path: Path) -> None:
    from sklearn.metrics import roc_curve

    gt, studies, _ = _groundtruth(tmp_path)
    pred = _write(tmp_path / "pred.csv", ["Study,Edema"] + [f"{s},0.{i % 9}" for i, s in enumerate(studies)])
    val = tmp_path / "val"
    val.mkdir()
    labels_csv, val_studies, codes, views = _chexpert_valid(val)
    labels_csv.rename(val / "labels.csv")
    images = _image_scores(val_studies, views, ["Edema"], seed=11)
    _write(val / "scores.csv", ["Path,Edema"] + [f"{p},{_fmt(s[0])}" for p, s in images.items()])
    result = xray.evaluate("cls", TaskInputs(gt, pred, validation=val), _cfg())
    assert result.config["xray_run"]["operating_point"] == "validation"
    pooled = np.array([
        max(round(s[0], 6) for p, s in images.items() if "/".join(p.split("/")[-3:-1]) in study)
        for study in val_studies
    ])  # fmt: skip
    c = codes[:, CHEXPERT_FINDINGS.index("Edema")]
    y = np.where(np.isnan(c), 0.0, c)
    keep = y != -1
    _, tpr, thresholds = roc_curve(y[keep], pooled[keep])
    expected = thresholds[np.argmax(tpr >= 0.95)]
    assert result.aggregates["xray/cls/threshold_at_sens95/by_finding/edema"].value == pytest.approx(expected)
