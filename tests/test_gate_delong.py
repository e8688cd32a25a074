"""DeLong's paired AUROC comparison and the promotion gate on X-ray ``cls`` evaluations.

The paired variance is checked against a direct O(m n) computation of the structural components (DeLong et al.
1988, the 2 x 2 covariance contrast), against the unpaired variance for independent models (Monte Carlo), and
the gate runs on real ``trackeval.benchmarks.xray`` evaluations of the NIH ChestX-ray14 label table with
simulated model scores.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm, t
from sklearn.metrics import roc_auc_score

from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import xray
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.config import GateConfig
from trackeval.demo.xray_data import NIH_FINDINGS, nih_findings
from trackeval.gate.compare import compare_results
from trackeval.gate.decide import decide
from trackeval.gate.policy import resolve_policies
from trackeval.metrics.classification import delong
from trackeval.results import BenchmarkResult
from trackeval.stats.paired import normal_pvalue, paired_delong

# ------------------------------------------------------------------ direct O(m n) structural components


def _components(y: np.ndarray, s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AUC and placements from the explicit (positive x negative) kernel: 1 if above, 1/2 if tied."""
    x, z = s[y == 1], s[y == 0]
    psi = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
    return float(psi.mean()), psi.mean(axis=1), psi.mean(axis=0)


def _delong_cov(y: np.ndarray, scores: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """AUCs and DeLong's covariance matrix ``S10 / m + S01 / n`` of several models on the same images."""
    comps = [_components(y, s) for s in scores]
    m, n = int((y == 1).sum()), int((y == 0).sum())
    s10 = np.cov(np.vstack([c[1] for c in comps]))
    s01 = np.cov(np.vstack([c[2] for c in comps]))
    return np.array([c[0] for c in comps]), np.atleast_2d(s10 / m + s01 / n)


def _paired_var_direct(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    _, s = _delong_cov(y, [a, b])
    return float(s[0, 0] + s[1, 1] - 2 * s[0, 1])


def _scores(rng: np.random.Generator, y: np.ndarray, shift: float, decimals: int = 2) -> np.ndarray:
    return np.round(1 / (1 + np.exp(-(rng.normal(size=y.shape) + shift * y))), decimals)  # rounding: ties


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_variance_equals_direct_structural_components(seed):
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=150) < 0.3).astype(float)
    a = _scores(rng, y, 1.5)
    b = np.round(0.6 * a + 0.4 * _scores(rng, y, 0.8), 2)  # correlated with a, with ties
    d = paired_delong(y, a, b)
    assert d.candidate[0] == pytest.approx(roc_auc_score(y, a), abs=1e-12)
    assert d.baseline[0] == pytest.approx(roc_auc_score(y, b), abs=1e-12)
    assert d.value[0] == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b), abs=1e-12)
    direct = _paired_var_direct(y, a, b)
    assert d.variance[0] == pytest.approx(direct, rel=1e-10)
    # var(A - B) = var(A) + var(B) - 2 cov(A, B): positively correlated models -> less than the unpaired sum
    assert d.variance[0] < delong(y, a).variance + delong(y, b).variance
    # the t reference: min(positives, negatives) - 1 degrees of freedom (every image its own cluster)
    df = int(min(y.sum(), (1 - y).sum())) - 1
    assert d.df[0] == df and d.overall_df == df
    half = t.ppf(0.975, df) * math.sqrt(direct)
    assert (d.low[0], d.high[0]) == pytest.approx((d.value[0] - half, d.value[0] + half), abs=1e-12)
    assert d.overall == d.value[0] and d.overall_variance == pytest.approx(direct, rel=1e-10)


def test_macro_difference_variance_is_the_delong_contrast_on_shared_labels():
    """Two findings with the same labels: var of ((A1 + A2) - (B1 + B2)) / 2 is L S L' over four AUCs."""
    rng = np.random.default_rng(5)
    y = (rng.uniform(size=120) < 0.4).astype(float)
    a1, a2, b1, b2 = (_scores(rng, y, s) for s in (1.8, 1.2, 1.0, 1.4))
    aucs, s = _delong_cov(y, [a1, a2, b1, b2])
    contrast = np.array([0.5, 0.5, -0.5, -0.5])
    d = paired_delong(np.c_[y, y], np.c_[a1, a2], np.c_[b1, b2])
    assert d.overall == pytest.approx(contrast @ aucs, abs=1e-12)
    assert d.overall_variance == pytest.approx(contrast @ s @ contrast, rel=1e-10)


