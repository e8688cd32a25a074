"""Declared figures of every unit: the rows of each plot kind against sklearn / direct computations, the PNGs of
``save_figures``, the two-version overlays and their place in the HTML reports.

Results are real evaluations (``trackeval.evaluate``) of small inputs: X-ray cls label/score tables, the UMD
gate dataset (``tests.gate_data``), the 3D-MIR toy ground truth and an IMIS folder driven by a prompt-aware
oracle.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from matplotlib import pyplot as plt
from matplotlib.container import BarContainer
from scipy import ndimage
from sklearn.metrics import precision_recall_curve, roc_curve

import trackeval
from tests import gate_data
from tests.conftest import save_nifti
from tests.test_imis import write_imis
from tests.test_mir3d import HAND, RANKINGS, _rankings, _toy_gt
from trackeval.benchmarks.imis.protocol import Request
from trackeval.plotdata import (
    POOLED,
    box_rows,
    curve_k_rows,
    operating_point_rows,
    plot_rows,
    pr_rows,
    roc_curve_rows,
)
from trackeval.report.figures import (
    figure_name,
    overlay_figure_objects,
    overlay_figures,
    result_figures,
    save_figures,
)
from trackeval.report.html import comparison_report, result_report
from trackeval.report.labels import metric_label, version_label
from trackeval.results import BenchmarkResult, PlotSpec

FINDINGS = ("Atelectasis", "Effusion", "Pleural Thickening")
TOKENS = ("atelectasis", "effusion", "pleural_thickening")
FAST = ["engine.executor=local", "engine.cache=false", "bootstrap.n_resamples=200"]


def _plot(result: BenchmarkResult, kind: str, **match: str) -> PlotSpec:
    return next(p for p in result.plots if p.kind == kind and all(getattr(p, k) == v for k, v in match.items()))


# --------------------------------------------------------------------------------------------------- X-ray cls


def _cls_tables(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels (NaN = uncertain, about 5%) and continuous scores (written exactly: ``repr`` round-trips)."""
    y = (rng.uniform(size=(n, len(FINDINGS))) < [0.3, 0.4, 0.2]).astype(float)
    scores = 1 / (1 + np.exp(-(rng.normal(size=y.shape) + shift * (2 * y - 1))))
    y[rng.uniform(size=y.shape) < 0.05] = np.nan
    return y, scores


def _write_cls(folder: Path, y: np.ndarray, scores: np.ndarray) -> dict[str, Path]:
    folder.mkdir(parents=True)
    header = ["image_id", *FINDINGS]
    ids = [f"img{i:03d}" for i in range(len(y))]
    with open(folder / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [header] + [[i, *("" if np.isnan(v) else int(v) for v in row)] for i, row in zip(ids, y, strict=True)]
        )
    with open(folder / "scores.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [header] + [[i, *(repr(float(v)) for v in row)] for i, row in zip(ids, scores, strict=True)]
        )
    return {"ground_truth": folder / "labels.csv", "predictions": folder / "scores.csv"}


