"""Shared configuration building blocks: frozen, strict sections and the engine/bootstrap sections."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

KEY_TOKEN = re.compile(r"^[a-z0-9_]+$")

PositiveInt = Annotated[int, Field(gt=0)]


class Section(BaseModel):
    """A config section: unknown keys are errors (typos never pass silently); values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BootstrapConfig(Section):
    """Case-level (patient-level) percentile bootstrap for every aggregate mean."""

    n_resamples: PositiveInt = 1000
    seed: int = 0
    confidence: float = Field(0.95, gt=0.0, lt=1.0)


class EngineConfig(Section):
    """Where per-case scoring runs, and the per-case cache.

    ``executor``: ``local`` (in-process), ``processes`` (a process pool, one worker per core unless
    ``workers`` is set) or ``dask`` (a ``dask.distributed`` LocalCluster with ``workers`` workers, or the
    existing cluster at ``scheduler``, e.g. ``tcp://host:8786`` from dask-jobqueue or Kubernetes; connecting
    gives up after ``scheduler_timeout_s`` seconds).
    ``cache``: reuse per-case results keyed by input digests + metric config (``--no-cache`` turns it off);
    ``cache_dir``: where (relative paths are relative to the working directory).
    None of these change a number: they are not part of results.json.
    """

    executor: Literal["local", "processes", "dask"] = "processes"
    workers: PositiveInt | None = None
    scheduler: str | None = None
    scheduler_timeout_s: float = Field(10.0, gt=0.0)
    cache: bool = True
    cache_dir: str = ".trackeval-cache"
