"""``trackeval evaluate xray``: the five tasks end to end on real data, and bad input for each."""

from __future__ import annotations

import csv
import json
import struct
import zlib
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge
from scipy import ndimage
from sklearn.metrics import roc_auc_score, roc_curve

from tests.results_doc import results_doc
from tests.xray_cli import fail_line, run_task
from trackeval.demo.xray_data import NIH_FINDINGS, iu_xray_reports, lung_masks, nih_findings
from trackeval.metrics.text import tokenize


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _agg(result: dict, key: str) -> float:
    return result["aggregates"][key]["value"]


# ---------------------------------------------------------------- cls: NIH ChestX-ray14 label table


@pytest.fixture(scope="module")
def nih():
    ids, y = nih_findings(limit=4000)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=y.shape) + 1.6 * y
    p = np.round(1 / (1 + np.exp(-logits)), 4)
    labels = y.astype(object)
    uncertain = rng.uniform(size=y.shape) < 0.02
    labels[uncertain] = ""
    return ids, y, labels, p, uncertain


def _cls_files(folder: Path, ids, labels, scores) -> tuple[Path, Path]:
    folder.mkdir()
    header = ["image_id", *NIH_FINDINGS]
    lab = _write_csv(folder / "labels.csv", header, [[i, *row] for i, row in zip(ids, labels, strict=True)])
    sco = _write_csv(folder / "scores.csv", header, [[i, *row] for i, row in zip(ids, scores, strict=True)])
    return lab, sco


def test_cls_on_nih_prevalence(nih, tmp_path):
    ids, y, labels, p, uncertain = nih
    test, val = slice(0, 3000), slice(3000, 4000)
    lab, sco = _cls_files(tmp_path / "test", ids[test], labels[test], p[test])
    _cls_files(tmp_path / "val", ids[val], labels[val], p[val])
    res = run_task("cls", lab, sco, tmp_path / "out")
    res_val = run_task("cls", lab, sco, tmp_path / "out_val", "--validation", str(tmp_path / "val"))
    assert res["config"]["xray_run"]["operating_point"] == "test"
    assert res_val["config"]["xray_run"]["operating_point"] == "validation"
    assert res["summary"]["n_uncertain_labels"] == int(uncertain[test].sum())
    aucs, below = [], []
    for j, finding in enumerate(NIH_FINDINGS):
        token = finding.lower()
        ok = ~uncertain[test, j]
        yy, ss = y[test][ok, j], p[test][ok, j]
        if min(yy.sum(), (1 - yy).sum()) < 10:  # xray.cls.min_positives (default 10): not in the headline
            below.append(token)
        if yy.min() == yy.max():  # e.g. Hernia (0.2% prevalence) may have no positive in 3000 images
            assert res["aggregates"][f"xray/cls/auroc/by_finding/{token}"]["value"] is None
            # no operating point either: NaN and a warning, never specificity 1
            assert res["aggregates"][f"xray/cls/spec_at_sens95/by_finding/{token}"]["value"] is None
            assert any(f"finding {finding!r}: no operating point" in w for w in res["warnings"])
            continue
        auc = roc_auc_score(yy, ss)
        if token not in below:
            aucs.append(auc)
        agg = res["aggregates"][f"xray/cls/auroc/by_finding/{token}"]
        assert agg["value"] == pytest.approx(auc, abs=1e-12)
        assert agg["ci95_low"] < auc < agg["ci95_high"]
        fpr, tpr, thr = roc_curve(yy, ss, drop_intermediate=False)
        i = int(np.argmax(tpr >= 0.95))
        assert _agg(res, f"xray/cls/spec_at_sens95/by_finding/{token}") == pytest.approx(1 - fpr[i], abs=1e-12)
        assert _agg(res, f"xray/cls/sens_at_sens95/by_finding/{token}") == pytest.approx(tpr[i], abs=1e-12)
        # validation threshold applied to the test set
        ok_v = ~uncertain[val, j]
        yv, sv = y[val][ok_v, j], p[val][ok_v, j]
        if yv.any():
            fv, tv, thv = roc_curve(yv, sv, drop_intermediate=False)
            t = thv[int(np.argmax(tv >= 0.95))]
            assert _agg(res_val, f"xray/cls/threshold_at_sens95/by_finding/{token}") == t
            assert _agg(res_val, f"xray/cls/sens_at_sens95/by_finding/{token}") == pytest.approx(
                (ss[yy == 1] >= t).mean()
            )
    assert _agg(res, "xray/cls/auroc") == pytest.approx(np.mean(aucs), abs=1e-12)
    assert res["config"]["xray_run"]["findings_below_min_positives"] == below
    assert res["summary"]["n_findings_below_min_positives"] == len(below)
    a = res["aggregates"]["xray/cls/auroc"]
    assert a["ci95_low"] < a["value"] < a["ci95_high"] and a["ci95_high"] - a["ci95_low"] < 0.05
    assert 0 <= _agg(res, "xray/cls/ece") < 0.5
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert "xray/cls/spec_at_sens95" in metrics and "xray/cls/auroc/ci95_low" in metrics


