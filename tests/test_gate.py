"""The promotion gate's decisions on real UMD evaluations of NIfTI data (no MLflow here: pure rules)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, t

from tests import gate_data
from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import mir3d
from trackeval.demo.mir3d_baselines import data_dir, write_baseline
from trackeval.gate.compare import compare_results
from trackeval.gate.decide import decide
from trackeval.gate.policy import UnitPolicy
from trackeval.results import BenchmarkResult


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, BenchmarkResult]:
    root = tmp_path_factory.mktemp("gate")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out = {v: gate_data.evaluate_version(root, gt, v, cfg)[0] for v in gate_data.VERSIONS}
    alt = gate_data.make_ground_truth(root / "alt", altered=True)
    out["other_data"] = gate_data.evaluate_version(root / "alt", alt, "improved", cfg)[0]
    return out


def _gate(results, candidate: str, *extra: str):
    cfg = gate_data.config(*extra)
    return decide(
        "seg",
        candidate,
        {"umd": results[candidate]},
        "champion",
        {"umd": results["champion"]},
        cfg.gate,
        gate_policies(cfg),
    )


def _declared(unit: str) -> UnitPolicy:
    """The policy of a built-in unit under the default config: its primary metric with the facts it declares."""
    return gate_policies(load_config())[unit]


def _per_organ(result: BenchmarkResult, organ: str) -> dict[str, float]:
    return {c.case_id: c.metrics[organ]["dsc"] for c in result.cases}


def test_paired_deltas_equal_hand_computed_case_differences(results):
    cand, base = results["organ_regress"], results["champion"]
    comp = compare_results(cand, base, _declared("umd"), ("organ", "modality"), n_resamples=500)
    rows = {r.key: r for r in comp.rows}
    per_organ = {}
    for organ in gate_data.LABELS:
        c, b = _per_organ(cand, organ), _per_organ(base, organ)
        per_organ[organ] = np.mean([c[k] - b[k] for k in c])
        assert rows[f"umd/dsc/by_organ/{organ}"].delta == pytest.approx(per_organ[organ])
        assert rows[f"umd/dsc/by_organ/{organ}"].n_pairs == 12
    # heart: a one-voxel shift of a 5-voxel-wide box on every case: Dice 1 -> 0.8
    assert per_organ["heart"] == pytest.approx(-0.2)
    head = rows["umd/dsc"]
    assert head.delta == pytest.approx(np.mean(list(per_organ.values())))
    assert head.ci95_low <= head.delta <= head.ci95_high
    assert head.candidate - head.baseline == pytest.approx(head.delta)


def test_clear_improvement_is_promoted(results):
    d = _gate(results, "improved")
    assert d.verdict == "pass", d.reasons
    head = d.comparisons[0].rows[0]
    assert head.ci95_low > 0.2
    assert {c.name for c in d.checks} == {"audit", "non_inferiority", "worst_group"}


def test_noise_level_difference_within_margin_is_promoted(results):
    d = _gate(results, "noise")
    head = d.comparisons[0].rows[0]
    assert -0.01 < head.ci95_low < head.delta < 0  # slightly worse, but non-inferior at margin 0.01
    assert d.verdict == "pass", d.reasons
    # the same data fail when superiority is required
    sup = _gate(results, "noise", "gate.superiority={umd: true}")
    assert sup.verdict == "fail" and [c.name for c in sup.checks if not c.passed] == ["superiority"]


def test_one_organ_regressing_is_rejected_by_the_worst_group_guard(results):
    d = _gate(results, "organ_regress", "gate.n_resamples=20000")
    head = d.comparisons[0].rows[0]
    assert head.ci95_low > 0.1  # the mean improves clearly
    failed = [c for c in d.checks if not c.passed]
    assert d.verdict == "fail"
    assert [c.name for c in failed] == ["worst_group"]
    assert "umd/dsc/by_organ/heart" in failed[0].detail
    heart = next(g for g in d.group_tests if g.key == "umd/dsc/by_organ/heart")
    # every replicate of heart lies below -margin (Dice 1 -> 0.8 on every case): the level is floored at 1/B
    # (the resolution of B = 20000 replicates) and expanded with 6 subjects, never 0
    want = float(t.cdf(norm.ppf(1 / 20000) / np.sqrt(6 / 5), 5))
    assert heart.p_value == pytest.approx(want, rel=1e-9) and 0.007 < heart.p_value < 0.009
    assert heart.p_adjusted == pytest.approx(5 * want, rel=1e-9)  # Holm, 5 groups: heart has the smallest p
    # a margin wider than the regression lets it through
    wide = _gate(results, "organ_regress", "gate.n_resamples=20000", "gate.group_margins={umd/organ/heart: 0.25}")
    assert wide.verdict == "pass"


def test_at_small_n_the_guard_resolves_no_p_below_its_resampling_floor(results):
    # B = 1000 at 6 subjects: the smallest p is expanded(1/1000) = 0.0185; Holm over 5 groups gives 0.093 > alpha,
    # so even a regression on every case is not shown beyond its margin (the guard cannot tell it at this n and B)
    d = _gate(results, "organ_regress")
    heart = next(g for g in d.group_tests if g.key == "umd/dsc/by_organ/heart")
    assert heart.p_value == pytest.approx(float(t.cdf(norm.ppf(1 / 1000) / np.sqrt(6 / 5), 5)), rel=1e-9)
    assert heart.p_adjusted == pytest.approx(5 * heart.p_value, rel=1e-9) and heart.p_adjusted > 0.05
    assert d.verdict == "pass", d.reasons


def test_plain_percentile_pvalues_keep_the_plus_one_rule(tmp_path):
    cfg = gate_data.config("bootstrap.interval=percentile", "bootstrap.cluster=case")
    gt = gate_data.make_ground_truth(tmp_path)
    res = {v: gate_data.evaluate_version(tmp_path, gt, v, cfg)[0] for v in ("champion", "organ_regress")}
    d = decide(
        "seg",
        "organ_regress",
        {"umd": res["organ_regress"]},
        "champion",
        {"umd": res["champion"]},
        cfg.gate,
        gate_policies(cfg),
    )
    heart = next(g for g in d.group_tests if g.key == "umd/dsc/by_organ/heart")
    # 5 groups (3 organs, 2 modalities); heart has the smallest p = 1/(B+1), so Holm multiplies it by 5
    assert heart.p_value == pytest.approx(1 / 1001)
    assert heart.p_adjusted == pytest.approx(5 / 1001)


def test_noninferiority_group_test_needs_every_group_shown_within_margin(results):
    d = _gate(results, "improved", "gate.group_test=noninferiority")
    assert d.verdict == "pass", d.reasons
    assert all(g.p_value == g.p_adjusted for g in d.group_tests)  # intersection-union: no adjustment


def test_different_data_digest_is_refused(results):
    d = _gate(results, "other_data")
    assert d.verdict == "fail"
    (check,) = [c for c in d.checks if not c.passed]
    assert check.name == "pairing" and "data digest mismatch" in check.detail
    assert d.comparisons[0].rows == []


def test_first_version_needs_the_absolute_floor(results):
    cfg = gate_data.config()
    ok = decide("seg", "champion", {"umd": results["champion"]}, None, None, cfg.gate, gate_policies(cfg))
    assert ok.verdict == "pass" and [c.name for c in ok.checks] == ["audit", "floor"]
    high = gate_data.config("gate.floors={umd: 0.9}")
    low = decide("seg", "champion", {"umd": results["champion"]}, None, None, high.gate, gate_policies(high))
    # the default floor statistic is the conservative end of the CI
    bound = results["champion"].aggregates["umd/dsc"].ci95_low
    assert bound < results["champion"].aggregates["umd/dsc"].value
    assert low.verdict == "fail" and low.checks[1].detail == f"umd/dsc ci95_low {bound:.4f} >= 0.9"


def test_failed_leakage_audit_blocks_promotion(results):
    leaky = results["improved"].model_copy(
        update={"summary": {**results["improved"].summary, "audit/n_subject_overlap": 2}}
    )
    cfg = gate_data.config()
    d = decide(
        "seg", "improved", {"umd": leaky}, "champion", {"umd": results["champion"]}, cfg.gate, gate_policies(cfg)
    )
    assert d.verdict == "fail"
    assert [c.detail for c in d.checks if not c.passed] == ["summary.audit/n_subject_overlap = 2"]


def test_missing_benchmark_in_candidate_fails(results):
    cfg = gate_data.config()
    d = decide("seg", "x", {}, "champion", {"umd": results["champion"]}, cfg.gate, gate_policies(cfg))
    assert d.verdict == "fail" and "candidate was not" in d.reasons[-1]


def test_mir3d_results_pair_on_full_metric_path(tmp_path):
    """3D-MIR case records hold `group/ap_at_10`; the gate must pair on it (not on `ap_at_10`)."""
    cfg = load_config(None, ["bootstrap.n_resamples=200"])
    rand = mir3d.evaluate(data_dir(), write_baseline("random", tmp_path / "r.csv", seed=1), cfg)
    oracle = mir3d.evaluate(data_dir(), write_baseline("oracle", tmp_path / "o.csv"), cfg)
    cmp = compare_results(oracle, rand, _declared("mir3d"), ("region",))
    head = cmp.rows[0]
    expected = oracle.aggregates["mir3d/group/ap_at_10"].value - rand.aggregates["mir3d/group/ap_at_10"].value
    assert not cmp.problems and head.delta == pytest.approx(expected)
    assert head.ci95_low > 0
    keys = [r.key for r in cmp.rows]
    assert len(keys) == len(set(keys)) == 5  # headline + one row per region, no duplicates
