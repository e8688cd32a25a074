"""Map a per-case scoring function over cases on an executor, with a progress bar on stderr.

Workers read their own files and return small records; results come back in input order whatever the
executor, so outputs are identical across executors and worker counts.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
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


def _init_worker() -> None:
    """One thread per worker process: the pool already uses every core."""
    import torch

    torch.set_num_threads(1)


def default_workers(config: EngineConfig) -> int:
    """``config.workers`` or the number of usable cores."""
    return config.workers or len(os.sched_getaffinity(0))


def map_cases(fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, description: str) -> list[R]:
    """``[fn(item) for item in items]`` on the configured executor, in input order.

    The first exception raised by ``fn`` stops the run (pending cases are cancelled) and propagates.
    ``processes`` falls back to in-process execution when there is one worker or one item.
    """
    workers = min(default_workers(config), len(items))
    progress, task = _progress(len(items), description)
    with progress:
        if config.executor == "local" or workers <= 1:
            out = []
            for item in items:
                out.append(fn(item))
                progress.advance(task)
            return out
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
            futures: list[Future[R]] = [pool.submit(fn, item) for item in items]
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                progress.advance(task, len(done))
                for f in done:
                    if f.exception() is not None:
                        for p in pending:
                            p.cancel()
                        raise f.exception()  # type: ignore[misc]
            return [f.result() for f in futures]
