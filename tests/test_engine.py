"""Executors and the case cache: identical results everywhere, resume after a crash, faults.

The fault tests wait for conditions (cache entries written, a worker busy), with deadlines scaled by
``TRACKEVAL_TEST_TIMEOUT_FACTOR`` (tests/conftest.py), and are in the slow tier with the Dask cluster tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cube, save_nifti, scaled, umd_argv, wait_for
from tests.results_doc import results_doc
from trackeval.cli import main
from trackeval.engine.cache import CaseCache, Lookup
from trackeval.results import CaseRecord


def _run(gt: Path, pred: Path, out: Path, *extra: str) -> bytes:
    assert main(umd_argv(gt, pred, out, "--set", "bootstrap.n_resamples=100", *extra)) == 0
    return (out / "results.json").read_bytes()


@pytest.mark.slow
def test_dask_local_cluster_gives_identical_results(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    local = _run(gt, pred, tmp_path / "local", "--executor", "local", "--no-cache")
    dask2 = _run(gt, pred, tmp_path / "dask", "--executor", "dask", "--workers", "2", "--no-cache")
    assert local == dask2


def test_cache_hit_is_identical_and_skips_work(umd_dataset, tmp_path: Path, monkeypatch):
    gt, pred = umd_dataset()
    first = _run(gt, pred, tmp_path / "a", "--executor", "local")
    entries = list(Path(".trackeval-cache", "umd").rglob("*.json"))
    assert len(entries) == 4
    from trackeval.benchmarks.umd import scoring

    def boom(*args, **kwargs):
        raise AssertionError("a cached case was recomputed")

    monkeypatch.setattr(scoring, "_organ_metrics", boom)
    assert _run(gt, pred, tmp_path / "b", "--executor", "local") == first
    # every output, not only results.json (whose keys are sorted): a cached record keeps the order of its items
    # and metrics, so cases.parquet's rows and columns are those of a computed run
    for name in ("metrics.json", "cases.parquet"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name


def test_cache_key_covers_inputs_and_config(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    base = json.loads(_run(gt, pred, tmp_path / "a", "--executor", "local"))
    # a changed metric config must not be served from the cache
    other = json.loads(_run(gt, pred, tmp_path / "b", "--executor", "local", "--set", "umd.nsd_tolerance_mm=3"))
    assert other["aggregates"]["umd/nsd"]["value"] > base["aggregates"]["umd/nsd"]["value"]
    # a changed prediction file must not be served from the cache
    (pred / "s1_ct.nii.gz").write_bytes((pred / "s1_pet.nii.gz").read_bytes())
    _run(gt, pred, tmp_path / "c", "--executor", "local")
    s1 = {c["case_id"]: c for c in results_doc(tmp_path / "c")["cases"]}
    assert s1["s1_ct"]["metrics"]["liver"]["dsc"] == s1["s1_pet"]["metrics"]["liver"]["dsc"]


def test_corrupt_cache_entry_is_a_miss(tmp_path: Path):
    cache = CaseCache(tmp_path, "ns")
    key = cache.key({"case_id": "a", "subject_id": "a"}, {"truth": "t", "prediction": "p"}, "{}")
    record = CaseRecord(case_id="a", subject_id="a", metrics={"x": {"dsc": 0.5}})
    assert cache.put(key, record) == ()
    assert cache.get(key) == Lookup(record)
    path = next(tmp_path.rglob("*.json"))
    assert path == cache.path(key)
    path.write_text("{truncated")
    miss = cache.get(key)
    assert miss.record is None and str(path) in miss.warning
    assert CaseCache(None, "ns").get(key) == Lookup(None)


def test_record_json_cannot_hold_is_not_cached_and_not_fatal(tmp_path: Path):
    cache = CaseCache(tmp_path, "ns")
    key = cache.key({"case_id": "a", "subject_id": "a"}, {"truth": "t"}, "{}")
    record = CaseRecord(case_id="a", subject_id="a", metrics={"x": {"hd": float("inf")}})
    assert cache.put(key, record) == ()
    assert cache.get(key) == Lookup(None) and not list(tmp_path.rglob("*.json"))


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_from_cache(umd_dataset, tmp_path: Path, monkeypatch):
    """SIGKILL while the last case is scored, once the three before it are cached: no output is written, and the
    re-run scores only the missing case and gives the same results as an uninterrupted run."""
    from trackeval.benchmarks.umd import scoring
    from trackeval.engine.cache import code_identity

    code_identity.cache_clear()  # hash the source as the subprocess will (computed once per process)
    gt, pred = umd_dataset()  # cases scored in manifest order: s1_ct, s1_pet, s2_ct, s2_pet
    big = (240, 240, 160)  # a liver filling the volume: ~1 s of scoring on an idle core, the window for the kill
    save_nifti(gt / "s2_pet.nii.gz", cube(big, (2, 2, 2), (238, 238, 158), 1))
    save_nifti(pred / "s2_pet.nii.gz", cube(big, (3, 2, 2), (239, 239, 159), 1))
    reference = _run(gt, pred, tmp_path / "ref", "--executor", "local", "--no-cache")
    out = tmp_path / "out"
    argv = umd_argv(gt, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=100")
    proc = subprocess.Popen([sys.executable, "-m", "trackeval.cli", *argv], stdout=subprocess.DEVNULL)
    cache_dir = Path(".trackeval-cache", "umd")

    def n_cached() -> int:
        return len(list(cache_dir.rglob("*.json")))  # entries are renamed into place: never a partial *.json

    try:
        wait_for(lambda: n_cached() >= 3 or proc.poll() is not None, 120, "3 cached cases (the run's first three)")
        assert proc.poll() is None, "the run ended before the kill: the fault was not injected"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=scaled(30))
    assert n_cached() == 3
    assert not out.exists() or list(out.iterdir()) == [], "outputs (or temporary files) of a killed run"

    scored: list[str] = []
    original = scoring._organ_metrics

    def counting(case_id: str, *args):
        scored.append(case_id)
        return original(case_id, *args)

    monkeypatch.setattr(scoring, "_organ_metrics", counting)
    assert _run(gt, pred, out, "--executor", "local") == reference
    assert scored == ["s2_pet"]


def test_unreachable_dask_scheduler(umd_dataset, tmp_path: Path, capsys):
    gt, pred = umd_dataset()
    rc = main(
        umd_argv(
            gt,
            pred,
            tmp_path / "o",
            "--executor",
            "dask",
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--set",
            "engine.scheduler_timeout_s=1",
        )
    )
    assert rc == 2 and "cannot reach the Dask scheduler" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_dask_worker_killed_mid_run_results_equal(umd_dataset, tmp_path: Path):
    """A worker process dies while scoring: its cases are rescheduled on the other worker, results unchanged."""
    import threading

    from distributed import Client

    from trackeval.engine.executors import local_cluster

    gt, pred = umd_dataset(shape=(90, 90, 60), n_subjects=6)
    reference = _run(gt, pred, tmp_path / "ref", "--executor", "local", "--no-cache")
    with local_cluster(2) as cluster:
        with Client(cluster) as client:
            pids = client.run(os.getpid)
            killed: list[str] = []

            def killer() -> None:
                deadline = time.monotonic() + scaled(60)
                while time.monotonic() < deadline:
                    busy = [w for w, tasks in client.processing().items() if tasks]
                    if busy:
                        os.kill(pids[busy[0]], signal.SIGKILL)
                        killed.append(busy[0])
                        return
                    time.sleep(0.005)

            thread = threading.Thread(target=killer, daemon=True)
            thread.start()
            out = _run(gt, pred, tmp_path / "out", "--no-cache", "--scheduler", cluster.scheduler_address)
            thread.join()
    assert killed, "no worker was busy: the fault was not injected"
    assert out == reference


@pytest.mark.slow
def test_disk_full_while_writing_outputs_leaves_no_partial_files(umd_dataset, tmp_path: Path):
    """A real write failure: the file-size limit (RLIMIT_FSIZE) makes writes fail with EFBIG, like a full disk."""
    import resource

    gt, pred = umd_dataset()
    out = tmp_path / "out"

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    argv = umd_argv(gt, pred, out, "--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=50")
    cmd = [sys.executable, "-m", "trackeval.cli", *argv]
    proc = subprocess.run(cmd, preexec_fn=limit, capture_output=True, text=True, timeout=scaled(120))
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the outputs" in proc.stderr
    assert list(out.iterdir()) == [], "partial or temporary files left behind"


START_METHODS = """
import json, sys, threading
from trackeval.engine.executors import start_method
out = {"alone": start_method()}
stop = threading.Event()
helper = threading.Thread(target=stop.wait)
helper.start()
out["with_a_thread"] = start_method()
stop.set()
helper.join()
out["thread_gone"] = start_method()
import torch  # noqa: E402
out["torch_loaded"] = start_method()
out["asked_for_fork"] = start_method("fork")
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auto forks on Linux only")
def test_auto_start_method_forks_only_a_single_threaded_caller_without_torch():
    proc = subprocess.run([sys.executable, "-c", START_METHODS], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {
        "alone": "fork",
        "with_a_thread": "forkserver",
        "thread_gone": "fork",
        "torch_loaded": "forkserver",
        "asked_for_fork": "fork",  # an explicit choice is the user's
    }


PRELOAD_PROBE = """
import sys


def loaded(name):
    return name in sys.modules
"""

PRELOAD = """
import json, sys
from preload_probe import loaded
from trackeval.api import load_config
from trackeval.engine.executors import map_cases
method, preload = sys.argv[1], sys.argv[2:]
cfg = load_config(None, ["engine.executor=processes", "engine.workers=2", f"engine.start_method={method}"])
in_workers = map_cases(loaded, ["numba", "numba"], cfg.engine, "probe", preload)
print(json.dumps({"workers": in_workers, "caller": "numba" in sys.modules}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and the fork server: Linux")
@pytest.mark.parametrize("method", ["fork", "forkserver"])
@pytest.mark.parametrize("preload", [True, False])
def test_a_pool_loads_the_preload_modules_once_for_its_workers(method: str, preload: bool, tmp_path: Path):
    """``map_cases(preload=...)``: a forking pool imports the modules in the caller before it forks, a fork server
    preloads them; either way every worker has them before its first case (the compiled surface loops: ~0.45
    CPU-s that each worker would otherwise pay). Without ``preload`` nothing loads them."""
    (tmp_path / "preload_probe.py").write_text(PRELOAD_PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    argv = [sys.executable, "-c", PRELOAD, method, *(["trackeval.metrics.compiled"] if preload else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=scaled(120))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"workers": [preload, preload], "caller": preload and method == "fork"}


def test_start_method_the_platform_lacks_is_a_config_error(monkeypatch):
    """A platform with ``spawn`` only (Windows): ``auto`` spawns, an explicit fork is refused naming the field."""
    import multiprocessing

    from trackeval.engine.executors import start_method
    from trackeval.errors import ConfigError

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    monkeypatch.setattr(sys, "platform", "win32")
    assert start_method("auto") == "spawn"
    with pytest.raises(
        ConfigError, match=r"engine.start_method=fork is not available on this platform \(available: spawn\)"
    ):
        start_method("fork")


def _threads_of_case(item: int) -> tuple[int, int]:
    from trackeval.engine.executors import case_threads

    return item, case_threads()


@pytest.mark.parametrize(
    ("executor", "workers", "expected"),
    [
        ("processes", 2, [1, 1, 1, 1, 1, 2]),  # the last case may use the core its finished neighbour frees
        ("processes", 4, [1, 1, 1, 2, 3, 4]),
        ("local", 2, [1] * 6),
    ],
)
def test_the_last_cases_of_a_pool_run_get_the_idle_workers_threads(executor: str, workers: int, expected: list[int]):
    from trackeval.config.base import EngineConfig
    from trackeval.engine.executors import case_threads, map_cases

    config = EngineConfig(executor=executor, workers=workers, cache=False)
    assert map_cases(_threads_of_case, list(range(6)), config, "probe") == list(enumerate(expected))
    assert case_threads() == 1  # the calling process is never left with a budget
