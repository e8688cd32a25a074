"""Process-pool workers start cheaply and score UMD cases without importing torch or MONAI.

Run in a fresh interpreter (the test process has imported torch and MONAI for other tests): the script maps a
probe over the cases with ``map_cases`` (``processes``, 2 workers, the pool trackeval uses); the probe records its
worker's state before and after scoring its case with the real ``score_case``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from trackeval.api import load_config
from trackeval.benchmarks.umd.cases import load_cases
from trackeval.benchmarks.umd.scoring import CaseJob, score_case
from trackeval.engine.cache import CaseCache

PROBE = '''
import os, resource, sys
from trackeval.benchmarks.umd.scoring import score_case

HEAVY = ("torch", "monai")


def probe(job):
    """(pid, CPU-s and max RSS in KB before the case, heavy modules before and after, the scored record)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    before = [m for m in HEAVY if m in sys.modules]
    scored = score_case(job)
    after = [m for m in HEAVY if m in sys.modules]
    return os.getpid(), usage.ru_utime + usage.ru_stime, usage.ru_maxrss, before, after, scored.record.model_dump()
'''

MAIN = """
import json, os, sys
from pathlib import Path
from probe import probe
from trackeval.api import load_config
from trackeval.benchmarks.umd.cases import load_cases
from trackeval.benchmarks.umd.scoring import CaseJob
from trackeval.engine.cache import CaseCache
from trackeval.engine.executors import map_cases

gt, pred = Path(sys.argv[1]), Path(sys.argv[2])
cfg = load_config(None, ["engine.executor=processes", "engine.workers=2", "engine.cache=false"])
cases, _, _ = load_cases(gt, pred)
jobs = [CaseJob(c, cfg.umd, CaseCache(None, "umd")) for c in cases]
print(json.dumps({"main": os.getpid(), "results": map_cases(probe, jobs, cfg.engine, "probe")}))
"""


def test_workers_score_without_torch_or_monai_and_start_cheaply(umd_dataset, tmp_path: Path) -> None:
    gt, pred = umd_dataset()
    (tmp_path / "probe.py").write_text(textwrap.dedent(PROBE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", MAIN, str(gt), str(pred)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    results = out["results"]
    assert len(results) == 4
    workers: dict[int, tuple[float, int]] = {}
    for pid, cpu_s, maxrss_kb, before, after, _record in results:
        assert before == [] and after == [], (before, after)
        workers.setdefault(pid, (cpu_s, maxrss_kb))  # the first case of each worker: its start-up
    assert out["main"] not in workers  # the cases ran in worker processes
    for cpu_s, maxrss_kb in workers.values():
        assert cpu_s <= 1.0, f"worker start-up took {cpu_s:.2f} CPU-s"
        assert maxrss_kb <= 150 * 1024, f"worker RSS before its first case: {maxrss_kb / 1024:.0f} MB"
    # the records are the ones scored in-process
    cfg = load_config(None, ["engine.executor=local", "engine.cache=false"])
    cases, _, _ = load_cases(gt, pred)
    local = [score_case(CaseJob(c, cfg.umd, CaseCache(None, "umd"))).record.model_dump() for c in cases]
    assert json.dumps([r[-1] for r in results], sort_keys=True) == json.dumps(local, sort_keys=True)
