"""Hostile inputs, round 4 (issue 34): the native layouts' readers under deep, huge and aliased input.

One case per row of the issue and per sibling (every structured reader, every layout that maps two spellings to
one key). Classes: TRACEBACK (deep JSON), RESOURCE (header sizes, polygon vertices), WRONG (id aliasing, YOLO and
COCO coordinate conventions), UNCLEAR (a restricting list's own file and line).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trackeval.errors import InputError
from trackeval.io import structured
from trackeval.io.tables import read_csv_rows

DEEP = 200_000
FINDINGS = ["Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion"]
RIBS = [f"R{i}" for i in range(1, 11)] + [f"L{i}" for i in range(1, 11)]
NIH_HEADER = (
    "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position,"
    "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],"
)


def _xray(cli, task: str, gt: Path, pred: Path, out: Path, *extra: str):
    argv = ["evaluate", "xray", "--task", task, "--ground-truth", gt, "--predictions", pred, "--out", out]
    return cli(*argv, "--executor", "local", "--set", "bootstrap.n_resamples=50", *extra)


def _deep(key_text: str = "") -> str:
    return "{" + key_text + '"x": ' + "[" * DEEP + "]" * DEEP + "}"


# ---------------------------------------------------------------- TRACEBACK: one bounded loader


def test_r2gen_annotation_nested_200000_deep_is_one_line(cli, tmp_path):
    """The issue's row: R2Gen annotation.json nested 200,000 deep was `internal error ... RecursionError`."""
    ann = tmp_path / "annotation.json"
    ann.write_text(_deep('"report": "", '))
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"id": "a", "report": "x"}\n')
    out = tmp_path / "out"
    res = _xray(cli, "report", ann, pred, out)
    res.one_line_error("nested deeper than 64 levels", f"file={ann}", "field=depth")
    assert not out.exists()


def _coco_deep(tmp_path: Path) -> tuple[str, Path, Path]:
    gt = tmp_path / "gt.json"
    gt.write_text(_deep('"images": [], '))
    pred = tmp_path / "det.json"
    pred.write_text("[]")
    return "loc", gt, pred


def _coco_pred_deep(tmp_path: Path) -> tuple[str, Path, Path]:
    gt = tmp_path / "gt.json"
    doc = {"images": [{"id": 1, "width": 10, "height": 10}], "categories": [{"id": 1, "name": "a"}], "annotations": []}
    gt.write_text(json.dumps(doc))
    pred = tmp_path / "det.json"
    pred.write_text("[" * DEEP + "]" * DEEP)
    return "loc", pred, pred


def _paxray_deep(tmp_path: Path) -> tuple[str, Path, Path]:
    gt = tmp_path / "paxray.json"
    gt.write_text(_deep('"label_dict": {"0": "lungs"}, '))
    return "seg", gt, tmp_path


def _vindr_deep(tmp_path: Path) -> tuple[str, Path, Path]:
    gt = tmp_path / "Vindr_RibCXR_test_mask.json"
    gt.write_text("[" * DEEP + "]" * DEEP)
    return "seg", gt, gt


def _report_pred_deep(tmp_path: Path) -> tuple[str, Path, Path]:
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "a", "report": "x"}\n')
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"id": "a", "report": ' + "[" * DEEP + "]" * DEEP + "}\n")
    return "report", refs, pred


@pytest.mark.parametrize(
    "build", [_coco_deep, _coco_pred_deep, _paxray_deep, _vindr_deep, _report_pred_deep], ids=lambda f: f.__name__
)
def test_every_json_reader_refuses_deep_nesting_in_one_line(cli, tmp_path, build):
    """Siblings: COCO truth and detections, paxray.json, VinDr JSON and JSON Lines predictions share the loader."""
    task, gt, pred = build(tmp_path)
    out = tmp_path / "out"
    deep_file = pred if build in (_coco_pred_deep, _report_pred_deep) else gt
    res = _xray(cli, task, gt, pred, out)
    line = res.one_line_error("nested deeper than 64 levels", f"file={deep_file}")
    assert "RecursionError" not in line
    assert not out.exists()


