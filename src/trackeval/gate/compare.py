"""Paired comparison of two results of one benchmark: deltas with CIs per headline and breakdown group.

Both results must come from the same cases: the same benchmark unit, ground-truth digest (truth files +
manifest), protocol configuration digest, case-id set, resampling unit (``config.bootstrap.cluster``) and
subject of every case (:func:`~trackeval.gate.pairing.pairing_problems`). Otherwise the comparison carries
``problems`` (a clear reason each) and no rows: unpaired numbers are never compared.

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
(:attr:`UnitPolicy.per_case <trackeval.gate.policy.UnitPolicy.per_case>`: ``dsc`` for ``umd/dsc``;
``group/ap_at_10`` for ``mir3d/group/ap_at_10``).

What the comparison knows of the metric is what its unit declares (:class:`~trackeval.spec.MetricInfo`, as a
gate policy holds it: :class:`~trackeval.gate.policy.UnitPolicy`); its ``paired`` method picks one of two
methods (``BenchmarkComparison.method``), and a metric declared ``paired="none"`` is not compared (a problem):

* ``paired_bootstrap`` (:mod:`trackeval.gate.bootstrap_rows`) for metrics whose headline is a mean of per-case
  values (intervals: the results' ``bootstrap.interval``; the rows keep the replicates for p-values), and for
  corpus metrics (``reduction="corpus"``: mAP, corpus BLEU), whose headline the unit's own ``corpus`` function
  recomputes from the case records under the case weights of every resample
  (:func:`trackeval.stats.paired.paired_corpus`; the headline and case-group rows, no item rows);
* ``delong`` (:mod:`trackeval.gate.delong_rows`) for AUROC (``paired="delong"``), which is not a per-case mean:
  the case records carry the per-image ``label`` and ``score`` of each finding (X-ray ``cls``), images are
  paired by case id, and :func:`trackeval.stats.paired.paired_delong` gives the AUC differences with Wald CIs on
  a Student t reference (``reference="t"``); the rows keep the standard error and the degrees of freedom for
  p-values. Labels that differ between the two results are a pairing problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from trackeval.gate import display
from trackeval.gate.bootstrap_rows import corpus_rows, mean_rows
from trackeval.gate.delong_rows import delong_rows
from trackeval.gate.pairing import UNIT_AS_BENCHMARK, DeltaRow, Paired, pairing_problems, protocol_digest
from trackeval.gate.policy import Policy
from trackeval.results import BenchmarkResult, metric_key

if TYPE_CHECKING:
    import pandas as pd


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

    def row_records(self) -> list[dict[str, object]]:
        """Each row as ``{column: value}`` (:data:`~trackeval.gate.display.ROW_COLUMNS`: ``unit``, not the stored
        ``benchmark``; no bootstrap replicates)."""
        return [r.model_dump(by_alias=False, exclude={"samples"}) for r in self.rows]

    def to_frame(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame, one per paired delta (candidate - baseline): the headline first
        (``dimension`` and ``group`` empty), then each breakdown group; the columns
        :data:`~trackeval.gate.display.ROW_COLUMNS`, the values, deltas, bounds, ``std_error`` and ``df`` as
        float64 (NaN: none, e.g. no CI, or the bootstrap's se). No row when the results could not be paired
        (``frame.attrs["problems"]`` says why). ``frame.attrs`` also holds ``metric``, ``candidate`` and
        ``baseline`` (the labels) and ``method``. Imports pandas on first use."""
        out = display.frame(self.row_records(), display.ROW_COLUMNS, display.FLOAT_COLUMNS)
        out.attrs.update(
            metric=self.metric,
            candidate=self.candidate_label,
            baseline=self.baseline_label,
            method=self.method,
            problems=list(self.problems),
        )
        return out

    def _repr_html_(self) -> str:
        """The comparison as an HTML fragment (Jupyter's rich display; every value escaped)."""
        labels = (self.candidate_label, self.baseline_label)
        return display.comparison_html(self.metric, labels, self.n_cases, self.problems, self.row_records())


def compare_results(
    cand: BenchmarkResult,
    base: BenchmarkResult,
    policy: Policy,
    dimensions: Sequence[str],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    labels: tuple[str, str] = ("candidate", "baseline"),
    protocol: Sequence[str] | None = None,
) -> BenchmarkComparison:
    """Deltas of ``<unit>/<policy.metric>`` overall and per breakdown group in ``dimensions`` (module docstring).

    Rows: the headline, then one row per item (when ``item_kind`` is a listed dimension) and one per value of
    each listed case-group dimension (both headlines recomputed on those cases). With the bootstrap, each row has
    its own resamples of the results' clusters (seed derived from ``seed`` and the row key, so rows are
    reproducible and independent of which other rows exist), the item rows share the headline's; with DeLong
    (``policy.paired="delong"``) the rows are analytic and ``n_resamples``/``seed`` are unused. ``policy``: the
    unit's gate policy, which holds the metric's declaration (:class:`~trackeval.gate.policy.UnitPolicy`; or a
    recorded policy, :class:`~trackeval.gate.policy.PolicyRecord`, when a decision is re-derived);
    ``reduction="corpus"`` recomputes the headline with ``policy.corpus`` (rows: the headline and the case
    groups, no item rows). ``confidence``: the level of the
    intervals (0.95: 95%). A metric declared ``paired="none"`` gives one problem and no rows.
    """
    unit = cand.unit
    head_key = metric_key(unit, *policy.metric.split("/"))
    problems = pairing_problems(cand, base, protocol)
    if policy.paired == "none":
        problems.append(
            f"{head_key} cannot be gated: its unit declares no paired comparison for it (paired='none'); "
            "choose another primary metric (gate.primary_metrics)"
        )
    cluster, interval = cand.resampling
    out = BenchmarkComparison(
        unit=unit,
        metric=head_key,
        method="delong" if policy.paired == "delong" else "paired_bootstrap",
        reference="t" if policy.paired == "delong" else "",
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
    pair = Paired.of(cand, base, head_key, dimensions, (n_resamples, seed, confidence))
    if policy.paired == "delong":
        out.problems, out.rows = delong_rows(pair)
    elif policy.reduction == "corpus":
        out.problems, out.rows = corpus_rows(pair, policy.corpus)
    else:
        out.problems, out.rows = mean_rows(pair, policy)
    return out
