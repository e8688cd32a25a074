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
headlines recomputed on it). The per-case metric is the last token of the primary metric (``dsc`` for
``umd/dsc``; ``ap_at_10`` for ``mir3d/group/ap_at_10``).

Two methods (``BenchmarkComparison.method``):

* ``paired_bootstrap`` for metrics whose headline is a mean of per-case values (intervals: the results'
  ``bootstrap.interval``; the rows keep the replicates for p-values), and for corpus metrics (``reduction=
  "corpus"``: mAP, corpus BLEU), whose headline the unit's own ``corpus`` function recomputes from the case
  records under the case weights of every resample (:func:`trackeval.stats.paired.paired_corpus`; the headline
  and case-group rows, no item rows);
* ``delong`` for AUROC (:data:`DELONG_METRICS`), which is not a per-case mean: the case records carry the
  per-image ``label`` and ``score`` of each finding (X-ray ``cls``), images are paired by case id, and
  :func:`trackeval.stats.paired.paired_delong` gives the AUC differences with Wald CIs; the rows keep the
  standard error for p-values. Labels that differ between the two results are a pairing problem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.results import BenchmarkResult, CaseRecord, item_matrix, metric_key, sha256_text
from trackeval.spec import CorpusHeadline
from trackeval.stats.bootstrap import cluster_codes, group_seed
from trackeval.stats.paired import (
    PairedAUC,
    PairedHeadline,
    Reduction,
    paired_corpus,
    paired_delong,
    paired_headlines,
)

#: Per-case metric tokens compared with DeLong's test on per-image labels and scores instead of a bootstrap.
DELONG_METRICS = frozenset({"auroc"})


class DeltaRow(BaseModel):
    """One paired delta (candidate - baseline). ``dimension``/``group`` are empty for the headline."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
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
    #: resampling units (clusters) behind the interval, which the small-sample correction of p-values uses
    n_units: int = 0
    #: DeLong standard error of ``delta`` (method ``delong``; None for the bootstrap or an undefined variance)
    std_error: float | None = None
    #: bootstrap replicates of ``delta``, kept in memory for p-values; never serialised
    samples: list[float] | None = Field(default=None, exclude=True, repr=False)


class BenchmarkComparison(BaseModel):
    """Paired comparison of one benchmark. ``problems`` non-empty -> the results cannot be paired."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    metric: str
    method: Literal["paired_bootstrap", "delong"] = "paired_bootstrap"
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
    values = {}
    for path in sorted(fields):
        node: object = result.config
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        values[path] = node
    return sha256_text(json.dumps(values, sort_keys=True))


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
        which = "" if protocol is None else f" on the fields that affect the compared metric ({', '.join(protocol)})"
        problems.append(f"protocol config differs{which} ({a[:12]} vs {b[:12]}); re-evaluate with the same config")
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


def _per_case_name(cases: Sequence[CaseRecord], metric: str) -> str:
    """The name under which case records hold ``metric``: the full path (3D-MIR: ``group/ap_at_10``) when any
    record uses it, else its last token (UMD: ``dsc``)."""
    if any(metric in values for case in cases for values in case.metrics.values()):
        return metric
    return metric.rsplit("/", 1)[-1]


