"""Paired comparison of two results of one benchmark: deltas with CIs per headline and breakdown group.

Both results must come from the same cases: the same benchmark unit, ground-truth digest (truth files +
manifest), protocol configuration digest, case-id set, resampling unit (``config.bootstrap.cluster``) and
subject of every case. Otherwise the comparison carries ``problems`` (a clear reason each) and no rows: unpaired
numbers are never compared.

**What is compared is what each result reports.** A row's delta is the candidate's headline minus the champion's
headline, each recomputed from its own case records exactly as its results.json reports it (the unit's declared
``reduction``), and the recomputed values must equal the stored aggregates (a problem otherwise). The interval
comes from resampling clusters of cases jointly for both versions and recomputing both headlines on every
resample (:func:`trackeval.stats.paired.paired_headlines`). So a cell that is not applicable on one side never
hides the other side's errors: a candidate that paints an organ the truth lacks (Dice 0 where the champion had
"not applicable") lowers its own headline and the delta.

Breakdown groups: the item dimension (``result.item_kind``, e.g. ``organ``: one column of the case x item
matrix; the delta of the two item means, where a side with no value at all for the item counts as the metric's
best value) and case-group dimensions (``CaseRecord.groups``, e.g. ``modality``: a subset of cases, with both
headlines recomputed on it). The per-case values are read under the metric's declared record name
(:attr:`MetricFacts.per_case`: ``dsc`` for ``umd/dsc``; ``group/ap_at_10`` for ``mir3d/group/ap_at_10``).

What the comparison knows of the metric is what its unit declares (:class:`~trackeval.spec.MetricInfo`, as a
gate policy holds it: :class:`MetricFacts`); its ``paired`` method picks one of two methods
(``BenchmarkComparison.method``), and a metric declared ``paired="none"`` is not compared (a problem):

* ``paired_bootstrap`` for metrics whose headline is a mean of per-case values (intervals: the results'
  ``bootstrap.interval``; the rows keep the replicates for p-values), and for corpus metrics (``reduction=
  "corpus"``: mAP, corpus BLEU), whose headline the unit's own ``corpus`` function recomputes from the case
  records under the case weights of every resample (:func:`trackeval.stats.paired.paired_corpus`; the headline
  and case-group rows, no item rows);
* ``delong`` for AUROC (``paired="delong"``), which is not a per-case mean: the case records carry the
  per-image ``label`` and ``score`` of each finding (X-ray ``cls``), images are paired by case id, and
  :func:`trackeval.stats.paired.paired_delong` gives the AUC differences with Wald CIs on a Student t reference
  (``reference="t"``); the rows keep the standard error and the degrees of freedom for p-values. Labels that
  differ between the two results are a pairing problem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.results import BenchmarkResult, CaseRecord, config_value, item_matrix, metric_key, sha256_text
from trackeval.spec import CorpusHeadline, PairedMethod, Reduction
from trackeval.stats.bootstrap import cluster_codes, group_seed
from trackeval.stats.paired import PairedAUC, PairedHeadline, paired_corpus, paired_delong, paired_headlines
from trackeval.stats.reduce import MeanReduction
from trackeval.stats.verify import close


class MetricFacts(Protocol):
    """What a comparison knows of the compared metric: the facts its unit declares
    (:class:`~trackeval.spec.MetricInfo`), as a gate policy (:class:`~trackeval.gate.policy.UnitPolicy`,
    built by :func:`~trackeval.gate.policy.metric_facts`) holds them."""

    @property
    def metric(self) -> str:
        """The metric path relative to the unit (``dsc``; ``group/ap_at_10``)."""
        ...

    @property
    def paired(self) -> PairedMethod:
        """``bootstrap``, ``delong`` or ``none`` (cannot be compared)."""
        ...

    @property
    def per_case(self) -> str:
        """The name of the metric's per-case values in the case records."""
        ...

    @property
    def reduction(self) -> Reduction:
        """How each headline is built from the case records."""
        ...

    @property
    def best(self) -> float:
        """The metric's best value, which an item without any value on one side counts as."""
        ...

    @property
    def corpus(self) -> Callable[..., Any] | None:
        """The unit's :data:`~trackeval.spec.CorpusHeadline` (``reduction="corpus"`` with the bootstrap)."""
        ...