def test_macro_difference_with_unknown_labels_and_an_undefined_finding():
    rng = np.random.default_rng(9)
    n = 80
    y = (rng.uniform(size=(n, 3)) < 0.35).astype(float)
    y[rng.uniform(size=n) < 0.2, 1] = np.nan  # unknown labels of finding 1 are left out of it
    y[:, 2] = 0.0  # no positive: AUC undefined, the finding is left out of the macro mean
    a = np.column_stack([_scores(rng, np.nan_to_num(y[:, j]), 1.5) for j in range(3)])
    b = np.column_stack([_scores(rng, np.nan_to_num(y[:, j]), 1.0) for j in range(3)])
    d = paired_delong(y, a, b)
    assert np.isnan(d.value[2]) and d.n_pairs[2] == 0
    known = ~np.isnan(y[:, 1])
    assert d.n_pairs.tolist() == [n, int(known.sum()), 0]
    # influence terms by hand from the O(m n) placements, zero where a label is unknown
    psi = np.zeros((n, 2))
    for j, rows in enumerate([np.ones(n, bool), known]):
        yj = y[rows, j]
        m_, n_ = int((yj == 1).sum()), int((yj == 0).sum())
        for s, sign in ((a, 1.0), (b, -1.0)):
            auc, v10, v01 = _components(yj, s[rows, j])
            phi = np.empty(yj.size)
            phi[yj == 1] = (v10 - auc) / math.sqrt(m_ * (m_ - 1))
            phi[yj == 0] = (v01 - auc) / math.sqrt(n_ * (n_ - 1))
            psi[rows, j] += sign * phi
        assert d.variance[j] == pytest.approx(_paired_var_direct(yj, a[rows, j], b[rows, j]), rel=1e-10)
    assert d.overall == pytest.approx(np.mean(d.value[:2]), abs=1e-15)
    assert d.overall_variance == pytest.approx(((psi.sum(axis=1) / 2) ** 2).sum(), rel=1e-10)


def _monte_carlo(correlated: bool, reps: int = 600) -> tuple[float, float, float]:
    """Mean paired variance, mean unpaired variance ``var(A) + var(B)``, and the empirical var of A - B."""
    rng = np.random.default_rng(11)
    y = np.r_[np.ones(40), np.zeros(60)]
    paired, unpaired, deltas = [], [], []
    for _ in range(reps):
        a = rng.normal(size=100) + 1.0 * y
        b = a + rng.normal(scale=0.5, size=100) if correlated else rng.normal(size=100) + 0.8 * y
        d = paired_delong(y, a, b)
        paired.append(d.variance[0])
        unpaired.append(delong(y, a).variance + delong(y, b).variance)
        deltas.append(d.value[0])
    return float(np.mean(paired)), float(np.mean(unpaired)), float(np.var(deltas, ddof=1))


def test_paired_variance_of_independent_models_is_the_unpaired_variance():
    paired, unpaired, empirical = _monte_carlo(correlated=False)
    assert paired == pytest.approx(unpaired, rel=0.03)  # E[cov] = 0: only estimation noise remains
    assert paired == pytest.approx(empirical, rel=0.12)


def test_paired_variance_of_correlated_models_tracks_the_true_variance():
    paired, unpaired, empirical = _monte_carlo(correlated=True)
    assert paired < 0.4 * unpaired  # the unpaired sum ignores the covariance and is far too wide
    assert paired == pytest.approx(empirical, rel=0.15)


def test_identical_models_give_zero_difference_and_zero_variance():
    rng = np.random.default_rng(3)
    y = (rng.uniform(size=(50, 2)) < 0.5).astype(float)
    s = rng.uniform(size=(50, 2))
    d = paired_delong(y, s, s.copy())
    assert d.overall == 0.0 and d.overall_variance == 0.0 and d.value.tolist() == [0.0, 0.0]


