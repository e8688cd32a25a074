"""Map a per-case scoring function over cases on an executor (local, process pool or Dask), with a progress bar.

Workers read their own files and return small records; results come back in input order whatever the
executor, so outputs are identical across executors, worker counts and start methods.

This module is the front: :func:`map_cases` runs the cases in this process, or hands them to the process pool
(:mod:`trackeval.engine.pool`: how it starts its workers, ``engine.start_method``, and the threads of the last
cases, :func:`case_threads`) or to Dask (:mod:`trackeval.engine.dask_cluster`); a worker that dies is reported
by :mod:`trackeval.engine.workers`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from trackeval.config import EngineConfig
from trackeval.engine.dask_cluster import DASK_ALLOWED_FAILURES, local_cluster, map_dask
from trackeval.engine.pool import case_threads, map_pool, start_method
from trackeval.engine.workers import default_workers

__all__ = ["DASK_ALLOWED_FAILURES", "case_threads", "local_cluster", "map_cases", "start_method"]

T = TypeVar("T")
R = TypeVar("R")


def _progress(total: int, description: str) -> tuple[Progress, int]:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    return progress, progress.add_task(description, total=total)


def map_cases(
    fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, description: str, preload: Sequence[str] = ()
) -> list[R]:
    """``[fn(item) for item in items]`` on the configured executor, in input order.

    ``preload``: modules that ``fn`` imports on its first item and that a process pool loads once before it starts
    its workers (:func:`~trackeval.engine.pool.pool_context`); in-process and on Dask they load where they are used.

    The first exception raised by ``fn`` stops the run (pending cases are cancelled) and propagates.
    ``processes`` falls back to in-process execution when there is one worker or one item. ``dask``
    retries the cases of a worker that dies (``distributed``'s ``allowed-failures``, :data:`DASK_ALLOWED_FAILURES`
    on a cluster trackeval starts), so a lost worker costs time, not results. A worker that dies for good (a pool
    worker killed, e.g. by the out-of-memory killer; a case that kills every Dask worker that tries it) raises
    :class:`~trackeval.errors.WorkerDied` naming the case(s) it was scoring, how it died and what to try. The
    progress bar counts the cases that were scored, never the failed ones.
    """
    progress, task = _progress(len(items), description)
    advance = functools.partial(progress.advance, task)
    if config.executor == "dask":
        with progress:
            return map_dask(fn, items, config, advance)
    workers = min(default_workers(config), len(items))
    if config.executor == "local" or workers <= 1:
        with progress:
            return _map_local(fn, items, advance)
    return map_pool(fn, items, config, workers, progress, advance, preload)


def _map_local(fn: Callable[[T], R], items: Sequence[T], advance: Callable[[int], None]) -> list[R]:
    """``[fn(item) for item in items]`` in this process, advancing the progress bar by one after each item."""
    out = []
    for item in items:
        out.append(fn(item))
        advance(1)
    return out