#: a model that stores its ``unit`` attribute under the key ``benchmark`` (the name records have always used)
#: and reads either
UNIT_AS_BENCHMARK = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)


class DeltaRow(BaseModel):
    """One paired delta (candidate - baseline). ``dimension``/``group`` are empty for the headline."""

    model_config = UNIT_AS_BENCHMARK

    #: the benchmark unit (``umd``, ``xray/cls``); stored as ``benchmark``
    unit: str = Field(alias="benchmark")
    key: str
    dimension: str = ""
    group: str = ""
    candidate: float | None
    baseline: float | None
    delta: float | None
    ci95_low: float | None
    ci95_high: float | None
    #: cases with a value on either side (the headline: cases with any value)
    n_pairs: int
    #: resampling units (clusters) behind the interval
    n_units: int = 0
    #: DeLong standard error of ``delta`` (method ``delong``; None for the bootstrap or an undefined variance)
    std_error: float | None = None
    #: degrees of freedom of the Student t reference of a DeLong row (``min(clusters with a positive, clusters
    #: with a negative) - 1``; None for the bootstrap)
    df: int | None = None
    #: bootstrap replicates of ``delta``, kept in memory for p-values; never serialised
    samples: list[float] | None = Field(default=None, exclude=True, repr=False)
    #: the effective number of clusters the interval's small-sample expansion used (Kish's, from the case weights:
    #: ``n_units`` when the clusters weigh the same; :func:`trackeval.stats.bootstrap.effective_units`), which
    #: the p-values of the row use with ``samples``; kept in memory, never serialised; None: ``n_units``
    n_effective: float | None = Field(default=None, exclude=True, repr=False)

    @property
    def expansion_units(self) -> float:
        """The units of the small-sample expansion of this row's interval and p-values: ``n_effective``, else
        ``n_units``."""
        return float(self.n_units) if self.n_effective is None else self.n_effective


class BenchmarkComparison(BaseModel):
    """Paired comparison of one benchmark unit. ``problems`` non-empty -> the results cannot be paired."""

    model_config = UNIT_AS_BENCHMARK

    #: the benchmark unit (``umd``, ``xray/cls``); stored as ``benchmark``
    unit: str = Field(alias="benchmark")
    metric: str
    method: Literal["paired_bootstrap", "delong"] = "paired_bootstrap"
    #: the reference distribution of a DeLong comparison's intervals and p-values: ``t`` (Student t with each
    #: row's ``df``; since issue 33), ``normal`` (a decision recorded before); empty for the bootstrap
    reference: Literal["", "normal", "t"] = ""
    #: the resampling unit and interval method of both results (``config.bootstrap``)
    cluster: Literal["subject_id", "case"] = "case"
    interval: Literal["expanded_percentile", "percentile"] = "percentile"
    candidate_label: str
    baseline_label: str
    n_cases: int
    #: the candidate's ground-truth digest and the digest of the protocol fields the metric depends on
    data_digest: str = ""
    protocol_digest: str = ""
    problems: list[str]
    rows: list[DeltaRow]


def protocol_digest(result: BenchmarkResult, fields: Sequence[str] | None) -> str:
    """sha256 of the config values that affect a metric: ``fields`` are dotted paths into ``result.config``
    (``umd.labels``; a path that is absent counts as null). ``None``: the whole config (``config_digest``)."""
    if fields is None:
        return result.config_digest
    values = {path: config_value(result.config, path) for path in sorted(fields)}
    return sha256_text(json.dumps(values, sort_keys=True))


#: the longest value a protocol mismatch shows (compact JSON, shortened with ``...``)
SHOWN_VALUE_CHARS = 80