def test_nnunet_dataset_json_nested_deep_is_one_line(cli, tmp_path):
    """Sibling: nnU-Net's dataset.json (umd)."""
    root = tmp_path / "Dataset001_X"
    (root / "labelsTs").mkdir(parents=True)
    (root / "dataset.json").write_text(_deep('"labels": {"background": 0}, '))
    out = tmp_path / "out"
    res = cli("evaluate", "umd", "--ground-truth", root, "--predictions", tmp_path, "--out", out)
    res.one_line_error("nested deeper than 64 levels", "dataset.json")
    assert not out.exists()


def test_imis_dataset_json_nested_deep_is_one_line(cli, tmp_path):
    """Sibling: IMIS-Bench's dataset.json."""
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "dataset.json").write_text(_deep('"labels": {"0": "background"}, '))
    out = tmp_path / "out"
    res = cli("evaluate", "imis", "--ground-truth", tmp_path / "gt", "--predictions", tmp_path, "--out", out)
    res.one_line_error("nested deeper than 64 levels", "dataset.json")
    assert not out.exists()


def test_bounded_loader_limits_per_format(tmp_path, monkeypatch):
    """The loader itself, one case per format and limit: depth just under/over 64, elements, bytes, JSON Lines'
    line, YAML (deep, repeated key with both lines, an alias bomb counted once), XML (deep, elements), CSV cells."""
    ok = tmp_path / "ok.json"
    ok.write_text("[" * 63 + "]" * 63)
    assert structured.read_json(ok) == structured.parse_json("[" * 63 + "]" * 63, file="x")
    over = tmp_path / "over.json"
    over.write_text("[" * 65 + "]" * 65)
    with pytest.raises(InputError, match="nested deeper than 64 levels") as e:
        structured.read_json(over)
    assert e.value.file == str(over)
    lines = tmp_path / "x.jsonl"
    lines.write_text('{"a": 1}\n\n{"a": ' + "[" * 100 + "]" * 100 + "}\n")
    with pytest.raises(InputError, match="nested deeper than 64 levels on line 3"):
        structured.read_jsonl(lines)

    monkeypatch.setenv("TRACKEVAL_MAX_ELEMENTS", "10")
    many = tmp_path / "many.json"
    many.write_text(json.dumps(list(range(10))))  # 11 values with the list itself
    with pytest.raises(InputError, match=r"more than 10 values \(TRACKEVAL_MAX_ELEMENTS\)"):
        structured.read_json(many)
    many.write_text(json.dumps(list(range(9))))
    assert structured.read_json(many) == list(range(9))
    csv_file = tmp_path / "t.csv"
    csv_file.write_text("a,b\n1,2\n3,4\n5,6\n7,8\n")  # 10 cells
    assert len(read_csv_rows(csv_file, ("a",))) == 4
    csv_file.write_text("a,b\n1,2\n3,4\n5,6\n7,8\n9,0\n")
    with pytest.raises(InputError, match="more than 10 cells") as e:
        read_csv_rows(csv_file, ("a",))
    assert e.value.file == str(csv_file)
    xml = tmp_path / "r.xml"
    xml.write_text("<a>" + "<b/>" * 10 + "</a>")
    with pytest.raises(InputError, match="more than 10 elements"):
        structured.read_xml(xml)
    monkeypatch.delenv("TRACKEVAL_MAX_ELEMENTS")
    xml.write_text("<a>" * 65 + "</a>" * 65)
    with pytest.raises(InputError, match="nested deeper than 64"):
        structured.read_xml(xml)
    xml.write_text("<a><b>x</b>")
    with pytest.raises(InputError, match="malformed XML"):
        structured.read_xml(xml)

    yml = tmp_path / "data.yaml"
    yml.write_text("names:\n  - a\npath: x\nnames:\n  - b\n")
    with pytest.raises(InputError, match=r"'names' is repeated \(lines 1 and 4\)") as e:
        structured.read_yaml(yml)
    assert e.value.file == str(yml)
    yml.write_text("a: " + "[" * 70 + "]" * 70 + "\n")
    with pytest.raises(InputError, match="nests deeper than 64 levels"):
        structured.read_yaml(yml)
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"] + [f"{c}: &{c} [{', '.join(['*' + p] * 10)}]" for p, c in
                                                        zip("abcdefgh", "bcdefghi", strict=True)]  # fmt: skip
    yml.write_text("\n".join(bomb) + "\n")
    assert len(structured.read_yaml(yml)["i"]) == 10  # 10^9 leaves by expansion, 100 nodes read
    yml.write_text("names: [a, b\n")
    with pytest.raises(InputError, match="malformed YAML on line 2"):
        structured.read_yaml(yml)

    monkeypatch.setenv("TRACKEVAL_MAX_FILE_BYTES", "100")
    big = tmp_path / "big.json"
    big.write_text(json.dumps("x" * 200))
    with pytest.raises(InputError, match="file is 202 bytes, more than the 100 bytes allowed"):
        structured.read_json(big)


