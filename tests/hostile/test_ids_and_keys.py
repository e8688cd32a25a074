"""Ids and config say exactly what they mean: a trailing newline is part of an id, and a YAML key is never repeated.

Ids, names and tokens are checked with a full match (``fullmatch`` / ``\\Z``): a ``$``-anchored pattern also
matches before a trailing newline, so ``img2\\n`` passed as a case id. Each id source is tried with a trailing
newline: X-ray seg file names, IMIS image and label names, 3D-MIR region files and ``mir3d.regions``, label and
class names of every section, gate keys, metric keys in results.json, unit names, model names and versions; ids
read from CSV (UMD manifests, X-ray cls/ret labels) are stripped by the documented table reader, and ids matched
across two JSON files (X-ray report, loc) are compared exactly.

PyYAML keeps the last of two equal keys; trackeval's loader (:mod:`trackeval.config.loader`) refuses the repetition
at any level, in a params file (naming the key and both lines) and in a ``--set`` value. Real files throughout.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import yaml
from PIL import Image

from tests.conftest import evaluate_argv, umd_argv
from tests.results_doc import results_doc
from trackeval.config.loader import load_yaml
from trackeval.errors import ConfigError

FAST = ("--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=20")
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------ ids with a trailing newline


def _seg_folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    for i in range(3):
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


@pytest.mark.parametrize("side", ["gt", "pred"])
def test_xray_seg_file_name_with_a_trailing_newline_is_refused(cli, tmp_path, side):
    """``img2\\n.png`` is not ``img2.png``'s image, nor an image id at all (the id becomes a file name)."""
    gt, pred, names = _seg_folders(tmp_path)
    folder = gt if side == "gt" else pred
    bad = folder / "img2\n.png"
    (folder / "img2.png").rename(bad)
    out = tmp_path / "out"
    cli(*_seg_argv(gt, pred, out, names)).one_line_error(
        "unsafe or empty case id 'img2\\n'", f"file={str(bad)!r}", "case='img2\\n'", "field=case_id"
    )
    assert not out.exists()


def _imis(tmp_path: Path, image: str, label: str | None = None) -> tuple[Path, Path]:
    """A one-image IMIS-Bench folder whose dataset.json lists ``image`` (and ``label``) as given."""
    gt = tmp_path / "gt"
    (gt / "image").mkdir(parents=True)
    (gt / "label").mkdir()
    mask = np.zeros((24, 24), bool)
    mask[4:12, 5:15] = True
    img = np.zeros((24, 24, 3), np.uint8)
    img[..., 0] = mask * 200
    Image.fromarray(img).save(gt / "image" / "c1.png")
    label = label or "label/x___c1.(1, 24, 24, 1).npz"
    (gt / label).parent.mkdir(parents=True, exist_ok=True)
    tmp = gt / "label" / "tmp.npz"  # save_npz appends ".npz" to a name that does not end in it
    scipy.sparse.save_npz(tmp, scipy.sparse.csr_matrix(mask.reshape(1, -1).astype(np.int32)))
    tmp.rename(gt / label)
    meta = {"labels": {"0": "background", "1": "liver"}, "modality": {"0": "CT\n"}, "region": "Abdomen\n"}
    (gt / "dataset.json").write_text(json.dumps({**meta, "test": [{"image": image, "label": label}]}))
    return gt, tmp_path / "out"


def _imis_argv(gt: Path, out: Path) -> list[str]:
    argv = ["evaluate", "imis", "--ground-truth", gt, "--model", "trackeval.interactive.baselines:region_grower"]
    return [*argv, "--out", out, "--set", "bootstrap.n_resamples=20", "--set", "imis.max_turns=2"]


@pytest.mark.parametrize("image", ["image/c1\n.png", "image/c1.png\n"], ids=["before-suffix", "after-suffix"])
def test_imis_image_name_with_a_trailing_newline_is_refused(cli, tmp_path, image):
    gt, out = _imis(tmp_path, image)
    case = Path(image).name.removesuffix(".png")
    cli(*_imis_argv(gt, out)).one_line_error(
        f"unsafe or empty case id {case!r}", f"file={gt / 'dataset.json'}", "field=test[0].image"
    )
    assert not out.exists()


def test_imis_label_name_with_a_trailing_newline_does_not_declare_a_shape(cli, tmp_path):
    """The dense shape is read from a name ending in ``.(C, H, W, 1).npz``; ``...npz\\n`` does not end so."""
    gt, out = _imis(tmp_path, "image/c1.png", "label/x___c1.(1, 24, 24, 1).npz\n")
    cli(*_imis_argv(gt, out)).one_line_error("label file name must end in", "case=c1")
    assert not out.exists()


