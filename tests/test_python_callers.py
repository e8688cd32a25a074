"""``trackeval.evaluate`` from the Python callers a user has: an unguarded script that has loaded torch, ``python -c``,
a notebook (a ``__main__`` module without ``__file__``, kernel threads running) and a guarded script. Each runs in a
fresh interpreter, scores the bundled UMD example with the default executor (a process pool of 2 workers) and must
run its own top level once: the pool's workers never run the caller's main module
(:mod:`trackeval.engine.pool`). Then the evaluate -> write_results -> track -> evaluate loop of one process, 20 times
beside a CPU hog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import scaled

#: the caller's top level: one line in the marker file per run of it (the caller's pid and ``__name__``)
MARK = """
import os
with open(os.environ["CALLER_MARK"], "a", encoding="utf-8") as mark:
    mark.write(f"{os.getpid()} {__name__}\\n")
"""

#: score the UMD example with the default executor; print the aggregates and how the pool started its workers
SCORE = """
import json, multiprocessing.forkserver
import trackeval
from trackeval.demo.umd_example import example_inputs
from trackeval.engine.pool import start_method

cfg = trackeval.load_config(None, ["engine.cache=false", "engine.workers=2", f"engine.start_method={START}"])
result = trackeval.evaluate("umd", example_inputs(), cfg)
server = multiprocessing.forkserver._forkserver._forkserver_pid is not None
print(json.dumps({"method": start_method(START), "forkserver": server,
                  "aggregates": {k: v.value for k, v in result.aggregates.items()}}))
"""

TORCH = "import torch\ntorch.ones(1)\n"

#: a notebook kernel as IPython runs one: ``__main__`` is a plain module without ``__file__``, a heartbeat
#: thread runs, and each cell is compiled as ``<cell N>`` and executed in the module's namespace
NOTEBOOK = """
import sys, threading, types
main = types.ModuleType("__main__", doc="Automatically created module for IPython interactive environment")
main.__dict__["__builtins__"] = __builtins__
sys.modules["__main__"] = main
threading.Thread(target=threading.Event().wait, name="heartbeat", daemon=True).start()
for number, cell in enumerate(sys.argv[1:], 1):
    exec(compile(cell, f"<cell {number}>", "exec"), main.__dict__)
"""


@pytest.fixture(scope="module")
def expected() -> dict[str, float | None]:
    """The UMD example's aggregates scored in this process (``engine.executor=local``)."""
    import trackeval
    from trackeval.demo.umd_example import example_inputs

    cfg = trackeval.load_config(None, ["engine.executor=local", "engine.cache=false"])
    result = trackeval.evaluate("umd", example_inputs(), cfg)
    return {k: v.value for k, v in result.aggregates.items()}


def _run(args: list[str], tmp_path: Path, timeout_s: float = 300) -> tuple[dict, list[str]]:
    """Run ``python args...`` in ``tmp_path``; its exit status must be 0. Returns its last stdout line (JSON) and
    the marker file's lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRACKEVAL_"))}
    env["CALLER_MARK"] = str(tmp_path / "mark.txt")
    proc = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(timeout_s)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = (tmp_path / "mark.txt").read_text(encoding="utf-8").splitlines()
    return json.loads(proc.stdout.strip().splitlines()[-1]), marks


def _check(out: dict, marks: list[str], expected: dict[str, float | None], method: str) -> None:
    """The caller's top level ran once, as ``__main__``; the pool started as ``method``; the numbers are the
    in-process ones."""
    assert len(marks) == 1 and marks[0].endswith(" __main__"), marks
    assert out["method"] == method
    assert out["forkserver"] is (method == "forkserver")
    assert out["aggregates"] == expected
    assert out["aggregates"]["umd/dsc"] is not None and 0 < out["aggregates"]["umd/dsc"] < 1


@pytest.mark.slow
@pytest.mark.parametrize("start", ["auto", "spawn"])
def test_unguarded_script_that_loaded_torch_runs_its_top_level_once(tmp_path: Path, expected, start: str) -> None:
    script = tmp_path / "train_and_score.py"
    script.write_text(MARK + TORCH + f"START = {start!r}\n" + SCORE, encoding="utf-8")
    out, marks = _run([str(script)], tmp_path)
    _check(out, marks, expected, "forkserver" if start == "auto" else "spawn")  # torch loaded: no fork


@pytest.mark.slow
def test_python_dash_m_module_runs_once(tmp_path: Path, expected) -> None:
    """``python -m``: multiprocessing would re-run the module by name (``init_main_from_name``)."""
    (tmp_path / "score_module.py").write_text(MARK + TORCH + "START = 'auto'\n" + SCORE, encoding="utf-8")
    out, marks = _run(["-m", "score_module"], tmp_path)
    _check(out, marks, expected, "forkserver")


@pytest.mark.slow
def test_python_dash_c_runs_once(tmp_path: Path, expected) -> None:
    out, marks = _run(["-c", MARK + TORCH + "START = 'auto'\n" + SCORE], tmp_path)
    _check(out, marks, expected, "forkserver")


@pytest.mark.slow
def test_notebook_cells_run_once(tmp_path: Path, expected) -> None:
    """The marker is the first cell; the kernel's thread rules out forking."""
    out, marks = _run(["-c", NOTEBOOK, MARK, "START = 'auto'\n" + SCORE], tmp_path)
    _check(out, marks, expected, "forkserver")