# ---------------------------------------------------------------- RESOURCE: header sizes, polygon vertices


def _png_header(width: int, height: int) -> bytes:
    """A PNG of 45 bytes claiming ``width`` x ``height`` (signature, IHDR, an empty IDAT): no pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"")


def _vindr(tmp_path: Path, ribs: dict[str, list], png: bytes | None = None, size=(40, 30)) -> tuple[Path, Path]:
    """The released layout (``Data/Vindr_RibCXR_test_mask.json``, ``{column: {"0": value}}``, images under
    ``Data/test/img``), truth and predictions alike."""
    img = tmp_path / "Data" / "test" / "img"
    img.mkdir(parents=True)
    if png is None:
        Image.fromarray(np.zeros(size[::-1], np.uint8)).save(img / "VinDr_RibCXR_test_000.png")
    else:
        (img / "VinDr_RibCXR_test_000.png").write_bytes(png)
    table = {"img": {"0": "data/test/img/VinDr_RibCXR_test_000.png"}}
    table.update({r: {"0": ribs.get(r, "None")} for r in RIBS})
    gt = tmp_path / "Data" / "Vindr_RibCXR_test_mask.json"
    gt.write_text(json.dumps(table))
    pred = tmp_path / "pred" / "predictions.json"
    pred.parent.mkdir()
    pred.write_text(json.dumps(table))
    return gt, pred


def test_vindr_png_header_size_is_checked_before_allocation(cli, tmp_path, monkeypatch):
    """The issue's row: a 45-byte PNG claiming 3000 x 3000 built two 180 M-element stacks under a 1 M limit."""
    monkeypatch.setenv("TRACKEVAL_MAX_VOXELS", "1000000")
    png = _png_header(3000, 3000)
    assert len(png) == 45
    gt, pred = _vindr(tmp_path, {"R1": [{"x": 1, "y": 1}, {"x": 9, "y": 1}, {"x": 9, "y": 9}]}, png=png)
    out = tmp_path / "out"
    res = _xray(cli, "seg", gt, pred, out)
    res.one_line_error("(20, 3000, 3000) = 180000000 elements exceeds the limit of 1000000", "field=size",
                       "VinDr_RibCXR_test_000.png")  # fmt: skip
    assert not out.exists()


def test_yolo_image_header_size_is_checked(tmp_path, monkeypatch):
    """Sibling: every size read from a header goes through image_size's check (YOLO reads image headers)."""
    from trackeval.io.images import image_size

    monkeypatch.setenv("TRACKEVAL_MAX_VOXELS", "1000000")
    assert image_size(_png_header(1000, 1000), file="a.png") == (1000, 1000)
    with pytest.raises(InputError, match="exceeds the limit"):
        image_size(_png_header(1001, 1000), file="a.png")
    with pytest.raises(InputError, match=r"\(20, 300, 300\)"):
        image_size(_png_header(300, 300), file="a.png", planes=20)


