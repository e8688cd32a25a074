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
import functools
import gc
import importlib
import logging
import multiprocessing
import multiprocessing.context
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

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
from trackeval.errors import ConfigError, TrackevalError, WorkerDied

if TYPE_CHECKING:
    from distributed import LocalCluster

T = TypeVar("T")
R = TypeVar("R")

#: threads the case being scored in this process may use (see the module docstring); 1 outside a pool's tail
_case_threads = 1
#: in a pool worker: the run's shared :class:`_CaseTable` arrays (started, finished, peak_kib), from the initializer
_table: tuple[Any, Any, Any] | None = None
#: how often a LocalCluster that trackeval starts retries a case whose worker died (then KilledWorker)
DASK_ALLOWED_FAILURES = 2


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


def _with_threads(fn: Callable[[T], R], item: T, threads: int, index: int = -1) -> R:
    """``fn(item)`` in a pool worker, with :func:`case_threads` giving ``threads``; records in the run's
    :class:`_CaseTable` that this process started item ``index`` and, when done, its peak memory."""
    global _case_threads
    _case_threads = threads
    table = _table if index >= 0 else None
    if table is not None:
        table[0][index] = os.getpid()
    try:
        return fn(item)
    finally:
        _case_threads = 1
        if table is not None:
            table[2][index] = _peak_kib()
            table[1][index] = 1


def _peak_kib() -> int:
    """This process's peak resident memory in KiB (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


class _CaseTable:
    """Shared memory a process pool's workers write as they score (item ``i``: the pid that started it, 1 once
    it finished, the worker's peak memory then): when a worker dies, it says which case(s) it was scoring."""

    def __init__(self, ctx: multiprocessing.context.BaseContext, n: int) -> None:
        self.arrays = (ctx.Array("q", n, lock=False), ctx.Array("b", n, lock=False), ctx.Array("q", n, lock=False))

    def in_progress(self, pids: set[int]) -> list[int]:
        """The items started by one of ``pids`` and not finished, in input order."""
        started, finished, _ = self.arrays
        return [i for i, pid in enumerate(started) if pid in pids and not finished[i]]

    def peak_mib(self) -> float:
        """The highest worker peak memory over the finished items (MiB; 0 when none finished)."""
        return max(self.arrays[2], default=0) / 1024


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


def _init_worker(table: tuple[Any, Any, Any] | None = None) -> None:
    """One OpenMP/torch thread per worker process (the pool already uses every core); torch is not imported.
    ``table``: the run's :class:`_CaseTable` arrays, which :func:`_with_threads` writes.

    Only libraries that read ``OMP_NUM_THREADS`` when they load later in the worker (torch, for kernels that
    need it) are limited; numpy, imported first, keeps the caller's BLAS thread count, because BLAS reductions
    such as ``np.dot`` split their sums by thread count and a case must give the same bits in a worker as in
    the calling process.
    """
    import numpy  # noqa: F401  (loaded before the variable is set: its BLAS keeps the caller's threads)

    global _table
    _table = table
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


def pool_context(
    fn: Callable[..., object], requested: str = "auto", preload: Sequence[str] = ()
) -> multiprocessing.context.BaseContext:
    """The multiprocessing context of the process pool: :func:`start_method`'s. ``preload``: modules every worker
    will import that ``fn``'s module imports lazily (the compiled surface kernels: ~0.45 CPU-s each time); when
    forking they are imported here, in the caller, so that no worker imports them again; a fork server preloads
    them with ``fn``'s module and :func:`_main_imports`."""
    ctx = multiprocessing.get_context(start_method(requested))
    if isinstance(ctx, multiprocessing.context.ForkServerContext):
        ctx.set_forkserver_preload([fn.__module__, *preload, *_main_imports()])
    elif ctx.get_start_method() == "fork":
        for name in preload:
            importlib.import_module(name)
    return ctx


def default_workers(config: EngineConfig) -> int:
    """``config.workers`` or the number of usable cores."""
    return config.workers or len(os.sched_getaffinity(0))


