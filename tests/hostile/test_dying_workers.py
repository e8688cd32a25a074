"""A worker that dies mid-case is named, not reported as our bug.

The fault is real: the test-only plug-in ``tests/plugins/dyingbench`` (installed into a throw-away site folder,
on ``PYTHONPATH`` of the ``trackeval`` subprocess only) scores its cases through trackeval's own executors, and
the worker that gets ``dying.kill_case`` ends itself (SIGKILL as the out-of-memory killer sends, SIGSEGV, or an
exit status). Each case asserts exit 2 and one ``trackeval: error:`` line naming the case and how the worker died
(with the memory hint for SIGKILL), a progress bar that does not claim completion, an untouched ``--out``, and no
process of the run left behind (every process of the run carries a marker in its environment; psutil finds
them).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, scaled, wait_for

pytestmark = pytest.mark.slow

CASES = [f"c{i}" for i in range(1, 7)]
#: environment variable marking every process of one ``trackeval`` run (inherited by its workers)
RUN_MARK = "DYINGBENCH_RUN"


def _install(site: Path) -> None:
    shutil.copytree(REPO / "tests" / "plugins" / "dyingbench", site / "dyingbench")
    dist = site / "dyingbench-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dyingbench\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[trackeval.benchmarks]\ndying = dyingbench:SPEC\n", encoding="utf-8")


@pytest.fixture
def dying(tmp_path: Path):
    """``dying(*args) -> (CompletedProcess, run mark)``: ``trackeval evaluate dying`` on 6 cases in a subprocess,
    ``--out`` = ``tmp_path/out``."""
    site = tmp_path / "site"
    _install(site)
    truth, pred = tmp_path / "truth.csv", tmp_path / "predictions.csv"
    truth.write_text("case_id,label\n" + "".join(f"{c},a\n" for c in CASES), encoding="utf-8")
    pred.write_text("case_id,label\n" + "".join(f"{c},{'ab'[i % 2]}\n" for i, c in enumerate(CASES)), encoding="utf-8")

    def run(*args: str) -> tuple[subprocess.CompletedProcess, str]:
        mark = uuid.uuid4().hex
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
        env[RUN_MARK] = mark
        argv = ["evaluate", "dying", "--ground-truth", truth, "--predictions", pred, "--out", tmp_path / "out"]
        argv += ["--set", "bootstrap.n_resamples=50", *args]
        cmd = [sys.executable, "-m", "trackeval.cli", *map(str, argv)]
        proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=scaled(300))
        return proc, mark

    return run


def _processes_of(mark: str) -> list[psutil.Process]:
    """Live processes (other than zombies) whose environment carries ``RUN_MARK=mark``."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(RUN_MARK) == mark:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_named_death(proc: subprocess.CompletedProcess, mark: str, *needles: str) -> str:
    """Exit 2, one error line holding every needle, no bug report, no finished progress bar, no process left."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("trackeval: error:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    line = lines[0]
    for needle in needles:
        assert needle in line, (needle, line)
    assert "internal error" not in line and "please report" not in line and "BrokenProcessPool" not in line
    counts = [int(n) for n in re.findall(rf"(\d+)/{len(CASES)}\b", proc.stderr)]
    assert all(n < len(CASES) for n in counts), ("the progress bar claims completion", counts)
    wait_for(lambda: not _processes_of(mark), 30, "every process of the failed run to exit")
    return line


@pytest.fixture
def previous_out(dying, tmp_path: Path) -> dict[str, bytes]:
    """A successful run's ``--out``, as bytes: a failed run must leave it as it is."""
    proc, _ = dying("--executor", "local")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _snapshot(tmp_path / "out")


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_pool_worker_killed_by_sigkill_names_the_case_the_signal_and_memory(dying, previous_out, tmp_path, method):
    proc, mark = dying("--workers", "2", "--set", "dying.kill_case=c3", "--set", f"engine.start_method={method}")
    line = _assert_named_death(
        proc,
        mark,
        "a worker process died while scoring case c3",
        "killed by signal 9 (SIGKILL)",
        "out of memory",
        "2 workers",
        "peak memory per worker",
        "--workers 1",
        "TRACKEVAL_MAX_VOXELS",
        "[case=c3]",
    )
    assert "c1" not in line and "c2" not in line  # only the case that was being scored when the worker died
    assert _snapshot(tmp_path / "out") == previous_out


@pytest.mark.parametrize(
    ("how", "said"), [("sigsegv", "killed by signal 11 (SIGSEGV)"), ("exit", "exited with status 3")]
)
def test_pool_worker_crashing_otherwise_names_the_case_and_how(dying, previous_out, tmp_path, how, said):
    proc, mark = dying("--workers", "2", "--set", "dying.kill_case=c4", "--set", f"dying.how={how}")
    line = _assert_named_death(proc, mark, "while scoring case c4", said, "--workers 1", "[case=c4]")
    assert "out of memory" not in line  # the memory hint is for SIGKILL
    assert _snapshot(tmp_path / "out") == previous_out


