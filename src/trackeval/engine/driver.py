"""The evaluation driver every benchmark adapter ends in: scored cases in, a :class:`BenchmarkResult` out.

An adapter does what is specific to its benchmark: it loads and validates its inputs, scores one case (in a
worker, returning a :class:`Scored`: the case record with the digests of the files it read) and builds its
aggregates. The driver does the rest, the same way for every unit:

* :func:`score_cases`: every case through the engine's executor (:func:`~trackeval.engine.executors.map_cases`),
  the case cache's warnings logged once;
* :func:`case_digests`: the ground-truth and predictions digests joined case by case (``<case_id>:<digest>``
  lines, in case order, after the adapter's index lines);
* :func:`finish`: the :class:`Evaluation` an adapter hands over (records, aggregates, digests, counts, warnings)
  as a :class:`BenchmarkResult` (:func:`trackeval.results.build_result`).

Units that score a whole file at once (3D-MIR, the X-ray classification, retrieval, localisation and report tasks)
digest their input files themselves and use :func:`finish` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trackeval.case_table import CaseTable
from trackeval.config import EngineConfig
from trackeval.engine.cache import log_cache_warnings
from trackeval.engine.executors import map_cases
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, build_result, sha256_text

__all__ = ["Evaluation", "Scored", "case_digests", "finish", "score_cases"]

_Job = TypeVar("_Job")


@dataclass(frozen=True)
class Scored:
    """One scored case: its record and the sha256 digests of the truth and prediction it was scored from
    (``"missing"`` for a missing prediction); ``cache_warnings``: what the case cache has to say about it, logged
    once by the calling process (:func:`~trackeval.engine.cache.log_cache_warnings`)."""

    record: CaseRecord
    truth_digest: str
    pred_digest: str
    cache_warnings: tuple[str, ...] = ()


@dataclass
class Evaluation:
    """What an adapter hands to :func:`finish`.

    ``params``: protocol facts decided at run time (e.g. where the operating point was chosen), which the adapter
    may log next to its config in results.json. ``formats``: the resolved input layouts
    (:func:`trackeval.io.layouts.choose`), e.g. ``{"ground_truth": "chexpert", "predictions": "generic"}``,
    recorded by :func:`finish` as ``config.format`` (nothing when empty).
    """

    #: the case records, or their columns (a unit with many cases builds the table directly)
    records: list[CaseRecord] | CaseTable
    aggregates: dict[str, MetricSummary]
    item_kind: str
    ground_truth_digest: str
    predictions_digest: str
    summary: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)


def score_cases(
    score: Callable[[_Job], Scored], jobs: Sequence[_Job], engine: EngineConfig, what: str, preload: Sequence[str] = ()
) -> list[Scored]:
    """``score`` of every job, in job order, on the configured executor (``what`` names the cases in progress and
    error messages: ``"UMD cases"``; ``preload``: see :func:`~trackeval.engine.executors.map_cases`); the cache
    warnings of every case are logged once."""
    scored = map_cases(score, jobs, engine, what, preload)
    log_cache_warnings(s.cache_warnings for s in scored)
    return scored


def case_digests(scored: Sequence[Scored], *truth_index: str) -> tuple[str, str]:
    """``(ground-truth digest, predictions digest)`` of scored cases: sha256 over the ``truth_index`` lines (the
    adapter's manifest or index, e.g. ``"manifest:<sha256>"``) and one ``<case_id>:<digest>`` line per case."""
    truth = sha256_text(*truth_index, *(f"{s.record.case_id}:{s.truth_digest}" for s in scored))
    predictions = sha256_text(*(f"{s.record.case_id}:{s.pred_digest}" for s in scored))
    return truth, predictions


def finish(
    benchmark: str, evaluation: Evaluation, *, config: dict[str, Any], model: dict[str, str] | None, task: str = ""
) -> BenchmarkResult:
    """The :class:`BenchmarkResult` of ``evaluation``: ``config`` holds the sections that determine the numbers,
    ``model`` the evaluated model's ``name`` / ``version``, ``task`` the task of a multi-task benchmark."""
    if evaluation.formats:
        config = {**config, "format": dict(evaluation.formats)}
    return build_result(
        benchmark,
        task=task,
        model=model,
        config=config,
        ground_truth_digest=evaluation.ground_truth_digest,
        predictions_digest=evaluation.predictions_digest,
        summary=evaluation.summary,
        warnings=evaluation.warnings,
        cases=evaluation.records,
        aggregates=evaluation.aggregates,
        item_kind=evaluation.item_kind,
    )
