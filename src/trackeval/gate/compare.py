"""Paired comparison of two results of one benchmark: deltas with CIs per headline and breakdown group.

Both results must come from the same cases: the same benchmark unit, ground-truth digest (truth files +
manifest), protocol configuration digest and case-id set. Otherwise the comparison carries ``problems`` (a
clear reason each) and no rows: unpaired numbers are never compared.

Breakdown groups: the item dimension (``result.item_kind``, e.g. ``organ``: one column of the case x item
matrix) and case-group dimensions (``CaseRecord.groups``, e.g. ``modality``: a subset of cases, with the
headline statistic recomputed on it). The per-case metric is the last token of the primary metric
(``dsc`` for ``umd/dsc``; ``ap_at_10`` for ``mir3d/group/ap_at_10``).

Two methods (``BenchmarkComparison.method``):

* ``paired_bootstrap`` for metrics that are means of per-case values: :func:`trackeval.stats.paired.
  paired_bootstrap` (percentile CIs; the rows keep the bootstrap replicates for p-values);
* ``delong`` for AUROC (:data:`DELONG_METRICS`), which is not a per-case mean: the case records carry the
  per-image ``label`` and ``score`` of each finding (X-ray ``cls``), images are paired by case id, and
  :func:`trackeval.stats.paired.paired_delong` gives the AUC differences with Wald CIs; the rows keep the
  standard error for p-values. Labels that differ between the two results are a pairing problem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.results import BenchmarkResult, CaseRecord, item_matrix, metric_key, sha256_text
from trackeval.stats.bootstrap import group_seed
from trackeval.stats.paired import PairedAUC, PairedDelta, paired_bootstrap, paired_delong

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
    n_pairs: int
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
    return problems


def _per_case_name(cases: Sequence[CaseRecord], metric: str) -> str:
    """The name under which case records hold ``metric``: the full path (3D-MIR: ``group/ap_at_10``) when any
    record uses it, else its last token (UMD: ``dsc``)."""
    if any(metric in values for case in cases for values in case.metrics.values()):
        return metric
    return metric.rsplit("/", 1)[-1]


def _f(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _headline_row(benchmark: str, key: str, dim: str, group: str, d: PairedDelta | PairedAUC) -> DeltaRow:
    boot = isinstance(d, PairedDelta)
    return DeltaRow(
        benchmark=benchmark,
        key=key,
        dimension=dim,
        group=group,
        candidate=_f(d.overall_candidate),
        baseline=_f(d.overall_baseline),
        delta=_f(d.overall),
        ci95_low=_f(d.overall_low),
        ci95_high=_f(d.overall_high),
        n_pairs=int(d.n_pairs.sum()),
        std_error=None if boot else _f(math.sqrt(d.overall_variance)),
        samples=d.overall_samples.tolist() if boot else None,
    )


def _item_row(benchmark: str, key: str, dim: str, group: str, d: PairedDelta | PairedAUC, j: int) -> DeltaRow:
    boot = isinstance(d, PairedDelta)
    return DeltaRow(
        benchmark=benchmark,
        key=key,
        dimension=dim,
        group=group,
        candidate=_f(d.candidate[j]),
        baseline=_f(d.baseline[j]),
        delta=_f(d.value[j]),
        ci95_low=_f(d.low[j]),
        ci95_high=_f(d.high[j]),
        n_pairs=int(d.n_pairs[j]),
        std_error=None if boot else _f(math.sqrt(d.variance[j])),
        samples=d.samples[:, j].tolist() if boot else None,
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
) -> BenchmarkComparison:
    """Paired deltas of ``<unit>/<metric>`` overall and per breakdown group in ``dimensions``.

    Rows: the headline (mean over items of the per-item mean deltas; for AUROC the macro mean over findings of
    the AUC differences), then one row per item (when ``item_kind`` is a listed dimension) and one per value of
    each listed case-group dimension (the headline statistic recomputed on those cases). With the bootstrap,
    each row has its own paired case-level bootstrap (seed derived from ``seed`` and the row key, so rows are
    reproducible and independent of which other rows exist); with DeLong (AUROC) the rows are analytic and
    ``n_resamples``/``seed`` are unused.
    """
    bench = cand.unit
    head_key = metric_key(bench, *metric.split("/"))
    per_case = metric.rsplit("/", 1)[-1]
    problems = pairing_problems(cand, base, protocol)
    out = BenchmarkComparison(
        benchmark=bench,
        metric=head_key,
        method="delong" if per_case in DELONG_METRICS else "paired_bootstrap",
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
    analyse: Callable[[str, np.ndarray | slice], PairedDelta | PairedAUC]
    if out.method == "delong":
        y, cs, bs, out.problems = _delong_inputs(cand_cases, base_cases, items)
        if out.problems:
            return out

        def analyse(key: str, rows: np.ndarray | slice) -> PairedAUC:
            return paired_delong(y[rows], cs[rows], bs[rows], confidence)

    else:
        name = _per_case_name(cand_cases, metric)
        cm, bm = item_matrix(cand_cases, items, name), item_matrix(base_cases, items, name)

        def analyse(key: str, rows: np.ndarray | slice) -> PairedDelta:
            return paired_bootstrap(cm[rows], bm[rows], n_resamples, group_seed(seed, key), confidence)

    whole = analyse(head_key, slice(None))
    if whole.n_pairs.sum() == 0:
        out.problems = [f"no paired cases: no case has a {per_case} value in both results"]
        return out
    out.rows.append(_headline_row(bench, head_key, "", "", whole))
    if cand.item_kind in dimensions:
        for j, item in enumerate(items):
            if whole.n_pairs[j] > 0:
                key = f"{head_key}/by_{cand.item_kind}/{item}"
                out.rows.append(_item_row(bench, key, cand.item_kind, item, whole, j))
    for dim in dimensions:
        if dim == cand.item_kind and cand.item_kind in dimensions:
            continue  # already one row per item (3D-MIR: region is both the item and a case group)
        values = sorted({c.groups[dim] for c in cand_cases if dim in c.groups})
        for value in values:
            rows = np.array([c.groups.get(dim) == value for c in cand_cases])
            key = f"{head_key}/by_{dim}/{value}"
            d = analyse(key, rows)
            if d.n_pairs.sum() > 0:
                out.rows.append(_headline_row(bench, key, dim, value, d))
    return out
