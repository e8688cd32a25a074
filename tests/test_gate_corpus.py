"""Corpus metrics in the gate (issue 19): ``xray/loc``'s ``map_50`` is compared by resampling images and
recomputing mAP for both versions from their case records.

The weighted AP kernel against :func:`average_precision_at_iou` (ones, and integer weights as repeated images),
the corpus bootstrap against the per-case one, and real ``xray/loc`` evaluations through the gate: the same
detections pass with a delta of exactly 0, a version that lost half its true positives fails.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from trackeval.benchmarks.xray import SPECS
from trackeval.benchmarks.xray.loc import map_50_corpus
from trackeval.cli import main
from trackeval.config import GateConfig
from trackeval.gate.compare import compare_results
from trackeval.gate.decide import compare_unit, decide
from trackeval.gate.policy import resolve_policies
from trackeval.io.results_folder import read_results
from trackeval.metrics.detection import (
    average_precision_at_iou,
    match_image,
    weighted_average_precision,
    xywh_to_xyxy,
)
from trackeval.results import BenchmarkResult
from trackeval.spec import MetricInfo
from trackeval.stats.bootstrap import group_seed
from trackeval.stats.paired import paired_corpus, paired_headlines

# ---------------------------------------------------------------- the weighted AP kernel


def _scene(seed: int, n_images: int = 8) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """One category: truth boxes, detections and scores per image (scores with ties across images, none within
    one: see the tie caveat of :func:`weighted_average_precision`)."""
    rng = np.random.default_rng(seed)
    gts, dets, scores = [], [], []
    for _ in range(n_images):
        g, d, s = [], [], []
        for _ in range(rng.integers(0, 3)):
            x, y = rng.uniform(0, 80, 2)
            w, h = rng.uniform(5, 30, 2)
            g.append([x, y, w, h])
            for _ in range(rng.integers(0, 3)):  # jittered detections, some duplicates (false positives)
                j = np.asarray(g[-1]) + rng.normal(0, 4, 4)
                d.append([j[0], j[1], max(j[2], 1.0), max(j[3], 1.0)])
                s.append(round(float(rng.uniform()), 1) + 0.01 * len(s))
        if rng.uniform() < 0.4:
            d.append([10.0, 10, 20, 20])
            s.append(round(float(rng.uniform()), 1) + 0.01 * len(s))
        gts.append(xywh_to_xyxy(g))
        dets.append(xywh_to_xyxy(d))
        scores.append(np.array(s))
    return gts, dets, scores


def _matched(gts, dets, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pooled kept scores, TP flags and image index of every detection, and the truth boxes per image."""
    s, tp, img = [], [], []
    for i, (g, d, sc) in enumerate(zip(gts, dets, scores, strict=True)):
        ks, kt = match_image(g, d, sc, 0.5, 100)
        s.append(ks)
        tp.append(kt)
        img.append(np.full(ks.size, i))
    return np.concatenate(s), np.concatenate(tp), np.concatenate(img), np.array([len(g) for g in gts], float)


@pytest.mark.parametrize("seed", range(8))
def test_ones_give_exactly_the_ap_and_integer_weights_the_ap_of_repeated_images(seed):
    gts, dets, scores = _scene(seed)
    s, tp, img, n_gt = _matched(gts, dets, scores)
    rng = np.random.default_rng(100 + seed)
    weights = np.vstack([np.ones(len(gts)), rng.integers(0, 4, size=(30, len(gts)))])
    got = weighted_average_precision(s, tp, img, n_gt, weights)
    assert got[0] == average_precision_at_iou(gts, dets, scores, 0.5)  # bit for bit
    for w, ap in zip(weights[1:], got[1:], strict=True):
        rep = [i for i in range(len(gts)) for _ in range(int(w[i]))]  # the copies of an image adjacent
        expected = average_precision_at_iou([gts[i] for i in rep], [dets[i] for i in rep], [scores[i] for i in rep])
        assert (math.isnan(ap) and math.isnan(expected)) or ap == expected, (w, ap, expected)


def test_weighted_ap_by_hand():
    # image 0: FP 0.9, TP 0.6 (1 truth box); image 1: TP 0.5 (1 truth box); image 2: one truth box, missed
    s, tp, img, n_gt = [0.9, 0.6, 0.5], [False, True, True], [0, 0, 1], [1, 1, 1]
    w = np.array([[1, 1, 0], [2, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0]])
    got = weighted_average_precision(s, tp, img, n_gt, w)
    # ones without image 2: FP, TP, TP -> precision 2/3 at recall 1
    assert got[0] == pytest.approx(2 / 3, abs=1e-12)
    # image 0 twice: FP, FP, TP, TP, TP over 3 truth boxes -> precision 0.5 at recall 2/3, 0.6 at 1: 0.6 everywhere
    assert got[1] == pytest.approx(0.6, abs=1e-12)
    # a missed box: recall stops at 2/3 (points 0..0.66, 67 of 101) at precision 2/3
    assert got[2] == pytest.approx(67 / 101 * 2 / 3, abs=1e-12)
    assert got[3] == 0.0  # truth but no detection
    assert math.isnan(got[4])  # no truth: not scored
    assert weighted_average_precision([], [], [], [2], np.ones((2, 1))).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="weights must be"):
        weighted_average_precision(s, tp, img, n_gt, np.ones((2, 2)))