@pytest.fixture(scope="module")
def xray(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("xray")
    rng = np.random.default_rng(7)
    cfg = trackeval.load_config(None, [*FAST, "xray.cls.ece_bins=10"])
    out: dict = {}
    for version, shift in (("v1", 0.8), ("v2", 1.4)):
        y, s = _cls_tables(rng, 150, shift)
        inputs = _write_cls(root / version, y, s)
        out[version] = trackeval.evaluate("xray/cls", inputs, cfg, {"name": "cxr", "version": version})
        out[f"{version}_arrays"] = (y, s)
    return out


def _cap(thresholds: np.ndarray) -> list[float]:
    return [min(float(h), 1.0) for h in thresholds]


def test_xray_roc_and_pr_rows_equal_sklearn_per_finding_and_pooled(xray):
    result, (y, s) = xray["v1"], xray["v1_arrays"]
    roc_plot = result.plots[0]
    assert roc_plot.kind == "roc"
    roc = roc_curve_rows(result, "finding")
    pr = pr_rows(result, "finding")
    for j, token in enumerate(TOKENS):
        ok = ~np.isnan(y[:, j])
        fpr, tpr, thr = roc_curve(y[ok, j], s[ok, j])
        got = [r for r in roc if r["finding"] == token]
        assert [r["fpr"] for r in got] == pytest.approx(fpr) and [r["tpr"] for r in got] == pytest.approx(tpr)
        assert [r["threshold"] for r in got] == pytest.approx(_cap(thr))
        precision, recall, pthr = precision_recall_curve(y[ok, j], s[ok, j])
        got = [r for r in pr if r["finding"] == token]
        assert [r["precision"] for r in got] == pytest.approx(precision)
        assert [r["recall"] for r in got] == pytest.approx(recall)
        assert [r["threshold"] for r in got[:-1]] == pytest.approx(pthr) and got[-1]["threshold"] is None
    ok = ~np.isnan(y)
    fpr, tpr, thr = roc_curve(y[ok], s[ok])  # pooled over every finding with a certain label
    pooled = [r for r in roc if r["finding"] == POOLED]
    assert [r["fpr"] for r in pooled] == pytest.approx(fpr) and [r["tpr"] for r in pooled] == pytest.approx(tpr)
    # the DVC plot.csv of the first (roc) plot stays the pooled curve with the columns fpr, tpr, threshold
    rows = plot_rows(result, roc_plot)
    assert list(rows[0]) == ["fpr", "tpr", "threshold"]
    assert [r["fpr"] for r in rows] == pytest.approx(fpr) and [r["threshold"] for r in rows] == pytest.approx(_cap(thr))
    precision, recall, _ = precision_recall_curve(y[ok], s[ok])
    pooled = [r for r in plot_rows(result, _plot(result, "pr")) if r["finding"] == POOLED]
    assert [r["precision"] for r in pooled] == pytest.approx(precision)
    # bar rows: the AUROC aggregates by finding
    bar = plot_rows(result, _plot(result, "bar", metric="auroc"))
    assert {r["finding"]: r["value"] for r in bar} == {
        t: result.aggregates[f"xray/cls/auroc/by_finding/{t}"].value for t in TOKENS
    }


def test_xray_operating_points_are_the_sens95_thresholds(xray):
    result, (y, s) = xray["v1"], xray["v1_arrays"]
    points = {p["finding"]: p for p in operating_point_rows(result, "finding")}
    assert sorted(points) == sorted(TOKENS)
    for j, token in enumerate(TOKENS):
        ok = ~np.isnan(y[:, j])
        t = result.aggregates[f"xray/cls/threshold_at_sens95/by_finding/{token}"].value
        called, pos = s[ok, j] >= t, y[ok, j] == 1
        assert points[token]["threshold"] == t
        assert points[token]["tpr"] == pytest.approx(called[pos].mean()) and points[token]["tpr"] >= 0.95
        assert points[token]["fpr"] == pytest.approx(called[~pos].mean())
        assert points[token]["precision"] == pytest.approx(y[ok, j][called].mean())
        # the same rule as the adapter's per-case calls
        assert points[token]["tpr"] == pytest.approx(
            result.aggregates[f"xray/cls/sens_at_sens95/by_finding/{token}"].value
        )


def test_xray_reliability_bins_equal_a_direct_computation_and_the_ece(xray):
    result, (y, s) = xray["v1"], xray["v1_arrays"]
    rows = plot_rows(result, _plot(result, "reliability"))
    assert all(r["bin_high"] - r["bin_low"] == pytest.approx(0.1) for r in rows)  # xray.cls.ece_bins=10
    for j, token in enumerate(TOKENS):
        ok = ~np.isnan(y[:, j])
        yj, sj = y[ok, j], s[ok, j]
        expected = []
        for b in range(10):
            inside = (sj > b / 10) & (sj <= (b + 1) / 10) | ((b == 0) & (sj == 0.0))
            if inside.any():
                expected.append((b, int(inside.sum()), sj[inside].mean(), yj[inside].mean()))
        got = [r for r in rows if r["finding"] == token]
        assert [(r["bin"], r["n"]) for r in got] == [(b, n) for b, n, _, _ in expected]
        assert [r["mean_predicted"] for r in got] == pytest.approx([p for _, _, p, _ in expected])
        assert [r["observed_frequency"] for r in got] == pytest.approx([o for _, _, _, o in expected])
        ece = sum(r["n"] * abs(r["observed_frequency"] - r["mean_predicted"]) for r in got) / ok.sum()
        assert ece == pytest.approx(result.aggregates[f"xray/cls/ece/by_finding/{token}"].value)
    pooled = [r for r in rows if r["finding"] == POOLED]
    assert sum(r["n"] for r in pooled) == int((~np.isnan(y)).sum())


# --------------------------------------------------------------------------------------------------------- UMD


#: per-organ x-shifts (voxels) of the CT and the PET predictions (labels 1 liver, 2 kidney_left, 5 heart)
SHIFTS = {"v1": ({1: 0, 2: 1, 5: 0}, {1: 2, 2: 1, 5: 1}), "v2": ({1: 0, 2: 0, 5: 0}, {1: 1, 2: 0, 5: 0})}


@pytest.fixture(scope="module")
def umd(tmp_path_factory) -> dict[str, BenchmarkResult]:
    root = tmp_path_factory.mktemp("umd")
    gt = gate_data.make_ground_truth(root)
    cfg = gate_data.config("engine.cache=false")
    out = {}
    for version, (ct, pet) in SHIFTS.items():
        pred = root / f"pred_{version}"
        pred.mkdir()
        for i, subject in enumerate(gate_data.SUBJECTS):
            for modality, shifts in (("ct", ct), ("pet", pet)):
                save_nifti(pred / f"{subject}_{modality}.nii.gz", gate_data._label_map(i, shifts))
        out[version] = trackeval.evaluate(
            "umd", {"ground_truth": gt, "predictions": pred}, cfg, {"name": "seg", "version": version}
        )
    return out


def test_umd_box_rows_are_the_per_case_dice_and_the_gap_is_paired(umd):
    result = umd["v1"]
    box = _plot(result, "box")
    assert (box.metric, box.dimension) == ("dsc", "organ")
    rows = box_rows(result, box)
    expected = [
        (organ, c.case_id, c.metrics[organ]["dsc"])
        for organ in sorted(gate_data.LABELS)
        for c in result.cases
        if c.metrics[organ]["dsc"] is not None
    ]
    assert [(r["organ"], r["case_id"], r["value"]) for r in rows] == expected
    assert len(rows) == 12 * 3 and plot_rows(result, box) == rows
    # per modality: each case's mean over organs
    by_mod = box_rows(result, PlotSpec(metric="dsc", dimension="modality", kind="box"))
    means = {c.case_id: np.mean([m["dsc"] for m in c.metrics.values()]) for c in result.cases}
    assert {r["case_id"]: r["value"] for r in by_mod} == pytest.approx(means)
    assert {r["modality"] for r in by_mod} == {"ct", "pet"}
    # the paired CT - PET gap per organ: per subject dsc(ct) - dsc(pet), averaged over subjects
    gap = plot_rows(result, _plot(result, "bar", metric="dsc_gap/ct_vs_pet"))
    dsc = {(c.subject_id, c.groups["modality"]): c.metrics for c in result.cases}
    for r in gap:
        diffs = [dsc[(s, "ct")][r["organ"]]["dsc"] - dsc[(s, "pet")][r["organ"]]["dsc"] for s in gate_data.SUBJECTS]
        assert r["value"] == pytest.approx(np.mean(diffs))
        assert r["value"] == result.aggregates[f"umd/dsc_gap/ct_vs_pet/by_organ/{r['organ']}"].value
    assert sorted(r["organ"] for r in gap) == sorted(gate_data.LABELS)
    gaps = {r["organ"]: r["value"] for r in gap}
    assert gaps["liver"] > 0.1 and gaps["heart"] > 0.05 and gaps["kidney_left"] == 0.0  # PET worse, kidney alike
    first = plot_rows(result, result.plots[0])  # the pipeline's plot.csv: unchanged bar rows
    assert list(first[0]) == ["organ", "value", "ci95_low", "ci95_high"] and len(first) == 3


# ------------------------------------------------------------------------------------------------------- 3D-MIR


@pytest.fixture(scope="module")
def mir3d(tmp_path_factory) -> dict[str, BenchmarkResult]:
    root = tmp_path_factory.mktemp("mir3d")
    gt = _toy_gt(root / "gt")
    cfg = trackeval.load_config(None, FAST)
    better = [r for r in RANKINGS if r[1] != "q1"] + [("colon", "q3", 1, "i04"), ("colon", "q3", 2, "i09")]
    out = {}
    for version, rows in (("v1", RANKINGS), ("v2", better)):
        pred = _rankings(root / f"{version}.csv", rows)
        out[version] = trackeval.evaluate(
            "mir3d", {"ground_truth": gt, "predictions": pred}, cfg, {"name": "retriever", "version": version}
        )
    return out


def test_mir3d_curve_k_rows_are_the_p_at_k_aggregates(mir3d):
    result = mir3d["v1"]
    plot = _plot(result, "curve_k")
    assert result.plots[0].kind == "bar" and result.plots[0].metric == "group/ap_at_10"
    rows = curve_k_rows(result, plot)
    assert [(r["region"], r["k"]) for r in rows] == [(g, k) for g in ("colon", "lung") for k in (1, 3, 5, 10)]
    for r in rows:
        agg = result.aggregates[f"mir3d/group/p_at_{r['k']}/by_region/{r['region']}"]
        assert (r["value"], r["ci95_low"], r["ci95_high"]) == (agg.value, agg.ci95_low, agg.ci95_high)
    hand = HAND["retrieved_in_topk"]
    for r in rows:
        if (name := f"group/p_at_{r['k']}") in hand[r["region"]]:
            assert r["value"] == pytest.approx(hand[r["region"]][name], abs=1e-12)
    assert plot_rows(result, plot) == rows


# --------------------------------------------------------------------------------------------------------- IMIS

#: erosion iterations of the oracle's mask per initial prompt type and turn (0: the exact truth)
EROSIONS = {"point": (2, 1, 0), "box": (1, 0, 0), "text": (3, 2, 1)}
SIDES = {"c1": 10, "c2": 12, "c3": 14, "c4": 9}  # one square target per image


class PromptOracle:
    """Reads the truth off the image; how far it is eroded depends on the initial prompt type and the turn
    (``better``: one erosion less)."""

    supported_prompts = ("point", "box", "text")

    def __init__(self, better: str = "0") -> None:
        self.better = int(better)
        self.kind = "point"

    def predict(self, request: Request) -> np.ndarray:
        truth = request.image[..., 0] > 128
        if request.turn == 1:  # the turns of one sequence come in order: remember its initial prompt type
            p = request.prompts
            self.kind = "text" if p.text is not None else "box" if p.box is not None else "point"
        n = max(0, EROSIONS[self.kind][min(request.turn, 3) - 1] - self.better)
        return ndimage.binary_erosion(truth, iterations=n) if n else truth


def prompt_oracle(better: str = "0") -> PromptOracle:
    return PromptOracle(better)


def _square_dice(side: int, erosions: int) -> float:
    inner = max(side - 2 * erosions, 0) ** 2
    return 2 * inner / (inner + side * side)


@pytest.fixture(scope="module")
def imis(tmp_path_factory) -> dict[str, BenchmarkResult]:
    root = tmp_path_factory.mktemp("imis")
    masks = {}
    for case, side in SIDES.items():
        a = np.zeros((24, 24), bool)
        a[3 : 3 + side, 4 : 4 + side] = True
        masks[case] = np.stack([a, np.zeros_like(a)])
    gt = write_imis(root / "gt", masks)
    cfg = trackeval.load_config(None, [*FAST, "imis.max_turns=3"])
    out = {}
    for version, better in (("v1", "0"), ("v2", "1")):
        inputs = {
            "ground_truth": gt,
            "model": "tests.test_report_figures:prompt_oracle",
            "model_arg": [f"better={better}"],
        }
        out[version] = trackeval.evaluate("imis", inputs, cfg, {"name": "clicker", "version": version})
    return out


def test_imis_dice_vs_clicks_per_prompt_type(imis):
    result = imis["v1"]
    plot = _plot(result, "line", series="prompt")
    rows = plot_rows(result, plot)
    assert [(r["prompt"], r["click"]) for r in rows] == [(p, n) for p in ("box", "point", "text") for n in (1, 2, 3)]
    for r in rows:  # one target per image: the mean over images of the hand-computed Dice
        n_erode = EROSIONS[r["prompt"]][r["click"] - 1]
        assert r["value"] == pytest.approx(np.mean([_square_dice(a, n_erode) for a in SIDES.values()]))
        assert r["ci95_low"] <= r["value"] <= r["ci95_high"] and r["n_valid"] == 4
    for r in (r for r in rows if r["prompt"] == "point"):  # the point series is the by_click aggregate, CI too
        agg = result.aggregates[f"imis/dice/by_click/{r['click']}"]
        assert (r["value"], r["ci95_low"], r["ci95_high"]) == pytest.approx((agg.value, agg.ci95_low, agg.ci95_high))
    for r in (r for r in rows if r["click"] == 1):
        assert r["value"] == pytest.approx(result.aggregates[f"imis/dice/by_prompt/{r['prompt']}"].value)
    assert result.aggregates["imis/dice/by_click/1"].ci95_low < result.aggregates["imis/dice/by_click/1"].ci95_high
    first = plot_rows(result, result.plots[0])  # the pipeline's plot.csv header is unchanged
    assert list(first[0]) == ["click", "value", "ci95_low", "ci95_high"] and [r["click"] for r in first] == [1, 2, 3]
    # a series from nested aggregates, when they exist (here: UMD-like keys built by hand)
    agg = dict(result.aggregates)
    agg["imis/dice/by_region/x/by_click/2"] = agg["imis/dice/by_click/2"]
    nested = result.model_copy(update={"aggregates": agg})
    rows = plot_rows(nested, PlotSpec(metric="dice", dimension="click", kind="line", series="region"))
    assert [(r["region"], r["click"], r["value"]) for r in rows] == [("x", 2, agg["imis/dice/by_click/2"].value)]


# ------------------------------------------------------------------------------------------- figures and HTML

UNITS = ("xray", "umd", "mir3d", "imis")


@pytest.fixture(scope="module")
def pairs(xray, umd, mir3d, imis) -> dict[str, tuple[BenchmarkResult, BenchmarkResult]]:
    return {"xray": (xray["v1"], xray["v2"]), "umd": (umd["v1"], umd["v2"]), "mir3d": (mir3d["v1"], mir3d["v2"]),
            "imis": (imis["v1"], imis["v2"])}  # fmt: skip


@pytest.mark.parametrize("unit", UNITS)
def test_every_declared_plot_is_a_png_with_the_version_and_labels(pairs, unit, tmp_path):
    result = pairs[unit][0]
    assert result.plots, "the unit declares its figures"
    figures = result_figures(result)
    try:
        names = [n for n, _ in figures]
        declared = [figure_name(result.unit, p) for p in result.plots]
        assert names[: len(declared)] == declared  # every declared plot draws, first and in order
        version = version_label(result)
        for _, fig in figures:
            ax = fig.axes[0]
            assert version in ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
            assert "mean, 95% CI" != ax.get_ylabel()
        labels = {n: fig.axes[0].get_ylabel() for n, fig in figures}
    finally:
        for _, fig in figures:
            plt.close(fig)
    paths = save_figures(result, tmp_path / "fig")
    assert [p.stem for p in paths] == names
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
    html = result_report(result, paths)
    assert html.count('src="data:image/png;base64,') == len(paths)
    assert all(f"<figcaption>{p.stem}" in html for p in paths)
    expected = {
        "xray": {"xray__cls__auroc__by_finding": "AUROC, 95% CI", "xray__cls__roc": "true positive rate (sensitivity)"},
        "umd": {"umd__dsc__by_organ": "Dice, 95% CI", "umd__hd95__by_organ": "HD95 (mm), 95% CI",
                "umd__dsc__by_organ__box": "Dice per case",
                "umd__dsc_gap__ct_vs_pet__by_organ": "Dice gap CT − PET (paired), 95% CI"},
        "mir3d": {"mir3d__group__p_at_k__by_region": "P@k (lesion-group relevance), mean and 95% CI"},
        "imis": {"imis__dice__by_click__per_prompt": "Dice, mean and 95% CI"},
    }[unit]  # fmt: skip
    assert {n: labels[n] for n in expected} == expected


@pytest.mark.parametrize("unit", UNITS)
def test_overlay_draws_both_versions_on_the_same_axes(pairs, unit, tmp_path):
    a, b = pairs[unit]
    la, lb = version_label(a), version_label(b)
    figures = overlay_figure_objects(a, b)
    try:
        assert [n for n, _ in figures] == [figure_name(a.unit, p) + "__overlay" for p in a.plots]
        for name, fig in figures:
            (ax,) = fig.axes
            assert la in ax.get_title() and lb in ax.get_title()
            legend = [t.get_text() for t in ax.get_legend().get_texts()]
            assert any(la in t for t in legend) and any(lb in t for t in legend), (name, legend)
            kind = next(p.kind for p in a.plots if name == figure_name(a.unit, p) + "__overlay")
            if kind in ("line", "roc", "pr", "reliability", "curve_k"):
                lines = [ln.get_label() for ln in ax.get_lines()]
                assert any(la in t for t in lines) and any(lb in t for t in lines), (name, lines)
            elif kind == "bar":
                assert {c.get_label() for c in ax.containers if isinstance(c, BarContainer)} == {la, lb}
    finally:
        for _, fig in figures:
            plt.close(fig)
    paths = overlay_figures(a, b, tmp_path / "overlay")
    assert len(paths) == len(figures) and all(p.stat().st_size > 5000 for p in paths)


def test_comparison_report_overlay_section(pairs):
    a, b = pairs["mir3d"]
    plain = comparison_report([])
    assert "data:image/png" not in plain  # existing callers: no overlays
    html = comparison_report([], overlays=[(a, b)])
    assert "Overlays: mir3d" in html and html.count('src="data:image/png;base64,') == len(a.plots)
    with pytest.raises(ValueError, match="different units"):
        overlay_figure_objects(a, pairs["umd"][0])


def test_plotspec_is_backward_compatible(pairs):
    old = PlotSpec.model_validate({"metric": "dsc", "dimension": "organ", "kind": "line"})
    assert (old.series, old.case_metric, old.title) == ("", "", "")
    result = pairs["umd"][0]
    payload = result.model_dump(mode="json")
    payload["plots"] = [{"metric": "dsc", "dimension": "organ", "kind": "bar", "title": ""}]  # a 1.1 file
    payload["cases"] = [case.model_dump(mode="json") for case in result.cases]  # 1.x: the records inline
    assert BenchmarkResult.model_validate(payload).plots[0].kind == "bar"
    for bad in (
        {"kind": "pie"},
        {"kind": "bar", "series": "prompt"},  # series is a line option
        {"kind": "curve_k"},  # the metric must end in _k
        {"kind": "line", "series": "prompt", "case_metric": "dice_{prompt}"},  # no {organ} placeholder
    ):
        with pytest.raises(ValueError):
            PlotSpec.model_validate({"metric": "dsc", "dimension": "organ", **bad})
    # the units' declared labels (MetricInfo), with the unit of measurement and the filled placeholders
    assert metric_label("umd", "hd95") == "HD95 (mm)" and metric_label("xray/cls", "auroc") == "AUROC"
    assert metric_label("mir3d", "group/p_at_10") == "P@10 (lesion-group relevance)"
    assert metric_label("umd", "dsc_gap/ct_vs_pet/by_organ/liver") == "Dice gap CT − PET (paired)"
    assert metric_label("imis", "noc_85") == "NoC@85 (clicks)"
    assert metric_label("not_installed", "dice_auc") == "dice auc"  # a unit not registered here
    assert metric_label("umd", "not_declared_metric") == "not declared metric"
    assert len(plot_rows(result, PlotSpec(metric="nsd", dimension="organ"))) == 3


def test_curve_legends_show_the_reported_values_and_compute_none(xray):
    """ROC and reliability legends carry each finding's AUROC / ECE as results.json reports it; the pooled
    (micro-averaged) curve is not a reported metric and shows no number; PR shows none (no AP aggregate)."""
    result = xray["v1"]
    figures = dict(result_figures(result))
    try:
        for kind, metric, label in (("roc", "auroc", "AUROC"), ("reliability", "ece", "ECE")):
            legend = [t.get_text() for t in figures[f"xray__cls__{kind}"].axes[0].get_legend().get_texts()]
            for token in TOKENS:
                value = result.aggregates[f"xray/cls/{metric}/by_finding/{token}"].value
                assert f"{token} ({label} {value:.3f})" in legend, legend
            assert "pooled" in legend
        pr = [t.get_text() for t in figures["xray__cls__pr"].axes[0].get_legend().get_texts()]
        assert set(TOKENS) <= set(pr) and "pooled" in pr
    finally:
        for fig in figures.values():
            plt.close(fig)
