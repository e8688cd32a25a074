"""The paired comparison behind the gate on hand-made results (issue 19, section 6): which rows exist, what each
row holds, and which differences between two results make them unpairable.

Every bootstrap row is checked against :func:`paired_headlines` called directly with the row's seed, so the
arguments the comparison passes (seed per row key, clusters, interval method, reduction, best value, confidence)
are pinned; DeLong rows likewise against :func:`paired_delong`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from trackeval.gate.compare import compare_results
from trackeval.gate.delong_rows import headline_exclusions
from trackeval.gate.policy import UnitPolicy
from trackeval.results import BenchmarkResult, CaseRecord, DataInfo, MetricSummary, sha256_text
from trackeval.spec import MetricInfo
from trackeval.stats.bootstrap import cluster_codes, group_seed
from trackeval.stats.paired import paired_corpus, paired_delong, paired_headlines

NAN = math.nan


def facts(metric: str, **declared: Any) -> UnitPolicy:
    """What the comparison knows of ``metric`` when its unit declares ``MetricInfo(metric, **declared)``: the
    metric facts of a policy of unit ``toy`` (its gate rules are placeholders, which a comparison does not read)."""
    rules = {"margin": 0.0, "floor": None, "superiority": False, "group_dimensions": (), "default_group_margin": 0.0}
    info = MetricInfo(metric, label=metric, **declared)
    return UnitPolicy(unit="toy", metric=metric, info=info, group_margins=(), **rules)


def _result(
    metrics: dict[str, dict[str, dict[str, float | None]]],
    *,
    groups: dict[str, dict[str, str]] | None = None,
    subjects: dict[str, str] | None = None,
    cluster: str = "case",
    interval: str = "percentile",
    item_kind: str = "organ",
    aggregates: dict[str, MetricSummary] | None = None,
    extra_config: dict | None = None,
    benchmark: str = "toy",
) -> BenchmarkResult:
    config = {"bootstrap": {"cluster": cluster, "interval": interval}, **(extra_config or {})}
    cases = [
        CaseRecord(
            case_id=cid,
            subject_id=(subjects or {}).get(cid, cid),
            groups=(groups or {}).get(cid, {}),
            metrics=m,
        )
        for cid, m in metrics.items()
    ]
    return BenchmarkResult(
        benchmark=benchmark,
        config=config,
        config_digest=sha256_text(json.dumps(config, sort_keys=True)),
        trackeval_version="test",
        data=DataInfo(digest="d", ground_truth_digest="truth", predictions_digest="p", n_cases=len(cases)),
        item_kind=item_kind,
        cases=cases,
        aggregates=aggregates or {},
    )


def _dsc(table: dict[str, tuple[float, float]]) -> dict[str, dict[str, dict[str, float]]]:
    """``{case: (liver, heart)}`` -> case metrics (NaN: not applicable)."""
    return {c: {"liver": {"dsc": a}, "heart": {"dsc": b}} for c, (a, b) in table.items()}


CAND = {"c1": (1.0, 0.5), "c2": (0.75, NAN), "c3": (0.5, NAN), "c4": (1.0, 0.75), "c5": (0.25, NAN)}
BASE = {"c1": (0.5, 0.5), "c2": (0.75, 0.5), "c3": (0.25, NAN), "c4": (0.5, 0.5), "c5": (0.5, NAN)}
SITES = {"c1": {"site": "a"}, "c2": {"site": "a"}, "c3": {"site": "b"}, "c4": {"site": "b"}, "c5": {}}
SUBJECTS = {"c1": "s1", "c2": "s1", "c3": "s2", "c4": "s3", "c5": "s3"}


def _matrix(table: dict[str, tuple[float, float]], cases: list[str]) -> np.ndarray:
    # items sorted by name: heart, liver
    return np.array([[table[c][1], table[c][0]] for c in cases])


def test_bootstrap_rows_hold_each_sides_headline_and_the_paired_interval():
    cand = _result(_dsc(CAND), groups=SITES, subjects=SUBJECTS, cluster="subject_id", interval="expanded_percentile")
    base = _result(_dsc(BASE), groups=SITES, subjects=SUBJECTS, cluster="subject_id", interval="expanded_percentile")
    comp = compare_results(
        cand, base, facts("dsc"), ("organ", "site"), n_resamples=300, seed=4, confidence=0.9, labels=("v2", "v1")
    )
    assert comp.problems == [] and comp.method == "paired_bootstrap"
    assert (comp.unit, comp.metric, comp.cluster, comp.interval) == (
        "toy",
        "toy/dsc",
        "subject_id",
        "expanded_percentile",
    )
    assert (comp.candidate_label, comp.baseline_label, comp.n_cases, comp.data_digest) == ("v2", "v1", 5, "truth")
    assert comp.protocol_digest == cand.config_digest
    assert [(r.key, r.dimension, r.group) for r in comp.rows] == [
        ("toy/dsc", "", ""),
        ("toy/dsc/by_organ/heart", "organ", "heart"),
        ("toy/dsc/by_organ/liver", "organ", "liver"),
        ("toy/dsc/by_site/a", "site", "a"),
        ("toy/dsc/by_site/b", "site", "b"),
    ]
    ids = ["c1", "c2", "c3", "c4", "c5"]
    cm, bm = _matrix(CAND, ids), _matrix(BASE, ids)
    codes = cluster_codes([SUBJECTS[c] for c in ids])

    def direct(key, rows):
        return paired_headlines(
            cm[rows],
            bm[rows],
            reduction="item_mean",
            best=1.0,
            n_resamples=300,
            seed=group_seed(4, key),
            confidence=0.9,
            clusters=codes[rows],
            method="expanded_percentile",
        )

    rows = {r.key: r for r in comp.rows}
    head, whole = rows["toy/dsc"], direct("toy/dsc", slice(None))
    # candidate: heart (0.5 + 0.75) / 2 = 0.625, liver 3.5 / 5 = 0.7; baseline: heart 0.5, liver 0.5
    assert (head.candidate, head.baseline) == pytest.approx((0.6625, 0.5)) and head.delta == pytest.approx(0.1625)
    assert (head.ci95_low, head.ci95_high) == (whole.low, whole.high)
    np.testing.assert_array_equal(head.samples, whole.samples)
    assert len(head.samples) == 300
    assert head.n_pairs == 5 and head.n_units == 3 and head.std_error is None
    heart = rows["toy/dsc/by_organ/heart"]
    assert (heart.candidate, heart.baseline, heart.delta) == pytest.approx((0.625, 0.5, 0.125))
    assert (heart.ci95_low, heart.ci95_high) == (whole.item_low[0], whole.item_high[0])
    np.testing.assert_array_equal(heart.samples, whole.item_samples[:, 0])
    assert heart.n_pairs == 3 and heart.n_units == 2  # c1, c2, c4 have a heart value on some side: s1 and s3
    liver = rows["toy/dsc/by_organ/liver"]
    assert liver.delta == pytest.approx(0.2) and liver.n_pairs == 5 and liver.n_units == 3
    site_a = rows["toy/dsc/by_site/a"]
    a = direct("toy/dsc/by_site/a", np.array([True, True, False, False, False]))
    assert (site_a.candidate, site_a.baseline) == (a.candidate, a.baseline)
    assert (site_a.ci95_low, site_a.ci95_high, site_a.n_units) == (a.low, a.high, 1) and site_a.n_pairs == 2
    np.testing.assert_array_equal(site_a.samples, a.samples)
    # the expansions' effective numbers of subjects (Kish, from both sides' case weights summed), by hand:
    # headline: cases weigh 37, 22, 12, 37, 12 (/60), subjects s1, s2, s3 59, 12, 49: 120^2 / 6026
    assert head.n_effective == pytest.approx(14400 / 6026, rel=1e-12) and head.n_effective == whole.n_effective
    # heart: c1 1/2 + 1/3, c2 1/3, c4 1/2 + 1/3 -> s1 7/6, s3 5/6: 4 / (74/36); liver: 2/5 a case -> 100 / 36
    assert heart.n_effective == pytest.approx(144 / 74, rel=1e-12) and heart.n_units == 2
    assert liver.n_effective == pytest.approx(100 / 36, rel=1e-12)
    # site a is one subject; in site b c3 weighs 1/4 + 1/4 and c4 3/4 + 3/4: 2^2 / (1/4 + 9/4) = 1.6
    assert site_a.n_effective == 1.0 and site_a.expansion_units == 1.0
    assert rows["toy/dsc/by_site/b"].n_effective == pytest.approx(1.6, rel=1e-12)
    assert "n_effective" not in comp.model_dump(mode="json")["rows"][0]


def test_rows_are_reproducible_and_do_not_depend_on_the_other_rows():
    cand, base = _result(_dsc(CAND), groups=SITES), _result(_dsc(BASE), groups=SITES)
    full = compare_results(cand, base, facts("dsc"), ("organ", "site"), n_resamples=200, seed=1)
    sites = compare_results(cand, base, facts("dsc"), ("site",), n_resamples=200, seed=1)
    assert [r.key for r in sites.rows] == ["toy/dsc", "toy/dsc/by_site/a", "toy/dsc/by_site/b"]
    np.testing.assert_array_equal(sites.rows[1].samples, full.rows[3].samples)  # the site row's own resamples
    other = compare_results(cand, base, facts("dsc"), ("site",), n_resamples=200, seed=2)
    assert not np.array_equal(other.rows[0].samples, sites.rows[0].samples, equal_nan=True)
    assert [
        r.model_dump() for r in compare_results(cand, base, facts("dsc"), ("site",), n_resamples=200, seed=1).rows
    ] == [r.model_dump() for r in sites.rows]
    # case order does not matter: cases are paired by id
    shuffled = cand.model_copy(update={"cases": cand.cases[::-1]})
    again = compare_results(shuffled, base, facts("dsc"), ("site",), n_resamples=200, seed=1)
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in sites.rows]


def test_an_item_one_side_never_has_counts_as_the_best_value_there():
    cand = _result(_dsc({"c1": (1.0, 0.0), "c2": (0.5, 0.0)}))
    base = _result(_dsc({"c1": (1.0, NAN), "c2": (0.5, NAN)}))
    dice = {r.key: r for r in compare_results(cand, base, facts("dsc"), ("organ",), n_resamples=50).rows}
    heart = dice["toy/dsc/by_organ/heart"]
    assert heart.candidate == 0.0 and heart.baseline is None and heart.delta == -1.0
    assert dice["toy/dsc"].candidate == pytest.approx(0.375) and dice["toy/dsc"].baseline == pytest.approx(0.75)
    # a distance (best 0): the hallucinated organ at distance 0 is a delta of 0 against the best value
    dist = {r.key: r for r in compare_results(cand, base, facts("dsc", best=0.0), ("organ",), n_resamples=50).rows}
    assert dist["toy/dsc/by_organ/heart"].delta == 0.0
    none = compare_results(base, base, facts("dsc"), ("organ",), n_resamples=50)
    assert [r.key for r in none.rows] == ["toy/dsc", "toy/dsc/by_organ/liver"]  # no heart value on either side


def test_case_mean_reduction_and_the_full_metric_path():
    cand = {
        c: {"q": {"group/ap": a}, "r": {"group/ap": b}} for c, (a, b) in {"c1": (1.0, 0.0), "c2": (1.0, NAN)}.items()
    }
    base = {c: {"q": {"group/ap": 0.5}, "r": {"group/ap": 0.5}} for c in ("c1", "c2")}
    comp = compare_results(
        _result(cand), _result(base), facts("group/ap", reduction="case_mean", record_path=True), (), n_resamples=20
    )
    head = comp.rows[0]
    assert head.key == "toy/group/ap"
    # case means: c1 (1 + 0) / 2 = 0.5, c2 1.0 -> 0.75 (the item mean would be (1 + 0) / 2 = 0.5)
    assert head.candidate == pytest.approx(0.75) and head.baseline == pytest.approx(0.5)
    item_mean = compare_results(_result(cand), _result(base), facts("group/ap", record_path=True), (), n_resamples=20)
    assert item_mean.rows[0].candidate == pytest.approx(0.5)


def test_no_value_on_either_side_is_a_problem():
    empty = _result(_dsc({"c1": (NAN, NAN), "c2": (NAN, NAN)}))
    comp = compare_results(empty, empty, facts("dsc"), ("organ",), n_resamples=10)
    assert comp.problems == ["no case has a dsc value in either result"] and comp.rows == []


def test_stored_headlines_must_be_what_the_case_records_give():
    stored = MetricSummary(value=0.6625, ci95_low=0.5, ci95_high=0.7, n=5, n_valid=5)
    cand = _result(_dsc(CAND), aggregates={"toy/dsc": stored})
    base = _result(_dsc(BASE))
    ok = compare_results(cand, base, facts("dsc"), (), n_resamples=20)
    assert ok.problems == [] and ok.rows[0].candidate == 0.6625  # the stored value, equal up to rounding
    wrong = _result(_dsc(CAND), aggregates={"toy/dsc": stored.model_copy(update={"value": 0.625})})
    bad = compare_results(wrong, base, facts("dsc"), (), n_resamples=20)
    assert bad.rows == []
    assert bad.problems == [
        f"the candidate's toy/dsc = 0.625 is not what its case records give ({(0.625 + 0.7) / 2!r}): the gate "
        "compares the reported "
        "numbers only; re-evaluate with this trackeval"
    ]
    # a group row is verified too, and any problem removes every row
    group = MetricSummary(value=0.25, n=2, n_valid=2)
    wrong_group = _result(_dsc(BASE), aggregates={"toy/dsc/by_organ/liver": group})
    g = compare_results(cand, wrong_group, facts("dsc"), ("organ",), n_resamples=20)
    assert g.rows == [] and len(g.problems) == 1 and g.problems[0].startswith("the baseline's toy/dsc/by_organ/liver")
    # null stored for an item without any value is what the records give (NaN); a number there is not
    no_heart = {c: (v[0], NAN) for c, v in BASE.items()}
    null = {"toy/dsc/by_organ/heart": MetricSummary(value=None, n=5, n_valid=0)}
    h = compare_results(_result(_dsc(CAND)), _result(_dsc(no_heart), aggregates=null), facts("dsc"), ("organ",))
    assert h.problems == [] and h.rows[1].key == "toy/dsc/by_organ/heart" and h.rows[1].baseline is None
    number = {"toy/dsc/by_organ/heart": MetricSummary(value=0.5, n=5, n_valid=0)}
    h = compare_results(_result(_dsc(CAND)), _result(_dsc(no_heart), aggregates=number), facts("dsc"), ("organ",))
    assert h.rows == [] and h.problems[0].startswith("the baseline's toy/dsc/by_organ/heart = 0.5 is not what")


def test_a_case_group_without_values_has_no_row():
    groups = {**SITES, "c5": {"site": "c"}}
    cand = _result(_dsc({**CAND, "c5": (NAN, NAN)}), groups=groups)
    base = _result(_dsc({**BASE, "c5": (NAN, NAN)}), groups=groups)
    comp = compare_results(cand, base, facts("dsc"), ("site", "modality"), n_resamples=20)
    assert [r.key for r in comp.rows] == ["toy/dsc", "toy/dsc/by_site/a", "toy/dsc/by_site/b"]
    assert comp.rows[0].n_pairs == 4


# ------------------------------------------------------------------ DeLong rows (AUROC)


def _cls(labels: dict[str, list[float | None]], scores: dict[str, list[float | None]]) -> dict:
    """``{case: [label per finding]}`` and scores -> case metrics of findings f1, f2."""
    return {
        c: {f"f{j + 1}": {"label": y, "score": s} for j, (y, s) in enumerate(zip(labels[c], scores[c], strict=True))}
        for c in labels
    }


IDS = [f"i{k}" for k in range(8)]
Y = {c: [float(k % 2), float(k // 4)] for k, c in enumerate(IDS)}
S1 = {c: [0.1 + 0.1 * k, 0.8 - 0.05 * k] for k, c in enumerate(IDS)}
S2 = {c: [0.5 + 0.03 * ((k * 3) % 8) * (1 if k % 2 else -1), 0.2 + 0.09 * k] for k, c in enumerate(IDS)}


def _arrays(y, s, ids=IDS):
    return np.array([y[c] for c in ids], dtype=float), np.array([s[c] for c in ids], dtype=float)


def test_delong_rows_equal_paired_delong_per_finding_and_group():
    groups = {c: {"view": "ap" if k < 5 else "pa"} for k, c in enumerate(IDS)}
    cand, base = (
        _result(_cls(Y, S1), groups=groups, item_kind="finding"),
        _result(_cls(Y, S2), groups=groups, item_kind="finding"),
    )
    comp = compare_results(cand, base, facts("auroc", paired="delong"), ("finding", "view"), confidence=0.9)
    assert comp.method == "delong" and comp.problems == []
    assert [(r.key, r.dimension, r.group) for r in comp.rows] == [
        ("toy/auroc", "", ""),
        ("toy/auroc/by_finding/f1", "finding", "f1"),
        ("toy/auroc/by_finding/f2", "finding", "f2"),
        ("toy/auroc/by_view/ap", "view", "ap"),
        ("toy/auroc/by_view/pa", "view", "pa"),
    ]
    y, a = _arrays(Y, S1)
    _, b = _arrays(Y, S2)
    ref = paired_delong(y, a, b, 0.9)
    head = comp.rows[0]
    assert (head.candidate, head.baseline, head.delta) == pytest.approx(
        (ref.overall_candidate, ref.overall_baseline, ref.overall), abs=1e-15
    )
    assert (head.ci95_low, head.ci95_high) == pytest.approx((ref.overall_low, ref.overall_high), abs=1e-15)
    assert head.std_error == pytest.approx(math.sqrt(ref.overall_variance), rel=1e-12)
    # n_pairs counts image x finding cells (8 images, 2 findings); n_units the images (every image its own cluster)
    assert head.n_pairs == 16 and head.n_units == 8 and head.samples is None
    for j, r in enumerate(comp.rows[1:3]):
        assert r.delta == pytest.approx(ref.value[j], abs=1e-15) and r.n_pairs == 8
        assert (r.ci95_low, r.ci95_high) == pytest.approx((ref.low[j], ref.high[j]), abs=1e-15)
        assert r.std_error == pytest.approx(math.sqrt(ref.variance[j]), rel=1e-12)
    ap = paired_delong(y[:5], a[:5], b[:5], 0.9)
    assert comp.rows[3].delta == pytest.approx(ap.overall, abs=1e-15) and comp.rows[3].n_pairs == int(ap.n_pairs.sum())
    # f2 has a single positive among images 0..4: its variance, and so the macro one, is undefined
    assert math.isnan(ap.overall_variance) and comp.rows[3].std_error is None
    assert comp.rows[3].ci95_low is None and comp.rows[3].ci95_high is None
    # images 5..7 ("pa") have no negative of f2: only f1 is defined there
    assert comp.rows[4].n_pairs == 3


def test_identical_auroc_versions_have_a_zero_standard_error():
    r = _result(_cls(Y, S1), item_kind="finding")
    comp = compare_results(r, r, facts("auroc", paired="delong"), ("finding",))
    assert [row.std_error for row in comp.rows] == [0.0, 0.0, 0.0]
    assert all(row.delta == 0.0 for row in comp.rows)


def test_delong_labels_must_agree_and_exist():
    base = _result(_cls(Y, S2), item_kind="finding")
    flipped = {**Y, "i3": [0.0, 0.0]}
    comp = compare_results(_result(_cls(flipped, S1), item_kind="finding"), base, facts("auroc", paired="delong"), ())
    assert comp.rows == [] and comp.problems == [
        "labels differ between the two results (case 'i3', f1: 0.0 vs 1.0); re-evaluate both versions on the same "
        "ground truth"
    ]
    # an unknown label on one side only differs too
    unknown = {**Y, "i2": [None, 0.0]}
    u = compare_results(_result(_cls(unknown, S1), item_kind="finding"), base, facts("auroc", paired="delong"), ())
    assert u.problems == [
        "labels differ between the two results (case 'i2', f1: nan vs 0.0); re-evaluate both versions on the same "
        "ground truth"
    ]
    # unknown on both sides is the same label
    both = compare_results(
        _result(_cls(unknown, S1), item_kind="finding"),
        _result(_cls(unknown, S2), item_kind="finding"),
        facts("auroc", paired="delong"),
        (),
    )
    assert both.problems == [] and both.rows[0].n_pairs == 15
    bare = {c: {} for c in IDS}
    none = compare_results(_result(bare), _result(bare), facts("auroc", paired="delong"), ())
    assert none.problems == [
        "the case records carry no per-image 'label'/'score' values, which DeLong's AUROC comparison needs "
        "(an xray result of --task cls has them)"
    ]
    one_side = compare_results(_result(bare), base, facts("auroc", paired="delong"), ())
    assert one_side.problems[0].startswith("labels differ between the two results (case 'i0', f1: nan vs 0.0)")


def test_delong_without_a_defined_auroc_is_a_problem():
    negatives = {c: [0.0, 0.0] for c in IDS}
    comp = compare_results(
        _result(_cls(negatives, S1)), _result(_cls(negatives, S2)), facts("auroc", paired="delong"), ()
    )
    assert comp.problems == ["no paired images: no finding has a defined AUROC in both results"]


def test_delong_stored_headlines_are_verified():
    y, a = _arrays(Y, S1)
    _, b = _arrays(Y, S2)
    ref = paired_delong(y, a, b)
    good = MetricSummary(value=ref.overall_candidate, n=8, n_valid=8)
    ok = compare_results(
        _result(_cls(Y, S1), aggregates={"toy/auroc": good}), _result(_cls(Y, S2)), facts("auroc", paired="delong"), ()
    )
    assert ok.problems == []
    off = MetricSummary(value=ref.overall_candidate + 0.01, n=8, n_valid=8)
    bad = compare_results(
        _result(_cls(Y, S1)), _result(_cls(Y, S2), aggregates={"toy/auroc": off}), facts("auroc", paired="delong"), ()
    )
    assert bad.rows == [] and len(bad.problems) == 1
    assert bad.problems[0].startswith(f"the baseline's toy/auroc = {off.value!r} is not what its case records give")
    both = compare_results(
        _result(_cls(Y, S1), aggregates={"toy/auroc": off}),
        _result(_cls(Y, S2), aggregates={"toy/auroc": off}),
        facts("auroc", paired="delong"),
        (),
    )
    assert [p.split(" = ")[0] for p in both.problems] == ["the candidate's toy/auroc", "the baseline's toy/auroc"]


def test_findings_below_min_positives_are_left_out_on_either_side():
    left_out = {"toy_run": {"findings_below_min_positives": ["f2"]}}
    assert headline_exclusions(_result({}, extra_config=left_out)) == ["f2"]
    assert headline_exclusions(_result({})) == []
    assert headline_exclusions(_result({}, extra_config={"toy_run": "old"})) == []
    assert headline_exclusions(_result({}, extra_config={"toy_run": {}})) == []
    assert headline_exclusions(_result({}, extra_config={"toy_run": {"findings_below_min_positives": [3]}})) == ["3"]
    assert headline_exclusions(_result({}, extra_config={"other_run": {"findings_below_min_positives": ["f2"]}})) == []
    cand = _result(_cls(Y, S1), item_kind="finding")
    base = _result(_cls(Y, S2), item_kind="finding", extra_config=left_out)
    comp = compare_results(cand, base, facts("auroc", paired="delong"), ("finding",), protocol=("toy.x",))
    assert comp.problems == [] and [r.key for r in comp.rows] == ["toy/auroc", "toy/auroc/by_finding/f1"]
    y, a = _arrays(Y, S1)
    _, b = _arrays(Y, S2)
    assert comp.rows[0].delta == pytest.approx(paired_delong(y[:, :1], a[:, :1], b[:, :1]).overall, abs=1e-15)


# ------------------------------------------------------------------ what the comparison reads from each result


def test_the_per_case_values_are_read_under_the_declared_record_name():
    cand = {c: {"q": {"ap": v, "group/sub/ap": 2 * v}} for c, v in {"c1": 1.0, "c2": 0.5}.items()}
    base = {c: {"q": {"ap": v, "group/sub/ap": 2 * v}} for c, v in {"c1": 0.5, "c2": 0.5}.items()}
    # by default the records hold the last token: toy/group/sub/ap is read as "ap"
    comp = compare_results(_result(cand), _result(base), facts("group/sub/ap"), (), n_resamples=20)
    assert comp.problems == [] and comp.rows[0].key == "toy/group/sub/ap"
    assert comp.rows[0].delta == pytest.approx(0.25)
    # record_path: under the whole path (3D-MIR's group/ap_at_10), whatever else the records hold
    whole = compare_results(_result(cand), _result(base), facts("group/sub/ap", record_path=True), (), n_resamples=20)
    assert whole.problems == [] and whole.rows[0].delta == pytest.approx(0.5)
    # a metric the records do not hold at all: nothing to compare, named by its record name
    absent = compare_results(_result(cand), _result(base), facts("group/sub/dsc"), (), n_resamples=20)
    assert absent.problems == ["no case has a dsc value in either result"]
    named = compare_results(_result(cand), _result(base), facts("group/dsc", record_path=True), (), n_resamples=20)
    assert named.problems == ["no case has a group/dsc value in either result"]


def test_a_metric_declared_without_a_paired_method_cannot_be_gated():
    cand, base = _result(_dsc(CAND)), _result(_dsc(BASE))
    comp = compare_results(cand, base, facts("dsc", paired="none"), ("organ",), n_resamples=20)
    assert comp.rows == [] and comp.problems == [
        "toy/dsc cannot be gated: its unit declares no paired comparison for it (paired='none'); choose another "
        "primary metric (gate.primary_metrics)"
    ]
    # after the pairing problems, which say why the results are not comparable at all
    other = compare_results(cand, _result(_dsc(BASE), benchmark="other"), facts("dsc", paired="none"), ())
    assert other.problems[0].startswith("different benchmark units") and "cannot be gated" in other.problems[-1]


def test_defaults_resamples_and_seed():
    cand, base = _result(_dsc(CAND)), _result(_dsc(BASE))
    comp = compare_results(cand, base, facts("dsc"), ())
    assert len(comp.rows[0].samples) == 2000
    ids = ["c1", "c2", "c3", "c4", "c5"]
    ref = paired_headlines(
        _matrix(CAND, ids),
        _matrix(BASE, ids),
        reduction="item_mean",
        best=1.0,
        n_resamples=2000,
        seed=group_seed(0, "toy/dsc"),
        method="percentile",
    )
    np.testing.assert_array_equal(comp.rows[0].samples, ref.samples)
    assert (comp.rows[0].ci95_low, comp.rows[0].ci95_high) == (ref.low, ref.high)
    assert (comp.candidate_label, comp.baseline_label) == ("candidate", "baseline")


def test_cases_are_resampled_alone_unless_the_results_cluster_by_subject():
    by_case = compare_results(
        _result(_dsc(CAND), subjects=SUBJECTS),
        _result(_dsc(BASE), subjects=SUBJECTS),
        facts("dsc"),
        ("organ",),
        n_resamples=50,
    )
    assert by_case.cluster == "case" and by_case.rows[0].n_units == 5 and by_case.rows[1].n_units == 3
    by_subject = compare_results(
        _result(_dsc(CAND), subjects=SUBJECTS, cluster="subject_id"),
        _result(_dsc(BASE), subjects=SUBJECTS, cluster="subject_id"),
        facts("dsc"),
        (),
        n_resamples=50,
    )
    assert by_subject.rows[0].n_units == 3


def test_the_protocol_digest_is_of_the_compared_fields_and_ignores_key_order():
    a = _result(_dsc(CAND), extra_config={"toy": {"labels": {"liver": 1, "heart": 5}, "tol": 1}})
    b = _result(_dsc(BASE), extra_config={"toy": {"labels": {"heart": 5, "liver": 1}, "tol": 2}})
    comp = compare_results(a, b, facts("dsc"), (), n_resamples=20, protocol=("toy.labels",))
    assert comp.problems == []
    assert comp.protocol_digest == sha256_text(json.dumps({"toy.labels": {"heart": 5, "liver": 1}}))
    assert comp.protocol_digest != a.config_digest


def test_a_protocol_setting_added_later_reads_older_results_as_its_only_former_behaviour():
    """``toy.rule=old``: a result written before ``toy.rule`` existed pairs with one that says ``old`` and not with
    one that says ``new`` (the message shows the value the older result is read as)."""
    older = _result(_dsc(BASE), extra_config={"toy": {"labels": 1}})
    same = _result(_dsc(CAND), extra_config={"toy": {"labels": 1, "rule": "old"}})
    other = _result(_dsc(CAND), extra_config={"toy": {"labels": 1, "rule": "new"}})
    protocol = ("toy.labels", "toy.rule=old")
    assert compare_results(same, older, facts("dsc"), (), n_resamples=20, protocol=protocol).problems == []
    assert compare_results(other, older, facts("dsc"), (), n_resamples=20, protocol=protocol).problems == [
        'protocol config differs: toy.rule is "new" in the candidate, "old" in the baseline; '
        "re-evaluate with the same config"
    ]
    strict = compare_results(same, older, facts("dsc"), (), n_resamples=20, protocol=("toy.labels", "toy.rule"))
    assert strict.problems == [
        'protocol config differs: toy.rule is "old" in the candidate, null in the baseline; '
        "re-evaluate with the same config"
    ]


def test_pairing_messages_show_the_differing_field_and_at_most_five_case_ids():
    a = _result(_dsc(CAND), extra_config={"toy": {"t": 1}})
    b = _result(_dsc(CAND), extra_config={"toy": {"t": 2}})
    comp = compare_results(a, b, facts("dsc"), (), n_resamples=20)
    assert comp.rows == []
    assert comp.problems == [
        "protocol config differs: toy.t is 1 in the candidate, 2 in the baseline; re-evaluate with the same config"
    ]
    many = _result(_dsc({f"n{k}": (1.0, 1.0) for k in range(7)}))
    others = _result(_dsc({f"m{k}": (1.0, 1.0) for k in range(6)}))
    (sets,) = compare_results(many, others, facts("dsc"), (), n_resamples=20).problems
    assert sets == (
        "case sets differ: 7 case(s) only in the candidate ['n0', 'n1', 'n2', 'n3', 'n4'], "
        "6 only in the baseline ['m0', 'm1', 'm2', 'm3', 'm4']"
    )
    extra = _result(_dsc({**CAND, "c6": (1.0, 1.0)}))
    (fewer,) = compare_results(_result(_dsc(CAND)), extra, facts("dsc"), (), n_resamples=20).problems
    assert fewer == "case sets differ: 0 case(s) only in the candidate [], 1 only in the baseline ['c6']"


def test_a_stored_value_equal_to_the_records_within_rounding_is_the_one_reported():
    ids = ["c1", "c2", "c3", "c4", "c5"]
    liver_c, liver_b = (float(np.mean([t[c][0] for c in ids])) for t in (CAND, BASE))
    key = "toy/dsc/by_organ/liver"
    near_c = {key: MetricSummary(value=liver_c + 1e-13, n=5, n_valid=5)}
    near_b = {key: MetricSummary(value=liver_b - 1e-13, n=5, n_valid=5)}
    comp = compare_results(
        _result(_dsc(CAND), aggregates=near_c),
        _result(_dsc(BASE), aggregates=near_b),
        facts("dsc"),
        ("organ",),
        n_resamples=20,
    )
    row = {r.key: r for r in comp.rows}[key]
    assert (row.candidate, row.baseline) == (liver_c + 1e-13, liver_b - 1e-13)
    # near 0 the tolerance is absolute: a stored 0 for records that give 1e-13
    tiny = _result({"c1": {"q": {"dsc": 1e-13}}}, aggregates={"toy/dsc": MetricSummary(value=0.0, n=1, n_valid=1)})
    zero = compare_results(tiny, _result({"c1": {"q": {"dsc": 0.0}}}), facts("dsc"), (), n_resamples=20)
    assert zero.problems == [] and zero.rows[0].candidate == 0.0


def test_an_item_only_the_champion_has_counts_as_the_best_value_on_the_candidate_side():
    cand = _result(_dsc({"c1": (1.0, NAN), "c2": (0.5, NAN)}))
    base = _result(_dsc({"c1": (1.0, 0.25), "c2": (0.5, 0.75)}))
    rows = {r.key: r for r in compare_results(cand, base, facts("dsc"), ("organ",), n_resamples=20).rows}
    heart = rows["toy/dsc/by_organ/heart"]
    assert heart.candidate is None and heart.baseline == 0.5 and heart.delta == 0.5  # 1 - 0.5


def test_case_group_aggregates_are_verified():
    wrong = {"toy/dsc/by_site/a": MetricSummary(value=0.125, n=2, n_valid=2)}
    comp = compare_results(
        _result(_dsc(CAND), groups=SITES, aggregates=wrong),
        _result(_dsc(BASE), groups=SITES),
        facts("dsc"),
        ("site",),
        n_resamples=20,
    )
    assert comp.rows == [] and len(comp.problems) == 1
    assert comp.problems[0].startswith("the candidate's toy/dsc/by_site/a = 0.125 is not what its case records give")


def test_delong_variances_sum_a_subjects_images_when_the_results_cluster_by_subject():
    subjects = {c: f"p{k // 2}" for k, c in enumerate(IDS)}
    cand = _result(_cls(Y, S1), subjects=subjects, cluster="subject_id", item_kind="finding")
    base = _result(_cls(Y, S2), subjects=subjects, cluster="subject_id", item_kind="finding")
    comp = compare_results(cand, base, facts("auroc", paired="delong"), ("finding",))
    y, a = _arrays(Y, S1)
    _, b = _arrays(Y, S2)
    codes = cluster_codes([subjects[c] for c in IDS])
    clustered, plain = paired_delong(y, a, b, 0.95, codes), paired_delong(y, a, b, 0.95)
    assert comp.rows[0].std_error == pytest.approx(math.sqrt(clustered.overall_variance), rel=1e-12)
    assert clustered.overall_variance != pytest.approx(plain.overall_variance)


def test_delong_images_are_their_own_clusters_unless_the_results_cluster_by_subject():
    subjects = {c: f"p{k // 2}" for k, c in enumerate(IDS)}
    cand = _result(_cls(Y, S1), subjects=subjects, item_kind="finding")
    base = _result(_cls(Y, S2), subjects=subjects, item_kind="finding")
    comp = compare_results(cand, base, facts("auroc", paired="delong"), ())
    y, a = _arrays(Y, S1)
    _, b = _arrays(Y, S2)
    assert comp.cluster == "case"
    assert comp.rows[0].std_error == pytest.approx(math.sqrt(paired_delong(y, a, b).overall_variance), rel=1e-12)


def test_delong_rows_only_for_findings_and_groups_with_a_defined_auroc():
    labels = {c: [v[0], 0.0] for c, v in Y.items()}  # f2 has no positive anywhere
    groups = {c: {"view": "ap" if k < 6 else "pa"} for k, c in enumerate(IDS)}
    labels["i6"], labels["i7"] = [1.0, 0.0], [1.0, 0.0]  # the "pa" images are all positive for f1
    cand = _result(_cls(labels, S1), groups=groups, item_kind="finding")
    base = _result(_cls(labels, S2), groups=groups, item_kind="finding")
    comp = compare_results(cand, base, facts("auroc", paired="delong"), ("finding", "view"))
    assert comp.problems == []
    assert [r.key for r in comp.rows] == ["toy/auroc", "toy/auroc/by_finding/f1", "toy/auroc/by_view/ap"]
    assert comp.rows[0].n_pairs == 8 and comp.rows[2].n_pairs == 6


# ------------------------------------------------------------------ corpus metrics (reduction="corpus")


def _pooled_rate(cases, weights):
    """A corpus headline: hits over trials pooled over the weighted cases (NaN without trials)."""
    hits = np.array([c.metrics.get("all", {}).get("hits") or 0.0 for c in cases])
    trials = np.array([c.metrics.get("all", {}).get("trials") or 0.0 for c in cases])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ hits) / (weights @ trials)


def _rate(table: dict[str, tuple[float, float] | None]) -> dict:
    return {c: ({} if v is None else {"all": {"hits": v[0], "trials": v[1]}}) for c, v in table.items()}


RC = {"c1": (3.0, 4.0), "c2": (1.0, 2.0), "c3": (2.0, 2.0), "c4": (0.0, 2.0), "c5": None, "c6": (1.0, 1.0)}
RB = {"c1": (2.0, 4.0), "c2": (1.0, 2.0), "c3": (1.0, 2.0), "c4": (1.0, 2.0), "c5": None, "c6": None}
RGROUPS = {
    "c1": {"site": "a"},
    "c2": {"site": "a"},
    "c3": {"site": "b"},
    "c4": {"site": "b"},
    "c5": {"site": "c"},
    "c6": {"site": "b"},
}
RSUBJECTS = {"c1": "s1", "c2": "s1", "c3": "s2", "c4": "s3", "c5": "s3", "c6": "s4"}


def _corpus(cand, base, dims=("item", "site"), **kw):
    kw = {"n_resamples": 200, "seed": 3, "confidence": 0.9, **kw}
    return compare_results(cand, base, facts("rate", reduction="corpus", corpus=_pooled_rate), dims, **kw)


def test_corpus_rows_recompute_both_headlines_on_the_same_cluster_resamples():
    opts = {"groups": RGROUPS, "subjects": RSUBJECTS, "cluster": "subject_id", "interval": "expanded_percentile"}
    cand, base = _result(_rate(RC), item_kind="item", **opts), _result(_rate(RB), item_kind="item", **opts)
    comp = _corpus(cand, base)
    assert comp.problems == []
    # the item dimension gives no rows (a corpus function has the headline only); the case groups do
    assert [(r.key, r.dimension, r.group) for r in comp.rows] == [
        ("toy/rate", "", ""),
        ("toy/rate/by_site/a", "site", "a"),
        ("toy/rate/by_site/b", "site", "b"),
    ]
    ids = sorted(RC)
    cases_c, cases_b = sorted(cand.cases, key=lambda c: c.case_id), sorted(base.cases, key=lambda c: c.case_id)
    codes = cluster_codes([RSUBJECTS[c] for c in ids])

    def direct(key, idx):
        cr, br = [cases_c[i] for i in idx], [cases_b[i] for i in idx]
        return paired_corpus(
            lambda w: _pooled_rate(cr, w),
            lambda w: _pooled_rate(br, w),
            len(idx),
            n_resamples=200,
            seed=group_seed(3, key),
            confidence=0.9,
            clusters=codes[idx],
            method="expanded_percentile",
        )

    head, whole = comp.rows[0], direct("toy/rate", np.arange(6))
    assert (head.candidate, head.baseline) == pytest.approx((7 / 11, 5 / 10)) and head.delta == pytest.approx(
        7 / 11 - 0.5
    )
    assert (head.ci95_low, head.ci95_high, head.n_units) == (whole.low, whole.high, 4)
    np.testing.assert_array_equal(head.samples, whole.samples)
    assert head.n_pairs == 5  # c5 has no record on either side; c6 on the candidate's only
    b = comp.rows[2]
    group_b = direct("toy/rate/by_site/b", np.array([2, 3, 5]))
    assert (b.candidate, b.baseline) == pytest.approx((3 / 5, 2 / 4)) and b.n_pairs == 3 and b.n_units == 3
    assert (b.ci95_low, b.ci95_high) == (group_b.low, group_b.high)
    np.testing.assert_array_equal(b.samples, group_b.samples)


def test_corpus_rows_are_verified_against_the_stored_headlines():
    good = {"toy/rate": MetricSummary(value=7 / 11 + 1e-13, n=6, n_valid=5)}
    ok = _corpus(_result(_rate(RC), groups=RGROUPS, aggregates=good), _result(_rate(RB), groups=RGROUPS))
    assert ok.problems == [] and ok.rows[0].candidate == 7 / 11 + 1e-13  # the stored value is reported
    base_good = {"toy/rate": MetricSummary(value=0.5 - 1e-13, n=6, n_valid=4)}
    ok_b = _corpus(_result(_rate(RC), groups=RGROUPS), _result(_rate(RB), groups=RGROUPS, aggregates=base_good))
    assert ok_b.rows[0].baseline == 0.5 - 1e-13
    wrong = {"toy/rate": MetricSummary(value=0.25, n=6, n_valid=5)}
    head = _corpus(_result(_rate(RC), groups=RGROUPS, aggregates=wrong), _result(_rate(RB), groups=RGROUPS))
    assert head.rows == [] and len(head.problems) == 1
    assert head.problems[0].startswith("the candidate's toy/rate = 0.25 is not what its case records give")
    wrong_group = {"toy/rate/by_site/a": MetricSummary(value=0.25, n=2, n_valid=2)}
    group = _corpus(_result(_rate(RC), groups=RGROUPS), _result(_rate(RB), groups=RGROUPS, aggregates=wrong_group))
    assert group.rows == [] and len(group.problems) == 1
    assert group.problems[0].startswith("the baseline's toy/rate/by_site/a = 0.25 is not what its case records give")


def test_corpus_edges():
    none = {c: None for c in RC}
    empty = _corpus(_result(_rate(none)), _result(_rate(none)), ())
    assert empty.rows == [] and empty.problems == [
        "neither result's case records give toy/rate (nothing to recompute it from)"
    ]
    one_side = _corpus(_result(_rate(RC)), _result(_rate(none)), ())
    assert one_side.problems == [] and one_side.rows[0].candidate == pytest.approx(7 / 11)
    assert one_side.rows[0].baseline is None
    read_back = facts("rate", reduction="corpus", corpus=_pooled_rate).record()  # a record: no function
    missing = compare_results(_result(_rate(RC)), _result(_rate(RB)), read_back, ())
    assert missing.rows == [] and missing.problems == [
        "toy/rate is a corpus metric, but the policy carries no function to recompute it with"
    ]


def test_delong_units_are_the_labelled_images_or_their_subjects():
    labels = {
        "i0": [0.0, 0.0],
        "i1": [1.0, 1.0],
        "i2": [0.0, 1.0],
        "i3": [1.0, 0.0],
        "i4": [0.0, None],
        "i5": [1.0, None],
        "i6": [None, None],
        "i7": [None, None],
    }
    subjects = {c: f"p{k // 2}" for k, c in enumerate(IDS)}
    groups = {c: {"half": "x" if k < 4 else "y"} for k, c in enumerate(IDS)}
    for cluster, want in (("subject_id", (3, 3, 2, 2)), ("case", (6, 6, 4, 4))):
        opts = {"subjects": subjects, "groups": groups, "cluster": cluster, "item_kind": "finding"}
        comp = compare_results(
            _result(_cls(labels, S1), **opts),
            _result(_cls(labels, S2), **opts),
            facts("auroc", paired="delong"),
            ("finding", "half"),
        )
        rows = {r.key: r for r in comp.rows}
        assert comp.problems == [] and "toy/auroc/by_half/y" in rows
        got = tuple(
            rows[k].n_units
            for k in ("toy/auroc", "toy/auroc/by_finding/f1", "toy/auroc/by_finding/f2", "toy/auroc/by_half/x")
        )
        assert got == want, cluster
        assert (rows["toy/auroc/by_finding/f1"].n_pairs, rows["toy/auroc/by_finding/f2"].n_pairs) == (6, 4)


def test_corpus_rows_resample_cases_alone_and_read_the_results_interval_method():
    cand = _result(_rate(RC), subjects=RSUBJECTS)  # cluster "case", interval "percentile"
    base = _result(_rate(RB), subjects=RSUBJECTS)
    comp = _corpus(cand, base, ())
    head = comp.rows[0]
    assert comp.cluster == "case" and head.n_units == 6
    cases_c, cases_b = sorted(cand.cases, key=lambda c: c.case_id), sorted(base.cases, key=lambda c: c.case_id)
    ref = paired_corpus(
        lambda w: _pooled_rate(cases_c, w),
        lambda w: _pooled_rate(cases_b, w),
        6,
        n_resamples=200,
        seed=group_seed(3, "toy/rate"),
        confidence=0.9,
        method="percentile",
    )
    np.testing.assert_array_equal(head.samples, ref.samples)
    assert (head.ci95_low, head.ci95_high) == (ref.low, ref.high)
