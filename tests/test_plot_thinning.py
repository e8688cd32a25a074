"""ROC and PR curves for figures: the full curves computed with numpy equal sklearn's, and the drawn curves,
thinned to at most :data:`~trackeval.plotdata.MAX_POINTS` points, stay within a stated vertical distance of
them (issue 38: figures from thinned curves).

The tolerances are in axis units (rates, 0-1). The report draws ROC/PR on square axes about 350 pixels high
(7.2 x 4.4 in at 100 dpi), so one pixel is about 2.9e-3: :data:`ROC_TOLERANCE` and :data:`PR_TOLERANCE`
are under a pixel.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib import pyplot as plt
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve

from trackeval.plotdata import (
    MAX_POINTS,
    POOLED,
    operating_point_rows,
    pr_points,
    pr_rows,
    roc_curve_rows,
    roc_points,
    roc_rows,
    thin_curve,
)
from trackeval.report.curves import draw_curves
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, PlotSpec, build_result

#: the largest vertical distance allowed between the thinned ROC polyline and the full one
ROC_TOLERANCE = 2e-3
#: the same for the thinned PR curve drawn as steps (``steps-post``) against the full steps
PR_TOLERANCE = 2e-3


def _pairs(n: int, prevalence: float, seed: int, decimals: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """0/1 labels and sigmoid scores separated by a unit shift; ``decimals``: round the scores (ties)."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < prevalence).astype(float)
    s = 1 / (1 + np.exp(-(rng.normal(size=n) + (2 * y - 1))))
    return y, (s if decimals is None else np.round(s, decimals))


#: 100k pairs: common and rare positives, continuous scores and scores with ties
DATASETS = {
    "common": (100_000, 0.3, 1, None),
    "rare": (100_000, 0.01, 2, None),
    "ties": (100_000, 0.2, 3, 4),
}


@pytest.fixture(scope="module", params=sorted(DATASETS))
def data(request) -> tuple[np.ndarray, np.ndarray]:
    return _pairs(*DATASETS[request.param])


def _chord_distance(x: np.ndarray, y: np.ndarray, keep: np.ndarray) -> float:
    """The largest vertical distance from a point of the full polyline ``(x, y)`` (x monotone) to the polyline
    through the points ``keep``: for a point between kept ``a`` and ``b``, to the chord ``a-b`` at its x (to
    the chord's y range when the chord is vertical)."""
    b = np.minimum(np.searchsorted(keep, np.arange(len(x))), len(keep) - 1)
    hi, lo = keep[b], keep[np.maximum(b - 1, 0)]
    vertical = x[hi] == x[lo]
    chord = y[lo] + (x - x[lo]) * (y[hi] - y[lo]) / np.where(vertical, 1.0, x[hi] - x[lo])
    outside = np.maximum(y - np.maximum(y[lo], y[hi]), np.minimum(y[lo], y[hi]) - y)
    return float(np.where(vertical, np.maximum(outside, 0.0), np.abs(y - chord)).max())


def _step_distance(y: np.ndarray, keep: np.ndarray) -> float:
    """The largest vertical distance between the full curve and the kept points, both drawn as ``steps-post``:
    a point drawn at its own level is drawn, thinned, at the level of the kept point before it."""
    held = keep[np.searchsorted(keep, np.arange(len(y)), side="right") - 1]
    return float(np.abs(y - y[held]).max())


# ------------------------------------------------------------------------------------- the full curves


def test_full_roc_is_sklearns_bit_for_bit(data) -> None:
    y, s = data
    for drop in (False, True):
        got, want = roc_points(y, s, drop_intermediate=drop), roc_curve(y, s, drop_intermediate=drop)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_full_pr_is_sklearns_bit_for_bit(data) -> None:
    y, s = data
    got, want = pr_points(y, s), precision_recall_curve(y, s)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


# ------------------------------------------------------------------------------------ the thinned curves


def test_thinned_roc_keeps_the_endpoints_the_auc_and_the_shape(data) -> None:
    y, s = data
    fpr, tpr, _ = roc_points(y, s, drop_intermediate=True)
    keep = thin_curve(fpr, tpr)
    assert len(fpr) > MAX_POINTS >= len(keep)
    assert keep[0] == 0 and keep[-1] == len(fpr) - 1 and np.all(np.diff(keep) > 0)
    assert np.trapezoid(tpr[keep], fpr[keep]) == pytest.approx(roc_auc_score(y, s), abs=1e-3)
    assert _chord_distance(fpr, tpr, keep) < ROC_TOLERANCE
    full_fpr, full_tpr, _ = roc_points(y, s)  # against every distinct threshold, not only the corners
    assert _chord_distance(full_fpr, full_tpr, thin_curve(full_fpr, full_tpr)) < ROC_TOLERANCE


