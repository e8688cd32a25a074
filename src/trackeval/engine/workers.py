"""The workers of the executors (:mod:`trackeval.engine.executors`): how many a run uses, and the one-line
:class:`~trackeval.errors.WorkerDied` when one dies while scoring (from the process pool,
:mod:`trackeval.engine.pool`, or Dask, :mod:`trackeval.engine.dask_cluster`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trackeval.errors import WorkerDied

if TYPE_CHECKING:
    from trackeval.config import EngineConfig

#: how a Dask worker died when no nanny of this process logged it (a cluster of its own: ``--scheduler``)
UNKNOWN_DEATH = "died (how: see the cluster's worker logs)"


def default_workers(config: EngineConfig) -> int:
    """``config.workers`` or the number of usable cores."""
    return config.workers or len(os.sched_getaffinity(0))


def case_name(item: Any, index: int) -> str:
    """The case an item scores, for messages: its ``case_id`` (or its ``case``'s), else ``#<index>``."""
    for holder in (item, getattr(item, "case", None)):
        name = getattr(holder, "case_id", None)
        if isinstance(name, str):
            return name
    return f"#{index}"


def how_it_died(exit_codes: Sequence[int]) -> str:
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


def worker_died(who: str, how: str, cases: list[str], workers: int, peak_mib: float, extra: str = "") -> WorkerDied:
    """One line: who died while scoring which case(s), how, and what to try."""
    what = f"case {cases[0]}" if len(cases) == 1 else f"cases {', '.join(cases[:10])}" if cases else "no case"
    peak = f" (peak memory per worker on the cases scored before: {peak_mib:.0f} MiB)" if peak_mib else ""
    if "SIGKILL" in how or how == UNKNOWN_DEATH:
        likely = "likely" if "SIGKILL" in how else "often"
        cause = (
            f"{likely} out of memory (the kernel's out-of-memory killer sends SIGKILL) with {workers} workers{peak}: "
            "retry with --workers 1 (or fewer workers), or refuse volumes this large with TRACKEVAL_MAX_VOXELS"
        )
    else:
        cause = f"{workers} workers{peak}: retry with --workers 1 to score one case at a time"
    message = f"{who} died while scoring {what}: {how}{extra}; {cause}"
    return WorkerDied(message, case_id=", ".join(cases[:10]) + (", ..." if len(cases) > 10 else "") or None)
