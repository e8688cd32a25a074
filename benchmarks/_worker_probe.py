"""Worker start-up and peak memory of the UMD scoring path, per multiprocessing start method.

Run by ``bench_e2e_umd.py`` as its own process (so that its ``__main__`` is as small as the CLI's)::

    python benchmarks/_worker_probe.py METHOD GT_DIR PRED_DIR [N_CASES]

``METHOD``: ``trackeval`` (``engine.start_method=auto``, the default) or a start method (``fork``,
``forkserver``, ``spawn``); the cases run through ``trackeval.engine.executors.map_cases`` with 2 workers, as in
``trackeval evaluate`` (the last case with the idle worker's thread). Two workers score the first
``N_CASES`` cases of the manifest with the real ``score_case``; each worker reports, at the start of each case, its
CPU seconds and max RSS so far, and after it its max RSS. Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

from trackeval.api import load_config
from trackeval.benchmarks.umd.cases import load_cases
from trackeval.benchmarks.umd.scoring import CaseJob, score_case
from trackeval.engine.cache import CaseCache
from trackeval.engine.executors import map_cases
from trackeval.engine.executors import start_method as start_method_for

HEAVY = ("torch", "monai")


def probe(job: object) -> dict[str, object]:
    """Score one case; the worker's state before and after it."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    heavy_before = [m for m in HEAVY if m in sys.modules]
    score_case(job)  # type: ignore[arg-type]
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pid": os.getpid(),
        "cpu_before_s": before.ru_utime + before.ru_stime,
        "maxrss_before_mb": before.ru_maxrss / 1024,
        "maxrss_after_mb": after.ru_maxrss / 1024,
        "heavy_before": heavy_before,
        "heavy_after": [m for m in HEAVY if m in sys.modules],
    }


def main() -> None:
    method, gt, pred = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    n_cases = int(sys.argv[4]) if len(sys.argv) > 4 else None
    start_method = "auto" if method == "trackeval" else method
    overrides = ["engine.cache=false", "engine.executor=processes", "engine.workers=2"]
    cfg = load_config(None, [*overrides, f"engine.start_method={start_method}"])
    cases, _, _ = load_cases(gt, pred)
    jobs = [CaseJob(c, cfg.umd, CaseCache(None, "umd")) for c in cases[:n_cases]]
    used = start_method_for(start_method)  # what map_cases will choose, asked before it starts any thread
    reports = map_cases(probe, jobs, cfg.engine, "probe")
    print(json.dumps({"method": used, "reports": reports}))


if __name__ == "__main__":
    main()