def test_normal_pvalue_is_the_one_sided_wald_test():
    assert normal_pvalue(-0.08, 0.02, -0.05, "less") == pytest.approx(norm.cdf(-1.5))
    assert normal_pvalue(0.01, 0.01, -0.01, "greater") == pytest.approx(norm.sf(2.0))
    # p <= alpha exactly when the one-sided (1 - alpha) bound excludes the threshold
    z95 = norm.ppf(0.95)
    assert normal_pvalue(-0.05 + 0.01 * z95, 0.01, -0.05, "greater") == pytest.approx(0.05)
    assert normal_pvalue(0.0, 0.0, -0.05, "less") == 1.0 and normal_pvalue(-0.1, 0.0, -0.05, "less") == 0.0
    assert normal_pvalue(math.nan, 0.01, 0.0, "less") == 1.0 and normal_pvalue(0.1, math.nan, 0.0, "greater") == 1.0


# ------------------------------------------------------------------ the gate on X-ray cls evaluations

N_IMAGES = 1500
REGRESSED = "effusion"  # token of NIH "Effusion" (254 positives in the first 2000 images)
OVERRIDES = ["bootstrap.n_resamples=100", "gate.n_resamples=200"]


def _write(path: Path, ids: list[str], rows: np.ndarray) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", *NIH_FINDINGS])
        w.writerows([i, *r] for i, r in zip(ids, rows.tolist(), strict=True))


@pytest.fixture(scope="module")
def xray_results(tmp_path_factory) -> dict[str, BenchmarkResult]:
    """Real NIH labels; each version's scores are sigmoid(shift * y + noise), the noise partly shared."""
    root = tmp_path_factory.mktemp("xray_gate")
    ids, y = nih_findings(limit=N_IMAGES)
    rng = np.random.default_rng(0)
    shared, own = rng.normal(size=y.shape), rng.normal(size=y.shape)
    logits = {
        "champion": 1.0 * y + shared,
        "improved": 2.0 * y + 0.8 * shared + 0.6 * own,
        "finding_regress": 2.0 * y + 0.8 * shared + 0.6 * own,
    }
    j = NIH_FINDINGS.index("Effusion")
    logits["finding_regress"][:, j] = 0.2 * y[:, j] + own[:, j]  # this finding only: worse than the champion
    labels = root / "labels.csv"
    _write(labels, ids, y)
    cfg = load_config(None, OVERRIDES)
    out = {}
    for version, z in logits.items():
        scores = root / f"scores_{version}.csv"
        _write(scores, ids, np.round(1 / (1 + np.exp(-z)), 4))
        out[version] = xray.evaluate("cls", TaskInputs(labels, scores), cfg, {"name": "cxr", "version": version})
    return out


#: what the gate knows of xray/cls's AUROC: the facts the unit declares (paired by DeLong)
CLS = resolve_policies(GateConfig(), xray.SPECS)["xray/cls"]


def _gate(results: dict[str, BenchmarkResult], candidate: str, champion: str = "champion", *extra: str):
    cfg = load_config(None, [*OVERRIDES, *extra])
    cand, champ = {"xray/cls": results[candidate]}, {"xray/cls": results[champion]}
    return decide("cxr", candidate, cand, champion, champ, cfg.gate, gate_policies(cfg))


def _labels_scores(result: BenchmarkResult, token: str) -> tuple[np.ndarray, np.ndarray]:
    cases = sorted(result.cases, key=lambda c: c.case_id)
    return np.array([c.metrics[token]["label"] for c in cases]), np.array([c.metrics[token]["score"] for c in cases])


def test_xray_comparison_rows_match_the_evaluations_and_direct_delong(xray_results):
    cand, base = xray_results["improved"], xray_results["champion"]
    comp = compare_results(cand, base, CLS, ("finding",))
    assert comp.method == "delong" and not comp.problems
    rows = {r.key: r for r in comp.rows}
    head = rows["xray/cls/auroc"]
    assert head.candidate == pytest.approx(cand.aggregates["xray/cls/auroc"].value, abs=1e-12)
    assert head.baseline == pytest.approx(base.aggregates["xray/cls/auroc"].value, abs=1e-12)
    assert head.samples is None and head.n_pairs == N_IMAGES * len(NIH_FINDINGS)
    for finding in NIH_FINDINGS:
        token = finding.lower()
        row = rows[f"xray/cls/auroc/by_finding/{token}"]
        y, a = _labels_scores(cand, token)
        _, b = _labels_scores(base, token)
        assert row.delta == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b), abs=1e-12)
        assert row.std_error == pytest.approx(math.sqrt(_paired_var_direct(y, a, b)), rel=1e-9)
        assert row.n_pairs == N_IMAGES
    assert head.delta == pytest.approx(np.mean([r.delta for r in comp.rows[1:]]), abs=1e-12)
    # case order does not matter: images are paired by case id
    shuffled = cand.model_copy(update={"cases": cand.cases[::-1]})
    again = compare_results(shuffled, base, CLS, ("finding",))
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in comp.rows]