def _f(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _row(
    benchmark: str,
    key: str,
    dim: str,
    group: str,
    values: tuple[float, float, float, float, float],
    n_pairs: int,
    n_units: int,
    std_error: float | None = None,
    samples: np.ndarray | None = None,
) -> DeltaRow:
    cand, base, delta, low, high = (_f(v) for v in values)
    return DeltaRow(
        benchmark=benchmark,
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
    if (math.isnan(value) and math.isnan(recomputed)) or math.isclose(value, recomputed, rel_tol=1e-9, abs_tol=1e-12):
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
    metric: str,
    dimensions: Sequence[str],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    labels: tuple[str, str] = ("candidate", "baseline"),
    protocol: Sequence[str] | None = None,
    reduction: Reduction | Literal["corpus"] = "item_mean",
    best: float = 1.0,
    corpus: CorpusHeadline | None = None,
) -> BenchmarkComparison:
    """Deltas of ``<unit>/<metric>`` overall and per breakdown group in ``dimensions`` (module docstring).

    Rows: the headline, then one row per item (when ``item_kind`` is a listed dimension) and one per value of
    each listed case-group dimension (both headlines recomputed on those cases). With the bootstrap, each row has
    its own resamples of the results' clusters (seed derived from ``seed`` and the row key, so rows are
    reproducible and independent of which other rows exist), the item rows share the headline's; with DeLong
    (AUROC) the rows are analytic and ``n_resamples``/``seed`` are unused. ``reduction``/``best``: the unit's
    headline reduction and the metric's best value (:class:`trackeval.spec.PrimaryMetric`); ``corpus``: the
    unit's corpus headline function, which ``reduction="corpus"`` recomputes the headline with (rows: the
    headline and the case groups, no item rows).
    """
    bench = cand.unit
    head_key = metric_key(bench, *metric.split("/"))
    per_case = metric.rsplit("/", 1)[-1]
    problems = pairing_problems(cand, base, protocol)
    cluster, interval = cand.resampling
    out = BenchmarkComparison(
        benchmark=bench,
        metric=head_key,
        method="delong" if per_case in DELONG_METRICS else "paired_bootstrap",
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
    cand_cases = sorted(cand.cases, key=lambda c: c.case_id)
    base_by_id = {c.case_id: c for c in base.cases}
    base_cases = [base_by_id[c.case_id] for c in cand_cases]
    items = sorted({i for c in cand_cases for i in c.metrics} | {i for c in base_cases for i in c.metrics})
    if out.method == "delong":
        out.problems, out.rows = _delong_rows(
            cand, base, cand_cases, base_cases, items, head_key, dimensions, confidence
        )
        return out
    if reduction == "corpus":
        out.problems, out.rows = _corpus_rows(
            cand, base, cand_cases, base_cases, head_key, dimensions, corpus, (n_resamples, seed, confidence)
        )
        return out
    name = _per_case_name(cand_cases, metric)
    cm, bm = item_matrix(cand_cases, items, name), item_matrix(base_cases, items, name)
    codes = cluster_codes([c.subject_id for c in cand_cases]) if cluster == "subject_id" else None
    has_value = ~(np.isnan(cm) & np.isnan(bm))

    def analyse(key: str, rows: np.ndarray | slice) -> PairedHeadline:
        return paired_headlines(
            cm[rows],
            bm[rows],
            reduction=reduction,
            best=best,
            n_resamples=n_resamples,
            seed=group_seed(seed, key),
            confidence=confidence,
            clusters=None if codes is None else codes[rows],
            method=interval,
        )

    def verified(key: str, cand_value: float, base_value: float) -> bool:
        found = [
            _stored_mismatch(cand, key, cand_value, "candidate"),
            _stored_mismatch(base, key, base_value, "baseline"),
        ]
        out.problems += [p for p in found if p]
        return not any(found)

    def reported_row(key: str, dim: str, group: str, d: PairedHeadline, n_pairs: int) -> DeltaRow:
        c, b = _reported(cand, key, d.candidate), _reported(base, key, d.baseline)
        return _row(bench, key, dim, group, (c, b, c - b, d.low, d.high), n_pairs, d.n_units, None, d.samples)

    whole = analyse(head_key, slice(None))
    if not has_value.any():
        out.problems = [f"no case has a {per_case} value in either result"]
        return out
    if not verified(head_key, whole.candidate, whole.baseline):
        return out
    out.rows.append(reported_row(head_key, "", "", whole, int(has_value.any(axis=1).sum())))
    if cand.item_kind in dimensions:
        for j, item in enumerate(items):
            if has_value[:, j].any():
                key = f"{head_key}/by_{cand.item_kind}/{item}"
                ic = _reported(cand, key, whole.item_candidate[j])
                ib = _reported(base, key, whole.item_baseline[j])
                delta = (best if math.isnan(ic) else ic) - (best if math.isnan(ib) else ib)
                d = (ic, ib, delta, whole.item_low[j], whole.item_high[j])
                if verified(key, whole.item_candidate[j], whole.item_baseline[j]):
                    n = int(has_value[:, j].sum())
                    out.rows.append(
                        _row(
                            bench,
                            key,
                            cand.item_kind,
                            item,
                            d,
                            n,
                            int(whole.item_units[j]),
                            None,
                            whole.item_samples[:, j],
                        )
                    )
    for dim in dimensions:
        if dim == cand.item_kind:
            continue  # already one row per item (3D-MIR: region is both the item and a case group)
        for value in sorted({c.groups[dim] for c in cand_cases if dim in c.groups}):
            rows = np.array([c.groups.get(dim) == value for c in cand_cases])
            key = f"{head_key}/by_{dim}/{value}"
            if has_value[rows].any():
                d = analyse(key, rows)
                if verified(key, d.candidate, d.baseline):
                    out.rows.append(reported_row(key, dim, value, d, int(has_value[rows].any(axis=1).sum())))
    if out.problems:
        out.rows = []
    return out


def headline_exclusions(result: BenchmarkResult) -> list[str]:
    """Items a result reports but leaves out of its headline and of the gate: X-ray findings with fewer than
    ``xray.cls.min_positives`` positives or negatives, listed in ``config.<benchmark>_run.
    findings_below_min_positives``."""
    run = result.config.get(f"{result.benchmark}_run", {})
    return [str(t) for t in run.get("findings_below_min_positives", [])] if isinstance(run, dict) else []


def _corpus_rows(
    cand: BenchmarkResult,
    base: BenchmarkResult,
    cand_cases: list[CaseRecord],
    base_cases: list[CaseRecord],
    head_key: str,
    dimensions: Sequence[str],
    corpus: CorpusHeadline | None,
    resampling: tuple[int, int, float],
) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a corpus comparison (``reduction="corpus"``): both headlines recomputed by the unit's
    ``corpus`` function on the same resamples of the cases (:func:`~trackeval.stats.paired.paired_corpus`),
    overall and per case group; ``resampling``: ``(n_resamples, seed, confidence)``."""
    if corpus is None:
        return [f"{head_key} is a corpus metric, but the policy carries no function to recompute it with"], []
    fn: CorpusHeadline = corpus
    bench = cand.unit
    n_resamples, seed, confidence = resampling
    cluster, interval = cand.resampling
    codes = cluster_codes([c.subject_id for c in cand_cases]) if cluster == "subject_id" else None
    has_value = np.array([bool(c.metrics or b.metrics) for c, b in zip(cand_cases, base_cases, strict=True)])
    problems: list[str] = []
    rows: list[DeltaRow] = []

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
            method=interval,
        )

    def add(key: str, dim: str, group: str, d: PairedHeadline, n_pairs: int) -> None:
        found = [
            _stored_mismatch(cand, key, d.candidate, "candidate"),
            _stored_mismatch(base, key, d.baseline, "baseline"),
        ]
        problems.extend(p for p in found if p)
        if not any(found):
            c, b = _reported(cand, key, d.candidate), _reported(base, key, d.baseline)
            rows.append(_row(bench, key, dim, group, (c, b, c - b, d.low, d.high), n_pairs, d.n_units, None, d.samples))

    whole = analyse(head_key, np.arange(len(cand_cases)))
    if math.isnan(whole.candidate) and math.isnan(whole.baseline):
        return [f"neither result's case records give {head_key} (nothing to recompute it from)"], []
    add(head_key, "", "", whole, int(has_value.sum()))
    if problems:
        return problems, []
    for dim in dimensions:
        if dim == cand.item_kind:
            continue  # a corpus function gives the headline only, no per-item values
        for value in sorted({c.groups[dim] for c in cand_cases if dim in c.groups}):
            sel = np.array([c.groups.get(dim) == value for c in cand_cases])
            if has_value[sel].any():
                key = f"{head_key}/by_{dim}/{value}"
                add(key, dim, value, analyse(key, np.flatnonzero(sel)), int(has_value[sel].sum()))
    return (problems, []) if problems else ([], rows)


def _delong_rows(
    cand: BenchmarkResult,
    base: BenchmarkResult,
    cand_cases: list[CaseRecord],
    base_cases: list[CaseRecord],
    items: list[str],
    head_key: str,
    dimensions: Sequence[str],
    confidence: float,
) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a DeLong comparison (AUROC): the headline, one row per finding and per case group."""
    bench = cand.unit
    left_out = set(headline_exclusions(cand)) | set(headline_exclusions(base))
    items = [i for i in items if i not in left_out]
    y, cs, bs, problems = _delong_inputs(cand_cases, base_cases, items)
    if problems:
        return problems, []

    codes = cluster_codes([c.subject_id for c in cand_cases]) if cand.resampling[0] == "subject_id" else None

    def analyse(rows: np.ndarray | slice) -> PairedAUC:
        return paired_delong(y[rows], cs[rows], bs[rows], confidence, None if codes is None else codes[rows])

    labelled = ~np.isnan(y)

    def units(images: np.ndarray) -> int:
        """Resampling units (patients, or images) among the ``images`` mask."""
        return int(images.sum()) if codes is None else int(np.unique(codes[images]).size)

    def row(key: str, dim: str, group: str, d: PairedAUC, j: int | None, rows: np.ndarray) -> DeltaRow:
        if j is None:
            values = (d.overall_candidate, d.overall_baseline, d.overall, d.overall_low, d.overall_high)
            n, var, n_units = int(d.n_pairs.sum()), d.overall_variance, units(rows & labelled.any(axis=1))
        else:
            values = (d.candidate[j], d.baseline[j], d.value[j], d.low[j], d.high[j])
            n, var, n_units = int(d.n_pairs[j]), d.variance[j], units(rows & labelled[:, j])
        return _row(bench, key, dim, group, values, n, n_units, _f(math.sqrt(var)) if var >= 0 else None)

    every = np.ones(len(cand_cases), dtype=bool)
    whole = analyse(slice(None))
    if whole.n_pairs.sum() == 0:
        return ["no paired images: no finding has a defined AUROC in both results"], []
    found = [
        _stored_mismatch(cand, head_key, whole.overall_candidate, "candidate"),
        _stored_mismatch(base, head_key, whole.overall_baseline, "baseline"),
    ]
    if any(found):
        return [p for p in found if p], []
    out = [row(head_key, "", "", whole, None, every)]
    if cand.item_kind in dimensions:
        out += [
            row(f"{head_key}/by_{cand.item_kind}/{item}", cand.item_kind, item, whole, j, every)
            for j, item in enumerate(items)
            if whole.n_pairs[j] > 0
        ]
    for dim in dimensions:
        if dim == cand.item_kind:
            continue
        for value in sorted({c.groups[dim] for c in cand_cases if dim in c.groups}):
            rows = np.array([c.groups.get(dim) == value for c in cand_cases])
            d = analyse(rows)
            if d.n_pairs.sum() > 0:
                out.append(row(f"{head_key}/by_{dim}/{value}", dim, value, d, None, rows))
    return [], out