def _first_differing_path(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The first (sorted) ``section.field`` dotted path whose value differs between two configs; ``section``
    alone when a whole section is missing on one side or is not a mapping; None when they are equal."""
    for section in sorted(set(a) | set(b)):
        x, y = a.get(section), b.get(section)
        if isinstance(x, dict) and isinstance(y, dict):
            for field in sorted(set(x) | set(y)):
                if x.get(field) != y.get(field):
                    return f"{section}.{field}"
        elif x != y:
            return section
    return None


def _shown(value: object) -> str:
    """``value`` as compact JSON, shortened to :data:`SHOWN_VALUE_CHARS` characters."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def _protocol_problem(
    cand: Mapping[str, Any], base: Mapping[str, Any], protocol: Sequence[str] | None, digests: tuple[str, str]
) -> str:
    """``protocol config differs: umd.labels is {...} in the candidate, {...} in the baseline; re-evaluate with
    the same config``: every differing field of ``protocol`` (None: the first differing path of the whole
    config). The digest prefixes only when no value differs (configs equal, digests not)."""
    if protocol is None:
        first = _first_differing_path(cand, base)
        paths = [] if first is None else [first]
    else:
        paths = [p for p in protocol if config_value(cand, p) != config_value(base, p)]
    what = "; ".join(
        f"{p} is {_shown(config_value(cand, p))} in the candidate, {_shown(config_value(base, p))} in the baseline"
        for p in paths
    )
    if not what:
        what = f"digest {digests[0][:12]} in the candidate, {digests[1][:12]} in the baseline"
    return f"protocol config differs: {what}; re-evaluate with the same config"


def pairing_problems(cand: BenchmarkResult, base: BenchmarkResult, protocol: Sequence[str] | None = None) -> list[str]:
    """Reasons why two results are not evaluations of the same cases under the same protocol ([] if paired).

    ``protocol``: the config fields that affect the compared metric (see :func:`protocol_digest`); a
    difference elsewhere (an NSD tolerance when Dice is compared, a training manifest used only by the leakage
    audit) does not block pairing. None: the whole protocol config must match.
    """
    problems = []
    if cand.unit != base.unit:
        problems.append(f"different benchmark units: {cand.unit} vs {base.unit}")
    if cand.data.ground_truth_digest != base.data.ground_truth_digest:
        problems.append(
            f"data digest mismatch: the ground truth differs ({cand.data.ground_truth_digest[:12]} vs "
            f"{base.data.ground_truth_digest[:12]}); re-evaluate both versions on the same data"
        )
    a, b = protocol_digest(cand, protocol), protocol_digest(base, protocol)
    if a != b:
        problems.append(_protocol_problem(cand.config, base.config, protocol, (a, b)))
    ca, ba = {c.case_id for c in cand.cases}, {c.case_id for c in base.cases}
    if ca != ba:
        only_c, only_b = sorted(ca - ba), sorted(ba - ca)
        problems.append(
            f"case sets differ: {len(only_c)} case(s) only in the candidate {only_c[:5]}, "
            f"{len(only_b)} only in the baseline {only_b[:5]}"
        )
    elif cand.resampling[0] == "subject_id":
        subject = {c.case_id: c.subject_id for c in base.cases}
        moved = sorted(c.case_id for c in cand.cases if subject[c.case_id] != c.subject_id)
        if moved:
            problems.append(f"case {moved[0]!r} belongs to another subject in the two results ({len(moved)} case(s))")
    if cand.resampling != base.resampling:
        problems.append(
            f"bootstrap resampling differs (cluster, interval): {cand.resampling} vs {base.resampling}; "
            "re-evaluate both versions with the same bootstrap config"
        )
    return problems