def test_clear_auroc_improvement_is_promoted(xray_results):
    d = _gate(xray_results, "improved")
    assert d.verdict == "pass", d.reasons
    head = d.comparisons[0].rows[0]
    assert head.ci95_low > 0.05
    assert {c.name for c in d.checks} == {"audit", "non_inferiority", "worst_group"}
    assert len(d.group_tests) == len(NIH_FINDINGS)


def test_one_finding_regressing_is_rejected_by_the_worst_group_guard(xray_results):
    d = _gate(xray_results, "finding_regress")
    head = d.comparisons[0].rows[0]
    assert head.ci95_low > 0.01  # the macro AUROC still improves clearly
    failed = [c for c in d.checks if not c.passed]
    assert d.verdict == "fail" and [c.name for c in failed] == ["worst_group"]
    assert f"xray/cls/auroc/by_finding/{REGRESSED}" in failed[0].detail
    g = next(g for g in d.group_tests if g.key.endswith(REGRESSED))
    y, a = _labels_scores(xray_results["finding_regress"], REGRESSED)
    _, b = _labels_scores(xray_results["champion"], REGRESSED)
    delta = roc_auc_score(y, a) - roc_auc_score(y, b)
    assert delta < -0.1
    df = int(min(y.sum(), (1 - y).sum())) - 1  # NIH: every image its own cluster here
    p = t.cdf((delta + 0.05) / math.sqrt(_paired_var_direct(y, a, b)), df)  # one-sided t-test at margin 0.05
    assert d.comparisons[0].reference == "t" and next(r for r in d.comparisons[0].rows if r.key == g.key).df == df
    assert g.p_value == pytest.approx(p, rel=1e-6)
    assert g.p_adjusted == pytest.approx(min(1.0, len(NIH_FINDINGS) * p), rel=1e-6)  # Holm: smallest p x 14
    assert (
        _gate(xray_results, "finding_regress", "champion", "gate.group_margins={xray/finding/effusion: 0.3}").verdict
        == "pass"
    )


def test_different_image_ids_are_refused(xray_results):
    cand = xray_results["improved"]
    fewer = cand.model_copy(update={"cases": cand.cases[1:]})
    cfg = load_config(None, OVERRIDES)
    d = decide(
        "cxr",
        "improved",
        {"xray/cls": fewer},
        "champion",
        {"xray/cls": xray_results["champion"]},
        cfg.gate,
        gate_policies(cfg),
    )
    (check,) = [c for c in d.checks if not c.passed]
    assert check.name == "pairing" and "case sets differ: 0 case(s) only in the candidate" in check.detail
    assert cand.cases[0].case_id in check.detail and d.comparisons[0].rows == []


def test_differing_labels_and_missing_labels_are_pairing_problems(xray_results):
    cand, base = xray_results["improved"], xray_results["champion"]
    first = cand.cases[0]
    flipped = {**first.metrics, "hernia": {**first.metrics["hernia"], "label": 1.0 - first.metrics["hernia"]["label"]}}
    changed = cand.model_copy(update={"cases": [first.model_copy(update={"metrics": flipped}), *cand.cases[1:]]})
    comp = compare_results(changed, base, CLS, ("finding",))
    assert comp.rows == [] and len(comp.problems) == 1
    assert "labels differ" in comp.problems[0] and first.case_id in comp.problems[0] and "hernia" in comp.problems[0]
    bare = [c.model_copy(update={"metrics": {}}) for c in cand.cases]
    no_labels = compare_results(
        cand.model_copy(update={"cases": bare}),
        base.model_copy(update={"cases": bare}),
        CLS,
        (),
    )
    assert no_labels.rows == [] and "no per-image 'label'/'score'" in no_labels.problems[0]


