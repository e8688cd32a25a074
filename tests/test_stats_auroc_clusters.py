"""The patient-clustered AUROC interval (issue 33): the X-ray ``cls`` headline and per-finding intervals and the
gate's paired DeLong rows sum DeLong's influence terms within a patient, so that duplicating every patient's
studies (no information added) leaves every interval's width within a few percent; with every study its own
cluster (``bootstrap.cluster=case``) the same duplication halves it.

The intervals are checked against an independent O(m n) computation of the placements summed per patient, and
the clustered variance against Obuchowski's (1997) formula.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t
from sklearn.metrics import roc_auc_score

from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import xray
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.gate.decide import decide
from trackeval.metrics.classification import auc_df, auroc_interval, clustered_variance, delong, delong_influence

FINDINGS = ("Edema", "Pneumonia")
TOKENS = ("edema", "pneumonia")
N_PATIENTS = 70
COPIES = 4


def _cohort(seed: int = 33) -> tuple[np.ndarray, np.ndarray]:
    """Patients with 1-6 studies each; labels clustered by a patient propensity: ``(sizes, labels (n, 2))``."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, N_PATIENTS)
    propensity = rng.beta([0.7, 0.5], [1.6, 1.8], (N_PATIENTS, 2))
    codes = np.repeat(np.arange(N_PATIENTS), sizes)
    y = (rng.uniform(size=(codes.size, 2)) < propensity[codes]).astype(float)
    return sizes, y


def _scores(seed: int, sizes: np.ndarray, y: np.ndarray, shift: float) -> np.ndarray:
    """Probabilities with a patient effect shared by the patient's studies (a model sees the same patient)."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(sizes.size), sizes)
    latent = shift * y + rng.normal(0, 0.7, (sizes.size, 2))[codes] + rng.normal(0, 0.8, y.shape)
    return np.round(1 / (1 + np.exp(-latent)), 6)


def _write(folder: Path, sizes: np.ndarray, y: np.ndarray, scores: np.ndarray, copies: int = 1) -> TaskInputs:
    """MIMIC-CXR-JPG layout (``subject_id, study_id``, findings; predictions keyed by ``study_id``); every
    study ``copies`` times as new studies of the same patient."""
    folder.mkdir(parents=True, exist_ok=True)
    codes = np.repeat(np.arange(sizes.size), sizes)
    truth, pred = [f"subject_id,study_id,{','.join(FINDINGS)}"], [f"study_id,{','.join(FINDINGS)}"]
    for i, patient in enumerate(codes):
        for c in range(copies):
            study = 50000000 + 10 * i + c
            truth.append(f"{10000000 + patient},{study},{','.join(f'{v:.1f}' for v in y[i])}")
            pred.append(f"{study},{','.join(f'{v:.6f}' for v in scores[i])}")
    (folder / "mimic-cxr-2.0.0-chexpert.csv").write_text("\n".join(truth) + "\n", encoding="utf-8")
    (folder / "scores.csv").write_text("\n".join(pred) + "\n", encoding="utf-8")
    return TaskInputs(folder / "mimic-cxr-2.0.0-chexpert.csv", folder / "scores.csv")


def _cfg(*extra: str):
    return load_config(None, ["bootstrap.n_resamples=50", "gate.n_resamples=50", *extra])


def _evaluate(inputs: TaskInputs, version: str, *extra: str):
    return xray.evaluate("cls", inputs, _cfg(*extra), {"name": "cxr", "version": version})


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    sizes, y = _cohort()
    base, cand = _scores(1, sizes, y, 1.6), _scores(2, sizes, y, 1.8)
    root = tmp_path_factory.mktemp("clusters")
    files = {
        (name, copies): _write(root / f"{name}_{copies}", sizes, y, s, copies)
        for name, s in (("champion", base), ("candidate", cand))
        for copies in (1, COPIES)
    }
    return sizes, y, base, files


def _width(result, key: str) -> float:
    agg = result.aggregates[key]
    return agg.ci95_high - agg.ci95_low


def _direct_clustered(y: np.ndarray, s: np.ndarray, codes: np.ndarray) -> tuple[float, float]:
    """AUC and the clustered DeLong variance from the explicit (positive x negative) kernel, the placements'
    deviations scaled as DeLong's ``ddof=1`` variances and summed per patient before squaring."""
    x, z = s[y == 1], s[y == 0]
    k = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
    auc, m, n = float(k.mean()), x.size, z.size
    phi = np.empty(y.size)
    phi[y == 1] = (k.mean(axis=1) - auc) / math.sqrt(m * (m - 1))
    phi[y == 0] = (k.mean(axis=0) - auc) / math.sqrt(n * (n - 1))
    sums = np.array([phi[codes == g].sum() for g in np.unique(codes)])
    return auc, float((sums**2).sum())


def _obuchowski(y: np.ndarray, s: np.ndarray, codes: np.ndarray) -> float:
    """Obuchowski (1997): ``S10 / m + S01 / n + 2 S11 / (m n)`` from per-cluster placement sums, ``K / (K - 1)``."""
    x, z = s[y == 1], s[y == 0]
    k = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
    auc, m, n = float(k.mean()), x.size, z.size
    groups = np.unique(codes)
    kk = groups.size
    v10 = np.array([k.mean(axis=1)[codes[y == 1] == g].sum() for g in groups])
    v01 = np.array([k.mean(axis=0)[codes[y == 0] == g].sum() for g in groups])
    mk = np.array([(codes[y == 1] == g).sum() for g in groups])
    nk = np.array([(codes[y == 0] == g).sum() for g in groups])
    s10 = kk / ((kk - 1) * m) * ((v10 - mk * auc) ** 2).sum()
    s01 = kk / ((kk - 1) * n) * ((v01 - nk * auc) ** 2).sum()
    s11 = kk / (kk - 1) * ((v10 - mk * auc) * (v01 - nk * auc)).sum()
    return s10 / m + s01 / n + 2 * s11 / (m * n)