def test_paired_corpus_draws_the_resamples_of_paired_headlines():
    rng = np.random.default_rng(3)
    cand, base = rng.uniform(size=25), rng.uniform(size=25)

    def mean(x):
        return lambda w: (w @ x) / w.sum(axis=1)

    got = paired_corpus(mean(cand), mean(base), 25, n_resamples=300, seed=(1, 2), method="percentile")
    ref = paired_headlines(
        cand, base, reduction="item_mean", best=1.0, n_resamples=300, seed=(1, 2), method="percentile"
    )
    np.testing.assert_allclose(got.samples, ref.samples, rtol=0, atol=1e-12)
    assert got.candidate == pytest.approx(ref.candidate, abs=1e-12) and got.n_units == ref.n_units == 25
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high), abs=1e-12)
    same = paired_corpus(mean(cand), mean(cand), 25, n_resamples=300, seed=0)
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0) and not np.any(same.samples)
    assert same.item_candidate.size == 0 and same.item_samples.shape == (300, 0)


# ---------------------------------------------------------------- real xray/loc evaluations


def _coco_scene(n_images: int = 40) -> tuple[dict, list[dict]]:
    """Truth of two categories on ``n_images`` images (integer ids, so their string order differs) and a
    detector's results: most truth boxes found (jittered), duplicates and false positives, scores with ties."""
    rng = np.random.default_rng(7)
    gt = {"images": [{"id": i} for i in range(1, n_images + 1)], "annotations": []}
    gt["categories"] = [{"id": 1, "name": "Fracture"}, {"id": 2, "name": "Nodule"}]
    dets = []
    for im in range(1, n_images + 1):
        for cat in (1, 2):
            for _ in range(rng.integers(0, 3)):
                box = [float(v) for v in (*rng.uniform(0, 200, 2).round(1), *rng.uniform(20, 60, 2).round(1))]
                gt["annotations"].append({"id": len(gt["annotations"]) + 1, "image_id": im, "category_id": cat,
                                          "bbox": box})  # fmt: skip
                if rng.uniform() < 0.85:
                    j = [round(box[0] + rng.normal(0, 2), 1), round(box[1] + rng.normal(0, 2), 1), box[2], box[3]]
                    score = round(float(rng.uniform(0.3, 1.0)), 2)
                    dets.append({"image_id": im, "category_id": cat, "bbox": j, "score": score, "tp": True})
            if rng.uniform() < 0.5:
                box = [round(float(v), 1) for v in rng.uniform(250, 300, 4)]
                dets.append({"image_id": im, "category_id": cat, "bbox": box, "score": round(float(rng.uniform()), 2)})
    return gt, dets


def _evaluate(folder: Path, gt: dict, dets: list[dict]) -> BenchmarkResult:
    folder.mkdir()
    (folder / "gt.json").write_text(json.dumps(gt))
    (folder / "det.json").write_text(json.dumps([{k: v for k, v in d.items() if k != "tp"} for d in dets]))
    argv = ["evaluate", "xray", "--task", "loc", "--ground-truth", str(folder / "gt.json")]
    argv += ["--predictions", str(folder / "det.json"), "--out", str(folder / "out"), "--executor", "local"]
    assert main([*argv, "--set", "bootstrap.n_resamples=200"]) == 0
    return read_results(folder / "out")  # verifies results.json, metrics.json and cases.parquet


@pytest.fixture(scope="module")
def loc_runs(tmp_path_factory) -> dict[str, BenchmarkResult]:
    gt, dets = _coco_scene()
    found = [d for d in dets if d.get("tp")]
    dropped = {id(d) for d in found[::2]}  # half of the detections that find a truth box
    root = tmp_path_factory.mktemp("loc")
    return {
        "champion": _evaluate(root / "champion", gt, dets),
        "same": _evaluate(root / "same", gt, dets),
        "worse": _evaluate(root / "worse", gt, [d for d in dets if id(d) not in dropped]),
    }


def test_loc_records_hold_the_matched_detections(loc_runs):
    res = loc_runs["champion"]
    items = [(c.case_id, item, m) for c in res.cases for item, m in c.metrics.items()]
    dets = [(cid, item, m) for cid, item, m in items if "/det_" in item]
    assert dets and all(set(m) == {"score", "tp", "rank"} for _, _, m in dets)
    assert {item.split("/")[0] for _, item, _ in dets} == {"fracture", "nodule"}
    assert all(set(m) == {"n_gt", "n_det"} for _, item, m in items if "/" not in item)
    for token in ("fracture", "nodule"):  # ranks: every detection of a category once, in descending score
        ranked = sorted((m["rank"], m["score"]) for _, item, m in dets if item.startswith(token + "/"))
        assert [r for r, _ in ranked] == list(range(len(ranked)))
        assert all(a >= b for (_, a), (_, b) in zip(ranked, ranked[1:], strict=False))
    assert res.summary["n_detections"] == len(dets)  # max_dets (100) cuts nothing here


