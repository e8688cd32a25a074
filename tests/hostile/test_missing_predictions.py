"""Missing predictions are loud: one warning line naming the count and the first ids (results.json ``warnings``
too), ``missing_prediction: error`` and "no prediction matches any case" as exit 2 naming the case / folder and
the file expected, ``.nii`` predictions read like ``.nii.gz`` (both for one case is an error), and
``n_missing_predictions`` shown by ``track``, ``compare``, ``promote`` and ``leaderboard``.

Real files throughout: NIfTI via nibabel (``tests.conftest.umd_dataset``), PNG masks via Pillow, the bundled
3D-MIR labels and splits, an embedded SQLite MLflow store (``tests.test_tracking.store``).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image

from tests import test_tracking
from tests.conftest import evaluate_argv, save_nifti, umd_argv
from tests.results_doc import results_doc
from trackeval.benchmarks.mir3d.readers import load_ground_truth
from trackeval.benchmarks.missing import missing_note
from trackeval.demo.mir3d_baselines import data_dir, random_rankings, write_rankings

migrated_db, store = test_tracking.migrated_db, test_tracking.store

FAST = ("--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=50")


def _to_nii(path: Path) -> Path:
    """Rewrite ``<case>.nii.gz`` as an uncompressed ``<case>.nii`` with the same voxels and header."""
    img = nib.load(path)
    target = path.with_name(path.name[: -len(".gz")])
    save_nifti(target, np.asarray(img.dataobj), spacing=tuple(float(z) for z in img.header.get_zooms()))
    path.unlink()
    return target


# ---------------------------------------------------------------------------------------------------------- UMD


def test_one_missing_file_is_one_warning_line_with_the_count_and_the_id(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset(n_subjects=3)
    (pred / "s2_pet.nii.gz").unlink()
    out = tmp_path / "out"
    run = cli(*umd_argv(gt, pred, out, *FAST))
    assert run.rc == 0, run.err
    line = "1/6 cases have no prediction: s2_pet"
    assert run.out.count(line) == 1 and "Traceback" not in run.err
    res = results_doc(out)
    assert line in res["warnings"] and res["summary"]["n_missing_predictions"] == 1
    assert {c["case_id"]: c["status"] for c in res["cases"]}["s2_pet"] == "missing_prediction"


def test_the_warning_names_the_first_five_ids_then_dots(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset(n_subjects=4)
    for case in ("s1_ct", "s1_pet", "s2_ct", "s2_pet", "s3_ct", "s4_pet"):
        (pred / f"{case}.nii.gz").unlink()
    out = tmp_path / "out"
    run = cli(*umd_argv(gt, pred, out, *FAST))
    assert run.rc == 0, run.err
    line = "6/8 cases have no prediction: s1_ct, s1_pet, s2_ct, s2_pet, s3_ct, ..."
    assert line in run.out and line in results_doc(out)["warnings"]
    assert missing_note(["a", "b"], 3) == "2/3 cases have no prediction: a, b"


def test_missing_prediction_error_exits_2_naming_the_case_and_the_file(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset(n_subjects=3)
    (pred / "s2_pet.nii.gz").unlink()
    (pred / "s3_ct.nii.gz").unlink()
    out = tmp_path / "out"
    run = cli(*umd_argv(gt, pred, out, *FAST, "--set", "umd.missing_prediction=error"))
    run.one_line_error(
        "2/6 cases have no prediction: s2_pet, s3_ct",
        f"file={pred / 's2_pet.nii.gz'}",
        "case=s2_pet",
        "field=umd.missing_prediction",
    )
    assert not out.exists()


def test_error_policy_with_every_prediction_present_is_a_normal_run(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    run = cli(*umd_argv(gt, pred, out, *FAST, "--set", "umd.missing_prediction=error"))
    assert run.rc == 0, run.err
    res = results_doc(out)
    assert res["summary"]["n_missing_predictions"] == 0 and res["config"]["umd"]["missing_prediction"] == "error"
    assert not any("no prediction" in w for w in res["warnings"])


@pytest.mark.parametrize("policy", ["worst", "exclude"])
def test_predictions_all_misnamed_exit_2_naming_the_folder(cli, umd_dataset, tmp_path, policy):
    gt, pred = umd_dataset()
    for p in sorted(pred.iterdir()):
        p.rename(p.with_name(p.name.replace(".nii.gz", "_pred.nii.gz")))
    out = tmp_path / "out"
    run = cli(*umd_argv(gt, pred, out, *FAST, "--set", f"umd.missing_prediction={policy}"))
    run.one_line_error(
        f"no prediction in {pred} matches a case",
        "expected names like s1_ct.nii.gz, s1_pet.nii.gz, s2_ct.nii.gz (or .nii)",
        "found 4 other file(s), e.g. s1_ct_pred.nii.gz",
        f"file={pred}",
    )
    assert not out.exists()


def test_a_wrong_predictions_folder_exits_2_naming_it(cli, umd_dataset, tmp_path):
    gt, _ = umd_dataset()
    wrong = tmp_path / "empty"
    wrong.mkdir()
    out = tmp_path / "out"
    cli(*umd_argv(gt, wrong, out, *FAST)).one_line_error(
        f"no prediction in {wrong} matches a case", "expected names like s1_ct.nii.gz", "found no other file"
    )
    assert not out.exists()


def test_nii_predictions_are_matched_and_score_as_nii_gz(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    run = cli(*umd_argv(gt, pred, tmp_path / "gz", *FAST))
    assert run.rc == 0, run.err
    plain = tmp_path / "plain"
    shutil.copytree(pred, plain)
    for p in sorted(plain.glob("*.nii.gz")):
        assert _to_nii(p).read_bytes()[344:348] == b"n+1\x00"  # an uncompressed single-file NIfTI-1
    assert not list(plain.glob("*.nii.gz"))
    run = cli(*umd_argv(gt, plain, tmp_path / "nii", *FAST))
    assert run.rc == 0, run.err
    a, b = results_doc(tmp_path / "gz"), results_doc(tmp_path / "nii")
    assert b["summary"]["n_missing_predictions"] == 0 and not any("no prediction" in w for w in b["warnings"])
    assert b["aggregates"]["umd/dsc"] == a["aggregates"]["umd/dsc"]
    dice = {c["case_id"]: {o: m.get("dsc") for o, m in c["metrics"].items()} for c in a["cases"]}
    assert {c["case_id"]: {o: m.get("dsc") for o, m in c["metrics"].items()} for c in b["cases"]} == dice


def test_a_nii_ground_truth_is_read_too(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    assert cli(*umd_argv(gt, pred, tmp_path / "gz", *FAST)).rc == 0
    _to_nii(gt / "s1_ct.nii.gz")
    run = cli(*umd_argv(gt, pred, tmp_path / "nii", *FAST))
    assert run.rc == 0, run.err
    assert (
        results_doc(tmp_path / "nii")["aggregates"]["umd/dsc"] == results_doc(tmp_path / "gz")["aggregates"]["umd/dsc"]
    )


def test_nii_and_nii_gz_for_one_case_exit_2_naming_both(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    gz = pred / "s1_ct.nii.gz"
    shutil.copy(gz, tmp_path / "keep.nii.gz")
    _to_nii(gz)
    shutil.copy(tmp_path / "keep.nii.gz", gz)
    out = tmp_path / "out"
    cli(*umd_argv(gt, pred, out, *FAST)).one_line_error(
        "two label maps for one case: s1_ct.nii.gz and s1_ct.nii", f"file={gz}", "case=s1_ct"
    )
    assert not out.exists()


# ----------------------------------------------------------------------------------------------------- X-ray seg


def _seg_folders(tmp_path: Path, n: int = 4) -> tuple[Path, Path, Path]:
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    for i in range(n):
        mask = np.zeros((12, 12), np.uint8)
        mask[2 : 6 + i, 3:9] = 255
        Image.fromarray(mask).save(gt / f"img{i}.png")
        Image.fromarray(np.roll(mask, 1, axis=0)).save(pred / f"img{i}.png")
    names = tmp_path / "names.csv"
    with names.open("w", newline="") as f:
        csv.writer(f).writerows([["id", "name"], [255, "lung"]])
    return gt, pred, names


def _seg_argv(gt: Path, pred: Path, out: Path, names: Path, *extra: str) -> list[str]:
    return [*evaluate_argv("xray", gt, pred, out, "--task", "seg", "--label-names", str(names)), *FAST, *extra]


def test_xray_seg_missing_prediction_warns_then_errors_on_policy(cli, tmp_path):
    gt, pred, names = _seg_folders(tmp_path)
    (pred / "img2.png").unlink()
    out = tmp_path / "out"
    run = cli(*_seg_argv(gt, pred, out, names))
    assert run.rc == 0, run.err
    line = "1/4 cases have no prediction: img2"
    assert run.out.count(line) == 1 and line in results_doc(out)["warnings"]
    assert results_doc(out)["summary"]["n_missing_predictions"] == 1
    out2 = tmp_path / "out2"
    cli(*_seg_argv(gt, pred, out2, names, "--set", "xray.seg.missing_prediction=error")).one_line_error(
        line, f"file={pred / 'img2.png'}", "case=img2", "field=xray.seg.missing_prediction"
    )
    assert not out2.exists()


def test_xray_seg_predictions_all_misnamed_exit_2_naming_the_folder(cli, tmp_path):
    gt, pred, names = _seg_folders(tmp_path)
    for p in sorted(pred.iterdir()):
        p.rename(p.with_name(p.stem + "_pred.png"))
    out = tmp_path / "out"
    cli(*_seg_argv(gt, pred, out, names)).one_line_error(
        f"no prediction in {pred} matches a case",
        "expected names like img0.png, img1.png, img2.png",
        "found 4 other file(s), e.g. img0_pred.png",
        f"file={pred}",
    )
    assert not out.exists()


# --------------------------------------------------------------------------------------------- 3D-MIR and report


def test_mir3d_query_without_a_ranking_warns_and_no_matching_ranking_is_an_error(cli, tmp_path):
    truth = load_ground_truth(data_dir())
    rows = random_rankings(truth, seed=0)
    first = truth["colon"].queries[0]
    ranks = write_rankings([r for r in rows if (r[0], r[1]) != ("colon", first)], tmp_path / "rankings.csv")
    out = tmp_path / "out"
    run = cli(*evaluate_argv("mir3d", data_dir(), ranks, out, *FAST))
    assert run.rc == 0, run.err
    n = sum(len(t.queries) for t in truth.values())
    line = f"1/{n} cases have no prediction: colon/{first}"
    assert run.out.count(line) == 1 and line in results_doc(out)["warnings"]
    assert results_doc(out)["summary"]["n_missing_predictions"] == 1
    lung_only = write_rankings([r for r in rows if r[0] == "lung"], tmp_path / "lung.csv")
    out2 = tmp_path / "out2"
    cli(*evaluate_argv("mir3d", data_dir(), lung_only, out2, *FAST, "--set", "mir3d.regions=[colon]")).one_line_error(
        f"no prediction in {lung_only} matches a case",
        f"expected queries like colon/{first}",
        "row(s) of regions not selected by mir3d.regions",
        f"file={lung_only}",
    )
    assert not out2.exists()


def test_xray_report_reference_without_a_prediction_is_one_warning_line(cli, tmp_path):
    refs, preds = tmp_path / "refs.jsonl", tmp_path / "preds.jsonl"
    texts = {f"r{i}": f"no acute finding number {i}" for i in range(3)}
    refs.write_text("".join(json.dumps({"id": k, "report": v}) + "\n" for k, v in texts.items()))
    preds.write_text("".join(json.dumps({"id": k, "report": v}) + "\n" for k, v in texts.items() if k != "r1"))
    out = tmp_path / "out"
    run = cli(*evaluate_argv("xray", refs, preds, out, "--task", "report", *FAST))
    assert run.rc == 0, run.err
    line = "1/3 cases have no prediction: r1"
    assert run.out.count(line) == 1 and results_doc(out)["warnings"] == [line]


def test_imis_image_without_a_log_line_is_one_warning_line(cli, tmp_path):
    from tests.test_imis import ORACLE, write_imis
    from trackeval.benchmarks.imis.config import IMISConfig
    from trackeval.benchmarks.imis.runner import write_log

    square = np.zeros((24, 24), bool)
    square[2:12, 2:12] = True
    gt = write_imis(tmp_path / "gt", {c: np.stack([square, np.zeros_like(square)]) for c in ("c1", "c2", "c3")})
    log = write_log(gt, ORACLE, tmp_path / "log", IMISConfig(max_turns=2))
    partial = log.with_name("partial.jsonl")
    partial.write_text("".join(x for x in log.read_text().splitlines(True) if json.loads(x)["case_id"] != "c2"))
    out = tmp_path / "out"
    argv = ["evaluate", "imis", "--ground-truth", gt, "--predictions", partial, "--out", out]
    run = cli(*argv, *FAST, "--set", "imis.max_turns=2")
    assert run.rc == 0, run.err
    line = "1/3 cases have no prediction: c2"
    assert run.out.count(line) == 1 and line in results_doc(out)["warnings"]
    assert results_doc(out)["summary"]["n_missing_predictions"] == 1


# ----------------------------------------------------------------------------- track, compare, promote, leaderboard


def test_track_compare_promote_and_leaderboard_show_the_count(cli, store, umd_dataset, tmp_path):
    sets, _ = store
    gate = ("--set", "gate.floors.umd=0.0")
    gt, pred = umd_dataset()
    partial = tmp_path / "pred_v2"
    shutil.copytree(pred, partial)
    (partial / "s2_pet.nii.gz").unlink()
    folders = {}
    for version, folder in (("v1", pred), ("v2", partial)):
        folders[version] = tmp_path / f"out_{version}"
        argv = umd_argv(gt, folder, folders[version], *FAST, "--model-name", "seg", "--model-version", version)
        assert cli(*argv).rc == 0
    shown = "umd: {} has 1 missing prediction(s) (n_missing_predictions=1)"

    run = cli("track", folders["v1"], folders["v2"], *sets)
    assert run.rc == 0, run.err
    assert shown.format("seg/v2") in run.err and "seg/v1 has" not in run.err

    run = cli("compare", folders["v2"], folders["v1"], "--markdown", tmp_path / "cmp.md", *sets)
    assert run.rc == 0, run.err
    assert shown.format(f"A={folders['v2']}") in run.out and f"B={folders['v1']} has" not in run.out
    assert shown.format(f"A={folders['v2']}") in (tmp_path / "cmp.md").read_text()
    run = cli("compare", "seg/v1", "seg/v2", *sets)
    assert run.rc == 0, run.err
    assert shown.format("B=seg/v2") in run.out

    run = cli("promote", "--model", "seg", "--candidate", "v2", *gate, *sets)  # first version: floors only
    assert run.rc == 0, run.err
    assert shown.format("candidate v2") in run.out
    run = cli("promote", "--model", "seg", "--candidate", "v1", "--dry-run", *gate, *sets)
    assert run.rc in (0, 1), run.err
    assert shown.format("champion v2") in run.out and "candidate v1 has" not in run.out

    md = tmp_path / "board.md"
    run = cli("leaderboard", "--model", "seg", "--markdown", md, *sets)
    assert run.rc == 0, run.err
    assert shown.format("seg/v2") in run.out and shown.format("seg/v1") not in run.out
    assert shown.format("seg/v2") in md.read_text()