def test_imis_group_values_with_a_trailing_newline_become_plain_tokens(cli, tmp_path):
    """Modality ``CT\\n`` and region ``Abdomen\\n`` are metric-key tokens ``ct`` / ``abdomen``: every key is a
    full match of the key grammar."""
    gt, out = _imis(tmp_path, "image/c1.png")
    res = cli(*_imis_argv(gt, out))
    assert res.rc == 0, res.err
    (case,) = results_doc(out)["cases"]
    assert case["case_id"] == "c1" and case["groups"] == {"modality": "ct", "region": "abdomen"}
    assert all("\n" not in key for key in results_doc(out)["aggregates"])


def _mir3d_copy(tmp_path: Path) -> tuple[Path, Path]:
    from trackeval.benchmarks.mir3d.readers import load_ground_truth
    from trackeval.demo.mir3d_baselines import data_dir, random_rankings, write_rankings

    gt = tmp_path / "mir"
    shutil.copytree(data_dir(), gt)
    ranks = write_rankings(random_rankings(load_ground_truth(data_dir()), seed=0), tmp_path / "rankings.csv")
    return gt, ranks


def test_mir3d_region_file_with_a_trailing_newline_is_refused(cli, tmp_path):
    gt, ranks = _mir3d_copy(tmp_path)
    bad = gt / "3DMIR_labels" / "colon\n_labels_and_captions.csv"
    (gt / "3DMIR_labels" / "colon_labels_and_captions.csv").rename(bad)
    out = tmp_path / "out"
    cli(*evaluate_argv("mir3d", gt, ranks, out, *FAST)).one_line_error(
        "region name 'colon\\n' must be lowercase", f"file={str(bad)!r}", "field=region"
    )
    assert not out.exists()


#: (override, field): names that become metric-key tokens, each with a trailing newline (YAML "\n" escape)
NEWLINE_NAMES = [
    ('umd.labels={"liver\\n": 1}', "umd.labels"),
    ('xray.seg.labels={"lung\\n": 255}', "xray.seg.labels"),
    ('imis.labels={"liver\\n": 1}', "imis.labels"),
    ('mir3d.regions=["colon\\n"]', "mir3d.regions"),
    ('gate.margins={"umd\\n": 0.1}', "gate.margins"),
    ('gate.floors={"xray/cls\\n": 0.5}', "gate.floors"),
]


@pytest.mark.parametrize(("override", "field"), NEWLINE_NAMES, ids=[f for _, f in NEWLINE_NAMES])
def test_config_names_with_a_trailing_newline_are_refused(cli, tmp_path, override, field):
    out = tmp_path / "out"
    line = cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--set", override)).one_line_error(
        f"field {field}:", "\\n'", rc=2
    )
    assert "lowercase letters" in line or "[a-z0-9_] tokens" in line
    assert not out.exists()


def test_umd_manifest_ids_are_stripped_by_the_table_reader(cli, umd_dataset, tmp_path):
    """CSV values are stripped (docs: "parsed as data"), so a quoted ``"s1_ct\\n"`` is the case ``s1_ct`` and
    ``"s1\\n"`` the subject ``s1`` (one cluster with s1_pet); an id with a newline inside is refused."""
    gt, pred = umd_dataset()
    manifest = gt / "manifest.csv"
    rows = list(csv.DictReader(manifest.open(newline="")))
    rows[0]["case_id"], rows[0]["subject_id"] = rows[0]["case_id"] + "\n", rows[0]["subject_id"] + "\n"
    with manifest.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "out"
    res = cli(*umd_argv(gt, pred, out, *FAST))
    assert res.rc == 0, res.err
    cases = {c["case_id"]: c["subject_id"] for c in results_doc(out)["cases"]}
    assert cases == {"s1_ct": "s1", "s1_pet": "s1", "s2_ct": "s2", "s2_pet": "s2"}
    rows[0]["case_id"] = "s1_ct\nx"
    with manifest.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
    out2 = tmp_path / "out2"
    cli(*umd_argv(gt, pred, out2, *FAST)).one_line_error(
        "unsafe or empty case id 's1_ct\\nx'", f"file={manifest}", "case='s1_ct\\nx'", "field=case_id"
    )
    assert not out2.exists()