@pytest.mark.parametrize(("policy", "expected"), [("ignore", 3 / 4), ("zeros", 4 / 6), ("ones", 5 / 6)])
def test_cls_uncertain_policies(tmp_path, policy, expected):
    # finding f: labels 1, 0, blank, 1, 0 with scores .9 .8 .85 .6 .1 (hand-counted pairs)
    header = ["image_id", "f"]
    lab = _write_csv(tmp_path / "l.csv", header, [["a", 1], ["b", 0], ["c", ""], ["d", 1], ["e", 0]])
    sco = _write_csv(tmp_path / "s.csv", header, [["a", 0.9], ["b", 0.8], ["c", 0.85], ["d", 0.6], ["e", 0.1]])
    # min_positives=1: this 5-image finding stays in the headline (the default 10 would leave it out)
    res = run_task(
        "cls", lab, sco, tmp_path / "out", "--set", f"xray.cls.uncertain={policy}", "--set", "xray.cls.min_positives=1"
    )
    y = {"ignore": [1, 0, 1, 0], "zeros": [1, 0, 0, 1, 0], "ones": [1, 0, 1, 1, 0]}[policy]
    s = {"ignore": [0.9, 0.8, 0.6, 0.1]}.get(policy, [0.9, 0.8, 0.85, 0.6, 0.1])
    assert _agg(res, "xray/cls/auroc") == pytest.approx(expected, abs=1e-12)
    assert roc_auc_score(y, s) == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- seg: real lung masks (torchxrayvision)


def test_seg_on_real_lung_masks(tmp_path):
    masks = {k: m[::4, ::4] for k, m in lung_masks(limit=4).items()}
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    expected = {}
    for n, (_name, m) in enumerate(sorted(masks.items())):
        case = f"img{n}"
        Image.fromarray(m.astype(np.uint8) * 255).save(gt / f"{case}.png")
        if n == 3:
            expected[case] = (0.0, 0.0)  # missing prediction: scored as all background
            continue
        p = ndimage.binary_erosion(m, iterations=3) if n < 2 else np.roll(m, 5, axis=1)
        if n == 2:  # a prediction may be a 2D NIfTI instead of a PNG
            nib.save(nib.Nifti1Image(p.astype(np.uint8) * 255, np.eye(4)), pred / f"{case}.nii.gz")
        else:
            Image.fromarray(p.astype(np.uint8) * 255).save(pred / f"{case}.png")
        inter, union = (p & m).sum(), (p | m).sum()
        expected[case] = (2 * inter / (p.sum() + m.sum()), inter / union) if union else (np.nan, np.nan)
    names = _write_csv(tmp_path / "names.csv", ["id", "name"], [[255, "Lung"]])
    run_task("seg", gt, pred, tmp_path / "out", "--label-names", str(names))
    res = results_doc(tmp_path / "out")
    # the archive's mask 16745_2_2 is empty (a real edge case): both empty -> NaN, left out and not counted
    assert np.isnan(expected["img0"][0]) and 0.8 < expected["img1"][0] < 1.0
    dsc = np.nanmean([d for d, _ in expected.values()])
    assert _agg(res, "xray/seg/dsc") == pytest.approx(dsc, abs=1e-12)
    assert _agg(res, "xray/seg/dsc/by_class/lung") == pytest.approx(dsc, abs=1e-12)
    assert res["aggregates"]["xray/seg/dsc/by_class/lung"]["n_valid"] == 3
    assert _agg(res, "xray/seg/miou") == pytest.approx(np.nanmean([i for _, i in expected.values()]), abs=1e-12)
    assert res["summary"]["n_missing_predictions"] == 1
    assert {c["case_id"]: c["status"] for c in res["cases"]}["img3"] == "missing_prediction"


