"""stats.verify: a result's aggregates recomputed from its own case records, every rule and message pinned.

The fixture is three cases with two organs (``a``, ``b``) and two modalities, small enough to recompute by hand:

====  ========  ======  ======  ===========
case  modality  a       b       case mean
====  ========  ======  ======  ===========
c0    ct        0.25    1.0     0.625
c1    pet       0.5     null    0.5
c2    ct        0.75    absent  0.75
====  ========  ======  ======  ===========

Organ means: ``a`` 0.5 (3 values), ``b`` 1.0 (1 value). Headline: ``item_mean`` (0.5 + 1.0) / 2 = 0.75,
``case_mean`` (0.625 + 0.5 + 0.75) / 3 = 0.625. ``ct`` (c0, c2): ``a`` 0.5 (2), ``b`` 1.0 (1), ``item_mean`` 0.75,
``case_mean`` 0.6875. ``pet`` (c1): ``a`` 0.5 (1), ``b`` null (0), both headlines 0.5.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trackeval.errors import InputError
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, build_result
from trackeval.spec import MetricInfo
from trackeval.stats.verify import ABS_TOL, REL_TOL, close, verify_aggregates

FILE = Path("out") / "results.json"


def _cases() -> list[CaseRecord]:
    rows = [
        ("ct", {"a": {"dsc": 0.25}, "b": {"dsc": 1.0}}),
        ("pet", {"a": {"dsc": 0.5}, "b": {"dsc": None}}),
        ("ct", {"a": {"dsc": 0.75}}),
    ]
    return [
        CaseRecord(case_id=f"c{i}", subject_id=f"s{i}", groups={"modality": mod}, metrics=m)
        for i, (mod, m) in enumerate(rows)
    ]


def _s(value: float | None, n_valid: int, n: int = 3) -> MetricSummary:
    return MetricSummary(value=value, n=n, n_valid=n_valid)


def _aggregates() -> dict[str, MetricSummary]:
    return {
        "umd/dsc": _s(0.75, 3),
        "umd/dsc/by_organ/a": _s(0.5, 3),
        "umd/dsc/by_organ/b": _s(1.0, 1),
        "umd/dsc/by_modality/ct": _s(0.75, 2, 2),
        "umd/dsc/by_modality/ct/by_organ/a": _s(0.5, 2, 2),
        "umd/dsc/by_modality/ct/by_organ/b": _s(1.0, 1, 2),
        "umd/dsc/by_modality/pet": _s(0.5, 1, 1),
        "umd/dsc/by_modality/pet/by_organ/a": _s(0.5, 1, 1),
        "umd/dsc/by_modality/pet/by_organ/b": _s(None, 0, 1),
    }


def _result(
    aggregates: dict[str, MetricSummary] | None = None,
    cases: list[CaseRecord] | None = None,
    *,
    summary: dict[str, int] | None = None,
    benchmark: str = "umd",
    task: str = "",
    item_kind: str = "organ",
) -> BenchmarkResult:
    cases = _cases() if cases is None else cases
    return build_result(
        benchmark,
        task=task,
        model=None,
        config={},
        ground_truth_digest="t",
        predictions_digest="p",
        summary={"n_cases": len(cases)} if summary is None else summary,
        warnings=[],
        cases=cases,
        aggregates=_aggregates() if aggregates is None else aggregates,
        item_kind=item_kind,
    )


def _with(**changed: MetricSummary) -> dict[str, MetricSummary]:
    """The fixture's aggregates with some keys (``__`` for ``/``) replaced."""
    return {**_aggregates(), **{k.replace("__", "/"): v for k, v in changed.items()}}


def _declared(reduction: str | None):
    """A lookup that declares ``umd``'s ``dsc`` with ``reduction`` (None: knows nothing)."""

    def lookup(unit: str, metric: str) -> MetricInfo | None:
        if reduction is None or (unit, metric) != ("umd", "dsc"):
            return None
        paired = "delong" if reduction == "corpus" else "bootstrap"
        return MetricInfo(name="dsc", label="Dice", paired=paired, reduction=reduction)

    return lookup


def _refused(result: BenchmarkResult, declared=None) -> InputError:
    with pytest.raises(InputError) as err:
        verify_aggregates(result, file=FILE, declared=declared)
    assert err.value.file == str(FILE)
    return err.value


# ------------------------------------------------------------------ close


