"""The gate's decision rules pinned at their boundaries (issue 19, section 6), on hand-made rows and results.

Every rule is checked exactly where it flips: a lower bound exactly at ``-margin`` fails non-inferiority (the
rule is ``lo > -margin``), a floor exactly at the statistic passes (``>=``), superiority needs ``lo > 0``
strictly, lower-is-better units mirror every bound, and a case set renamed at the same size is not paired. The
values are powers of two, so every comparison at a boundary is exact in floating point.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as t_dist

from tests.test_gate_compare import facts
from trackeval.config import GateConfig
from trackeval.errors import ConfigError
from trackeval.gate.compare import BenchmarkComparison, compare_results
from trackeval.gate.decide import (
    Check,
    Decision,
    _floor_check,
    _group_tests,
    _interval_checks,
    _missing_check,
    audit_problems,
    compare_unit,
    decide,
    guard_resolution_note,
    n_missing,
    resolution_note,
)
from trackeval.gate.pairing import DeltaRow, pairing_problems, protocol_digest
from trackeval.gate.policy import PolicyRecord, UnitPolicy, resolve_policies
from trackeval.results import BenchmarkResult, CaseRecord, DataInfo, MetricSummary, sha256_text
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric
from trackeval.stats.bootstrap import expanded_pvalue

MARGIN = 0.25
TINY = 2.0**-20  # a step just inside a boundary, still exact in binary


#: the facts of the gated metric a test may set (the rest of ``_policy``'s keywords are the policy's fields)
FACTS = ("higher_is_better", "reduction", "paired", "best")


def _policy(**kw) -> UnitPolicy:
    facts = {"best": 1.0, **{f: kw.pop(f) for f in FACTS if f in kw}}
    fields = {
        "unit": "toy",
        "metric": "dsc",
        "info": MetricInfo("dsc", label="Dice", **facts),
        "margin": MARGIN,
        "floor": 0.5,
        "superiority": False,
        "group_dimensions": (),
        "default_group_margin": MARGIN,
        "group_margins": (),
    }
    return UnitPolicy(**{**fields, **kw})


def _head(lo: float | None, hi: float | None, delta: float | None = None, **kw) -> DeltaRow:
    if delta is None and lo is not None and hi is not None:
        delta = (lo + hi) / 2
    fields = {
        "unit": "toy",
        "key": "toy/dsc",
        "candidate": None,
        "baseline": None,
        "delta": delta,
        "ci95_low": lo,
        "ci95_high": hi,
        "n_pairs": 8,
        "n_units": 8,
    }
    return DeltaRow(**{**fields, **kw})


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# ------------------------------------------------------------------ non-inferiority and superiority


def test_lower_bound_exactly_at_minus_margin_fails_non_inferiority():
    (at,) = _interval_checks(_head(-MARGIN, 0.5, 0.125), _policy())
    assert at.name == "non_inferiority" and at.unit == "toy" and not at.passed
    assert at.detail == "toy/dsc: delta +0.1250 [-0.2500, +0.5000]; need lower bound > -0.25"
    (inside,) = _interval_checks(_head(-MARGIN + TINY, 0.5), _policy())
    assert inside.passed


def test_non_inferiority_reads_the_lower_bound_not_the_upper_one():
    # the upper bound is far above -margin; only the lower one decides
    (wide,) = _interval_checks(_head(-0.5, 0.5, 0.0), _policy())
    assert not wide.passed
    # a lower bound between -margin and 0 passes even though the interval reaches below 0 (the rule is not +margin)
    (close,) = _interval_checks(_head(-0.125, 0.0, -0.0625), _policy())
    assert close.passed


def test_lower_is_better_mirrors_the_margin_onto_the_upper_bound():
    low = _policy(higher_is_better=False)
    (at,) = _interval_checks(_head(-0.5, MARGIN, -0.125), low)
    assert not at.passed
    assert at.detail == "toy/dsc: delta -0.1250 [-0.5000, +0.2500]; need upper bound < +0.25 (lower is better)"
    (inside,) = _interval_checks(_head(-0.5, MARGIN - TINY), low)
    assert inside.passed
    # a lower bound far below -margin is good news for a distance: it does not fail the unit
    (better,) = _interval_checks(_head(-1.0, 0.0, -0.5), low)
    assert better.passed
    # ... and an upper bound above +margin fails it, whatever the lower bound
    (worse,) = _interval_checks(_head(0.0, 0.5, 0.25), low)
    assert not worse.passed


def test_superiority_needs_the_lower_bound_strictly_above_zero():
    sup = _policy(superiority=True)
    identical = _by_name(_interval_checks(_head(0.0, 0.0, 0.0), sup))
    assert identical["non_inferiority"].passed and not identical["superiority"].passed
    assert identical["superiority"].detail == "toy/dsc: delta +0.0000 [+0.0000, +0.0000]; need lower bound > 0"
    just = _by_name(_interval_checks(_head(TINY, 0.5), sup))
    assert just["superiority"].passed and just["non_inferiority"].passed
    negative = _by_name(_interval_checks(_head(-TINY, 0.5), sup))
    assert not negative["superiority"].passed and negative["non_inferiority"].passed


def test_superiority_of_a_lower_is_better_unit_needs_the_upper_bound_below_zero():
    sup = _policy(superiority=True, higher_is_better=False)
    identical = _by_name(_interval_checks(_head(0.0, 0.0, 0.0), sup))
    assert identical["non_inferiority"].passed and not identical["superiority"].passed
    assert identical["superiority"].detail.endswith("; need upper bound < 0 (lower is better)")
    assert _by_name(_interval_checks(_head(-0.5, -TINY), sup))["superiority"].passed
    # a lower bound above 0 would pass a higher-is-better unit; here it is a regression
    assert not _by_name(_interval_checks(_head(TINY, 0.125), sup))["superiority"].passed


def test_without_superiority_there_is_one_check():
    assert [c.name for c in _interval_checks(_head(0.5, 0.75), _policy())] == ["non_inferiority"]


def test_a_delta_without_interval_or_without_pairs_fails():
    (no_ci,) = _interval_checks(_head(None, None, 0.5), _policy())
    assert not no_ci.passed
    assert no_ci.detail == (
        "toy/dsc: delta +0.5000 without a CI (variance undefined, e.g. a finding with one positive); "
        "need lower bound > -0.25"
    )
    checks = _interval_checks(_head(None, None, None), _policy(superiority=True, higher_is_better=False))
    assert [c.passed for c in checks] == [False, False]
    assert checks[0].detail == "toy/dsc: no paired values; need upper bound < +0.25 (lower is better)"


# ------------------------------------------------------------------ absolute floor


def _floor_result(value: float | None, lo: float | None, hi: float | None, key: str = "toy/dsc") -> BenchmarkResult:
    return _result({"c1": 0.5}, aggregates={key: MetricSummary(value=value, ci95_low=lo, ci95_high=hi, n=1, n_valid=1)})


def test_floor_exactly_at_the_conservative_bound_passes():
    at = _floor_check(_floor_result(0.75, 0.5, 1.0), _policy(floor=0.5), GateConfig())
    assert at.name == "floor" and at.passed and at.detail == "toy/dsc ci95_low 0.5000 >= 0.5"
    below = _floor_check(_floor_result(0.75, 0.5 - TINY, 1.0), _policy(floor=0.5), GateConfig())
    assert not below.passed


def test_floor_uses_the_pessimistic_end_of_the_interval():
    # the value and the upper bound clear the floor; the lower bound does not
    assert not _floor_check(_floor_result(0.75, 0.25, 1.0), _policy(floor=0.5), GateConfig()).passed
    # with floor_statistic=value the point estimate decides, exactly at the floor included
    by_value = _floor_check(_floor_result(0.5, 0.25, 1.0), _policy(floor=0.5), GateConfig(floor_statistic="value"))
    assert by_value.passed and by_value.detail == "toy/dsc value 0.5000 >= 0.5"
    under = _floor_check(_floor_result(0.5 - TINY, 0.5, 1.0), _policy(floor=0.5), GateConfig(floor_statistic="value"))
    assert not under.passed


def test_a_lower_is_better_floor_is_a_ceiling_on_the_upper_bound():
    low = _policy(higher_is_better=False, floor=0.5)
    at = _floor_check(_floor_result(0.25, 0.0, 0.5), low, GateConfig())
    assert at.passed and at.detail == "toy/dsc ci95_low 0.5000 <= 0.5"  # the statistic is the conservative end
    # the value and lower bound are under the ceiling, the upper bound is not
    assert not _floor_check(_floor_result(0.25, 0.0, 0.5 + TINY), low, GateConfig()).passed
    assert not _floor_check(_floor_result(0.25, 0.0, 0.75), low, GateConfig()).passed
    assert _floor_check(_floor_result(0.5, 0.0, 0.75), low, GateConfig(floor_statistic="value")).passed
    assert not _floor_check(_floor_result(0.5 + TINY, 0.0, 0.25), low, GateConfig(floor_statistic="value")).passed


def test_floor_without_a_configured_floor_or_a_headline_fails():
    none = _floor_check(_floor_result(1.0, 1.0, 1.0), _policy(floor=None), GateConfig())
    assert not none.passed and none.detail == "no absolute floor configured (gate.floors)"
    missing = _floor_check(_floor_result(1.0, 1.0, 1.0, key="toy/other"), _policy(floor=0.0), GateConfig())
    assert not missing.passed and missing.detail == "toy/dsc ci95_low missing >= 0.0"
    no_bound = _floor_check(_floor_result(1.0, None, None), _policy(floor=0.0), GateConfig())
    assert not no_bound.passed and no_bound.detail == "toy/dsc ci95_low missing >= 0.0"
    by_value = _floor_check(
        _floor_result(1.0, 1.0, 1.0, key="toy/other"), _policy(floor=0.0), GateConfig(floor_statistic="value")
    )
    assert not by_value.passed and by_value.detail == "toy/dsc value missing >= 0.0"


# ------------------------------------------------------------------ the worst-group guard


def _group_row(key: str, samples: list[float] | None, *, unit: str = "toy", **kw) -> DeltaRow:
    dim, group = key.split("/by_")[1].split("/")
    fields = {
        "unit": unit,
        "key": key,
        "dimension": dim,
        "group": group,
        "candidate": None,
        "baseline": None,
        "delta": None if not samples else float(np.mean(samples)),
        "ci95_low": None if not samples else min(samples),
        "ci95_high": None if not samples else max(samples),
        "n_pairs": 8,
        "n_units": 8,
        "samples": samples,
    }
    return DeltaRow(**{**fields, **kw})


def _comparison(rows: list[DeltaRow], unit: str = "toy", **kw) -> BenchmarkComparison:
    fields = {
        "unit": unit,
        "metric": f"{unit}/dsc",
        "candidate_label": "v2",
        "baseline_label": "v1",
        "n_cases": 8,
        "problems": [],
        "rows": [_head(0.0, 0.0, 0.0, unit=unit), *rows],
    }
    return BenchmarkComparison(**{**fields, **kw})


def test_group_tests_skip_the_headline_and_report_each_group():
    rows = [_group_row("toy/dsc/by_organ/liver", [0.0] * 99), _group_row("toy/dsc/by_organ/heart", [-0.5] * 99)]
    tests = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig())
    assert [t.key for t in tests] == ["toy/dsc/by_organ/liver", "toy/dsc/by_organ/heart"]
    liver, heart = tests
    # every liver replicate (0) is on the H0 side of "delta < -0.25": p = (1 + 99) / 100
    assert liver.p_value == 1.0 and liver.passed and liver.unit == "toy" and liver.margin == MARGIN
    assert liver.delta == 0.0 and liver.ci95_low == 0.0 and liver.ci95_high == 0.0
    # no heart replicate on the H0 side: p = 1 / 100; Holm over 2 groups doubles the smallest p
    assert heart.p_value == pytest.approx(1 / 100) and heart.p_adjusted == pytest.approx(2 / 100)
    assert not heart.passed
    # at 19 replicates the smallest p is 1/20 and Holm's 2/20 > alpha: the same harm is not shown
    few = [_group_row("toy/dsc/by_organ/liver", [0.0] * 19), _group_row("toy/dsc/by_organ/heart", [-0.5] * 19)]
    assert [t.passed for t in _group_tests([_comparison(few)], {"toy": _policy()}, GateConfig())] == [True, True]


def test_harm_flags_a_group_whose_adjusted_p_equals_alpha():
    # one group, 19 replicates all beyond the margin: p = 1 / 20 = 0.05 = alpha exactly -> flagged (p <= alpha)
    rows = [_group_row("toy/dsc/by_organ/heart", [-0.5] * 19)]
    (at,) = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig(alpha=0.05))
    assert at.p_value == 0.05 and at.p_adjusted == 0.05 and not at.passed
    (above,) = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig(alpha=0.05 - TINY))
    assert above.passed


def test_noninferiority_group_test_passes_a_group_whose_p_equals_alpha():
    rows = [_group_row("toy/dsc/by_organ/heart", [0.0] * 19), _group_row("toy/dsc/by_organ/liver", [-0.5] * 19)]
    cfg = GateConfig(group_test="noninferiority", alpha=0.05)
    heart, liver = _group_tests([_comparison(rows)], {"toy": _policy()}, cfg)
    # H1 "delta > -0.25": no heart replicate on the H0 side -> p = 1/20 = alpha, shown within the margin
    assert heart.p_value == 0.05 and heart.p_adjusted == 0.05 and heart.passed
    # every liver replicate is on the H0 side: p = 1, not shown; no multiplicity adjustment in this mode
    assert liver.p_value == 1.0 and liver.p_adjusted == 1.0 and not liver.passed
    tight = _group_tests([_comparison(rows)], {"toy": _policy()}, cfg.model_copy(update={"alpha": 0.05 - TINY}))
    assert not tight[0].passed


def test_a_replicate_exactly_at_the_group_margin_counts_as_no_harm():
    # H1 "delta < -0.25": a replicate equal to -0.25 is on the H0 side
    rows = [_group_row("toy/dsc/by_organ/heart", [-MARGIN] * 19)]
    (g,) = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig())
    assert g.p_value == 1.0 and g.passed


def test_group_margins_mirror_for_a_lower_is_better_unit():
    low = {"toy": _policy(higher_is_better=False)}
    rows = [
        _group_row("toy/dsc/by_organ/same", [0.0] * 19),  # no change: fine
        _group_row("toy/dsc/by_organ/smaller", [-0.5] * 19),  # a smaller distance is better: fine
        _group_row("toy/dsc/by_organ/bigger", [0.5] * 19),  # a distance 0.5 larger: worse by more than 0.25
        _group_row("toy/dsc/by_organ/edge", [MARGIN] * 19),  # exactly +margin: on the H0 side
    ]
    same, smaller, bigger, edge = _group_tests([_comparison(rows)], low, GateConfig(multiplicity="none"))
    assert same.p_value == 1.0 and same.passed
    assert smaller.p_value == 1.0 and smaller.passed
    assert bigger.p_value == pytest.approx(1 / 20) and not bigger.passed
    assert edge.p_value == 1.0 and edge.passed
    # the noninferiority form mirrors too: H1 "delta < +0.25" is shown for the smaller and unchanged groups
    ni = _group_tests([_comparison(rows)], low, GateConfig(group_test="noninferiority"))
    assert [g.passed for g in ni] == [True, True, False, False]


def test_group_margins_come_from_the_row_group_and_holm_spans_all_units():
    cfg = GateConfig(multiplicity="bonferroni")
    policies = {
        "toy": _policy(group_margins=(("toy/organ/heart", 0.75),)),
        "other": _policy(unit="other"),
    }
    comps = [
        _comparison([_group_row("toy/dsc/by_organ/heart", [-0.5] * 19)]),
        _comparison([_group_row("other/dsc/by_organ/heart", [-0.5] * 19, unit="other")], unit="other"),
    ]
    toy, other = _group_tests(comps, policies, cfg)
    assert toy.margin == 0.75 and toy.p_value == 1.0 and toy.passed  # -0.5 is within the heart's 0.75
    assert other.margin == MARGIN and other.unit == "other"
    assert other.p_value == pytest.approx(1 / 20) and other.p_adjusted == pytest.approx(2 / 20)


def test_a_group_without_replicates_gives_no_evidence():
    rows = [_group_row("toy/dsc/by_organ/heart", None), _group_row("toy/dsc/by_organ/liver", [math.nan] * 4)]
    heart, liver = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig())
    assert heart.p_value == 1.0 and heart.passed and liver.p_value == 1.0 and liver.passed


def test_expanded_percentile_rows_use_the_expanded_pvalue():
    # 3 of 20 replicates on the H0 side of "delta < -0.25", 8 clusters
    samples = [-0.5] * 17 + [0.0] * 3
    rows = [_group_row("toy/dsc/by_organ/heart", samples)]
    (g,) = _group_tests([_comparison(rows, interval="expanded_percentile")], {"toy": _policy()}, GateConfig())
    assert g.p_value == pytest.approx(expanded_pvalue(3 / 20, 8, "expanded_percentile"), rel=1e-12)
    assert g.p_value > 3 / 20  # the expansion makes the small-sample p-value larger
    (plain,) = _group_tests([_comparison(rows)], {"toy": _policy()}, GateConfig())
    assert plain.p_value == pytest.approx(4 / 21)


def test_rows_with_an_effective_number_of_clusters_use_it_for_their_pvalues():
    # the interval of a row of unequal clusters was expanded with Kish's 3.5 clusters (df floor(3.5) - 1 = 2), not
    # its 8: the p-value must use the same, so that p <= alpha exactly when the bound excludes the margin
    samples = [-0.5] * 17 + [0.0] * 3
    row = _group_row("toy/dsc/by_organ/heart", samples, n_effective=3.5)
    assert row.expansion_units == 3.5 and _group_row("toy/dsc/by_organ/heart", samples).expansion_units == 8.0
    (g,) = _group_tests([_comparison([row], interval="expanded_percentile")], {"toy": _policy()}, GateConfig())
    assert g.p_value == pytest.approx(t_dist.cdf(norm.ppf(3 / 20) / math.sqrt(3.5 / 2.5), 2), rel=1e-9)
    # kept in memory like the replicates: a decision serialises n_units only
    assert "n_effective" not in row.model_dump(mode="json") and "n_effective" not in repr(row)
    assert row.model_dump(mode="json")["n_units"] == 8


def test_delong_group_rows_use_the_one_sided_z_test_with_the_mirrored_margin():
    rows = [
        _group_row("toy/dsc/by_finding/a", None, delta=-0.375, std_error=0.125),
        _group_row("toy/dsc/by_finding/b", None, delta=-0.375, std_error=None),
        _group_row("toy/dsc/by_finding/c", None, delta=None, std_error=0.125),
    ]
    comp = _comparison(rows, method="delong")
    a, b, c = _group_tests([comp], {"toy": _policy()}, GateConfig(multiplicity="none"))
    assert a.p_value == pytest.approx(norm.cdf((-0.375 + MARGIN) / 0.125))  # Phi(-1)
    assert b.p_value == 1.0 and c.p_value == 1.0
    # lower is better: H1 "delta > +0.25"; a delta of -0.375 is an improvement
    low = _group_tests([comp], {"toy": _policy(higher_is_better=False)}, GateConfig(multiplicity="none"))
    assert low[0].p_value == pytest.approx(norm.sf((-0.375 - MARGIN) / 0.125))


# ------------------------------------------------------------------ group-margin and policy lookup


def test_group_margin_most_specific_key_wins():
    p = _policy(
        unit="xray/seg",
        default_group_margin=0.5,
        group_margins=(
            ("xray", 0.01),
            ("xray/organ", 0.02),
            ("xray/organ/heart", 0.03),
            ("xray/seg", 0.04),
            ("xray/seg/organ", 0.05),
            ("xray/seg/organ/lung", 0.06),
        ),
    )
    assert p.group_margin("organ", "lung") == 0.06  # unit/dimension/group
    assert p.group_margin("organ", "liver") == 0.05  # unit/dimension
    assert p.group_margin("view", "ap") == 0.04  # unit
    assert p.key == "xray/seg/dsc"
    bench_only = _policy(unit="xray/seg", default_group_margin=0.5, group_margins=p.group_margins[:3])
    assert bench_only.group_margin("organ", "heart") == 0.03
    assert bench_only.group_margin("organ", "liver") == 0.02
    assert bench_only.group_margin("view", "ap") == 0.01
    assert _policy(unit="xray/seg", default_group_margin=0.5).group_margin("organ", "heart") == 0.5
    # a single-unit benchmark has one owner
    assert _policy(group_margins=(("toy/organ", 0.125),)).group_margin("organ", "x") == 0.125


def _spec(name: str, *metrics: MetricInfo, **primary) -> BenchmarkSpec:
    """A unit gated on ``dsc`` (unless ``primary`` says otherwise) that declares ``metrics`` (by default ``dsc``,
    an item mean with the default facts)."""
    return BenchmarkSpec(
        name=name,
        help=name,
        inputs=None,
        config_section=name.split("/")[0],
        config_model=None,
        evaluate=None,
        primary=PrimaryMetric(**{"metric": "dsc", **primary}),
        metrics=metrics or (MetricInfo("dsc", label="Dice"),),
        group_dimensions=("organ",),
    )


def test_resolve_policies_merges_unit_benchmark_and_declared_defaults():
    specs = [
        _spec(
            "tb/seg",
            MetricInfo("dsc", label="distance", higher_is_better=False, best=0.0),
            margin=0.01,
            floor=0.2,
            protocol=("tb.labels",),
        ),
        _spec(
            "tb/cls",
            MetricInfo("dsc", label="Dice"),
            MetricInfo("auroc", label="AUROC", reduction="case_mean", paired="none"),
            margin=0.02,
            group_margin=0.07,
            protocol=("tb.labels",),
        ),
        _spec("solo", floor=None),
    ]
    cfg = GateConfig(
        margins={"tb": 0.1, "tb/seg": 0.3},
        floors={"tb": 0.4},
        superiority={"tb/cls": True},
        primary_metrics={"tb": "cls/auroc"},
        group_margins={"tb/organ": 0.2, "solo": 0.125},
    )
    p = resolve_policies(cfg, specs)
    seg, cls, solo = p["tb/seg"], p["tb/cls"], p["solo"]
    assert (seg.margin, cls.margin, solo.margin) == (0.3, 0.1, 0.01)  # unit, benchmark, declared default
    assert (seg.floor, cls.floor, solo.floor) == (0.4, 0.4, None)
    assert (seg.superiority, cls.superiority, solo.superiority) == (False, True, False)
    # {tb: cls/auroc} selects tb/cls/auroc for tb/cls only; the whole config is then compared (protocol None)
    assert (seg.metric, cls.metric, solo.metric) == ("dsc", "auroc", "dsc")
    assert seg.protocol == ("tb.labels",) and cls.protocol is None
    assert seg.higher_is_better is False and seg.best == 0.0 and cls.best == 1.0
    # the chosen metric's declared facts (tb/cls/auroc's, not its primary dsc's)
    assert (cls.reduction, cls.paired, cls.per_case) == ("case_mean", "none", "auroc")
    assert (seg.reduction, seg.paired, seg.per_case) == ("item_mean", "bootstrap", "dsc")
    assert cls.default_group_margin == 0.07
    assert seg.group_margins == (("tb/organ", 0.2),) and solo.group_margins == (("solo", 0.125),)
    assert seg.group_dimensions == ("organ",)
    assert resolve_policies(GateConfig(group_dimensions=("site",)), specs)["solo"].group_dimensions == ("site",)


# ------------------------------------------------------------------ missing predictions, notes, audits


def test_missing_check_allows_as_many_missing_predictions_as_the_champion():
    assert _missing_check(_result({"a": 1.0}), _result({"a": 1.0}), "toy") is None
    two = _result({"a": 0.0, "b": 0.0, "c": 1.0}, missing=("a", "b"))
    three = _result({"a": 0.0, "b": 0.0, "c": 0.0}, missing=("a", "b", "c"))
    assert n_missing(two) == 2 and n_missing(three) == 3
    same = _missing_check(two, two, "toy")
    assert same.passed and same.name == "missing_predictions"
    assert same.detail == "missing predictions: candidate 2 vs champion 2"
    more = _missing_check(three, two, "toy")
    assert not more.passed and more.unit == "toy"
    assert _missing_check(two, three, "toy").passed
    only_champion = _missing_check(_result({"a": 1.0, "b": 1.0, "c": 1.0}), two, "toy")
    assert only_champion.passed and only_champion.detail == "missing predictions: candidate 0 vs champion 2"


def test_resolution_note_when_the_half_width_reaches_the_margin():
    comp = _comparison([], cluster="subject_id")
    # half-width exactly the margin: a true delta of 0 could not be shown non-inferior -> a note
    at = resolution_note(_head(-MARGIN, MARGIN, n_units=6), comp, _policy())
    # ceil(6 * (0.25 / 0.25) ** 2) + 1
    assert at == "toy: 6 subjects cannot resolve margin 0.25 at the observed spread; about 7 would"
    assert resolution_note(_head(-MARGIN + TINY, MARGIN - TINY, n_units=6), comp, _policy()) is None
    wide = resolution_note(_head(-0.5, 0.5, n_units=6), comp, _policy())
    assert wide == "toy: 6 subjects cannot resolve margin 0.25 at the observed spread; about 25 would"
    # ceil(5 * (0.375 / 0.25) ** 2) = ceil(11.25) = 12, + 1
    odd = resolution_note(_head(-0.375, 0.375, n_units=5), _comparison([]), _policy())
    assert odd == "toy: 5 cases cannot resolve margin 0.25 at the observed spread; about 13 would"
    # a subject per case (the X-ray formats, 3D-MIR queries): the units are named cases, DeLong or not
    single = _comparison([], cluster="subject_id", method="delong", n_cases=6)
    assert resolution_note(_head(-0.5, 0.5, n_units=6), single, _policy()).startswith("toy: 6 cases ")


def test_resolution_note_needs_an_interval_a_margin_and_units():
    comp = _comparison([])
    assert resolution_note(_head(None, None, 0.0), comp, _policy()) is None
    assert resolution_note(_head(-0.5, None, 0.0), comp, _policy()) is None
    assert resolution_note(_head(None, 0.5, 0.0), comp, _policy()) is None
    assert resolution_note(_head(-0.5, 0.5), comp, _policy(margin=0.0)) is None
    assert resolution_note(_head(-0.5, 0.5, n_units=0), comp, _policy()) is None
    one = resolution_note(_head(-0.5, 0.5, n_units=1), comp, _policy())
    assert one == "toy: 1 cases cannot resolve margin 0.25 at the observed spread; about 5 would"


def test_audit_problems_list_nonzero_audit_and_leak_counts_and_leak_warnings():
    r = _result(
        {"a": 1.0},
        summary={"audit/subject_overlap": 2, "audit/clean": 0, "n_leaked_ids": 1, "n_cases": 5, "leak_free": 0},
        warnings=["3 cases LEAK into training", "a harmless warning"],
    )
    assert audit_problems(r) == [
        "summary.audit/subject_overlap = 2",
        "summary.n_leaked_ids = 1",
        "warning: 3 cases LEAK into training",
    ]
    assert audit_problems(_result({"a": 1.0}, summary={"n_cases": 3})) == []


# ------------------------------------------------------------------ pairing: the same cases, not the same count


def _result(
    values: dict[str, float | None],
    *,
    unit: str = "toy",
    subjects: dict[str, str] | None = None,
    cluster: str = "case",
    interval: str = "percentile",
    digest: str = "truth",
    extra_config: dict | None = None,
    missing: tuple[str, ...] = (),
    aggregates: dict[str, MetricSummary] | None = None,
    summary: dict[str, int] | None = None,
    warnings: list[str] | None = None,
) -> BenchmarkResult:
    config = {"bootstrap": {"cluster": cluster, "interval": interval}, **(extra_config or {})}
    cases = [
        CaseRecord(
            case_id=cid,
            subject_id=(subjects or {}).get(cid, cid),
            metrics={"all": {"dsc": v}},
            status="missing_prediction" if cid in missing else "ok",
        )
        for cid, v in values.items()
    ]
    return BenchmarkResult(
        benchmark=unit,
        config=config,
        config_digest=sha256_text(json.dumps(config, sort_keys=True)),
        trackeval_version="test",
        data=DataInfo(digest="d", ground_truth_digest=digest, predictions_digest="p", n_cases=len(cases)),
        summary=summary or {},
        warnings=warnings or [],
        cases=cases,
        aggregates=aggregates or {},
    )


SCORES = {"c1": 0.5, "c2": 0.75, "c3": 0.625, "c4": 0.875}


def test_renamed_case_ids_of_the_same_count_are_a_pairing_problem():
    base = _result(SCORES)
    renamed = _result({"c1": 0.5, "c2": 0.75, "c3": 0.625, "c9": 0.875})
    assert len(renamed.cases) == len(base.cases)
    assert pairing_problems(renamed, base) == [
        "case sets differ: 1 case(s) only in the candidate ['c9'], 1 only in the baseline ['c4']"
    ]
    assert pairing_problems(base, base) == []
    policies = {"toy": _policy()}
    d = decide("m", "v2", {"toy": renamed}, "v1", {"toy": base}, GateConfig(n_resamples=50), policies)
    assert d.verdict == "fail"
    assert d.reasons == [
        "toy: pairing: case sets differ: 1 case(s) only in the candidate ['c9'], 1 only in the baseline ['c4']"
    ]
    assert d.comparisons[0].rows == [] and d.group_tests == []


def test_pairing_checks_unit_data_protocol_subjects_and_resampling():
    base = _result(SCORES, cluster="subject_id", subjects={"c1": "s1", "c2": "s1", "c3": "s2", "c4": "s2"})
    same = _result(SCORES, cluster="subject_id", subjects={"c1": "s1", "c2": "s1", "c3": "s2", "c4": "s2"})
    assert pairing_problems(same, base) == []
    moved = _result(SCORES, cluster="subject_id", subjects={"c1": "s1", "c2": "s2", "c3": "s2", "c4": "s1"})
    assert pairing_problems(moved, base) == ["case 'c2' belongs to another subject in the two results (2 case(s))"]
    # with cases as the resampling unit the subject labels play no part in pairing
    assert pairing_problems(_result(SCORES, subjects={"c1": "x"}), _result(SCORES)) == []
    other = _result(SCORES, unit="tiy")
    assert pairing_problems(other, _result(SCORES))[0] == "different benchmark units: tiy vs toy"
    data = pairing_problems(_result(SCORES, digest="a" * 20), _result(SCORES, digest="b" * 20))
    assert data == [
        "data digest mismatch: the ground truth differs (aaaaaaaaaaaa vs bbbbbbbbbbbb); "
        "re-evaluate both versions on the same data"
    ]
    a, b = _result(SCORES, extra_config={"toy": {"t": 1}}), _result(SCORES, extra_config={"toy": {"t": 2}})
    (whole,) = pairing_problems(a, b)
    assert (
        whole
        == "protocol config differs: toy.t is 1 in the candidate, 2 in the baseline; re-evaluate with the same config"
    )
    (named,) = pairing_problems(a, b, ("toy.t", "toy.u"))
    assert named == whole  # toy.u is absent on both sides: not named
    assert pairing_problems(a, b, ("toy.u",)) == []  # a field the metric does not depend on
    (boot,) = pairing_problems(_result(SCORES, interval="expanded_percentile"), _result(SCORES), ("toy.t",))
    assert boot == (
        "bootstrap resampling differs (cluster, interval): ('case', 'expanded_percentile') vs "
        "('case', 'percentile'); re-evaluate both versions with the same bootstrap config"
    )


def test_protocol_digest_and_resampling_defaults():
    r = _result(SCORES, extra_config={"toy": {"labels": {"liver": 1}}})
    assert protocol_digest(r, None) == r.config_digest
    expected = sha256_text(json.dumps({"toy.labels": {"liver": 1}, "toy.nope": None}, sort_keys=True))
    assert protocol_digest(r, ["toy.nope", "toy.labels"]) == expected
    old = r.model_copy(update={"config": {}})
    assert old.resampling == ("case", "percentile")  # written before schema 1.2


# ------------------------------------------------------------------ decide() end to end on hand-made results


def test_identical_versions_pass_non_inferiority_and_fail_superiority():
    r = _result(SCORES)
    cfg = GateConfig(n_resamples=50)
    plain = decide("m", "v2", {"toy": r}, "v1", {"toy": r}, cfg, {"toy": _policy()})
    assert plain.verdict == "pass" and [c.name for c in plain.checks] == ["audit", "non_inferiority"]
    head = plain.comparisons[0].rows[0]
    assert head.delta == 0.0 and head.ci95_low == 0.0 and head.ci95_high == 0.0
    sup = decide("m", "v2", {"toy": r}, "v1", {"toy": r}, cfg, {"toy": _policy(superiority=True)})
    assert sup.verdict == "fail"
    assert sup.reasons == ["toy: superiority: toy/dsc: delta +0.0000 [+0.0000, +0.0000]; need lower bound > 0"]
    assert sup.model == "m" and sup.candidate == "v2" and sup.champion == "v1"
    assert sup.gate_config.policies["toy"].superiority is True
    assert sup.gate_config.n_resamples == 50


def test_decide_without_a_champion_applies_the_floor_only():
    ok = MetricSummary(value=0.75, ci95_low=0.5, ci95_high=1.0, n=4, n_valid=4)
    r = _result(SCORES, aggregates={"toy/dsc": ok})
    d = decide("m", "v1", {"toy": r}, None, None, GateConfig(), {"toy": _policy(floor=0.5)})
    assert d.verdict == "pass" and [c.name for c in d.checks] == ["audit", "floor"]
    assert d.champion is None and d.comparisons == [] and d.group_tests == [] and d.notes == []
    high = decide("m", "v1", {"toy": r}, None, None, GateConfig(), {"toy": _policy(floor=0.5 + TINY)})
    assert high.verdict == "fail" and high.reasons[0].startswith("toy: floor: toy/dsc ci95_low 0.5000 >= 0.50000")
    no_audit = decide("m", "v1", {"toy": r}, None, None, GateConfig(require_audits=False), {"toy": _policy()})
    assert [c.name for c in no_audit.checks] == ["floor"]


def test_decide_refuses_unknown_units_missing_units_and_an_empty_candidate():
    r = _result(SCORES)
    unknown = decide("m", "v2", {"toy": r, "aaa": r}, "v1", {"toy": r}, GateConfig(n_resamples=20), {"toy": _policy()})
    assert unknown.verdict == "fail"
    assert unknown.reasons == [
        "aaa: primary_metric: not a registered benchmark unit: no primary metric (is its plug-in installed?)"
    ]
    # the units after it are still gated
    assert [c.name for c in unknown.checks] == ["primary_metric", "audit", "non_inferiority"]
    assert set(unknown.gate_config.policies) == {"toy"}
    policies = {"toy": _policy(), "abc": _policy(unit="abc")}
    missing = decide("m", "v2", {"toy": r}, "v1", {"toy": r, "abc": r}, GateConfig(n_resamples=20), policies)
    assert missing.reasons == ["abc: pairing: the champion was evaluated on abc but the candidate was not"]
    assert [c.name for c in missing.checks] == ["pairing", "audit", "non_inferiority"]
    empty = decide("m", "v2", {}, "v1", {}, GateConfig(), policies)
    assert empty.verdict == "fail" and empty.reasons == ["*: pairing: the candidate has no evaluations"]
    assert empty.gate_config.policies == {}
    leaky = _result(SCORES, summary={"audit/x": 1})
    audit = decide("m", "v2", {"toy": leaky}, "v1", {"toy": r}, GateConfig(n_resamples=20), {"toy": _policy()})
    assert audit.reasons == ["toy: audit: summary.audit/x = 1"]
    assert next(
        c for c in decide("m", "v", {"toy": r}, None, None, GateConfig(), {"toy": _policy()}).checks
    ).detail == ("clean")


def test_decide_records_missing_predictions_groups_and_notes():
    subjects = {"c1": "s1", "c2": "s1", "c3": "s2", "c4": "s2"}
    base = _result(SCORES, missing=("c1",))
    worse = _result({"c1": 0.5, "c2": 0.75, "c3": 0.625, "c4": 0.0}, missing=("c1", "c4"))
    pol = {"toy": _policy(margin=0.01)}
    d = decide("m", "v2", {"toy": worse}, "v1", {"toy": base}, GateConfig(n_resamples=200), pol)
    checks = _by_name(d.checks)
    assert not checks["missing_predictions"].passed
    assert checks["missing_predictions"].detail == "missing predictions: candidate 2 vs champion 1"
    assert not checks["non_inferiority"].passed
    # the headline interval is far wider than twice the margin: a note, which never changes the verdict
    assert len(d.notes) == 1 and d.notes[0].startswith("toy: 4 cases cannot resolve margin 0.01")
    assert isinstance(d, Decision) and d.verdict == "fail"
    # groups: a case-group dimension, one summary check when every group passes
    grouped = [_with_sites(_result(SCORES, subjects=subjects)), _with_sites(_result(SCORES, subjects=subjects))]
    pol = {"toy": _policy(group_dimensions=("site",))}
    g = decide("m", "v2", {"toy": grouped[0]}, "v1", {"toy": grouped[1]}, GateConfig(n_resamples=50), pol)
    assert g.verdict == "pass" and [t.key for t in g.group_tests] == ["toy/dsc/by_site/a", "toy/dsc/by_site/b"]
    assert g.checks[-1].name == "worst_group" and g.checks[-1].unit == "*" and g.checks[-1].passed
    assert g.checks[-1].detail == "2 group(s) within their margins (harm, holm)"


def test_decide_names_a_failed_group():
    base = _with_sites(_result(SCORES))
    cand = _with_sites(_result({"c1": 0.5, "c2": 0.75, "c3": 0.0, "c4": 0.0}))
    pol = {"toy": _policy(margin=1.0, group_dimensions=("site",))}
    d = decide("m", "v2", {"toy": cand}, "v1", {"toy": base}, GateConfig(n_resamples=200, multiplicity="none"), pol)
    failed = [c for c in d.checks if not c.passed]
    assert [c.name for c in failed] == ["worst_group"] and failed[0].unit == "toy"
    b = next(t for t in d.group_tests if t.key == "toy/dsc/by_site/b")
    assert not b.passed and b.delta == pytest.approx(-0.75)
    assert failed[0].detail == (
        f"toy/dsc/by_site/b: delta -0.7500 [{b.ci95_low:+.4f}, {b.ci95_high:+.4f}] vs margin -0.25; "
        f"p={b.p_value:.4f}, adjusted (none) {b.p_adjusted:.4f}"
    )
    assert all(c.unit != "*" for c in d.checks if c.name == "worst_group")


def test_compare_unit_passes_the_units_policy_and_the_gate_settings():
    cand = _result({"c1": 0.5, "c2": 1.0, "c3": 0.25}, extra_config={"toy": {"t": 1, "other": 1}})
    base = _result({"c1": 0.25, "c2": 0.75, "c3": 0.5}, extra_config={"toy": {"t": 1, "other": 2}})
    cand, base = _with_item(cand, "more", {"c1": 1.0}), _with_item(base, "more", {})
    policy = _policy(protocol=("toy.t",), reduction="case_mean", best=0.0, group_dimensions=("item",))
    cfg = GateConfig(n_resamples=40, seed=7, confidence=0.8)
    comp = compare_unit(cand, base, policy, cfg, ("v2", "v1"))
    # only toy.t must agree: the configs differ elsewhere
    assert comp.problems == [] and (comp.candidate_label, comp.baseline_label) == ("v2", "v1")
    same = compare_results(
        cand,
        base,
        facts("dsc", reduction="case_mean", best=0.0),
        ("item",),
        n_resamples=40,
        seed=7,
        confidence=0.8,
        labels=("v2", "v1"),
        protocol=("toy.t",),
    )
    assert [r.model_dump() for r in comp.rows] == [r.model_dump() for r in same.rows]
    assert comp.rows[0].samples == same.rows[0].samples
    # case_mean: c1 (0.5 + 1) / 2 = 0.75, c2 1.0, c3 0.25 -> 2 / 3 (the item mean would be (7 / 12 + 1) / 2)
    assert comp.rows[0].candidate == pytest.approx(2 / 3)
    # the item only the candidate has counts as the best value (0 here) on the champion's side
    more = next(r for r in comp.rows if r.key == "toy/dsc/by_item/more")
    assert more.candidate == 1.0 and more.baseline is None and more.delta == 1.0
    item_mean = compare_unit(cand, base, _policy(protocol=("toy.t",)), cfg, ("v2", "v1"))
    assert item_mean.rows[0].candidate == pytest.approx((7 / 12 + 1) / 2)
    other = compare_results(
        cand,
        base,
        facts("dsc", reduction="case_mean", best=0.0),
        (),
        n_resamples=40,
        seed=8,
        confidence=0.8,
        protocol=("toy.t",),
    )
    assert other.rows[0].samples != comp.rows[0].samples
    wider = compare_unit(cand, base, policy, cfg.model_copy(update={"confidence": 0.95}), ("v2", "v1"))
    assert wider.rows[0].ci95_low <= comp.rows[0].ci95_low and wider.rows[0].ci95_high >= comp.rows[0].ci95_high
    assert (wider.rows[0].ci95_low, wider.rows[0].ci95_high) != (comp.rows[0].ci95_low, comp.rows[0].ci95_high)
    assert compare_unit(cand, base, _policy(), cfg, ("v2", "v1")).problems[0].startswith("protocol config differs")


def _with_sites(r: BenchmarkResult) -> BenchmarkResult:
    """``r`` with the case group ``site``: ``a`` for c1 and c2, ``b`` for the others."""
    cases = [c.model_copy(update={"groups": {**c.groups, "site": _site(c.case_id)}}) for c in r.cases]
    return r.model_copy(update={"cases": cases})


def _with_item(r: BenchmarkResult, item: str, dsc: dict[str, float]) -> BenchmarkResult:
    """``r`` with one more item in every case: its Dice from ``dsc`` by case id, null for the other cases."""
    cases = [c.model_copy(update={"metrics": {**c.metrics, item: {"dsc": dsc.get(c.case_id)}}}) for c in r.cases]
    return r.model_copy(update={"cases": cases})


def _site(case_id: str) -> str:
    return "a" if case_id in ("c1", "c2") else "b"


def test_every_unit_is_gated_whatever_happened_to_the_one_before():
    good = _result(SCORES)
    other_data = _result({"c1": 0.5, "c2": 0.75, "c3": 0.625, "c9": 0.875}, digest="elsewhere")
    policies = {u: _policy(unit=u) for u in ("aa", "bb", "cc")}
    cand = {"aa": other_data, "bb": good, "cc": good}
    d = decide("m", "v2", cand, "v1", {"aa": good, "cc": good}, GateConfig(n_resamples=20), policies)
    # aa: two pairing problems, joined into one check; bb: no champion result, the floor; cc: the interval rule
    assert [(c.unit, c.name) for c in d.checks] == [
        ("aa", "audit"),
        ("aa", "pairing"),
        ("bb", "audit"),
        ("bb", "floor"),
        ("cc", "audit"),
        ("cc", "non_inferiority"),
    ]
    assert d.checks[1].detail == (
        "data digest mismatch: the ground truth differs (elsewhere vs truth); re-evaluate both versions on the same "
        "data; case sets differ: 1 case(s) only in the candidate ['c9'], 1 only in the baseline ['c4']"
    )
    assert sorted(d.gate_config.policies) == ["aa", "bb", "cc"]


def test_audit_details_join_every_problem():
    leaky = _result(SCORES, summary={"audit/a": 1, "audit/b": 2})
    d = decide("m", "v2", {"toy": leaky}, None, None, GateConfig(), {"toy": _policy()})
    assert d.checks[0].detail == "summary.audit/a = 1; summary.audit/b = 2"


def test_decision_record_keeps_json_config_policies_of_a_first_version_and_labels():
    r = _result(SCORES, aggregates={"toy/dsc": MetricSummary(value=0.75, ci95_low=0.5, ci95_high=1.0, n=4, n_valid=4)})
    cfg = GateConfig(group_dimensions=("site",))
    first = decide("m", "v1", {"toy": r}, None, None, cfg, {"toy": _policy(), "unused": _policy(unit="unused")})
    stored = json.loads(first.model_dump_json())["gate_config"]
    assert stored["group_dimensions"] == ["site"]  # JSON: a list, not a tuple
    assert list(stored["policies"]) == ["toy"] and stored["policies"]["toy"]["margin"] == MARGIN
    # a champion result without a champion version: the comparison is labelled ""
    unnamed = decide("m", "v2", {"toy": r}, None, {"toy": r}, GateConfig(n_resamples=20), {"toy": _policy()})
    assert (unnamed.comparisons[0].candidate_label, unnamed.comparisons[0].baseline_label) == ("v2", "")
    named = decide("m", "v2", {"toy": r}, "v1", {"toy": r}, GateConfig(n_resamples=20), {"toy": _policy()})
    assert named.comparisons[0].baseline_label == "v1"


def test_a_decision_round_trips_and_stores_units_under_benchmark():
    base = _with_sites(_result({"c1": 0.5, "c2": 0.75, "c3": 0.5, "c4": 0.25}))
    cand = _with_sites(_result({"c1": 0.75, "c2": 0.75, "c3": 0.5, "c4": 0.5}))
    pol = {"toy": _policy(group_dimensions=("site",))}
    d = decide("m", "v2", {"toy": cand}, "v1", {"toy": base}, GateConfig(n_resamples=20), pol)
    stored = json.loads(d.model_dump_json())
    # the key records have always used: "benchmark", for the attribute named unit
    assert [c["benchmark"] for c in stored["checks"]] == [c.unit for c in d.checks] and "unit" not in stored["checks"][
        0
    ]
    assert stored["comparisons"][0]["benchmark"] == "toy" and stored["comparisons"][0]["rows"][0]["benchmark"] == "toy"
    # the recorded config: every field except those kept out of records (the signing keys' paths, issue 32)
    recorded = [f for f, info in GateConfig.model_fields.items() if not info.exclude]
    assert list(stored["gate_config"]) == [*recorded, "policies"] and "signing_key" not in stored["gate_config"]
    back = Decision.model_validate_json(d.model_dump_json())
    assert back.model_dump(mode="json") == stored and back.gate_config.policies["toy"] == pol["toy"].record()
    # a record written before policies held the paired method and per-case name still reads
    del stored["gate_config"]["policies"]["toy"]["paired"], stored["gate_config"]["policies"]["toy"]["per_case"]
    old = Decision.model_validate(stored).gate_config.policies["toy"]
    assert {"paired", "per_case"}.isdisjoint(old.model_fields_set) and old.margin == MARGIN


def test_a_group_without_a_delta_is_named_with_n_a():
    base = _with_sites(_result({"c1": 0.5, "c2": 0.75, "c3": None, "c4": None}))
    cand = _with_sites(_result({"c1": 0.5, "c2": 0.75, "c3": 0.5, "c4": 0.5}))
    pol = {"toy": _policy(margin=1.0, group_dimensions=("site",))}
    cfg = GateConfig(n_resamples=50, group_test="noninferiority")
    d = decide("m", "v2", {"toy": cand}, "v1", {"toy": base}, cfg, pol)
    b = next(t for t in d.group_tests if t.key == "toy/dsc/by_site/b")
    assert b.delta is None and b.p_value == 1.0 and not b.passed
    assert [c.detail for c in d.checks if c.name == "worst_group"] == [
        "toy/dsc/by_site/b: delta n/a vs margin -0.25; p=1.0000, adjusted (holm) 1.0000"
    ]


def _mean_corpus(cases, weights):
    return weights @ np.array([c.metrics["all"]["dsc"] for c in cases]) / weights.sum(axis=1)


def test_a_corpus_headline_is_kept_for_its_own_metric_only():
    specs = [
        _spec("cb/loc", MetricInfo("dsc", label="Dice", reduction="corpus", corpus=_mean_corpus)),
        _spec("cb/seg", MetricInfo("dsc", label="Dice", reduction="corpus", corpus=_mean_corpus)),
        _spec("cb/cls", MetricInfo("dsc", label="Dice"), MetricInfo("other", label="other", reduction="case_mean")),
    ]
    # an undeclared primary metric is refused: its direction and pairing would be guesses
    with pytest.raises(ConfigError, match=r"^gate.primary_metrics: cb/seg/other is not a metric unit cb/seg declares"):
        resolve_policies(GateConfig(primary_metrics={"cb/seg": "other"}), specs)
    p = resolve_policies(GateConfig(primary_metrics={"cb/cls": "other"}), specs)
    assert p["cb/loc"].reduction == "corpus" and p["cb/loc"].corpus is _mean_corpus
    # the corpus function computes its own metric only; a declared other metric has its own facts
    assert p["cb/cls"].reduction == "case_mean" and p["cb/cls"].corpus is None
    # the record is every field but the function, in the order decisions have always stored them
    rec = p["cb/loc"].record().model_dump(mode="json")
    assert "corpus" not in rec and rec["reduction"] == "corpus" and rec["unit"] == "cb/loc"
    assert list(rec) == [
        "unit",
        "metric",
        "higher_is_better",
        "margin",
        "floor",
        "superiority",
        "group_dimensions",
        "default_group_margin",
        "group_margins",
        "protocol",
        "reduction",
        "paired",
        "per_case",
        "best",
    ]
    assert json.dumps(rec)
    # read back: equal but for the function, which a record cannot hold
    back = PolicyRecord.model_validate_json(json.dumps(rec))
    assert back.corpus is None and back == p["cb/loc"].record()
    # explained: the declaration supplies the function and the facts an older record lacks; none: the record
    info = specs[0].metric_info("dsc")
    assert back.policy(info).record() == back and back.policy(info).corpus is _mean_corpus
    old = PolicyRecord.model_validate({k: v for k, v in rec.items() if k not in ("reduction", "best")})
    assert old.policy(info).record() == back and old.policy(None) is old and old.reduction == "item_mean"
    # recorded facts win over the declaration's; a recorded corpus metric the unit declares no function for
    assert back.model_copy(update={"best": 0.5}).policy(info).best == 0.5
    plain = specs[2].metric_info("dsc")
    assert plain is not None and back.policy(plain) == back and isinstance(back.policy(plain), PolicyRecord)


def _group_comparison(n_groups: int, n_units: int, method: str = "paired_bootstrap") -> BenchmarkComparison:
    rows = [
        DeltaRow(unit="toy", key=f"toy/dsc/by_organ/o{i}", dimension="organ", group=f"o{i}", candidate=0.5,
                 baseline=0.9, delta=-0.4, ci95_low=-0.45, ci95_high=-0.35, n_pairs=2 * n_units, n_units=n_units)
        for i in range(n_groups)
    ]  # fmt: skip
    return BenchmarkComparison(
        unit="toy", metric="toy/dsc", method=method, cluster="subject_id", interval="expanded_percentile",
        candidate_label="v2", baseline_label="v1", n_cases=2 * n_units, problems=[], rows=rows,
    )  # fmt: skip


def test_guard_note_says_when_no_group_can_be_refused_and_what_would_let_one_be():
    """At 6 subjects the smallest bootstrap p-value is the expanded 1/B: with 5 groups Holm's first step needs
    p <= 0.01, reached from B = 8783 on (found here by scanning scipy's t and normal, not the product's inverse)."""
    smallest = [t_dist.cdf(norm.ppf(1 / b) / math.sqrt(6 / 5), 5) for b in range(8700, 8900)]
    need = 8700 + next(i for i, p in enumerate(smallest) if p <= 0.01)
    five = [_group_comparison(5, 6)]
    note = guard_resolution_note(five, 5, GateConfig(n_resamples=need - 1))
    assert note is not None and f"gate.n_resamples >= {need} would let one be" in note
    assert "at 6 clusters" in note and "holm over 5 groups" in note and "above the 0.0100" in note
    assert guard_resolution_note(five, 5, GateConfig(n_resamples=need)) is None
    # 15 groups (13 organs + 2 modalities) at 6 subjects: ~1.9 million resamples; the note asks for subjects
    fifteen = guard_resolution_note([_group_comparison(15, 6)], 15, GateConfig(n_resamples=2000))
    assert fifteen is not None and fifteen.endswith("(more subjects)")
    assert guard_resolution_note([_group_comparison(15, 30)], 15, GateConfig(n_resamples=2000)) is None
    # no floor for DeLong groups; nothing to refuse under the non-inferiority guard
    assert guard_resolution_note([_group_comparison(5, 6, "delong")], 5, GateConfig(n_resamples=100)) is None
    assert guard_resolution_note(five, 5, GateConfig(n_resamples=100, group_test="noninferiority")) is None


def test_guard_note_reads_the_effective_number_of_clusters():
    """5 groups of 6 subjects whose unequal sizes give 5.5 effective clusters (df 4): the smallest p-value is
    the 1/B expanded with 5.5, reaching Holm's 0.01 from B = 58194 on (found by bisection on scipy's t and
    normal)."""
    comp = _group_comparison(5, 6)
    five = [comp.model_copy(update={"rows": [r.model_copy(update={"n_effective": 5.5}) for r in comp.rows]})]
    note = guard_resolution_note(five, 5, GateConfig(n_resamples=58193))
    assert note is not None and "at 5.5 clusters" in note and "gate.n_resamples >= 58194 would let one be" in note
    assert guard_resolution_note(five, 5, GateConfig(n_resamples=58194)) is None
    # the shown number is rounded to 2 decimals
    odd = [comp.model_copy(update={"rows": [r.model_copy(update={"n_effective": 5.4567}) for r in comp.rows]})]
    assert "at 5.46 clusters" in guard_resolution_note(odd, 5, GateConfig(n_resamples=2000))
    # below 3 effective clusters (1 degree of freedom) no number of resamples would do: more subjects
    few = [comp.model_copy(update={"rows": [r.model_copy(update={"n_effective": 1.6}) for r in comp.rows]})]
    assert guard_resolution_note(few, 5, GateConfig(n_resamples=2000)).endswith("(more subjects)")
