"""The process pool of :func:`trackeval.engine.executors.map_cases` (``engine.executor=processes``): how it starts
its workers, the thread budget of the last cases, and which case(s) a worker that died was scoring.

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
  function's module once (``set_forkserver_preload``) and forks the workers from that clean state (~0.006 CPU-s
  and ~40 MB each).
* ``spawn`` (everywhere): every worker re-imports the scoring code (~0.4 CPU-s and ~60 MB each).

**The caller's main module.** ``forkserver`` and ``spawn`` workers are started without the caller's main module
(:class:`_WithoutMain`): multiprocessing would re-run the caller's script in every worker (as ``__mp_main__``),
which ran an unguarded script's top level again (training, a stray ``promote``) and made its workers die starting
pools of their own. Our workers need nothing from ``__main__``, so a script needs no ``__main__`` guard and a
notebook or ``python -c`` works alike; only a scoring function or case class defined in ``__main__`` itself
keeps multiprocessing's preparation (:func:`_defined_in_main`).

**The tail.** Cases are coarse (a UMD case is ~1 s), so at the end of a pool run workers run out of cases while
the last ones are still being scored. The last ``workers - 1`` cases may therefore use more threads
(:func:`tail_threads`): the case dispatched last up to ``workers``, the one before it one fewer, and so on; a
scoring function asks :func:`case_threads` and may score independent parts (UMD: organs) in that many threads.
The values never depend on it. On the 6-case UMD set this shortens a 2-worker run by ~0.3 s (the last case was
scored while the other worker idled): 0.57-0.58x the wall time of one worker, 0.62-0.64x without.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import importlib
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

from trackeval.engine.workers import case_name, how_it_died, worker_died
from trackeval.errors import ConfigError

if TYPE_CHECKING:
    from rich.progress import Progress

    from trackeval.config import EngineConfig

T = TypeVar("T")
R = TypeVar("R")

#: threads the case being scored in this process may use (see the module docstring); 1 outside a pool's tail
_case_threads = 1
#: in a pool worker: the run's shared :class:`_CaseTable` arrays (started, finished, peak_kib), from the initializer
_table: tuple[Any, Any, Any] | None = None


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


def _defined_in_main(fn: Callable[..., object], items: Sequence[object]) -> bool:
    """Whether the scoring function (or a ``functools.partial``'s function) or the items' class was defined in
    ``__main__``: only then must a worker run the caller's main module to unpickle them."""
    owners = (getattr(fn, "func", fn), type(items[0]) if items else None)
    return any(getattr(owner, "__module__", None) in ("__main__", "__mp_main__") for owner in owners)


def _main_imports() -> list[str]:
    """The modules ``__main__`` holds or took functions and classes from (for a fork server whose workers must
    re-run the main module: a few dictionary look-ups instead of the imports; Python < 3.13 cannot preload the
    script itself)."""
    names = set()
    for value in vars(sys.modules["__main__"]).values():
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name not in ("__main__", "__mp_main__", "builtins"):
            names.add(name)
    return sorted(names)


class _WithoutMain:
    """``multiprocessing.spawn`` as our workers' launchers see it: the same module, except that the preparation
    data a new worker receives never names the caller's main module (``init_main_from_path`` /
    ``init_main_from_name``), so the worker does not run the user's script, ``python -m`` module or notebook
    kernel before it unpickles its task (see the module docstring)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(multiprocessing.spawn, name)

    @staticmethod
    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = multiprocessing.spawn.get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data


@functools.cache
def _launcher_without_main(popen_class: type) -> type:
    """A subclass of a POSIX ``Popen`` class of ``multiprocessing`` (fork server, spawn) whose ``_launch`` is the
    standard library's own code, run with ``spawn`` bound to :class:`_WithoutMain` (the one global it reads the
    preparation data from; unchanged since Python 3.8)."""
    launch = popen_class._launch
    namespace = {**launch.__globals__, "spawn": _WithoutMain()}
    code = types.FunctionType(launch.__code__, namespace, launch.__name__, launch.__defaults__, launch.__closure__)
    return type(f"{popen_class.__name__}WithoutMain", (popen_class,), {"_launch": code})


if sys.platform != "win32":  # POSIX launchers (Windows has no fork server; its spawn launcher differs)

    class _ForkServerProcess(multiprocessing.context.ForkServerProcess):
        """A fork-server process that never runs the caller's main module (:class:`_WithoutMain`)."""

        @staticmethod
        def _Popen(process_obj: Any) -> Any:  # noqa: N802  (multiprocessing's name)
            from multiprocessing import popen_forkserver

            return _launcher_without_main(popen_forkserver.Popen)(process_obj)

    class _SpawnProcess(multiprocessing.context.SpawnProcess):
        """A spawned process that never runs the caller's main module (:class:`_WithoutMain`)."""

        @staticmethod
        def _Popen(process_obj: Any) -> Any:  # noqa: N802  (multiprocessing's name)
            from multiprocessing import popen_spawn_posix

            return _launcher_without_main(popen_spawn_posix.Popen)(process_obj)

    class _ForkServerContext(multiprocessing.context.ForkServerContext):
        Process = _ForkServerProcess

    class _SpawnContext(multiprocessing.context.SpawnContext):
        Process = _SpawnProcess


def _context_without_main(method: str) -> multiprocessing.context.BaseContext:
    """The ``forkserver`` or ``spawn`` context whose processes never run the caller's main module; ``fork``'s
    (a copy of the caller runs nothing again), and the standard ``spawn`` on Windows (its launcher differs)."""
    if method == "forkserver":
        return _ForkServerContext()
    if method == "spawn" and sys.platform != "win32":
        return _SpawnContext()
    return multiprocessing.get_context(method)


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
    fn: Callable[..., object], requested: str = "auto", preload: Sequence[str] = (), main: bool = False
) -> multiprocessing.context.BaseContext:
    """The multiprocessing context of the process pool: :func:`start_method`'s. ``preload``: modules every worker
    will import that ``fn``'s module imports lazily (the compiled surface kernels: ~0.45 CPU-s each time); when
    forking they are imported here, in the caller, so that no worker imports them again; a fork server preloads
    them with ``fn``'s module. ``main``: the workers need the caller's main module (``fn`` was defined there);
    else (always, for trackeval's own scoring functions) a fork server's or spawned worker never runs it."""
    method = start_method(requested)
    ctx = multiprocessing.get_context(method) if main else _context_without_main(method)
    if isinstance(ctx, multiprocessing.context.ForkServerContext):
        ctx.set_forkserver_preload([fn.__module__, *preload, *(_main_imports() if main else ())])
    elif ctx.get_start_method() == "fork":
        for name in preload:
            importlib.import_module(name)
    return ctx


def map_pool(
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
    ctx = pool_context(fn, config.start_method, preload, _defined_in_main(fn, items))
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
    how = how_it_died(sorted({codes[pid] for pid in dead})) if dead else "died"
    return worker_died("a worker process", how, [case_name(items[i], i) for i in cases], workers, table.peak_mib())