def test_case_group_rows_recompute_the_macro_delong_on_their_images(xray_results):
    cand, base = xray_results["improved"], xray_results["champion"]

    def with_view(r: BenchmarkResult) -> BenchmarkResult:
        cases = [c.model_copy(update={"groups": {"view": "pa" if int(c.case_id[-5]) % 2 else "ap"}}) for c in r.cases]
        return r.model_copy(update={"cases": cases})

    comp = compare_results(with_view(cand), with_view(base), CLS, ("view",))
    assert [r.key for r in comp.rows] == ["xray/cls/auroc", "xray/cls/auroc/by_view/ap", "xray/cls/auroc/by_view/pa"]
    tokens = [f.lower() for f in NIH_FINDINGS]
    cases_c = sorted(cand.cases, key=lambda c: c.case_id)
    cases_b = sorted(base.cases, key=lambda c: c.case_id)
    pa = np.array([int(c.case_id[-5]) % 2 == 1 for c in cases_c])
    y, a, b = (
        np.array([[c.metrics[t][k] for t in tokens] for c in cs])
        for cs, k in ((cases_c, "label"), (cases_c, "score"), (cases_b, "score"))
    )
    ref = paired_delong(y[pa], a[pa], b[pa])
    row = comp.rows[2]
    assert row.delta == pytest.approx(ref.overall, abs=1e-15) and row.n_pairs == int(ref.n_pairs.sum())
    assert row.std_error == pytest.approx(math.sqrt(ref.overall_variance), rel=1e-12)
    assert 0 < row.n_pairs < N_IMAGES * len(NIH_FINDINGS)


def test_clustered_variance_sums_influence_within_a_patient():
    rng = np.random.default_rng(4)
    y = (rng.uniform(size=120) < 0.3).astype(float)
    a, b = _scores(rng, y, 1.5), _scores(rng, y, 1.0)
    plain = paired_delong(y, a, b)
    singletons = paired_delong(y, a, b, clusters=np.arange(120))
    assert singletons.variance[0] == pytest.approx(plain.variance[0], rel=1e-12)
    # every image twice (two views of one patient): the AUCs are unchanged; counted as 240 independent images
    # the variance halves, while as 120 clusters of two it is the 120-image variance again
    yy, aa, bb = (np.repeat(v, 2) for v in (y, a, b))
    naive = paired_delong(yy, aa, bb)
    clustered = paired_delong(yy, aa, bb, clusters=np.repeat(np.arange(120), 2))
    assert clustered.value[0] == pytest.approx(plain.value[0], abs=1e-12)
    assert naive.variance[0] == pytest.approx(plain.variance[0] / 2, rel=0.05)
    assert clustered.variance[0] == pytest.approx(plain.variance[0], rel=0.05)
    assert clustered.overall_variance == pytest.approx(clustered.variance[0], rel=1e-12)


def test_evaluate_write_read_gate_and_curves_never_build_a_record_per_case(
    xray_results, tmp_path, tmp_path_factory, monkeypatch
):
    """The decision side works on the case table's columns: with the per-case record view made to fail, an X-ray
    classification evaluation, its results folder written and read back (verified), the gate and the ROC/PR data
    all run (at 100,000 studies a record per image was most of track's, compare's and promote's time)."""
    from trackeval import case_table, plotdata
    from trackeval.io.results_folder import read_results, write_outputs

    def records(self):
        raise AssertionError("a CaseRecord per case was built")

    monkeypatch.setattr(case_table.CaseTable, "_records", property(records))
    root = next(tmp_path_factory.getbasetemp().glob("xray_gate*"))  # the xray_results fixture's files
    cfg = load_config(None, OVERRIDES)
    fresh = xray.evaluate("cls", TaskInputs(root / "labels.csv", root / "scores_improved.csv"), cfg, {"name": "cxr"})
    for version, result in (("improved", fresh), ("champion", xray_results["champion"])):
        write_outputs(result, tmp_path / version)
    back = {v: read_results(tmp_path / v) for v in ("improved", "champion")}
    assert back["improved"].aggregates == xray_results["improved"].aggregates
    d = _gate(back, "improved")
    assert d.verdict == _gate(xray_results, "improved").verdict == "pass"
    pairs = plotdata.label_score_pairs(back["improved"])
    assert len(pairs) == len(NIH_FINDINGS) and all(len(y) == len(s) for y, s in pairs.values())
    assert plotdata.roc_rows(back["improved"]) and plotdata.pr_rows(back["improved"])