# ---------------------------------------------------------------- ret


def test_ret_precision_at_k(tmp_path):
    labels = _write_csv(
        tmp_path / "labels.csv",
        ["image_id", "label"],
        [["q1", "hand"], ["q2", "knee"], ["a", "hand"], ["b", "hand"], ["c", "knee"], ["d", "knee"]],
    )
    ranks = _write_csv(
        tmp_path / "rankings.csv",
        ["query", "rank", "retrieved"],
        [["q1", 1, "a"], ["q1", 2, "c"], ["q1", 3, "b"], ["q2", 2, "a"], ["q2", 1, "c"]],
    )
    res = run_task("ret", labels, ranks, tmp_path / "out", "--set", "xray.ret.ks=[1,3]")
    assert _agg(res, "xray/ret/p_at_1") == 1.0  # q1 -> a (hand), q2 -> c (knee)
    assert _agg(res, "xray/ret/p_at_3") == pytest.approx((2 / 3 + 1 / 3) / 2)  # q2's list padded to 3
    assert res["summary"]["n_short_lists"] == 1


# ---------------------------------------------------------------- loc


def _coco(tmp_path: Path) -> tuple[Path, Path]:
    gt = {
        "images": [{"id": 1}, {"id": 2}],
        "categories": [{"id": 1, "name": "Fracture"}, {"id": 2, "name": "Nodule"}],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 1, "bbox": [214, 41, 348, 244]},
            {"id": 11, "image_id": 2, "category_id": 2, "bbox": [0, 0, 10, 10]},
        ],
    }
    dets = [
        {"image_id": 1, "category_id": 1, "bbox": [258, 41, 348, 244], "score": 0.536},  # IoU 0.776
        {"image_id": 2, "category_id": 2, "bbox": [20, 20, 10, 10], "score": 0.9},  # miss
        {"annotation_id": 10, "bbox": [214, 41, 348, 244]},
        {"annotation_id": 11, "bbox": [5, 0, 10, 10]},  # IoU 50/150
    ]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "det.json").write_text(json.dumps(dets))
    return tmp_path / "gt.json", tmp_path / "det.json"


def test_loc_map50_and_grounding(tmp_path):
    gt, det = _coco(tmp_path)
    res = run_task("loc", gt, det, tmp_path / "out")
    assert _agg(res, "xray/loc/map_50/by_category/fracture") == pytest.approx(1.0)
    assert _agg(res, "xray/loc/map_50/by_category/nodule") == 0.0
    assert _agg(res, "xray/loc/map_50") == pytest.approx(0.5)
    assert _agg(res, "xray/loc/miou") == pytest.approx((1 + 1 / 3) / 2)


# ---------------------------------------------------------------- report: real IU X-ray reports


