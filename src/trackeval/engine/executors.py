"""Map a per-case scoring function over cases on an executor (local, process pool or Dask), with a progress bar.

Workers read their own files and return small records; results come back in input order whatever the
executor, so outputs are identical across executors, worker counts and start methods.

How the process pool starts its workers (``engine.start_method``, default ``auto``), measured on the 6-case UMD
set by ``benchmarks/bench_e2e_umd.py``:

* ``fork`` (``auto`` on Linux when it is safe): each worker is a copy of the calling process, which has already
  imported the scoring code: ~0.002 CPU-s per worker and nothing else (``--workers 2``: 0.62-0.64x the wall
  time of one worker on 6 UMD cases before the tail threads below, where a fork server gave 0.71-0.75x).
  Forking is safe only while the caller runs a single thread (a lock held by another thread would stay held
  forever in the child) and has not loaded torch (its OpenMP pool does not survive a fork); the pool forks
  every worker before the progress bar starts its thread. macOS frameworks are not fork-safe, so ``auto``
  forks on Linux only.
* ``forkserver`` (``auto`` otherwise, where the platform has it): one fresh interpreter imports the scoring
  function's module and the main module's imports once (``set_forkserver_preload``, ~0.8 CPU-s) and forks the
  workers from that clean state (~0.006 CPU-s and ~40 MB each).
* ``spawn`` (everywhere): every worker re-imports everything (~0.4 CPU-s and ~60 MB each).

**The tail.** Cases are coarse (a UMD case is ~1 s), so at the end of a pool run workers run out of cases while
the last ones are still being scored. The last ``workers - 1`` cases may therefore use more threads
(:func:`tail_threads`): the case dispatched last up to ``workers``, the one before it one fewer, and so on; a
scoring function asks :func:`case_threads` and may score independent parts (UMD: organs) in that many threads.
The values never depend on it. On the 6-case UMD set this shortens a 2-worker run by ~0.3 s (the last case was
scored while the other worker idled): 0.57-0.58x the wall time of one worker, 0.62-0.64x without.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING, TypeVar

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
from trackeval.errors import ConfigError, TrackevalError

if TYPE_CHECKING:
    from distributed import LocalCluster

T = TypeVar("T")
R = TypeVar("R")

#: threads the case being scored in this process may use (see the module docstring); 1 outside a pool's tail
_case_threads = 1


def case_threads() -> int:
    """How many threads the case being scored may use: 1, or more for the last cases of a process-pool run."""
    return _case_threads


def tail_threads(n_items: int, workers: int) -> list[int]:
    """Thread budget per item of a pool run, in dispatch order: 1, except the last ``workers - 1`` items, which
    get one more thread per worker that will have no case left while they run (the last one ``workers``).

    >>> tail_threads(6, 2)
    [1, 1, 1, 1, 1, 2]
    >>> tail_threads(5, 4)
    [1, 1, 2, 3, 4]
    """
    return [min(workers, 1 + max(0, workers - (n_items - i))) for i in range(n_items)]


def _with_threads(fn: Callable[[T], R], item: T, threads: int) -> R:
    """``fn(item)`` in a pool worker, with :func:`case_threads` giving ``threads``."""
    global _case_threads
    _case_threads = threads
    try:
        return fn(item)
    finally:
        _case_threads = 1


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
    """One OpenMP/torch thread per worker process (the pool already uses every core); torch is not imported.

    Only libraries that read ``OMP_NUM_THREADS`` when they load later in the worker (torch, for kernels that
    need it) are limited; numpy, imported first, keeps the caller's BLAS thread count, because BLAS reductions
    such as ``np.dot`` split their sums by thread count and a case must give the same bits in a worker as in
    the calling process.
    """
    import numpy  # noqa: F401  (loaded before the variable is set: its BLAS keeps the caller's threads)

    os.environ["OMP_NUM_THREADS"] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    _one_malloc_arena()


def _one_malloc_arena() -> None:
    """Make glibc's malloc serve every thread of this worker from one arena (``mallopt(M_ARENA_MAX, 1)``).

    glibc gives each new thread an arena of its own, and memory freed in one arena is not reused by the others:
    a tail case scored in two threads (see the module docstring) peaked ~20 MiB higher than in one (247 vs 226
    MiB on the 6-case UMD set); with one arena it peaks as in one thread. A no-op without glibc.
    """
    try:
        ctypes.CDLL(None).mallopt(-8, 1)  # -8: M_ARENA_MAX
    except (OSError, AttributeError):  # no C library to load, or no mallopt (macOS, Windows)
        pass


def _main_imports() -> list[str]:
    """The modules ``__main__`` holds or took functions and classes from (``trackeval.cli`` for the console script).

    Every worker re-runs a main script to unpickle what it defines (multiprocessing's ``prepare``), and the fork
    server cannot preload the script itself (Python < 3.13 drops its path); with these modules preloaded, the
    re-run is a few dictionary look-ups instead of the imports.
    """
    names = set()
    for value in vars(sys.modules["__main__"]).values():
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name not in ("__main__", "__mp_main__", "builtins"):
            names.add(name)
    return sorted(names)


def fork_is_safe() -> bool:
    """Whether forking the calling process is safe: Linux, one running thread, torch not loaded."""
    return sys.platform.startswith("linux") and threading.active_count() == 1 and "torch" not in sys.modules


def start_method(requested: str = "auto") -> str:
    """The start method the process pool uses for ``engine.start_method`` (see the module docstring).

    Raises :class:`~trackeval.errors.ConfigError` for a method this platform does not have.
    """
    available = multiprocessing.get_all_start_methods()
    if requested == "auto":
        return "fork" if fork_is_safe() else "forkserver" if "forkserver" in available else "spawn"
    if requested not in available:
        raise ConfigError(
            f"engine.start_method={requested} is not available on this platform (available: {', '.join(available)})"
        )
    return requested


def pool_context(fn: Callable[..., object], requested: str = "auto") -> multiprocessing.context.BaseContext:
    """The multiprocessing context of the process pool: :func:`start_method`'s; a fork server preloads ``fn``'s
    module and :func:`_main_imports`."""
    ctx = multiprocessing.get_context(start_method(requested))
    if isinstance(ctx, multiprocessing.context.ForkServerContext):
        ctx.set_forkserver_preload([fn.__module__, *_main_imports()])
    return ctx


def default_workers(config: EngineConfig) -> int:
    """``config.workers`` or the number of usable cores."""
    return config.workers or len(os.sched_getaffinity(0))


def map_cases(fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, description: str) -> list[R]:
    """``[fn(item) for item in items]`` on the configured executor, in input order.

    The first exception raised by ``fn`` stops the run (pending cases are cancelled) and propagates.
    ``processes`` falls back to in-process execution when there is one worker or one item. ``dask``
    retries the cases of a worker that dies (``distributed``'s ``allowed-failures``), so a lost worker
    costs time, not results.
    """
    progress, task = _progress(len(items), description)
    if config.executor == "dask":
        with progress:
            return _map_dask(fn, items, config, lambda n: progress.advance(task, n))
    workers = min(default_workers(config), len(items))
    if config.executor == "local" or workers <= 1:
        with progress:
            out = []
            for item in items:
                out.append(fn(item))
                progress.advance(task)
            return out
    ctx = pool_context(fn, config.start_method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
        # the first submit starts the workers (all of them at once when forking): before the progress thread; a
        # forked worker's garbage collections skip the objects it inherits (none of them are copied for it)
        gc.freeze()
        try:
            budget = tail_threads(len(items), workers)
            futures: list[Future[R]] = [
                pool.submit(_with_threads, fn, item, threads) for item, threads in zip(items, budget, strict=True)
            ]
        finally:
            gc.unfreeze()
        with progress:
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


@contextlib.contextmanager
def local_cluster(n_workers: int) -> Iterator[LocalCluster]:
    """A ``dask.distributed`` LocalCluster on 127.0.0.1: ``n_workers`` processes of one thread, no dashboard.

    distributed's nanny exports ``MALLOC_TRIM_THRESHOLD_=65536`` into the worker processes (and, as a side
    effect, into this process's ``os.environ``, so every later subprocess inherits it): glibc then returns freed
    memory to the OS after nearly every array temporary, and the page faults made scoring 1.5x (UMD) to 4.3x
    (IMIS-sized 2D masks) slower than in-process (measured with benchmarks/bench_scale.py). The clusters
    trackeval starts leave it unset; an existing cluster (``--scheduler``) keeps its own settings.
    """
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        with LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
        ) as cluster:
            yield cluster


def _map_dask(
    fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, advance: Callable[[int], None]
) -> list[R]:
    """Run on a ``dask.distributed`` cluster: the one at ``config.scheduler`` or a new LocalCluster."""
    from distributed import Client, as_completed

    with contextlib.ExitStack() as stack:
        if config.scheduler:
            try:
                client = stack.enter_context(Client(config.scheduler, timeout=f"{config.scheduler_timeout_s}s"))
            except OSError as exc:
                raise TrackevalError(f"cannot reach the Dask scheduler at {config.scheduler}: {exc}") from exc
        else:
            cluster = stack.enter_context(local_cluster(default_workers(config)))
            client = stack.enter_context(Client(cluster))
        futures = client.map(fn, items, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[R | None] = [None] * len(items)
        try:
            for future in as_completed(futures):
                out[index[future.key]] = future.result()
                advance(1)
        except BaseException:
            client.cancel(futures)
            raise
        return out  # type: ignore[return-value]