def test_close_is_relative_to_1e9_absolute_to_1e12_and_nan_equals_only_nan():
    assert (REL_TOL, ABS_TOL) == (1e-9, 1e-12)
    assert close(1.0, 1.0) and close(1.0, 1.0 + 5e-10) and close(1000.0, 1000.0 + 5e-7)
    assert not close(1.0, 1.0 + 2e-9) and not close(1000.0, 1000.0 + 2e-6) and not close(1.0, 1.5)
    assert close(0.0, 5e-13) and not close(0.0, 2e-12)  # near 0 the absolute tolerance decides
    assert close(math.nan, math.nan)
    assert not close(math.nan, 0.5) and not close(0.5, math.nan) and not close(math.nan, 0.0)


# ------------------------------------------------------------------ a consistent result passes


@pytest.mark.parametrize("reduction", ["item_mean", None])
def test_a_result_that_agrees_with_its_records_passes(reduction):
    verify_aggregates(_result(), file=FILE, declared=_declared(reduction))
    verify_aggregates(_result(), file=FILE)  # no lookup: either rule


# ------------------------------------------------------------------ item means and their counts


def test_a_forged_item_mean_is_refused_naming_the_key_and_both_numbers():
    err = _refused(_result(_with(umd__dsc__by_organ__a=_s(0.55, 3))))
    assert err.field == "umd/dsc/by_organ/a"
    assert err.message == (
        "aggregate umd/dsc/by_organ/a = 0.55 (n_valid 3) contradicts its case records, which give 0.5 (n_valid 3)"
    )
    # within the tolerance it agrees
    verify_aggregates(_result(_with(umd__dsc__by_organ__a=_s(0.5 + 1e-12, 3))), file=FILE)


def test_a_forged_count_of_valid_values_is_refused_even_with_the_right_mean():
    err = _refused(_result(_with(umd__dsc__by_organ__b=_s(1.0, 2))))
    assert err.field == "umd/dsc/by_organ/b"
    assert err.message.endswith("= 1.0 (n_valid 2) contradicts its case records, which give 1.0 (n_valid 1)")


def test_item_means_of_a_group_use_only_the_groups_cases():
    err = _refused(_result(_with(umd__dsc__by_modality__ct__by_organ__a=_s(0.5, 3, 2))))
    assert err.field == "umd/dsc/by_modality/ct/by_organ/a" and err.message.endswith("which give 0.5 (n_valid 2)")
    # pet has only c1, whose a is 0.5 and b null: a mean over nothing is null
    err = _refused(_result(_with(umd__dsc__by_modality__pet__by_organ__a=_s(0.375, 1, 1))))
    assert err.message.endswith("= 0.375 (n_valid 1) contradicts its case records, which give 0.5 (n_valid 1)")
    err = _refused(_result(_with(umd__dsc__by_modality__pet__by_organ__b=_s(0.25, 0, 1))))
    assert err.message == (
        "aggregate umd/dsc/by_modality/pet/by_organ/b = 0.25 (n_valid 0) contradicts its case records, "
        "which give null (n_valid 0)"
    )


def test_an_item_no_case_has_agrees_only_with_null():
    verify_aggregates(_result({**_aggregates(), "umd/dsc/by_organ/z": _s(None, 0)}), file=FILE)
    err = _refused(_result({**_aggregates(), "umd/dsc/by_organ/z": _s(0.125, 0)}))
    assert err.field == "umd/dsc/by_organ/z" and err.message.endswith("which give null (n_valid 0)")
    err = _refused(_result(_with(umd__dsc__by_organ__a=_s(None, 3))))  # a null where there are values
    assert err.message.startswith("aggregate umd/dsc/by_organ/a = null (n_valid 3) contradicts")


def test_numbers_are_shown_in_full():
    err = _refused(_result(_with(umd__dsc__by_organ__a=_s(0.1 + 0.2, 3))))
    assert "= 0.30000000000000004 (n_valid 3)" in err.message


# ------------------------------------------------------------------ headlines under the declared reduction


def test_an_item_mean_headline_is_refused_with_the_case_mean_value():
    err = _refused(_result(_with(umd__dsc=_s(0.625, 3))), _declared("item_mean"))
    assert err.field == "umd/dsc"
    assert err.message == (
        "aggregate umd/dsc = 0.625 contradicts its case records, which give 0.75 (the mean over organ means, "
        "its declared item_mean reduction)"
    )