def test_report_against_pycocoevalcap(tmp_path):
    reports = list(iu_xray_reports().items())[:60]
    with open(tmp_path / "refs.jsonl", "w") as f:
        for rid, text in reports:
            f.write(json.dumps({"id": rid, "report": text}) + "\n")
    with open(tmp_path / "preds.jsonl", "w") as f:
        for k, (rid, _) in enumerate(reports[:-1]):  # the last reference has no prediction
            f.write(json.dumps({"id": rid, "report": reports[(k + 3) % len(reports)][1]}) + "\n")
    res = run_task("report", tmp_path / "refs.jsonl", tmp_path / "preds.jsonl", tmp_path / "out")
    gts = {rid: [" ".join(tokenize(t))] for rid, t in reports}
    hyp = {rid: [" ".join(tokenize(reports[(k + 3) % len(reports)][1]))] for k, (rid, _) in enumerate(reports)}
    hyp[reports[-1][0]] = [""]
    bleu, _ = Bleu(4).compute_score(gts, hyp, verbose=0)
    for k in range(4):
        assert _agg(res, f"xray/report/bleu_{k + 1}") == pytest.approx(bleu[k], abs=1e-9)
        b = res["aggregates"][f"xray/report/bleu_{k + 1}"]
        assert b["ci95_low"] <= b["value"] <= b["ci95_high"]
    assert _agg(res, "xray/report/rouge_l") == pytest.approx(Rouge().compute_score(gts, hyp)[0], abs=1e-9)
    assert _agg(res, "xray/report/cider") == pytest.approx(Cider().compute_score(gts, hyp)[0], abs=1e-9)
    assert res["summary"]["n_missing_predictions"] == 1


# ---------------------------------------------------------------- bad input


def _cls_pair(tmp_path: Path, label_rows, score_rows, header=("image_id", "a", "b"), score_header=None):
    lab = _write_csv(tmp_path / "labels.csv", list(header), label_rows)
    sco = _write_csv(tmp_path / "scores.csv", list(score_header or header), score_rows)
    return lab, sco


GOOD_LABELS = [["x1", 1, 0], ["x2", 0, 1]]


@pytest.mark.parametrize(
    ("label_rows", "score_rows", "score_header", "needles"),
    [
        (GOOD_LABELS, [["x1", "nan", 0.1], ["x2", 0.2, 0.3]], None, ("NaN or infinite", "case=x1", "field=a")),
        (GOOD_LABELS, [["x1", "inf", 0.1], ["x2", 0.2, 0.3]], None, ("NaN or infinite", "scores.csv")),
        (GOOD_LABELS, [["x1", 1.2, 0.1], ["x2", 0.2, 0.3]], None, ("not a probability", "line 2", "field=a")),
        (
            GOOD_LABELS,
            [["x1", 0.5, 0.1, 0.3], ["x2", 0.2, 0.3, 0.1]],
            ("image_id", "a", "b", "c"),
            ("unknown", "field=c"),
        ),
        (GOOD_LABELS, [["x1", 0.5], ["x2", 0.2]], ("image_id", "a"), ("missing", "field=b")),
        (GOOD_LABELS, [["x1", 0.5, 0.1], ["x1", 0.2, 0.3]], None, ("duplicate image_id", "case=x1")),
        (GOOD_LABELS, [["x1", 0.5, 0.1], ["x2", 0.2, 0.3], ["x3", 0.1, 0.1]], None, ("not labelled", "case=x3")),
        (GOOD_LABELS, [["x1", 0.5, 0.1]], None, ("without scores", "case=x2")),
        ([["x1", 2, 0], ["x2", 0, 1]], [["x1", 0.5, 0.1], ["x2", 0.2, 0.3]], None, ("labels.csv", "field=a")),
    ],
)
def test_cls_bad_input(tmp_path, capsys, label_rows, score_rows, score_header, needles):
    lab, sco = _cls_pair(tmp_path, label_rows, score_rows, score_header=score_header)
    fail_line(capsys, "cls", lab, sco, tmp_path / "out", *needles)