def map_cases(
    fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, description: str, preload: Sequence[str] = ()
) -> list[R]:
    """``[fn(item) for item in items]`` on the configured executor, in input order.

    ``preload``: modules that ``fn`` imports on its first item and that a process pool loads once before it starts
    its workers (:func:`pool_context`); in-process and on Dask they load where they are used.

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
            return _map_dask(fn, items, config, advance)
    workers = min(default_workers(config), len(items))
    if config.executor == "local" or workers <= 1:
        with progress:
            return _map_local(fn, items, advance)
    return _map_pool(fn, items, config, workers, progress, advance, preload)


def _map_local(fn: Callable[[T], R], items: Sequence[T], advance: Callable[[int], None]) -> list[R]:
    """``[fn(item) for item in items]`` in this process, advancing the progress bar by one after each item."""
    out = []
    for item in items:
        out.append(fn(item))
        advance(1)
    return out


def _map_pool(
    fn: Callable[[T], R],
    items: Sequence[T],
    config: EngineConfig,
    workers: int,
    progress: Progress,
    advance: Callable[[int], None],
    preload: Sequence[str],
) -> list[R]:
    """``[fn(item) for item in items]`` on a process pool of ``workers`` workers, in input order; the progress bar
    runs only once every case is submitted. A worker that dies raises :class:`WorkerDied`
    (:func:`_pool_worker_died`); any other first exception of ``fn`` propagates as it is."""
    ctx = pool_context(fn, config.start_method, preload)
    table = _CaseTable(ctx, len(items))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(table.arrays,))
    with pool:
        futures, broken = _submit_all(pool, fn, items, workers)
        if broken is None:
            with progress:
                broken = _wait_all(futures, advance)
        processes = list((getattr(pool, "_processes", None) or {}).values())  # before shutdown forgets them
    if broken is not None:  # the pool is shut down: every worker has exited and has its exit code
        died = _pool_worker_died(broken, processes, table, items, workers)
        if died is broken:
            raise broken
        raise died from broken
    return [f.result() for f in futures]


def _submit_all(
    pool: ProcessPoolExecutor, fn: Callable[[T], R], items: Sequence[T], workers: int
) -> tuple[list[Future[R]], BrokenProcessPool | None]:
    """Submit every item to ``pool`` in input order, each with its :func:`tail_threads` budget; returns the futures
    and, when a worker died before every case was submitted, the ``BrokenProcessPool`` that stopped it (else None).

    The first submit starts the workers (all of them at once when forking), so this runs before the progress bar
    starts its thread; meanwhile the garbage collector is frozen, so a forked worker's collections skip the
    objects it inherits (none of them are copied for it).
    """
    futures: list[Future[R]] = []
    broken: BrokenProcessPool | None = None
    gc.freeze()
    try:
        budget = tail_threads(len(items), workers)
        for i, (item, threads) in enumerate(zip(items, budget, strict=True)):
            futures.append(pool.submit(_with_threads, fn, item, threads, i))
    except BrokenProcessPool as exc:  # a worker died before every case was submitted
        broken = exc
    finally:
        gc.unfreeze()
    return futures, broken


def _wait_all(futures: list[Future[R]], advance: Callable[[int], None]) -> BrokenProcessPool | None:
    """Wait for ``futures``, advancing the progress bar by the cases scored (never the failed ones).

    At the first failure (the earliest in input order among those that finished together) the pending futures
    are cancelled and its exception is raised, or returned when it is a ``BrokenProcessPool`` (a worker died).
    None: every case was scored.
    """
    order = {f: i for i, f in enumerate(futures)}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_EXCEPTION)
        failed = sorted((f for f in done if f.exception() is not None), key=order.__getitem__)
        advance(len(done) - len(failed))  # a failed case is not a completed one
        if failed:
            for f in pending:
                f.cancel()
            exc = failed[0].exception()
            if not isinstance(exc, BrokenProcessPool):
                raise exc  # type: ignore[misc]
            return exc
    return None


def _pool_worker_died(
    exc: BrokenProcessPool, processes: list[Any], table: _CaseTable, items: Sequence[Any], workers: int
) -> BaseException:
    """The :class:`WorkerDied` of a broken process pool: the cases the dead worker(s) were scoring, how they died.

    When a worker dies, the pool terminates the others (SIGTERM): the dead ones are those that ended otherwise
    (all that died, if the culprit itself got a SIGTERM). A pool broken by a result it could not read (``exc``
    has a cause) is not a dying worker: ``exc`` is returned as it is.
    """
    if exc.__cause__ is not None:
        return exc
    for process in processes:
        process.join(timeout=5)  # already joined by the pool's shutdown; never wait long
    codes = {p.pid: p.exitcode for p in processes if p.exitcode not in (None, 0)}
    dead = {pid for pid, code in codes.items() if code != -signal.SIGTERM} or set(codes)
    cases = table.in_progress(dead)
    how = _how_it_died(sorted({codes[pid] for pid in dead})) if dead else "died"
    return _worker_died("a worker process", how, [_case_name(items[i], i) for i in cases], workers, table.peak_mib())


def _case_name(item: Any, index: int) -> str:
    """The case an item scores, for messages: its ``case_id`` (or its ``case``'s), else ``#<index>``."""
    for holder in (item, getattr(item, "case", None)):
        name = getattr(holder, "case_id", None)
        if isinstance(name, str):
            return name
    return f"#{index}"


def _how_it_died(exit_codes: Sequence[int]) -> str:
    """``killed by signal 9 (SIGKILL)`` / ``exited with status 3`` (several codes: each, joined by ``or``)."""
    words = []
    for code in exit_codes:
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "unknown"
            words.append(f"killed by signal {-code} ({name})")
        else:
            words.append(f"exited with status {code}")
    return " or ".join(words) or "died"


def _worker_died(who: str, how: str, cases: list[str], workers: int, peak_mib: float, extra: str = "") -> WorkerDied:
    """One line: who died while scoring which case(s), how, and what to try."""
    what = f"case {cases[0]}" if len(cases) == 1 else f"cases {', '.join(cases[:10])}" if cases else "no case"
    peak = f" (peak memory per worker on the cases scored before: {peak_mib:.0f} MiB)" if peak_mib else ""
    if "SIGKILL" in how or how == _UNKNOWN_DEATH:
        likely = "likely" if "SIGKILL" in how else "often"
        cause = (
            f"{likely} out of memory (the kernel's out-of-memory killer sends SIGKILL) with {workers} workers{peak}: "
            "retry with --workers 1 (or fewer workers), or refuse volumes this large with TRACKEVAL_MAX_VOXELS"
        )
    else:
        cause = f"{workers} workers{peak}: retry with --workers 1 to score one case at a time"
    message = f"{who} died while scoring {what}: {how}{extra}; {cause}"
    return WorkerDied(message, case_id=", ".join(cases[:10]) + (", ..." if len(cases) > 10 else "") or None)


@contextlib.contextmanager
def local_cluster(n_workers: int) -> Iterator[LocalCluster]:
    """A ``dask.distributed`` LocalCluster on 127.0.0.1: ``n_workers`` processes of one thread, no dashboard.

    distributed's nanny exports ``MALLOC_TRIM_THRESHOLD_=65536`` into the worker processes (and, as a side
    effect, into this process's ``os.environ``, so every later subprocess inherits it): glibc then returns freed
    memory to the OS after nearly every array temporary, and the page faults made scoring 1.5x (UMD) to 4.3x
    (IMIS-sized 2D masks) slower than in-process (measured with benchmarks/bench_scale.py). The clusters
    trackeval starts leave it unset; an existing cluster (``--scheduler``) keeps its own settings.

    A case whose worker dies is retried :data:`DASK_ALLOWED_FAILURES` times (on a fresh worker each time), then
    fails with ``KilledWorker`` (reported as :class:`~trackeval.errors.WorkerDied`). While the cluster closes,
    distributed's INFO lines about the scheduler's closed streams (each with a traceback) are not logged.
    """
    import dask
    from distributed import LocalCluster

    settings = {
        "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
        "distributed.scheduler.allowed-failures": DASK_ALLOWED_FAILURES,  # a case that kills its workers: bounded
    }
    batched = logging.getLogger("distributed.batched")
    level = batched.level
    try:
        with dask.config.set(settings):
            with LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
            ) as cluster:
                try:
                    yield cluster
                finally:  # closing: the scheduler's streams to the workers close, and distributed logs each one
                    batched.setLevel(logging.WARNING)  # at INFO with a traceback ("Batched Comm Closed")
    finally:
        batched.setLevel(level)


