"""X-ray ``cls`` headlines (issue 19, section 3): logit-scale AUROC intervals, findings below
``xray.cls.min_positives`` left out of the macro headlines (reported, warned, recorded), and ``ece_reference``."""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t
from sklearn.metrics import roc_auc_score

import trackeval
from trackeval.metrics.classification import ece_reference, expected_calibration_error

FAST = ["engine.executor=local", "engine.cache=false", "bootstrap.n_resamples=200"]
FINDINGS = ("Effusion", "Mass", "Hernia")
TOKENS = ("effusion", "mass", "hernia")
N = 240
HERNIA_POSITIVES = 3


def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Labels (Effusion ~30%, Mass ~20%, Hernia exactly 3 positives) and scores sigmoid(noise + 1.2 (2y - 1))."""
    rng = np.random.default_rng(23)
    y = (rng.uniform(size=(N, 3)) < [0.3, 0.2, 0.0]).astype(float)
    y[rng.choice(N, HERNIA_POSITIVES, replace=False), 2] = 1.0
    scores = np.round(1 / (1 + np.exp(-(rng.normal(size=y.shape) + 1.2 * (2 * y - 1)))), 4)
    return y, scores


def _write(folder: Path, y: np.ndarray, scores: np.ndarray, findings=FINDINGS) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"img{i:04d}" for i in range(len(y))]
    for name, table, fmt in (("labels.csv", y, int), ("scores.csv", scores, float)):
        with open(folder / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["image_id", *findings])
            w.writerows([i, *(fmt(v) for v in row)] for i, row in zip(ids, table, strict=True))
    return {"ground_truth": folder / "labels.csv", "predictions": folder / "scores.csv"}


def _evaluate(inputs: dict[str, Path], *overrides: str):
    cfg = trackeval.load_config(None, [*FAST, *overrides])
    return trackeval.evaluate("xray/cls", inputs, cfg, {"name": "cxr", "version": "v1"})


def _value(result, key: str) -> float:
    return result.aggregates[key].value


def _delong_var_direct(y: np.ndarray, s: np.ndarray) -> float:
    """DeLong's variance from the O(m n) kernel (1 above, 1/2 tied)."""
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return float(np.var(psi.mean(axis=1), ddof=1) / len(pos) + np.var(psi.mean(axis=0), ddof=1) / len(neg))


def _df(y: np.ndarray, cols: list[int]) -> int:
    """The t reference's degrees of freedom: every image its own cluster, min(positives, negatives) - 1 of the
    smallest class over ``cols``."""
    return int(min(min(y[:, j].sum(), (1 - y[:, j]).sum()) for j in cols)) - 1


def _logit_ci(a: float, var: float, df: int) -> tuple[float, float]:
    """expit(logit(a) -/+ t_{0.975, df} sqrt(var) / (a (1 - a))), written out."""
    half = t.ppf(0.975, df) * math.sqrt(var) / (a * (1 - a))
    centre = math.log(a / (1 - a))
    return 1 / (1 + math.exp(-(centre - half))), 1 / (1 + math.exp(-(centre + half)))


def _macro_var(y: np.ndarray, s: np.ndarray, cols: list[int]) -> float:
    """Variance of the mean of the AUCs of ``cols`` on the same images, from the O(m n) placements."""
    psi_sum = np.zeros(len(y))
    for j in cols:
        yj, sj = y[:, j], s[:, j]
        pos, neg = sj[yj == 1], sj[yj == 0]
        k = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
        auc, m, n = k.mean(), len(pos), len(neg)
        phi = np.empty(len(y))
        phi[yj == 1] = (k.mean(axis=1) - auc) / math.sqrt(m * (m - 1))
        phi[yj == 0] = (k.mean(axis=0) - auc) / math.sqrt(n * (n - 1))
        psi_sum += phi / len(cols)
    return float((psi_sum**2).sum())


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    y, s = _tables()
    assert y[:, 2].sum() == HERNIA_POSITIVES and min(y[:, :2].sum(axis=0)) >= 10
    return y, s, _write(tmp_path_factory.mktemp("cls"), y, s)


def test_by_finding_auroc_ci_is_the_logit_interval_of_delong(data):
    y, s, inputs = data
    res = _evaluate(inputs)
    for j, token in enumerate(TOKENS):
        agg = res.aggregates[f"xray/cls/auroc/by_finding/{token}"]
        auc = roc_auc_score(y[:, j], s[:, j])
        assert agg.value == pytest.approx(auc, abs=1e-12)
        low, high = _logit_ci(auc, _delong_var_direct(y[:, j], s[:, j]), _df(y, [j]))
        assert (agg.ci95_low, agg.ci95_high) == pytest.approx((low, high), abs=1e-10)
        assert agg.ci95_low < auc < agg.ci95_high