def _f(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _row(
    unit: str,
    key: str,
    dim: str,
    group: str,
    values: tuple[float, float, float, float, float],
    n_pairs: int,
    n_units: int,
    std_error: float | None = None,
    samples: np.ndarray | None = None,
    df: int | None = None,
    n_effective: float | None = None,
) -> DeltaRow:
    cand, base, delta, low, high = (_f(v) for v in values)
    return DeltaRow(
        unit=unit,
        key=key,
        dimension=dim,
        group=group,
        candidate=cand,
        baseline=base,
        delta=delta,
        ci95_low=low,
        ci95_high=high,
        n_pairs=n_pairs,
        n_units=n_units,
        std_error=std_error,
        samples=None if samples is None else samples.tolist(),
        df=df,
        n_effective=n_effective,
    )


def _delong_inputs(
    cand_cases: Sequence[CaseRecord], base_cases: Sequence[CaseRecord], items: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Labels and both score matrices (case x item, rows in the same case order) and the pairing problems."""
    y = item_matrix(cand_cases, items, "label")
    y_base = item_matrix(base_cases, items, "label")
    problems = []
    if np.isnan(y).all() and np.isnan(y_base).all():
        problems.append(
            "the case records carry no per-image 'label'/'score' values, which DeLong's AUROC comparison needs "
            "(an xray result of --task cls has them)"
        )
    elif not np.array_equal(y, y_base, equal_nan=True):
        i, j = np.argwhere(~((y == y_base) | (np.isnan(y) & np.isnan(y_base))))[0]
        problems.append(
            f"labels differ between the two results (case {cand_cases[i].case_id!r}, {items[j]}: "
            f"{y[i, j]} vs {y_base[i, j]}); re-evaluate both versions on the same ground truth"
        )
    return y, item_matrix(cand_cases, items, "score"), item_matrix(base_cases, items, "score"), problems


def _stored_mismatch(result: BenchmarkResult, key: str, recomputed: float, side: str) -> str | None:
    """A problem when the stored aggregate ``key`` differs from the value recomputed from the case records."""
    stored = result.aggregates.get(key)
    if stored is None:
        return None
    value = math.nan if stored.value is None else stored.value
    if close(value, recomputed):  # the evidence checks' tolerance: the stored value up to its last bits
        return None
    return (
        f"the {side}'s {key} = {value!r} is not what its case records give ({recomputed!r}): the gate compares "
        "the reported numbers only; re-evaluate with this trackeval"
    )


def _reported(result: BenchmarkResult, key: str, recomputed: float) -> float:
    """The value ``result`` reports for ``key`` (its stored aggregate, once :func:`_stored_mismatch` found it equal
    to ``recomputed`` up to the last bits), else ``recomputed``."""
    stored = result.aggregates.get(key)
    if stored is None:
        return recomputed
    return math.nan if stored.value is None else stored.value


def compare_results(
    cand: BenchmarkResult,
    base: BenchmarkResult,
    facts: MetricFacts,
    dimensions: Sequence[str],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    labels: tuple[str, str] = ("candidate", "baseline"),
    protocol: Sequence[str] | None = None,
) -> BenchmarkComparison:
    """Deltas of ``<unit>/<facts.metric>`` overall and per breakdown group in ``dimensions`` (module docstring).

    Rows: the headline, then one row per item (when ``item_kind`` is a listed dimension) and one per value of
    each listed case-group dimension (both headlines recomputed on those cases). With the bootstrap, each row has
    its own resamples of the results' clusters (seed derived from ``seed`` and the row key, so rows are
    reproducible and independent of which other rows exist), the item rows share the headline's; with DeLong
    (``facts.paired="delong"``) the rows are analytic and ``n_resamples``/``seed`` are unused. ``facts``: the
    metric's declared facts (:class:`MetricFacts`); ``reduction="corpus"`` recomputes the headline with
    ``facts.corpus`` (rows: the headline and the case groups, no item rows). ``confidence``: the level of the
    intervals (0.95: 95%). A metric declared ``paired="none"`` gives one problem and no rows.
    """
    unit = cand.unit
    head_key = metric_key(unit, *facts.metric.split("/"))
    problems = pairing_problems(cand, base, protocol)
    if facts.paired == "none":
        problems.append(
            f"{head_key} cannot be gated: its unit declares no paired comparison for it (paired='none'); "
            "choose another primary metric (gate.primary_metrics)"
        )
    cluster, interval = cand.resampling
    out = BenchmarkComparison(
        unit=unit,
        metric=head_key,
        method="delong" if facts.paired == "delong" else "paired_bootstrap",
        reference="t" if facts.paired == "delong" else "",
        cluster=cluster,
        interval=interval,
        candidate_label=labels[0],
        baseline_label=labels[1],
        n_cases=len(cand.cases),
        data_digest=cand.data.ground_truth_digest,
        protocol_digest=protocol_digest(cand, protocol),
        problems=problems,
        rows=[],
    )
    if problems:
        return out
    pair = _Paired.of(cand, base, head_key, dimensions, (n_resamples, seed, confidence))
    if facts.paired == "delong":
        out.problems, out.rows = _delong_rows(pair)
    elif facts.reduction == "corpus":
        out.problems, out.rows = _corpus_rows(pair, facts.corpus)
    else:
        out.problems, out.rows = _mean_rows(pair, facts)
    return out


def headline_exclusions(result: BenchmarkResult) -> list[str]:
    """Items a result reports but leaves out of its headline and of the gate: X-ray findings with fewer than
    ``xray.cls.min_positives`` positives or negatives, listed in ``config.<benchmark>_run.
    findings_below_min_positives``."""
    run = result.config.get(f"{result.benchmark}_run", {})
    return [str(t) for t in run.get("findings_below_min_positives", [])] if isinstance(run, dict) else []


@dataclass(frozen=True)
class _Paired:
    """Two paired results (:func:`pairing_problems` found none) and what every method shares: both sides' case
    records in case-id order (row ``i`` of each is one case), the items of either, the compared headline key,
    the breakdown dimensions and ``(n_resamples, seed, confidence)``."""

    cand: BenchmarkResult
    base: BenchmarkResult
    cand_cases: list[CaseRecord]
    base_cases: list[CaseRecord]
    items: list[str]
    head_key: str
    dimensions: Sequence[str]
    resampling: tuple[int, int, float]

    @classmethod
    def of(
        cls,
        cand: BenchmarkResult,
        base: BenchmarkResult,
        head_key: str,
        dimensions: Sequence[str],
        resampling: tuple[int, int, float],
    ) -> _Paired:
        cand_cases = sorted(cand.cases, key=lambda c: c.case_id)
        base_by_id = {c.case_id: c for c in base.cases}
        base_cases = [base_by_id[c.case_id] for c in cand_cases]
        items = sorted({i for c in cand_cases for i in c.metrics} | {i for c in base_cases for i in c.metrics})
        return cls(cand, base, cand_cases, base_cases, items, head_key, dimensions, resampling)

    @property
    def unit(self) -> str:
        return self.cand.unit

    def clusters(self) -> np.ndarray | None:
        """The cluster code of each row when the results resample subjects, else None (cases resampled alone)."""
        if self.cand.resampling[0] != "subject_id":
            return None
        return cluster_codes([c.subject_id for c in self.cand_cases])

    def case_groups(self) -> Iterator[tuple[str, str, str, np.ndarray]]:
        """``(key, dimension, group, row mask)`` of every case group of the listed dimensions, groups sorted;
        the item dimension is left out: it has one row per item (3D-MIR: ``region`` is both) or, for a corpus
        function that gives the headline only, none."""
        for dim in self.dimensions:
            if dim == self.cand.item_kind:
                continue
            for group in sorted({c.groups[dim] for c in self.cand_cases if dim in c.groups}):
                rows = np.array([c.groups.get(dim) == group for c in self.cand_cases])
                yield f"{self.head_key}/by_{dim}/{group}", dim, group, rows

    def mismatches(self, key: str, cand_value: float, base_value: float) -> list[str]:
        """The problems of either side whose stored ``key`` is not the value recomputed from its case records."""
        found = [
            _stored_mismatch(self.cand, key, cand_value, "candidate"),
            _stored_mismatch(self.base, key, base_value, "baseline"),
        ]
        return [p for p in found if p]

    def headline_row(self, key: str, dim: str, group: str, d: PairedHeadline, n_pairs: int) -> DeltaRow:
        """The row of a resampled headline ``d``: each side's reported value (:func:`_reported`) and their delta."""
        c, b = _reported(self.cand, key, d.candidate), _reported(self.base, key, d.baseline)
        values = (c, b, c - b, d.low, d.high)
        return _row(self.unit, key, dim, group, values, n_pairs, d.n_units, None, d.samples, None, d.n_effective)


def _mean_rows(pair: _Paired, facts: MetricFacts) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a comparison of a mean of per-case values (``reduction`` ``item_mean`` or
    ``case_mean``): both headlines recomputed on the same cluster resamples
    (:func:`~trackeval.stats.paired.paired_headlines`), overall, per item and per case group."""
    cm = item_matrix(pair.cand_cases, pair.items, facts.per_case)
    bm = item_matrix(pair.base_cases, pair.items, facts.per_case)
    codes = pair.clusters()
    has_value = ~(np.isnan(cm) & np.isnan(bm))
    n_resamples, seed, confidence = pair.resampling
    reduction = cast(MeanReduction, facts.reduction)  # "corpus" is compared by _corpus_rows

    def analyse(key: str, rows: np.ndarray | slice) -> PairedHeadline:
        return paired_headlines(
            cm[rows],
            bm[rows],
            reduction=reduction,
            best=facts.best,
            n_resamples=n_resamples,
            seed=group_seed(seed, key),
            confidence=confidence,
            clusters=None if codes is None else codes[rows],
            method=pair.cand.resampling[1],
        )

    whole = analyse(pair.head_key, slice(None))
    if not has_value.any():
        return [f"no case has a {facts.per_case} value in either result"], []
    problems = pair.mismatches(pair.head_key, whole.candidate, whole.baseline)
    if problems:
        return problems, []
    rows = [pair.headline_row(pair.head_key, "", "", whole, int(has_value.any(axis=1).sum()))]
    if pair.cand.item_kind in pair.dimensions:
        item_problems, item_rows = _item_rows(pair, whole, has_value, facts.best)
        problems += item_problems
        rows += item_rows
    for key, dim, group, sel in pair.case_groups():
        if has_value[sel].any():
            d = analyse(key, sel)
            found = pair.mismatches(key, d.candidate, d.baseline)
            problems += found
            if not found:
                rows.append(pair.headline_row(key, dim, group, d, int(has_value[sel].any(axis=1).sum())))
    return (problems, []) if problems else ([], rows)


def _item_rows(
    pair: _Paired, whole: PairedHeadline, has_value: np.ndarray, best: float
) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of the items with a value on either side: the delta of the two item means, a side with
    no value for the item counting as ``best``; the intervals from the headline's resamples."""
    problems: list[str] = []
    rows = []
    kind = pair.cand.item_kind
    for j, item in enumerate(pair.items):
        if not has_value[:, j].any():
            continue
        key = f"{pair.head_key}/by_{kind}/{item}"
        found = pair.mismatches(key, whole.item_candidate[j], whole.item_baseline[j])
        problems += found
        if found:
            continue
        ic = _reported(pair.cand, key, whole.item_candidate[j])
        ib = _reported(pair.base, key, whole.item_baseline[j])
        delta = (best if math.isnan(ic) else ic) - (best if math.isnan(ib) else ib)
        values = (ic, ib, delta, whole.item_low[j], whole.item_high[j])
        n, units = int(has_value[:, j].sum()), int(whole.item_units[j])
        effective = float(whole.item_effective[j])
        rows.append(_row(pair.unit, key, kind, item, values, n, units, None, whole.item_samples[:, j], None, effective))
    return problems, rows


def _corpus_rows(pair: _Paired, corpus: Callable[..., Any] | None) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a corpus comparison (``reduction="corpus"``): both headlines recomputed by the unit's
    ``corpus`` function (a :data:`~trackeval.spec.CorpusHeadline`) on the same resamples of the cases
    (:func:`~trackeval.stats.paired.paired_corpus`), overall and per case group."""
    if corpus is None:
        return [f"{pair.head_key} is a corpus metric, but the policy carries no function to recompute it with"], []
    fn: CorpusHeadline = corpus
    n_resamples, seed, confidence = pair.resampling
    codes = pair.clusters()
    cand_cases, base_cases = pair.cand_cases, pair.base_cases
    has_value = np.array([bool(c.metrics or b.metrics) for c, b in zip(cand_cases, base_cases, strict=True)])

    def analyse(key: str, idx: np.ndarray) -> PairedHeadline:
        cr, br = [cand_cases[i] for i in idx], [base_cases[i] for i in idx]
        return paired_corpus(
            lambda w: fn(cr, w),
            lambda w: fn(br, w),
            idx.size,
            n_resamples=n_resamples,
            seed=group_seed(seed, key),
            confidence=confidence,
            clusters=None if codes is None else codes[idx],
            method=pair.cand.resampling[1],
        )

    whole = analyse(pair.head_key, np.arange(len(cand_cases)))
    if math.isnan(whole.candidate) and math.isnan(whole.baseline):
        return [f"neither result's case records give {pair.head_key} (nothing to recompute it from)"], []
    problems = pair.mismatches(pair.head_key, whole.candidate, whole.baseline)
    if problems:
        return problems, []
    rows = [pair.headline_row(pair.head_key, "", "", whole, int(has_value.sum()))]
    for key, dim, group, sel in pair.case_groups():
        if has_value[sel].any():
            d = analyse(key, np.flatnonzero(sel))
            found = pair.mismatches(key, d.candidate, d.baseline)
            problems += found
            if not found:
                rows.append(pair.headline_row(key, dim, group, d, int(has_value[sel].sum())))
    return (problems, []) if problems else ([], rows)


def _delong_rows(pair: _Paired) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a DeLong comparison (AUROC): the headline, one row per finding and per case group;
    findings a result leaves out of its headline (:func:`headline_exclusions`) are left out."""
    left_out = set(headline_exclusions(pair.cand)) | set(headline_exclusions(pair.base))
    items = [i for i in pair.items if i not in left_out]
    y, cs, bs, problems = _delong_inputs(pair.cand_cases, pair.base_cases, items)
    if problems:
        return problems, []
    codes = pair.clusters()
    labelled = ~np.isnan(y)
    confidence = pair.resampling[2]

    def analyse(rows: np.ndarray | slice) -> PairedAUC:
        return paired_delong(y[rows], cs[rows], bs[rows], confidence, None if codes is None else codes[rows])

    def units(images: np.ndarray) -> int:
        """Resampling units (patients, or images) among the ``images`` mask."""
        return int(images.sum()) if codes is None else int(np.unique(codes[images]).size)

    def row(key: str, dim: str, group: str, d: PairedAUC, j: int | None, rows: np.ndarray) -> DeltaRow:
        if j is None:
            values = (d.overall_candidate, d.overall_baseline, d.overall, d.overall_low, d.overall_high)
            n, var, n_units = int(d.n_pairs.sum()), d.overall_variance, units(rows & labelled.any(axis=1))
            df = d.overall_df
        else:
            values = (d.candidate[j], d.baseline[j], d.value[j], d.low[j], d.high[j])
            n, var, n_units = int(d.n_pairs[j]), d.variance[j], units(rows & labelled[:, j])
            df = int(d.df[j])
        se = _f(math.sqrt(var)) if var >= 0 else None
        return _row(pair.unit, key, dim, group, values, n, n_units, se, df=df)

    every = np.ones(len(pair.cand_cases), dtype=bool)
    whole = analyse(slice(None))
    if whole.n_pairs.sum() == 0:
        return ["no paired images: no finding has a defined AUROC in both results"], []
    problems = pair.mismatches(pair.head_key, whole.overall_candidate, whole.overall_baseline)
    if problems:
        return problems, []
    out = [row(pair.head_key, "", "", whole, None, every)]
    if pair.cand.item_kind in pair.dimensions:
        kind = pair.cand.item_kind
        out += [
            row(f"{pair.head_key}/by_{kind}/{item}", kind, item, whole, j, every)
            for j, item in enumerate(items)
            if whole.n_pairs[j] > 0
        ]
    for key, dim, group, sel in pair.case_groups():
        d = analyse(sel)
        if d.n_pairs.sum() > 0:
            out.append(row(key, dim, group, d, None, sel))
    return [], out