def _ring(n: int, cx=20.0, cy=15.0, r=8.0) -> list[dict[str, float]]:
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return [{"x": float(cx + r * np.cos(a)), "y": float(cy + r * np.sin(a))} for a in t]


def test_vindr_polygon_vertices_are_bounded(cli, tmp_path, monkeypatch):
    """The issue's row: one rib of 150,000 points took 1.38 GB; the vertex limits refuse it by name, per polygon
    and per file, and under the limits the same polygon is scored (its own prediction: Dice 1)."""
    gt, pred = _vindr(tmp_path, {"R1": _ring(1500), "L2": _ring(1500, cx=15)})
    monkeypatch.setenv("TRACKEVAL_MAX_POLYGON_VERTICES", "1000")
    res = _xray(cli, "seg", gt, pred, tmp_path / "o1")
    res.one_line_error("polygon of 1500 vertices exceeds the limit of 1000", "field=R1", f"file={gt}")
    monkeypatch.setenv("TRACKEVAL_MAX_POLYGON_VERTICES", "2000")
    monkeypatch.setenv("TRACKEVAL_MAX_TOTAL_VERTICES", "2500")
    res = _xray(cli, "seg", gt, pred, tmp_path / "o2")
    res.one_line_error("exceed 2500 vertices in all", "field=L2")
    monkeypatch.delenv("TRACKEVAL_MAX_TOTAL_VERTICES")
    res = _xray(cli, "seg", gt, pred, tmp_path / "o3")
    assert res.rc == 0, res.err
    agg = json.loads((tmp_path / "o3" / "results.json").read_text())["aggregates"]
    assert agg["xray/seg/dsc/by_class/r1"]["value"] == 1.0
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


# ---------------------------------------------------------------- WRONG: id aliasing


def _groundtruth(tmp_path: Path, n: int = 12) -> tuple[Path, list[str]]:
    """CheXpert's test ``groundtruth.csv`` (``Study`` rows, 0/1, no final newline)."""
    rng = np.random.default_rng(3)
    studies = [f"CheXpert-v1.0/test/patient{64741 + i}/study1" for i in range(n)]
    labels = rng.integers(0, 2, (n, len(FINDINGS)))
    labels[0], labels[1] = 1, 0
    rows = [",".join([s, *map(str, r)]) for s, r in zip(studies, labels, strict=True)]
    path = tmp_path / "groundtruth.csv"
    path.write_text("\n".join(["Study," + ",".join(FINDINGS), *rows]))
    return path, studies


def _scores(path: Path, key: str, ids: list[str], findings: list[str] = FINDINGS) -> Path:
    rng = np.random.default_rng(4)
    rows = [",".join([i, *(f"{v:.4f}" for v in rng.random(len(findings)))]) for i in ids]
    path.write_text("\n".join([f"{key}," + ",".join(findings), *rows]) + "\n")
    return path


def test_chexpert_prediction_spelt_two_ways_is_a_duplicate(cli, tmp_path):
    """The issue's row: `patient64743/study1` beside `CheXpert-v1.0/test/patient64743/study1` was max-pooled."""
    gt, studies = _groundtruth(tmp_path)
    pred = _scores(tmp_path / "pred.csv", "Study", [*studies, "patient64743/study1"])
    out = tmp_path / "out"
    res = _xray(cli, "cls", gt, pred, out)
    res.one_line_error("duplicate: 'patient64743/study1' (line 14) and 'CheXpert-v1.0/test/patient64743/study1' "
                       "(line 4) name the same study", f"file={pred}")  # fmt: skip
    assert not out.exists()