def test_ones_give_the_stored_map50(loc_runs):
    for res in loc_runs.values():
        cases = sorted(res.cases, key=lambda c: c.case_id)  # the gate's order, not the COCO image order
        point = map_50_corpus(cases, np.ones((1, len(cases))))[0]
        stored = res.aggregates["xray/loc/map_50"].value
        assert point == pytest.approx(stored, rel=0, abs=1e-12)
    assert (
        loc_runs["worse"].aggregates["xray/loc/map_50"].value
        < loc_runs["champion"].aggregates["xray/loc/map_50"].value - 0.2
    )


#: what the gate knows of xray/loc's mAP: the facts the unit declares (a corpus metric with its function)
LOC = resolve_policies(GateConfig(), SPECS)["xray/loc"]


def test_loc_policy_is_the_corpus_reduction():
    assert LOC.reduction == "corpus" and LOC.paired == "bootstrap" and LOC.corpus is map_50_corpus
    record = LOC.record().model_dump(mode="json")
    assert "corpus" not in record and record["reduction"] == "corpus"
    json.dumps(record)
    miou = resolve_policies(GateConfig(primary_metrics={"xray": "loc/miou"}), SPECS)["xray/loc"]
    assert miou.metric == "miou" and miou.reduction == "item_mean" and miou.corpus is None
    with pytest.raises(ValueError, match="corpus"):
        MetricInfo("map_50", label="mAP", reduction="corpus")
    with pytest.raises(ValueError, match="corpus"):
        MetricInfo("map_50", label="mAP", corpus=map_50_corpus)


def test_the_champions_detections_pass_and_half_the_true_positives_fail(loc_runs):
    cfg = GateConfig(n_resamples=500)
    policies = resolve_policies(cfg, SPECS)
    champion = loc_runs["champion"]
    same = compare_unit(loc_runs["same"], champion, policies["xray/loc"], cfg, ("2", "1"))
    assert same.problems == [] and same.method == "paired_bootstrap" and len(same.rows) == 1
    head = same.rows[0]
    with_items = sum(bool(c.metrics) for c in champion.cases)  # images with a truth box or a detection
    assert head.key == "xray/loc/map_50" and head.n_pairs == with_items < 40 and head.n_units == 40
    assert (head.delta, head.ci95_low, head.ci95_high) == (0.0, 0.0, 0.0)
    assert head.candidate == champion.aggregates["xray/loc/map_50"].value  # the reported number
    passed = decide("m", "2", {"xray/loc": loc_runs["same"]}, "1", {"xray/loc": champion}, cfg, policies)
    assert passed.verdict == "pass", passed.checks
    json.loads(passed.model_dump_json())  # the recorded policies are data, not code

    worse = compare_unit(loc_runs["worse"], champion, policies["xray/loc"], cfg, ("3", "1"))
    row = worse.rows[0]
    assert worse.problems == [] and row.delta < -0.2 and row.ci95_high < -0.01
    assert row.ci95_low <= row.delta <= row.ci95_high
    failed = decide("m", "3", {"xray/loc": loc_runs["worse"]}, "1", {"xray/loc": champion}, cfg, policies)
    assert failed.verdict == "fail"
    assert [c.name for c in failed.checks if not c.passed] == ["non_inferiority"]


def test_the_corpus_interval_is_the_paired_corpus_bootstrap(loc_runs):
    cand, base = loc_runs["worse"], loc_runs["champion"]
    comp = compare_results(cand, base, LOC, (), n_resamples=200, seed=5)
    cc = sorted(cand.cases, key=lambda c: c.case_id)
    bc = sorted(base.cases, key=lambda c: c.case_id)
    ref = paired_corpus(
        lambda w: map_50_corpus(cc, w),
        lambda w: map_50_corpus(bc, w),
        len(cc),
        n_resamples=200,
        seed=group_seed(5, "xray/loc/map_50"),
        method=cand.resampling[1],
    )
    row = comp.rows[0]
    assert (row.ci95_low, row.ci95_high) == (ref.low, ref.high)
    assert row.delta == pytest.approx(ref.delta, abs=1e-12)
    missing = compare_results(cand, base, LOC.record(), (), n_resamples=20)  # a record: no function
    assert missing.rows == [] and "no function to recompute" in missing.problems[0]


def test_a_result_without_detection_records_is_not_compared(loc_runs):
    base = loc_runs["champion"]
    old = base.model_copy(
        update={
            "cases": [
                c.model_copy(update={"metrics": {k: v for k, v in c.metrics.items() if "/" not in k}})
                for c in base.cases
            ]
        }
    )
    comp = compare_results(old, base, LOC, (), n_resamples=20)
    assert comp.rows == [] and "is not what its case records give" in comp.problems[0]