def test_a_case_mean_headline_follows_its_own_rule():
    verify_aggregates(
        _result(_with(umd__dsc=_s(0.625, 3), umd__dsc__by_modality__ct=_s(0.6875, 2, 2))),
        file=FILE,
        declared=_declared("case_mean"),
    )
    err = _refused(_result(), _declared("case_mean"))  # the fixture's headline is the item mean, 0.75
    assert err.field == "umd/dsc"
    assert err.message == (
        "aggregate umd/dsc = 0.75 contradicts its case records, which give 0.625 (the mean over cases, "
        "its declared case_mean reduction)"
    )
    err = _refused(_result(_with(umd__dsc=_s(0.625, 3))), _declared("case_mean"))
    assert err.field == "umd/dsc/by_modality/ct" and "which give 0.6875 (the mean over cases" in err.message


@pytest.mark.parametrize("declared", [None, _declared(None)])
def test_without_a_declaration_either_rule_is_accepted(declared):
    verify_aggregates(_result(_with(umd__dsc=_s(0.625, 3))), file=FILE, declared=declared)
    verify_aggregates(_result(_with(umd__dsc=_s(0.75, 3))), file=FILE, declared=declared)
    err = _refused(_result(_with(umd__dsc=_s(0.7, 3))), declared)
    assert err.message == (
        "aggregate umd/dsc = 0.7 contradicts its case records, which give 0.75 or 0.625 (the mean over organ "
        "means, or over cases)"
    )


def test_when_both_rules_agree_the_message_gives_one_number():
    # pet holds one case: its mean over organ means and its mean over cases are both 0.5
    err = _refused(_result(_with(umd__dsc__by_modality__pet=_s(0.25, 1, 1))))
    assert err.field == "umd/dsc/by_modality/pet"
    assert err.message == (
        "aggregate umd/dsc/by_modality/pet = 0.25 contradicts its case records, which give 0.5 (the mean over "
        "organ means, or over cases)"
    )


def test_a_null_headline_where_the_records_give_a_value_is_refused():
    err = _refused(_result(_with(umd__dsc=_s(None, 3))), _declared("item_mean"))
    assert err.message.startswith("aggregate umd/dsc = null contradicts its case records, which give 0.75 ")


def test_a_corpus_headline_is_not_recomputed():
    verify_aggregates(_result(_with(umd__dsc=_s(0.1, 3))), file=FILE, declared=_declared("corpus"))


def test_a_headline_is_recomputed_over_the_items_of_its_breakdown_only():
    only_a = {k: v for k, v in _aggregates().items() if "by_organ/b" not in k}
    # over organ a alone, both rules give a's mean, 0.5; ct and pet give 0.5 too
    only_a |= {"umd/dsc": _s(0.5, 3), "umd/dsc/by_modality/ct": _s(0.5, 2, 2)}
    verify_aggregates(_result(only_a), file=FILE, declared=_declared("item_mean"))
    err = _refused(_result({**only_a, "umd/dsc": _s(0.75, 3)}), _declared("item_mean"))
    assert "which give 0.5 (the mean over organ means" in err.message
    # a breakdown item no case has is left out of the headline (the fixture's 0.75 still agrees)
    verify_aggregates(_result(_with(umd__dsc__by_organ__z=_s(None, 0))), file=FILE, declared=_declared("item_mean"))


def test_a_headline_without_a_breakdown_is_not_recomputed():
    verify_aggregates(_result({"umd/dsc": _s(0.1, 3)}), file=FILE, declared=_declared("item_mean"))
    # a key below an item is no item of the breakdown
    nested = {"umd/dsc": _s(0.1, 3), "umd/dsc/by_organ/a/extra": _s(0.2, 3)}
    verify_aggregates(_result(nested), file=FILE, declared=_declared("item_mean"))


def test_every_aggregate_is_checked_after_an_item_that_agrees():
    first_items = {"umd/dsc/by_organ/a": _s(0.5, 3), "umd/dsc/by_organ/b": _s(1.0, 1), "umd/dsc": _s(0.7, 3)}
    assert _refused(_result(first_items), _declared("item_mean")).field == "umd/dsc"
    # and after a key that is not recomputable
    after_other = {"other/dsc": _s(0.5, 3), "umd/dsc/by_organ/a": _s(0.55, 3)}
    assert _refused(_result(after_other)).field == "umd/dsc/by_organ/a"


# ------------------------------------------------------------------ keys that are not recomputable