def test_chexpert_views_of_one_study_still_pool(cli, tmp_path):
    """Not an alias: two images of one study (their file names differ) are pooled as before."""
    gt, studies = _groundtruth(tmp_path)
    views = [f"{s}/view{v}_frontal.jpg" for s in studies for v in (1, 2)]
    pred = _scores(tmp_path / "pred.csv", "Path", views)
    res = _xray(cli, "cls", gt, pred, tmp_path / "out")
    assert res.rc == 0, res.err
    again = _scores(tmp_path / "again.csv", "Path", [*views, views[3].replace("CheXpert-v1.0/test/", "")])
    res = _xray(cli, "cls", gt, again, tmp_path / "o2")
    res.one_line_error("duplicate:", "(line 26)", "(line 5)", "view2_frontal.jpg", f"file={again}")


def test_chexpert_truth_study_spelt_two_ways_is_a_duplicate(cli, tmp_path):
    """Sibling, truth side: groundtruth.csv naming one study twice (was collapsed silently when labels agreed)."""
    gt, studies = _groundtruth(tmp_path)
    gt.write_text(gt.read_text() + "\ntest/patient64741/study1,1,1,1,1,1")
    pred = _scores(tmp_path / "pred.csv", "Study", studies)
    res = _xray(cli, "cls", gt, pred, tmp_path / "out")
    res.one_line_error("duplicate: 'test/patient64741/study1' (line 14) and", "(line 2)", f"file={gt}")


def test_mimic_study_spelt_with_and_without_s_is_a_duplicate(cli, tmp_path):
    """Sibling: MIMIC-CXR-JPG's study ids (`s50414267` and `50414267` are one study), truth and predictions."""
    header = "subject_id,study_id," + ",".join(sorted(FINDINGS))
    values = [["1.0", "0.0", "", "1.0", "0.0"], ["0.0", "1.0", "1.0", "", "-1.0"]]
    rows = [f"{10000032 + i},{50414267 + i}," + ",".join(values[i % 2]) for i in range(10)]
    gt = tmp_path / "mimic-cxr-2.0.0-chexpert.csv"
    gt.write_text("\n".join([header, *rows]) + "\n")
    pred = _scores(tmp_path / "pred.csv", "study_id", [str(50414267 + i) for i in range(10)] + ["s50414268"])
    res = _xray(cli, "cls", gt, pred, tmp_path / "out")
    res.one_line_error("duplicate: 's50414268' (line 12) and '50414268' (line 3) name the same study", str(pred))
    gt.write_text(gt.read_text() + "10000099,s50414267," + ",".join(["0.0"] * 5) + "\n")
    res = _xray(cli, "cls", gt, pred, tmp_path / "o2")
    res.one_line_error("duplicate: 's50414267' (line 12) and '50414267' (line 2)", str(gt))


def _nih(tmp_path: Path, n: int = 12) -> tuple[Path, list[str]]:
    names = [f"{i + 1:08d}_000.png" for i in range(n)]
    lines = [NIH_HEADER] + [
        f"{name},{'Effusion' if i % 2 else 'No Finding'},0,{i + 1},58,M,PA,2682,2749,0.143,0.143," for i, name in
        enumerate(names)
    ]  # fmt: skip
    gt = tmp_path / "Data_Entry_2017.csv"
    gt.write_text("\n".join(lines) + "\n")
    return gt, names


def test_nih_test_list_repeating_an_image_names_the_list_and_both_lines(cli, tmp_path):
    """The issue's row: test_list.txt listing an image twice blamed the predictions file."""
    gt, names = _nih(tmp_path)
    (tmp_path / "test_list.txt").write_text("\n".join([*names[2:], names[5]]) + "\n")
    pred = _scores(tmp_path / "pred.csv", "Image Index", names[2:], ["Effusion"])
    res = _xray(cli, "cls", gt, pred, tmp_path / "out")
    res.one_line_error(f"duplicate: image '{names[5]}' on lines 4 and 11", f"file={tmp_path / 'test_list.txt'}")
    (tmp_path / "test_list.txt").write_text("\n".join([*names[2:], "99999999_000.png"]) + "\n")
    res = _xray(cli, "cls", gt, pred, tmp_path / "o2")
    res.one_line_error("'99999999_000.png' on line 11", "test_list.txt", "field=line 11")


