"""Shared configuration building blocks: frozen, strict sections, the engine/bootstrap sections and the value
types every section uses, so that a value no kernel can compute with is a one-line config error naming the field:

* integers fit numpy's int64 (:data:`INT64_MAX`): a YAML ``99999999999999999999`` is refused, not overflowed;
* seeds are integers in ``[0, INT64_MAX]`` (numpy's generators refuse negative seeds);
* floats are finite (:data:`FiniteFloat`): YAML ``.nan``/``.inf`` and ``1e400`` are refused;
* bootstrap resamples are at most :data:`MAX_RESAMPLES` (their statistics are held in memory);
* lists that a protocol needs (cut-offs, prompt types) are non-empty and without repeats (:func:`distinct`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

#: a metric-key token; test with ``KEY_TOKEN.fullmatch`` (``\Z``, not ``$``, which also matches before a trailing
#: newline: ``"liver\n"`` is not a token)
KEY_TOKEN = re.compile(r"^[a-z0-9_]+\Z")

#: the largest integer a config value may hold (numpy int64, what every kernel computes with)
INT64_MAX = 2**63 - 1
#: the most bootstrap resamples (``bootstrap.n_resamples``, ``gate.n_resamples``): a resample matrix of
#: ``n_resamples x n_metrics`` floats is held in memory
MAX_RESAMPLES = 1_000_000

#: an integer in ``[1, INT64_MAX]``
PositiveInt = Annotated[int, Field(gt=0, le=INT64_MAX)]
#: an integer in ``[0, INT64_MAX]``
NonNegativeInt = Annotated[int, Field(ge=0, le=INT64_MAX)]
#: a random seed: an integer in ``[0, INT64_MAX]``
Seed = NonNegativeInt
#: a finite float (no NaN, no infinity, nothing beyond the float range)
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
#: a number of bootstrap resamples in ``[1, MAX_RESAMPLES]``
Resamples = Annotated[int, Field(gt=0, le=MAX_RESAMPLES)]

T = TypeVar("T")


def distinct(values: Sequence[T], what: str) -> Sequence[T]:
    """``values`` when non-empty and without repeats; ``ValueError`` naming ``what`` otherwise (a field validator
    turns it into a config error naming the field)."""
    if not values:
        raise ValueError(f"{what} must not be empty")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat a value: {list(values)}")
    return values


class Section(BaseModel):
    """A config section: unknown keys are errors (typos never pass silently); values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BootstrapConfig(Section):
    """The bootstrap behind every aggregate's CI (and the gate's paired deltas, which resample the same unit).

    ``cluster``: the resampling unit: ``subject_id`` draws a subject's cases together (UMD's PET and CT scans of
    one subject; every other format's case records carry their patient or study id there, else the case id), ``case``
    draws cases independently. ``interval``: ``expanded_percentile`` (default; small-sample corrected, see
    :mod:`trackeval.stats.bootstrap`) or the plain ``percentile`` interval. Both are recorded in results.json, and
    two results pair in the gate only when they agree.
    """

    n_resamples: Resamples = 1000
    seed: Seed = 0
    confidence: FiniteFloat = Field(0.95, gt=0.0, lt=1.0)
    cluster: Literal["subject_id", "case"] = "subject_id"
    interval: Literal["expanded_percentile", "percentile"] = "expanded_percentile"


class EngineConfig(Section):
    """Where per-case scoring runs, and the per-case cache.

    ``executor``: ``local`` (in-process), ``processes`` (a process pool, one worker per core unless
    ``workers`` is set) or ``dask`` (a ``dask.distributed`` LocalCluster with ``workers`` workers, or the
    existing cluster at ``scheduler``, e.g. ``tcp://host:8786`` from dask-jobqueue or Kubernetes; connecting
    gives up after ``scheduler_timeout_s`` seconds).
    ``start_method``: how ``processes`` starts its workers; ``auto`` forks the calling process on Linux when that
    is safe (one thread, no torch loaded) and uses a fork server otherwise (see :mod:`trackeval.engine.pool`).
    ``cache``: reuse per-case results keyed by the case's identity, its input digests, the protocol config and the
    scoring code's identity, each entry verified on read (``--no-cache`` turns it off; see
    :mod:`trackeval.engine.cache`);
    ``cache_dir``: where (relative paths are relative to the working directory).
    None of these change a number: they are not part of results.json.
    """

    executor: Literal["local", "processes", "dask"] = "processes"
    workers: PositiveInt | None = None
    scheduler: str | None = None
    scheduler_timeout_s: FiniteFloat = Field(10.0, gt=0.0)
    start_method: Literal["auto", "fork", "forkserver", "spawn"] = "auto"
    cache: bool = True
    cache_dir: str = ".trackeval-cache"