def test_finding_with_3_positives_is_reported_warned_and_left_out_of_the_headlines(data, caplog):
    y, s, inputs = data
    with caplog.at_level(logging.WARNING, logger="trackeval.benchmarks.xray.cls"):
        res = _evaluate(inputs)
    note = "xray/cls: finding 'Hernia' has 3 positives (< xray.cls.min_positives=10): reported, not in the headline"
    assert note in res.warnings and note in caplog.text
    assert res.config["xray_run"]["findings_below_min_positives"] == ["hernia"]
    assert res.summary["n_findings_below_min_positives"] == 1
    # reported: every by_finding aggregate of Hernia is there
    for metric in ("auroc", "threshold_at_sens95", "sens_at_sens95", "spec_at_sens95", "ppv_at_sens95", "ece"):
        assert f"xray/cls/{metric}/by_finding/hernia" in res.aggregates, metric
    assert _value(res, "xray/cls/auroc/by_finding/hernia") == pytest.approx(roc_auc_score(y[:, 2], s[:, 2]))
    # the headline AUROC: the mean over Effusion and Mass, by hand, with the logit interval of its variance
    macro = (roc_auc_score(y[:, 0], s[:, 0]) + roc_auc_score(y[:, 1], s[:, 1])) / 2
    head = res.aggregates["xray/cls/auroc"]
    assert head.value == pytest.approx(macro, abs=1e-12)
    assert (head.ci95_low, head.ci95_high) == pytest.approx(
        _logit_ci(macro, _macro_var(y, s, [0, 1]), _df(y, [0, 1])), abs=1e-10
    )
    # the other macro headlines: means over the same two findings
    for metric in ("sens_at_sens95", "spec_at_sens95", "ppv_at_sens95", "ece", "ece_reference"):
        two = [_value(res, f"xray/cls/{metric}/by_finding/{t}") for t in TOKENS[:2]]
        assert _value(res, f"xray/cls/{metric}") == pytest.approx(np.mean(two), abs=1e-12), metric
    three = [_value(res, f"xray/cls/ece/by_finding/{t}") for t in TOKENS]
    assert _value(res, "xray/cls/ece") != pytest.approx(np.mean(three))


def test_min_positives_1_keeps_the_old_headline(data):
    y, s, inputs = data
    res = _evaluate(inputs, "xray.cls.min_positives=1")
    aucs = [roc_auc_score(y[:, j], s[:, j]) for j in range(3)]
    head = res.aggregates["xray/cls/auroc"]
    assert head.value == pytest.approx(np.mean(aucs), abs=1e-12)
    assert (head.ci95_low, head.ci95_high) == pytest.approx(
        _logit_ci(np.mean(aucs), _macro_var(y, s, [0, 1, 2]), _df(y, [0, 1, 2]))
    )
    for metric in ("sens_at_sens95", "spec_at_sens95", "ppv_at_sens95", "ece", "ece_reference"):
        three = [_value(res, f"xray/cls/{metric}/by_finding/{t}") for t in TOKENS]
        assert _value(res, f"xray/cls/{metric}") == pytest.approx(np.mean(three), abs=1e-12), metric
    assert not [w for w in res.warnings if "min_positives" in w]
    assert res.config["xray_run"]["findings_below_min_positives"] == []
    assert res.summary["n_findings_below_min_positives"] == 0
    # 0 turns the rule off; with both classes present in every finding it is the same result
    off = _evaluate(inputs, "xray.cls.min_positives=0")
    assert {k: v.value for k, v in off.aggregates.items()} == {k: v.value for k, v in res.aggregates.items()}


def test_too_few_negatives_and_no_finding_left(tmp_path):
    y, s = _tables()
    y[:, 1] = 1.0
    y[:2, 1] = 0.0  # Mass: 2 negatives
    res = _evaluate(_write(tmp_path / "a", y, s))
    assert "xray/cls: finding 'Mass' has 2 negatives (< xray.cls.min_positives=10): reported, not in the headline" in (
        res.warnings
    )
    assert res.config["xray_run"]["findings_below_min_positives"] == ["mass", "hernia"]
    assert _value(res, "xray/cls/auroc") == pytest.approx(roc_auc_score(y[:, 0], s[:, 0]), abs=1e-12)
    # Hernia alone: no finding for the headlines, which are NaN (null) with a warning
    only = _evaluate(_write(tmp_path / "b", y[:, 2:], s[:, 2:], FINDINGS[2:]))
    for metric in ("auroc", "sens_at_sens95", "spec_at_sens95", "ppv_at_sens95", "ece", "ece_reference"):
        assert _value(only, f"xray/cls/{metric}") is None, metric  # NaN is stored as null
    assert any("no finding has 10 positives and 10 negatives" in w for w in only.warnings)
    assert not math.isnan(_value(only, "xray/cls/auroc/by_finding/hernia"))


def test_ece_reference_per_finding_and_next_to_ece(data):
    y, s, inputs = data
    res = _evaluate(inputs, "xray.cls.ece_bins=10")
    for j, token in enumerate(TOKENS):
        assert _value(res, f"xray/cls/ece_reference/by_finding/{token}") == pytest.approx(
            ece_reference(s[:, j], 10), abs=1e-15
        )
        assert _value(res, f"xray/cls/ece/by_finding/{token}") == pytest.approx(
            expected_calibration_error(y[:, j].astype(int), s[:, j], 10), abs=1e-15
        )
    assert res.aggregates["xray/cls/ece_reference"].n_valid == N