def test_empty_and_malformed_files(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "r1", "report": "no effusion"}\n')
    fail_line(capsys, "report", empty, good, tmp_path / "o1", "file is empty", "empty.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "r1", "report": "no effusion"}\n{"id": "r2", "report": \n')
    fail_line(capsys, "report", good, bad, tmp_path / "o2", "malformed JSON on line 2", "bad.jsonl")
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "r1", "report": "a"}\n{"id": "r1", "report": "b"}\n')
    fail_line(capsys, "report", dup, good, tmp_path / "o3", "duplicate id", "case=r1", "field=id")
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"id": "r1", "report": "a"}\n{"id": "r9", "report": "b"}\n')
    fail_line(capsys, "report", good, extra, tmp_path / "o4", "without a reference", "case=r9")
    noreport = tmp_path / "noreport.jsonl"
    noreport.write_text('{"id": "r1", "text": "a"}\n')
    fail_line(capsys, "report", good, noreport, tmp_path / "o5", "'report' must be a string", "field=report")
    gt, det = _coco(tmp_path)
    det.write_text('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5},')
    fail_line(capsys, "loc", gt, det, tmp_path / "o6", "malformed JSON", "det.json")
    det.write_text('[{"image_id": 1, "category_id": 7, "bbox": [0, 0, 1, 1], "score": 0.5}]')
    fail_line(capsys, "loc", gt, det, tmp_path / "o7", "unknown category_id", "field=category_id")
    det.write_text('[{"image_id": 1, "category_id": 1, "bbox": [0, 0, -1, 1], "score": 0.5}]')
    fail_line(capsys, "loc", gt, det, tmp_path / "o8", "width and height", "field=bbox")
    gt.write_text('{"images": [], "annotations": []}')
    fail_line(capsys, "loc", gt, det, tmp_path / "o9", "'categories'", "gt.json")


def test_ret_bad_input(tmp_path, capsys):
    labels = _write_csv(tmp_path / "labels.csv", ["image_id", "label"], [["q", "a"], ["x", "a"], ["y", "b"]])
    cases = [
        ([["q", 1, "q"]], ("retrieves itself", "case=q", "field=retrieved")),
        ([["q", 1, "x"], ["q", 2, "x"]], ("retrieved twice", "field=retrieved")),
        ([["q", 1, "x"], ["q", 3, "y"]], ("not 1..2: rank 2 is missing (rank 3 is on line 3)", "case=q", "field=rank")),
        ([["z", 1, "x"]], ("query 'z'", "field=query")),
        ([["q", 1, "nope"]], ("'nope'", "field=retrieved")),
    ]
    for n, (rows, needles) in enumerate(cases):
        ranks = _write_csv(tmp_path / f"r{n}.csv", ["query", "rank", "retrieved"], rows)
        fail_line(capsys, "ret", labels, ranks, tmp_path / f"o{n}", *needles)


def test_seg_bad_input(tmp_path, capsys):
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    Image.fromarray(np.full((8, 8), 255, np.uint8)).save(gt / "a.png")
    Image.fromarray(np.full((8, 9), 255, np.uint8)).save(pred / "a.png")
    names = _write_csv(tmp_path / "names.csv", ["id", "name"], [[255, "lung"]])
    extra = ("--label-names", str(names))
    fail_line(capsys, "seg", gt, pred, tmp_path / "o1", "shape mismatch", "case=a", "field=dim", extra=extra)
    Image.fromarray(np.full((8, 8), 7, np.uint8)).save(pred / "a.png")
    fail_line(capsys, "seg", gt, pred, tmp_path / "o2", "[7]", "not in the label names", extra=extra)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(pred / "a.png")
    fail_line(capsys, "seg", gt, pred, tmp_path / "o3", "PNG mode RGB", "field=mode", extra=extra)
    fail_line(capsys, "seg", gt, pred, tmp_path / "o4", "no class names", "field=label_names")


def test_seg_png_bomb_is_refused_before_decoding(tmp_path, capsys):
    """A 200,000 x 200,000 PNG header (a few bytes on disk) is refused from its declared size, never decoded."""
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    Image.fromarray(np.full((8, 8), 255, np.uint8)).save(gt / "a.png")

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 200_000, 200_000, 8, 0, 0, 0, 0)  # 8-bit greyscale
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")
    (pred / "a.png").write_bytes(bomb)
    names = _write_csv(tmp_path / "names.csv", ["id", "name"], [[255, "lung"]])
    fail_line(
        capsys,
        "seg",
        gt,
        pred,
        tmp_path / "o",
        "decompression bomb",
        f"file={pred / 'a.png'}",
        "case=a",
        "field=size",
        extra=("--label-names", str(names)),
    )