def test_thinned_pr_steps_keep_the_endpoints_the_average_precision_and_the_shape(data) -> None:
    y, s = data
    precision, recall, _ = pr_points(y, s)
    keep = thin_curve(recall, precision, step=True)
    assert len(precision) > MAX_POINTS >= len(keep)
    assert keep[0] == 0 and keep[-1] == len(precision) - 1
    assert _step_distance(precision, keep) < PR_TOLERANCE
    # the area under the drawn steps (sklearn's average precision: each level held down to the next recall)
    ap = -np.sum(np.diff(recall[keep]) * precision[keep][:-1])
    assert ap == pytest.approx(average_precision_score(y, s), abs=PR_TOLERANCE)


def test_small_curves_are_kept_whole() -> None:
    y, s = _pairs(400, 0.3, 4)
    fpr, tpr, _ = roc_points(y, s)
    precision, recall, _ = pr_points(y, s)
    assert len(fpr) <= MAX_POINTS and np.array_equal(thin_curve(fpr, tpr), np.arange(len(fpr)))
    assert np.array_equal(thin_curve(recall, precision, step=True), np.arange(len(recall)))


def test_a_straight_curve_thins_to_its_endpoints() -> None:
    """Points no farther off than the tolerance are not kept, however many the budget allows."""
    x = np.linspace(0, 1, 5000)
    assert thin_curve(x, 0.5 * x).tolist() == [0, 4999]
    assert thin_curve(x[::-1], np.full(5000, 0.7), step=True).tolist() == [0, 4999]


# --------------------------------------------------------------------- the rows and the figure drawn from them

ITEMS = ("atelectasis", "effusion")


@pytest.fixture(scope="module")
def result() -> BenchmarkResult:
    """An X-ray classification result with 6,000 cases x 2 findings (labels and scores only) and a 95%-sensitivity
    threshold for the first finding."""
    y, s = _pairs(12_000, 0.3, 5)
    cases = [
        CaseRecord(
            case_id=f"c{i}",
            subject_id=f"p{i}",
            metrics={item: {"label": y[2 * i + j], "score": s[2 * i + j]} for j, item in enumerate(ITEMS)},
        )
        for i in range(6000)
    ]
    threshold = MetricSummary(value=0.3, ci95_low=None, ci95_high=None, n=6000, n_valid=6000)
    return build_result(
        "xray",
        task="cls",
        model={"name": "cxr", "version": "v1"},
        config={},
        ground_truth_digest="0" * 64,
        predictions_digest="0" * 64,
        summary={},
        warnings=[],
        cases=cases,
        aggregates={f"xray/cls/threshold_at_sens95/by_finding/{ITEMS[0]}": threshold},
        item_kind="finding",
    )


def _arrays(result: BenchmarkResult, item: str | None) -> tuple[np.ndarray, np.ndarray]:
    records = [case.metrics[i] for case in result.cases for i in ITEMS if item in (None, i)]
    return np.array([m["label"] for m in records]), np.array([m["score"] for m in records])


@pytest.mark.parametrize("item", [*ITEMS, None])
def test_rows_are_the_thinned_curves(result, item) -> None:
    y, s = _arrays(result, item)
    group = item or POOLED
    roc = [r for r in roc_curve_rows(result) if r["finding"] == group]
    fpr, tpr, thr = roc_points(y, s, drop_intermediate=True)
    keep = thin_curve(fpr, tpr)
    assert len(fpr) > MAX_POINTS >= len(roc) == len(keep)
    assert [(r["fpr"], r["tpr"], r["threshold"]) for r in roc] == list(
        zip(fpr[keep], tpr[keep], np.minimum(thr[keep], 1.0), strict=True)
    )
    pr = [r for r in pr_rows(result) if r["finding"] == group]
    precision, recall, _ = pr_points(y, s)
    keep = thin_curve(recall, precision, step=True)
    assert [(r["recall"], r["precision"]) for r in pr] == list(zip(recall[keep], precision[keep], strict=True))
    assert pr[-1]["threshold"] is None and (pr[-1]["recall"], pr[-1]["precision"]) == (0.0, 1.0)
    if item is None:  # the roc plot's plot.csv: the pooled curve, thinned the same way
        assert roc_rows(result) == [{k: v for k, v in r.items() if k != "finding"} for r in roc]


def test_operating_points_use_every_pair(result) -> None:
    y, s = _arrays(result, ITEMS[0])
    (point,) = operating_point_rows(result)
    called, pos = s >= 0.3, y == 1
    assert (point["finding"], point["threshold"]) == (ITEMS[0], 0.3)
    assert point["tpr"] == called[pos].mean() and point["fpr"] == called[~pos].mean()
    assert point["precision"] == y[called].mean()


def test_the_figure_draws_only_the_thinned_points(result) -> None:
    fig, ax = plt.subplots()
    try:
        for kind in ("roc", "pr"):
            ax.clear()
            plot = PlotSpec(metric="auroc", dimension="finding", kind=kind)
            assert draw_curves(ax, plot, [("v1", result)], lambda n: ["#4c72b0"] * n)
            curves = [line for line in ax.get_lines() if line.get_label() != "chance"]
            assert len(curves) == len(ITEMS) + 1
            assert all(2 < len(line.get_xdata()) <= MAX_POINTS for line in curves)
    finally:
        plt.close(fig)