def test_the_workers_the_pool_stops_are_not_blamed(dying, previous_out, tmp_path):
    """Three workers: when one dies, the pool terminates the other two (SIGTERM) while they score their cases;
    only the case of the worker that died is named."""
    proc, mark = dying("--workers", "3", "--set", "dying.kill_case=c5")
    line = _assert_named_death(proc, mark, "while scoring case c5", "SIGKILL", "3 workers", "[case=c5]")
    assert "SIGTERM" not in line
    assert _snapshot(tmp_path / "out") == previous_out


def test_first_case_killing_its_worker_before_all_cases_are_submitted(dying, previous_out, tmp_path):
    proc, mark = dying("--workers", "2", "--set", "dying.kill_case=c1")
    _assert_named_death(proc, mark, "while scoring case c1", "SIGKILL", "[case=c1]")
    assert _snapshot(tmp_path / "out") == previous_out


def test_dask_worker_killed_on_every_try_names_the_case_and_the_signal(dying, previous_out, tmp_path):
    """A real LocalCluster: the case kills every worker that tries it; distributed retries it a bounded number of
    times (KilledWorker), and the error names the case, the signal and the attempts."""
    from trackeval.engine.executors import DASK_ALLOWED_FAILURES

    proc, mark = dying("--executor", "dask", "--workers", "2", "--set", "dying.kill_case=c2")
    _assert_named_death(
        proc,
        mark,
        "a Dask worker died while scoring case c2",
        "killed by signal 9 (SIGKILL)",
        f"on each of the {DASK_ALLOWED_FAILURES + 1} workers that tried it",
        "out of memory",
        "--workers 1",
        "[case=c2]",
    )
    assert _snapshot(tmp_path / "out") == previous_out


def test_dask_worker_of_an_existing_cluster_names_the_case(dying, previous_out, tmp_path, monkeypatch):
    """``--scheduler``: the cluster (and its nannies' logs) belongs to someone else: the case is still named from
    the markers its dead workers left."""
    from trackeval.engine.executors import local_cluster

    monkeypatch.syspath_prepend(str(tmp_path / "site"))  # the cluster's scheduler and workers unpickle the plug-in
    with local_cluster(2) as cluster:
        proc, mark = dying("--scheduler", cluster.scheduler_address, "--set", "dying.kill_case=c6")
    _assert_named_death(
        proc, mark, "a Dask worker died while scoring case c6", "worker logs", "--workers 1", "[case=c6]"
    )
    assert _snapshot(tmp_path / "out") == previous_out


def test_worker_died_is_a_located_exit_2_error_that_survives_pickling():
    import pickle

    from trackeval.errors import InputError, WorkerDied, describe_failure

    exc = WorkerDied("a worker process died while scoring case c3: killed by signal 9 (SIGKILL)", case_id="c3")
    again = pickle.loads(pickle.dumps(exc))
    assert isinstance(again, WorkerDied) and isinstance(again, InputError) and str(again) == str(exc)
    status, line = describe_failure(exc, "evaluate dying")
    assert status == 2 and line.endswith("[case=c3]") and "please report" not in line


def _die_on_three(item: int) -> int:
    if item == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def test_map_cases_raises_worker_died_in_process(capsys):
    """The API (not only the CLI): ``map_cases`` raises ``WorkerDied`` naming the item, and the pool's workers
    are gone when it returns."""
    from trackeval.config.base import EngineConfig
    from trackeval.engine.executors import map_cases
    from trackeval.errors import WorkerDied

    before = {c.pid for c in psutil.Process().children(recursive=True)}
    with pytest.raises(WorkerDied, match=r"while scoring case #3: killed by signal 9 \(SIGKILL\)") as info:
        map_cases(_die_on_three, list(range(6)), EngineConfig(executor="processes", workers=2, cache=False), "p")
    assert info.value.case_id == "#3"
    helpers = ("resource_tracker", "forkserver")  # multiprocessing's own helpers live as long as this process

    def leftovers() -> list[psutil.Process]:
        out = []
        for c in psutil.Process().children(recursive=True):
            try:
                if c.pid not in before and not any(h in " ".join(c.cmdline()) for h in helpers):
                    out.append(c)
            except psutil.NoSuchProcess:
                continue
        return out

    wait_for(lambda: not leftovers(), 30, "the pool's workers to exit")
    assert not re.search(r"\b6/6\b", capsys.readouterr().err)