def test_nih_image_spelt_with_its_folder_is_a_duplicate(cli, tmp_path):
    """Sibling: NIH predictions naming one image by its file name and by a path through images_001/images/."""
    gt, names = _nih(tmp_path)
    pred = _scores(tmp_path / "pred.csv", "Image Index", [*names, f"images_001/images/{names[0]}"], ["Effusion"])
    res = _xray(cli, "cls", gt, pred, tmp_path / "out")
    res.one_line_error(f"duplicate: 'images_001/images/{names[0]}' (line 14) and '{names[0]}' (line 2)", str(pred))


# ---------------------------------------------------------------- WRONG: coordinate conventions


def _yolo(tmp_path: Path, pred_line: str) -> tuple[Path, Path]:
    root = tmp_path / "bone"
    (root / "test" / "images").mkdir(parents=True)
    (root / "test" / "labels").mkdir(parents=True)
    (root / "data.yaml").write_text("path: .\ntest: test/images\nnames: ['elbow positive', 'fingers positive']\n")
    Image.new("L", (100, 80), 0).save(root / "test" / "images" / "a.jpg")
    (root / "test" / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.25\n")
    pred = tmp_path / "labels"
    pred.mkdir()
    (pred / "a.txt").write_text(pred_line)
    return root / "data.yaml", pred


def test_yolo_predictions_in_pixels_are_refused_as_the_truth_is(cli, tmp_path):
    """The issue's row: predictions in pixels were scaled again (map_50 0.000, exit 0)."""
    gt, pred = _yolo(tmp_path, "0 50 40 20 20 0.9\n")
    res = _xray(cli, "loc", gt, pred, tmp_path / "out")
    res.one_line_error("line 1: coordinates must be normalised to [0, 1] (YOLO), got 50", "a.txt", "field=box")
    (pred / "a.txt").write_text("0 0.5 0.5 0.2 0.25 0.9\n")
    res = _xray(cli, "loc", gt, pred, tmp_path / "o2")
    assert res.rc == 0, res.err
    assert json.loads((tmp_path / "o2" / "results.json").read_text())["aggregates"]["xray/loc/map_50"][
        "value"
    ] == pytest.approx(1.0)


@pytest.mark.parametrize("side", ["truth", "predictions"])
def test_coco_boxes_must_lie_inside_their_image(cli, tmp_path, side):
    """Sibling: COCO boxes in pixels inside the image's width x height (normalised boxes would be inside, but a
    box past the edge is refused), on truth and predictions alike."""
    box_in, box_out = [10, 10, 20, 20], [90, 10, 20, 20]
    doc = {
        "images": [{"id": 1, "width": 100, "height": 80, "file_name": "a.png"}],
        "categories": [{"id": 1, "name": "nodule"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": box_out if side == "truth" else box_in}],
    }
    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps(doc))
    pred = tmp_path / "det.json"
    box = box_out if side == "predictions" else box_in
    pred.write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": box, "score": 0.9}]))
    res = _xray(cli, "loc", gt, pred, tmp_path / "out")
    res.one_line_error("reaches outside its 100 x 80 image", f"file={gt if side == 'truth' else pred}")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- UNCLEAR: the redactor masks values, not prose


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # the row: the "key" ends a quoted value, the next word is prose
        (
            "unsafe or empty case id '../../etc/passwd': letters, digits, ...",
            "unsafe or empty case id '../../etc/passwd': letters, digits, ...",
        ),
        ("the password: is required", "the password: is required"),
        ("token: abc123def more", "token: *** more"),
        ("password=hunter2 ok", "password=*** ok"),
        ('{"password": "swordfish"}', '{"password": "***"}'),
        ("{'api_key': 'abcd1234'}", "{'api_key': '***'}"),
        ("secret = Sup3r", "secret = ***"),
    ],
)
def test_redactor_masks_values_not_prose(line, expected):
    from trackeval.io.redact import redact

    assert redact(line) == expected