def test_xray_cls_image_ids_are_stripped_by_the_table_reader(cli, tmp_path):
    labels, scores = tmp_path / "labels.csv", tmp_path / "scores.csv"
    with labels.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([["image_id", "a"], ["x1\n", 1], ["x2", 0], ["x3", 1]])
    with scores.open("w", newline="") as f:
        csv.writer(f).writerows([["image_id", "a"], ["x1", 0.9], ["x2", 0.2], ["x3", 0.6]])
    out = tmp_path / "out"
    res = cli(*evaluate_argv("xray", labels, scores, out, "--task", "cls", *FAST))
    assert res.rc == 0, res.err
    assert [c["case_id"] for c in results_doc(out)["cases"]] == ["x1", "x2", "x3"]


def test_xray_report_ids_are_compared_exactly(cli, tmp_path):
    """JSON ids are not stripped: ``r1\\n`` in the references and ``r1`` in the predictions are two ids."""
    refs, preds = tmp_path / "refs.jsonl", tmp_path / "preds.jsonl"
    refs.write_text("".join(json.dumps({"id": i, "report": "no acute finding"}) + "\n" for i in ("r1\n", "r2")))
    preds.write_text("".join(json.dumps({"id": i, "report": "no acute finding"}) + "\n" for i in ("r1", "r2")))
    out = tmp_path / "out"
    cli(*evaluate_argv("xray", refs, preds, out, "--task", "report", *FAST)).one_line_error(
        "prediction id(s) without a reference, e.g. 'r1'", f"file={preds}", "case=r1", "field=id"
    )
    assert not out.exists()


def test_xray_loc_image_ids_are_compared_exactly(cli, tmp_path):
    gt = {
        "images": [{"id": "img1\n"}, {"id": "img2"}],
        "categories": [{"id": 1, "name": "Nodule"}],
        "annotations": [{"id": 10, "image_id": "img1\n", "category_id": 1, "bbox": [0, 0, 10, 10]}],
    }
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    det = [{"image_id": "img1", "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.5}]
    (tmp_path / "det.json").write_text(json.dumps(det))
    out = tmp_path / "out"
    cli(
        *evaluate_argv("xray", tmp_path / "gt.json", tmp_path / "det.json", out, "--task", "loc", *FAST)
    ).one_line_error("image_id 'img1' is not in the ground truth", f"file={tmp_path / 'det.json'}", "field=image_id")
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "field"), [("--model-name", "seg\n", "name"), ("--model-version", "v1\n", "version")]
)
def test_model_name_or_version_with_a_trailing_newline_is_refused(cli, umd_dataset, tmp_path, option, value, field):
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = umd_argv(gt, pred, out, "--track", "--model-name", "seg", "--model-version", "v1", option, value)
    cli(*argv, "--set", f"tracking.uri={uri}").one_line_error("U+000A", f"field=model.{field}")
    assert not out.exists() and not (tmp_path / "mlflow.db").exists()


def test_metric_key_with_a_trailing_newline_in_results_json_is_refused(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    assert cli(*umd_argv(gt, pred, out, *FAST, "--model-name", "seg", "--model-version", "v1")).rc == 0
    data = json.loads((out / "results.json").read_text())  # the file as written: its keys are edited
    data["aggregates"]["umd/dsc\n"] = data["aggregates"].pop("umd/dsc")
    (out / "results.json").write_text(json.dumps(data))
    cli("compare", out, out).one_line_error(
        "invalid metric key 'umd/dsc\\n'", f"file={out / 'results.json'}", "field=aggregates"
    )


def test_metric_key_unit_name_and_pipeline_model_name_are_full_matches(tmp_path):
    from trackeval.pipeline.params import load_pipeline_params
    from trackeval.results import metric_key
    from trackeval.spec import UNIT_NAME

    with pytest.raises(ValueError, match="invalid metric key"):
        metric_key("umd", "dsc", "by_organ", "liver\n")
    assert metric_key("umd", "dsc", "by_organ", "liver") == "umd/dsc/by_organ/liver"
    assert UNIT_NAME.fullmatch("xray/cls") and not UNIT_NAME.fullmatch("xray/cls\n")
    assert not UNIT_NAME.match("toy\n")  # anchored with \Z: a plug-in calling .match is safe too
    params = tmp_path / "params.yaml"
    params.write_text('pipeline:\n  model_name: "seg\\n"\n')
    with pytest.raises(ConfigError, match="field pipeline.model_name"):
        load_pipeline_params(params)


# ---------------------------------------------------------------------------------------------- repeated YAML keys

#: (params file text, repeated key, where): each a ConfigError naming the file, the key and both lines
REPEATED_IN_FILE = [
    (
        "umd:\n  empty_both: perfect\nbootstrap:\n  seed: 1\numd:\n  nsd_tolerance_mm: 2.0\n",
        "umd",
        "lines 1 and 5",
    ),
    ("umd:\n  labels:\n    liver: 1\n    heart: 5\n    liver: 2\n", "umd.labels.liver", "lines 3 and 5"),
    ("xray:\n  seg:\n    labels: {lung: 255}\n    labels: {heart: 128}\n", "xray.seg.labels", "lines 3 and 4"),
    ("gate:\n  floors: {umd: 0.3, umd: 0.9}\n", "gate.floors.umd", "line 2, columns 12 and 22"),
    ('bootstrap:\n  seed: 1\n  "seed": 2\n', "bootstrap.seed", "lines 2 and 3"),
    ("pipeline:\n  model_name: seg\n  model_name: other\n", "pipeline.model_name", "lines 2 and 3"),
]


@pytest.mark.parametrize(
    ("text", "key", "lines"), REPEATED_IN_FILE, ids=["top-level", "nested", "section", "flow", "quoted", "pipeline"]
)
def test_repeated_key_in_a_params_file_is_refused(cli, tmp_path, text, key, lines):
    params = tmp_path / "params.yaml"
    params.write_text(text)
    out = tmp_path / "out"
    cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--config", params)).one_line_error(
        f"config file {params}: key '{key}' is repeated ({lines})", rc=2
    )
    assert not out.exists()


