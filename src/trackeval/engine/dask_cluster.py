"""The Dask executor of :func:`trackeval.engine.executors.map_cases` (``engine.executor=dask``): the cluster at
``engine.scheduler`` or a LocalCluster trackeval starts, and which case(s) a worker that died was scoring
(marker files, the nannies' log records).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from trackeval.engine.workers import UNKNOWN_DEATH, case_name, default_workers, how_it_died, worker_died
from trackeval.errors import TrackevalError, WorkerDied

if TYPE_CHECKING:
    from distributed import LocalCluster

    from trackeval.config import EngineConfig

T = TypeVar("T")
R = TypeVar("R")

#: how often a LocalCluster that trackeval starts retries a case whose worker died (then KilledWorker)
DASK_ALLOWED_FAILURES = 2


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


def map_dask(fn: Callable[[T], R], items: Sequence[T], config: EngineConfig, advance: Callable[[int], None]) -> list[R]:
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
    how = how_it_died(codes) if codes else UNKNOWN_DEATH
    n = exc.allowed_failures
    tries = f" on each of the {n + 1} workers that tried it (distributed.scheduler.allowed-failures={n})"
    names = [case_name(items[i], i) for i in cases]
    return worker_died("a Dask worker", how, names, workers, 0.0, extra=tries)