@pytest.mark.slow
def test_guarded_script_runs_its_top_level_once(tmp_path: Path, expected) -> None:
    script = tmp_path / "guarded.py"
    body = textwrap.indent("START = 'auto'\n" + SCORE, "    ")
    script.write_text(MARK + TORCH + "\nif __name__ == '__main__':\n" + body, encoding="utf-8")
    out, marks = _run([str(script)], tmp_path)
    _check(out, marks, expected, "forkserver")


#: evaluate -> write_results -> track inside ``mlflow.start_run()`` -> evaluate, ``argv[2]`` times in one process
LOOP = """
import json, sys
from pathlib import Path
import mlflow
import trackeval
from trackeval.demo.umd_example import example_inputs
from trackeval.engine.pool import start_method


def main() -> None:
    tmp, rounds = Path(sys.argv[1]), int(sys.argv[2])
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    overrides = ["engine.cache=false", "engine.workers=2", f"tracking.uri={uri}",
                 f"tracking.artifact_location={tmp / 'artifacts'}"]
    cfg = trackeval.load_config(None, overrides)
    mlflow.set_tracking_uri(uri)
    rounds_out = []
    for i in range(rounds):
        model = {"name": "seg", "version": f"v{i}"}
        methods = [start_method()]
        first = trackeval.evaluate("umd", example_inputs(), cfg, model=model)
        trackeval.write_results(first, tmp / f"results-{i}")
        with mlflow.start_run():
            tracked = trackeval.track(tmp / f"results-{i}", config=cfg)
            methods.append(start_method())
            second = trackeval.evaluate("umd", example_inputs(), cfg, model=model)
        same = first.model_dump(exclude={"data"}) == second.model_dump(exclude={"data"})
        rounds_out.append({"methods": methods, "same": same, "tracked": len(tracked),
                           "dsc": second.aggregates["umd/dsc"].value})
    print(json.dumps(rounds_out))


if __name__ == "__main__":
    main()
"""


@pytest.fixture
def cpu_hog() -> Iterator[subprocess.Popen]:
    """A process that keeps one core busy for the test's duration (a loaded 2-core machine)."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait(timeout=scaled(30))


@pytest.mark.slow
def test_evaluate_track_evaluate_loop_passes_20_times_beside_a_cpu_hog(tmp_path: Path, expected, cpu_hog) -> None:
    script = tmp_path / "loop.py"
    script.write_text(MARK + LOOP, encoding="utf-8")
    out, marks = _run([str(script), str(tmp_path), "20"], tmp_path, timeout_s=1500)
    assert cpu_hog.poll() is None  # the hog ran throughout
    assert len(marks) == 1, marks
    assert len(out) == 20
    for i, round_ in enumerate(out):
        assert round_["same"] and round_["tracked"] == 1, (i, round_)
        assert round_["dsc"] == expected["umd/dsc"], (i, round_)
