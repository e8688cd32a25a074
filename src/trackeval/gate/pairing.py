"""Two results of one benchmark as a pair: the checks that they are evaluations of the same cases under the same
protocol, and what every comparison method shares (the paired case records, the stored aggregates each side
reports, the rows of deltas).

Both results must come from the same cases: the same benchmark unit, ground-truth digest (truth files +
manifest), protocol configuration digest, case-id set, resampling unit (``config.bootstrap.cluster``) and
subject of every case (:func:`pairing_problems`). Otherwise a comparison carries ``problems`` (a clear reason
each) and no rows: unpaired numbers are never compared (:mod:`trackeval.gate.compare`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.case_table import CaseTable
from trackeval.results import BenchmarkResult, config_value, sha256_text
from trackeval.stats.bootstrap import cluster_codes
from trackeval.stats.paired import PairedHeadline
from trackeval.stats.verify import close

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


def protocol_digest(result: BenchmarkResult, fields: Sequence[str] | None) -> str:
    """sha256 of the config values that affect a metric: ``fields`` are dotted paths into ``result.config``
    (``umd.labels``; a path that is absent counts as null). ``None``: the whole config (``config_digest``)."""
    if fields is None:
        return result.config_digest
    values = {field: protocol_value(result.config, field) for field in sorted(fields)}
    return sha256_text(json.dumps(values, sort_keys=True))


def protocol_value(config: Mapping[str, Any], field: str) -> object:
    """The value of one protocol ``field`` in a result's ``config``: a dotted path (``umd.labels``; absent: None),
    or ``path=absent`` for a setting added after results were first written: a result that predates it (the path
    absent) is read as ``absent``, the only behaviour there was (``xray.seg.empty_both=nan``)."""
    path, declared, absent = field.partition("=")
    value = config_value(config, path)
    return absent if value is None and declared else value


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
        paths = [f for f in protocol if protocol_value(cand, f) != protocol_value(base, f)]
    what = "; ".join(
        f"{p.partition('=')[0]} is {_shown(protocol_value(cand, p))} in the candidate, "
        f"{_shown(protocol_value(base, p))} in the baseline"
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
    cand_ids, base_ids = cand.cases.field("case_id"), base.cases.field("case_id")
    ca, ba = set(cand_ids), set(base_ids)
    if ca != ba:
        only_c, only_b = sorted(ca - ba), sorted(ba - ca)
        problems.append(
            f"case sets differ: {len(only_c)} case(s) only in the candidate {only_c[:5]}, "
            f"{len(only_b)} only in the baseline {only_b[:5]}"
        )
    elif cand.resampling[0] == "subject_id":
        subject = dict(zip(base_ids, base.cases.field("subject_id"), strict=True))
        cand_subjects = cand.cases.field("subject_id")
        moved = sorted(c for c, s in zip(cand_ids, cand_subjects, strict=True) if subject[c] != s)
        if moved:
            problems.append(f"case {moved[0]!r} belongs to another subject in the two results ({len(moved)} case(s))")
    if cand.resampling != base.resampling:
        problems.append(
            f"bootstrap resampling differs (cluster, interval): {cand.resampling} vs {base.resampling}; "
            "re-evaluate both versions with the same bootstrap config"
        )
    return problems


def or_none(x: float) -> float | None:
    """``x`` as a float, None for NaN (a row's missing value)."""
    return None if np.isnan(x) else float(x)


def delta_row(
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
    """The row of ``key``: ``values`` are (candidate, baseline, delta, CI low, CI high), NaN meaning none."""
    cand, base, delta, low, high = (or_none(v) for v in values)
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


def reported(result: BenchmarkResult, key: str, recomputed: float) -> float:
    """The value ``result`` reports for ``key`` (its stored aggregate, once :func:`_stored_mismatch` found it equal
    to ``recomputed`` up to the last bits), else ``recomputed``."""
    stored = result.aggregates.get(key)
    if stored is None:
        return recomputed
    return math.nan if stored.value is None else stored.value


@dataclass(frozen=True)
class Paired:
    """Two paired results (:func:`pairing_problems` found none) and what every method shares: both sides' case
    records in case-id order (row ``i`` of each is one case), the items of either, the compared headline key,
    the breakdown dimensions and ``(n_resamples, seed, confidence)``."""

    cand: BenchmarkResult
    base: BenchmarkResult
    cand_cases: CaseTable
    base_cases: CaseTable
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
    ) -> Paired:
        cand_ids = cand.cases.field("case_id")
        order = sorted(range(len(cand_ids)), key=cand_ids.__getitem__)
        base_index = {case_id: i for i, case_id in enumerate(base.cases.field("case_id"))}
        cand_cases = cand.cases.take(order)
        base_cases = base.cases.take([base_index[cand_ids[i]] for i in order])
        items = sorted(set(cand_cases.sorted_items()) | set(base_cases.sorted_items()))
        return cls(cand, base, cand_cases, base_cases, items, head_key, dimensions, resampling)

    @property
    def unit(self) -> str:
        return self.cand.unit

    def clusters(self) -> np.ndarray | None:
        """The cluster code of each row when the results resample subjects, else None (cases resampled alone)."""
        if self.cand.resampling[0] != "subject_id":
            return None
        return cluster_codes(self.cand_cases.field("subject_id"))

    def case_groups(self) -> Iterator[tuple[str, str, str, np.ndarray]]:
        """``(key, dimension, group, row mask)`` of every case group of the listed dimensions, groups sorted;
        the item dimension is left out: it has one row per item (3D-MIR: ``region`` is both) or, for a corpus
        function that gives the headline only, none."""
        for dim in self.dimensions:
            if dim == self.cand.item_kind:
                continue
            values = np.asarray(self.cand_cases.field(dim), dtype=object)
            for group in sorted({v for v in values.tolist() if v is not None}):
                rows = values == group
                yield f"{self.head_key}/by_{dim}/{group}", dim, group, rows

    def mismatches(self, key: str, cand_value: float, base_value: float) -> list[str]:
        """The problems of either side whose stored ``key`` is not the value recomputed from its case records."""
        found = [
            _stored_mismatch(self.cand, key, cand_value, "candidate"),
            _stored_mismatch(self.base, key, base_value, "baseline"),
        ]
        return [p for p in found if p]

    def headline_row(self, key: str, dim: str, group: str, d: PairedHeadline, n_pairs: int) -> DeltaRow:
        """The row of a resampled headline ``d``: each side's reported value (:func:`reported`) and their delta."""
        c, b = reported(self.cand, key, d.candidate), reported(self.base, key, d.baseline)
        values = (c, b, c - b, d.low, d.high)
        return delta_row(self.unit, key, dim, group, values, n_pairs, d.n_units, None, d.samples, None, d.n_effective)