#: (--set override, repeated key as named)
REPEATED_IN_SET = [
    ("umd.labels={liver: 1, liver: 2}", "umd.labels.liver"),
    ("umd={empty_both: perfect, empty_both: nan}", "umd.empty_both"),
    ("gate={floors: {umd: 0.1, umd: 0.2}}", "gate.floors.umd"),
    ("xray.ret.ks={a: 1, a: 1}", "xray.ret.ks.a"),
]


@pytest.mark.parametrize(("override", "key"), REPEATED_IN_SET, ids=[k for _, k in REPEATED_IN_SET])
def test_repeated_key_in_a_set_value_is_refused(cli, tmp_path, override, key):
    out = tmp_path / "out"
    flag = override.partition("=")[0]
    cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--set", override)).one_line_error(
        f"--set {flag}: key '{key}' is repeated in the --set value", rc=2
    )
    assert not out.exists()


def test_repeated_key_in_the_pipeline_params_is_refused(cli, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text() + "\numd:\n  empty_both: perfect\n")
    first = 1 + next(i for i, x in enumerate((REPO / "params.yaml").read_text().splitlines()) if x == "umd:")
    cli("pipeline", "evaluate", "--params", params, "--benchmark", "umd", "--version", "v1").one_line_error(
        f"config file {params}: key 'umd' is repeated (lines {first} and", rc=2
    )


def test_the_repository_params_and_dvc_files_still_load(tmp_path):
    """params.yaml and dvc.yaml (and a YAML merge key overriding a merged value) load as PyYAML loads them."""
    from trackeval.api import load_config
    from trackeval.pipeline.params import load_pipeline_params

    for name in ("params.yaml", "dvc.yaml", "dvc.lock"):
        text = (REPO / name).read_text()
        assert load_yaml(text, where=name) == yaml.safe_load(text)
    cfg = load_config(REPO / "params.yaml")
    assert cfg.umd.labels["liver"] == 1 and cfg.umd.empty_both == "nan"
    assert load_pipeline_params(REPO / "params.yaml").model_name == "seg"
    merged = "base: &b {seed: 1, n_resamples: 50}\nbootstrap:\n  <<: *b\n  seed: 2\n"
    assert load_yaml(merged, where="x")["bootstrap"] == {"seed": 2, "n_resamples": 50}


@pytest.mark.parametrize("where", ["file", "set"])
def test_yaml_nested_too_deeply_is_a_config_error(cli, tmp_path, where):
    """PyYAML composes collections recursively: 5000 nested lists are a one-line config error, not exit 1."""
    deep = "[" * 5000 + "]" * 5000
    params = tmp_path / "params.yaml"
    params.write_text(f"umd: {deep}\n")
    out = tmp_path / "out"
    extra = ("--config", params) if where == "file" else ("--set", f"umd.labels={deep}")
    res = cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, *extra))
    res.one_line_error("the YAML is nested too deeply to read", str(params) if where == "file" else "--set umd.labels")
    assert not out.exists()


def test_safe_loading_is_kept(cli, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("umd: !!python/object/apply:os.system ['echo hacked']\n")
    out = tmp_path / "out"
    res = cli(*umd_argv(tmp_path / "gt", tmp_path / "pred", out, "--config", params))
    res.one_line_error(f"cannot read config file {params}", "python/object/apply:os.system")
    assert "hacked" not in res.out and not out.exists()