@pytest.mark.parametrize(
    "key",
    [
        "other/dsc/by_organ/a",  # another unit
        "umdx/dsc/by_organ/a",  # a unit whose name only starts like this one's
        "umd/hd95/by_organ/a",  # not a per-item metric of the records
        "umd/dsc/by_site/x/by_organ/a",  # not a group dimension of the records
        "umd/dsc/by_modality/mr/by_organ/a",  # a group value no case has
        "umd/dsc/by_modality/mr",
        "umd/dsc/by_organ",
        "umd/dsc/extra/by_organ/a",
        "umd/dsc/by_modality",
        "umd/dsc/at_modality/ct/by_organ/a",  # a group needs its by_ prefix
        "umd",
    ],
)
def test_keys_that_the_records_do_not_determine_are_not_checked(key):
    verify_aggregates(_result({**_aggregates(), key: _s(0.123, 3)}), file=FILE, declared=_declared("item_mean"))


def test_the_item_kind_names_the_breakdown():
    # the same records read as regions: by_organ is then no breakdown, by_region is
    as_regions = {k.replace("by_organ", "by_region"): v for k, v in _aggregates().items()}
    verify_aggregates(_result(as_regions, item_kind="region"), file=FILE)
    forged = {**as_regions, "umd/dsc/by_region/a": _s(0.55, 3)}
    assert _refused(_result(forged, item_kind="region")).field == "umd/dsc/by_region/a"
    verify_aggregates(_result(_with(umd__dsc__by_organ__a=_s(0.55, 3)), item_kind="region"), file=FILE)


def test_a_metric_path_of_several_tokens_and_a_task_unit():
    cases = [
        CaseRecord(case_id="q0", subject_id="q0", groups={"split": "test"}, metrics={"r1": {"group/ap_at_10": 0.5}}),
        CaseRecord(case_id="q1", subject_id="q1", groups={"split": "val"}, metrics={"r1": {"group/ap_at_10": 0.25}}),
    ]
    aggregates = {
        "mir/seg/group/ap_at_10": _s(0.375, 2, 2),
        "mir/seg/group/ap_at_10/by_region/r1": _s(0.375, 2, 2),
        "mir/seg/group/ap_at_10/by_split/test/by_region/r1": _s(0.5, 1, 1),
    }
    kw = {"benchmark": "mir", "task": "seg", "item_kind": "region", "summary": {}}
    verify_aggregates(_result(aggregates, cases, **kw), file=FILE)
    forged = {**aggregates, "mir/seg/group/ap_at_10/by_split/test/by_region/r1": _s(0.375, 1, 1)}
    err = _refused(_result(forged, cases, **kw))
    assert err.field == "mir/seg/group/ap_at_10/by_split/test/by_region/r1"
    assert err.message.endswith("which give 0.5 (n_valid 1)")
    err = _refused(_result({**aggregates, "mir/seg/group/ap_at_10": _s(0.5, 2, 2)}, cases, **kw))
    assert err.field == "mir/seg/group/ap_at_10" and "which give 0.375 (the mean over region means" in err.message


# ------------------------------------------------------------------ counts


def test_a_forged_number_of_cases_is_refused():
    r = _result()
    err = _refused(r.model_copy(update={"data": r.data.model_copy(update={"n_cases": 4})}))
    assert err.field == "data.n_cases" and err.message == "data.n_cases = 4 contradicts the case records, which give 3"
    err = _refused(_result(summary={"n_cases": 2}))
    assert err.field == "summary.n_cases"
    assert err.message == "summary.n_cases = 2 contradicts the case records, which give 3"


def test_missing_predictions_are_counted_from_the_records_status():
    cases = _cases()
    cases[2] = cases[2].model_copy(update={"status": "missing_prediction"})
    verify_aggregates(_result(cases=cases, summary={"n_cases": 3, "n_missing_predictions": 1}), file=FILE)
    err = _refused(_result(cases=cases, summary={"n_cases": 3, "n_missing_predictions": 0}))
    assert err.field == "summary.n_missing_predictions"
    assert err.message == "summary.n_missing_predictions = 0 contradicts the case records, which give 1"
    err = _refused(_result(summary={"n_missing_predictions": 1}))
    assert err.message == "summary.n_missing_predictions = 1 contradicts the case records, which give 0"


def test_counts_a_summary_does_not_hold_are_not_checked_and_are_checked_first():
    verify_aggregates(_result(summary={}), file=FILE)
    # a wrong count is reported before a wrong aggregate
    err = _refused(_result(_with(umd__dsc__by_organ__a=_s(0.55, 3)), summary={"n_cases": 7}))
    assert err.field == "summary.n_cases"