def _map_dask(
    fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, advance: Callable[[int], None]
) -> list[R]:
    """Run on a ``dask.distributed`` cluster: the one at ``config.scheduler`` or a new LocalCluster.

    Each case leaves a marker file ``<index>.<pid>`` in a temporary folder while it is scored (a worker on another
    machine, which cannot see the folder, leaves none), and the deaths the nannies of a LocalCluster log (in this
    process) are collected: when a case kills its workers, :func:`_dask_worker_died` names the case(s) whose
    markers were left behind and the signal.
    """
    from distributed import Client, as_completed
    from distributed.scheduler import KilledWorker

    with contextlib.ExitStack() as stack:
        markers = tempfile.mkdtemp(prefix="trackeval-dask-")
        stack.callback(shutil.rmtree, markers, ignore_errors=True)
        deaths = stack.enter_context(_nanny_deaths())
        if config.scheduler:
            try:
                client = stack.enter_context(Client(config.scheduler, timeout=f"{config.scheduler_timeout_s}s"))
            except OSError as exc:
                raise TrackevalError(f"cannot reach the Dask scheduler at {config.scheduler}: {exc}") from exc
            workers = len(client.scheduler_info().get("workers", {}))
        else:
            workers = default_workers(config)
            cluster = stack.enter_context(local_cluster(workers))
            client = stack.enter_context(Client(cluster))
        futures = client.map(functools.partial(_marked, fn, markers), items, range(len(items)), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[R | None] = [None] * len(items)
        try:
            for future in as_completed(futures):
                out[index[future.key]] = future.result()
                advance(1)
        except KilledWorker as exc:
            client.cancel(futures)
            if not config.scheduler:  # let the nannies finish restarting the dead workers before the cluster closes
                _settle(client, workers)
            raise _dask_worker_died(exc, index, items, markers, deaths, workers) from exc
        except BaseException:
            client.cancel(futures)
            raise
        return out  # type: ignore[return-value]


def _settle(client: object, workers: int) -> None:
    """Wait (at most 30 s) until a LocalCluster whose workers died runs ``workers`` workers again.

    A nanny restarts a dead worker at once; closing the cluster while that worker is still starting made it print
    a traceback of distributed's own (``RuntimeError: ConnectionPool is closed``) under trackeval's one-line error
    (in about a third of the runs of the dying-worker test on 2 cores).
    """
    with contextlib.suppress(Exception):  # a cluster that cannot settle is closed as it is
        client.wait_for_workers(workers, timeout=30)  # type: ignore[attr-defined]


def _marked(fn: Callable[[T], R], markers: str, item: T, index: int) -> R:
    """``fn(item)`` on a Dask worker, with the marker file ``<markers>/<index>.<pid>`` present while it runs."""
    marker = os.path.join(markers, f"{index}.{os.getpid()}")
    try:
        with open(marker, "x"):
            pass
    except OSError:  # a worker on another machine: no marker, the task key names the case instead
        marker = ""
    try:
        return fn(item)
    finally:
        if marker:
            with contextlib.suppress(OSError):
                os.unlink(marker)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours to signal
        return True
    return True


#: how a Dask worker died when no nanny of this process logged it (a cluster of its own: ``--scheduler``)
_UNKNOWN_DEATH = "died (how: see the cluster's worker logs)"
_DEATH = re.compile(r"Worker process (\d+) (?:was killed by signal (\d+)|exited with status (\d+))")


class _DeathLog(logging.Handler):
    """Collects ``{pid: exit code}`` from the nannies' ``Worker process N was killed by signal S`` records."""

    def __init__(self) -> None:
        super().__init__()
        self.codes: dict[int, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            if m := _DEATH.search(record.getMessage()):
                self.codes[int(m[1])] = -int(m[2]) if m[2] else int(m[3])


@contextlib.contextmanager
def _nanny_deaths() -> Iterator[_DeathLog]:
    handler = _DeathLog()
    logger = logging.getLogger("distributed.nanny")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _marker_files(markers: str) -> list[tuple[int, int]]:
    """``(index, pid)`` of every ``<index>.<pid>`` marker file (:func:`_marked`) in the folder ``markers``, in
    listing order; other names are ignored."""
    marked = []
    for name in os.listdir(markers):
        i, _, pid = name.partition(".")
        if i.isdigit() and pid.isdigit():
            marked.append((int(i), int(pid)))
    return marked


def _dead_markers(marked: list[tuple[int, int]], deaths: _DeathLog) -> list[tuple[int, int]]:
    """The markers of dead workers among ``marked``: those whose pid a nanny logged as dead, else (none logged)
    those whose process is gone. A marker of a live worker is a case still running elsewhere."""
    return [(i, pid) for i, pid in marked if pid in deaths.codes] or [(i, p) for i, p in marked if not _alive(p)]


def _dask_worker_died(
    exc: Any, index: dict[Any, int], items: Sequence[Any], markers: str, deaths: _DeathLog, workers: int
) -> WorkerDied:
    """The :class:`WorkerDied` of a ``KilledWorker``: the cases whose markers the dead workers left (else the task
    distributed gave up on) and, where a nanny of this process logged it, the signal."""
    left = _dead_markers(_marker_files(markers), deaths)
    cases = sorted({i for i, _ in left})
    if not cases and exc.task in index:
        cases = [index[exc.task]]
    codes = sorted({deaths.codes[pid] for _, pid in left if pid in deaths.codes})
    how = _how_it_died(codes) if codes else _UNKNOWN_DEATH
    n = exc.allowed_failures
    tries = f" on each of the {n + 1} workers that tried it (distributed.scheduler.allowed-failures={n})"
    names = [_case_name(items[i], i) for i in cases]
    return _worker_died("a Dask worker", how, names, workers, 0.0, extra=tries)