def test_per_finding_interval_is_the_clustered_logit_t_interval(cohort):
    sizes, y, base, files = cohort
    res = _evaluate(files["champion", 1], "v1")
    assert res.config["bootstrap"]["cluster"] == "subject_id"
    codes = np.repeat(np.arange(sizes.size), sizes)
    for j, token in enumerate(TOKENS):
        agg = res.aggregates[f"xray/cls/auroc/by_finding/{token}"]
        auc, var = _direct_clustered(y[:, j], base[:, j], codes)
        assert agg.value == pytest.approx(roc_auc_score(y[:, j], base[:, j]), abs=1e-12)
        assert var == pytest.approx(_obuchowski(y[:, j], base[:, j], codes), rel=0.05)
        df = min(np.unique(codes[y[:, j] == 1]).size, np.unique(codes[y[:, j] == 0]).size) - 1
        half = t.ppf(0.975, df) * math.sqrt(var) / (auc * (1 - auc))
        centre = math.log(auc / (1 - auc))
        want = (1 / (1 + math.exp(-(centre - half))), 1 / (1 + math.exp(-(centre + half))))
        assert (agg.ci95_low, agg.ci95_high) == pytest.approx(want, abs=1e-10)
        d = delong(y[:, j], base[:, j])
        assert clustered_variance(delong_influence(y[:, j], d), codes) == pytest.approx(var, rel=1e-10)
        assert auc_df(y[:, j], codes) == df
        assert auroc_interval(y[:, j], d, codes) == pytest.approx(want, abs=1e-10)


def test_headline_is_the_clustered_macro_interval(cohort):
    sizes, y, base, files = cohort
    res = _evaluate(files["champion", 1], "v1")
    codes = np.repeat(np.arange(sizes.size), sizes)
    phi = sum(delong_influence(y[:, j], delong(y[:, j], base[:, j])) for j in range(2)) / 2
    var = float((np.bincount(codes, weights=phi) ** 2).sum())
    macro = np.mean([roc_auc_score(y[:, j], base[:, j]) for j in range(2)])
    df = min(auc_df(y[:, j], codes) for j in range(2))
    half = t.ppf(0.975, df) * math.sqrt(var) / (macro * (1 - macro))
    centre = math.log(macro / (1 - macro))
    head = res.aggregates["xray/cls/auroc"]
    assert head.value == pytest.approx(macro, abs=1e-12)
    assert (head.ci95_low, head.ci95_high) == pytest.approx(
        (1 / (1 + math.exp(-(centre - half))), 1 / (1 + math.exp(-(centre + half)))), abs=1e-10
    )


def test_duplicating_each_patients_studies_keeps_the_headline_and_finding_widths(cohort):
    _, _, _, files = cohort
    once, dup = _evaluate(files["champion", 1], "v1"), _evaluate(files["champion", COPIES], "v1")
    for key in ["xray/cls/auroc", *(f"xray/cls/auroc/by_finding/{tok}" for tok in TOKENS)]:
        assert dup.aggregates[key].value == pytest.approx(once.aggregates[key].value, abs=1e-12)
        ratio = _width(dup, key) / _width(once, key)
        assert 0.95 <= ratio <= 1.02, (key, ratio)
    # counted as independent studies (bootstrap.cluster=case), the same copies halve the intervals: the test
    # tells the two apart
    once_c = _evaluate(files["champion", 1], "v1", "bootstrap.cluster=case")
    dup_c = _evaluate(files["champion", COPIES], "v1", "bootstrap.cluster=case")
    assert _width(dup_c, "xray/cls/auroc") / _width(once_c, "xray/cls/auroc") < 0.6


def test_duplicating_each_patients_studies_keeps_the_gate_widths(cohort):
    files = cohort[3]
    cfg = _cfg()
    rows = {}
    for copies in (1, COPIES):
        cand = _evaluate(files["candidate", copies], "v2")
        base = _evaluate(files["champion", copies], "v1")
        d = decide("cxr", "v2", {"xray/cls": cand}, "v1", {"xray/cls": base}, cfg.gate, gate_policies(cfg))
        (comp,) = d.comparisons
        assert comp.method == "delong" and comp.reference == "t" and not comp.problems
        rows[copies] = {r.key: r for r in comp.rows}
    assert set(rows[1]) == {"xray/cls/auroc", *(f"xray/cls/auroc/by_finding/{tok}" for tok in TOKENS)}
    # every row on its t reference: a finding's patients with a positive / a negative, the headline the smallest
    sizes, y, _, _ = cohort
    codes = np.repeat(np.arange(sizes.size), sizes)
    dfs = [auc_df(y[:, j], codes) for j in range(2)]
    assert [rows[1][f"xray/cls/auroc/by_finding/{tok}"].df for tok in TOKENS] == dfs
    assert rows[1]["xray/cls/auroc"].df == min(dfs) and 10 < min(dfs) < N_PATIENTS
    for key, row in rows[1].items():
        dup = rows[COPIES][key]
        # the same patients: the same clusters and degrees of freedom
        assert dup.delta == pytest.approx(row.delta, abs=1e-12)
        assert dup.df == row.df and dup.n_units == row.n_units == N_PATIENTS
        ratio = (dup.ci95_high - dup.ci95_low) / (row.ci95_high - row.ci95_low)
        assert 0.95 <= ratio <= 1.02, (key, ratio)
