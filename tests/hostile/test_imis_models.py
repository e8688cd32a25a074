"""Hostile IMIS models: a model cannot hang the run, end it with a success status or fake an output.

Each model below is loaded by ``trackeval evaluate imis --model tests.hostile.test_imis_models:<factory>`` on the
real IMIS demo data, in-process (``--executor local``). Every case asserts exit 2, the one-line message naming
the case, target, prompt and turn (``field=--model``), and that ``--out`` was not created.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, scaled
from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.session import load_model
from trackeval.demo.imis_data import build_imis_demo

MODULE = "tests.hostile.test_imis_models"
#: the hung models wait for this; it is set only when the test is over, to free their abandoned threads
RELEASE = threading.Event()
#: set by a hung model once it is running (so a test can wait for the call to have started)
ENTERED = threading.Event()


class Scripted:
    """Answers ``answer(request)`` from turn ``fail_turn`` on and an exact mask before (the truth is unknown to
    a model, so "exact" = all foreground: a valid bool mask of the right shape)."""

    supported_prompts = ("point",)

    def __init__(self, answer, fail_turn: int = 1) -> None:
        self.answer, self.fail_turn = answer, fail_turn

    def predict(self, request):
        if request.turn >= self.fail_turn:
            return self.answer(request)
        return np.ones(request.spatial_shape, dtype=bool)


def _raises(exc: BaseException):
    def answer(request):
        raise exc

    return answer


def _hang(request):
    ENTERED.set()
    RELEASE.wait()
    return np.zeros(request.spatial_shape, dtype=bool)


def _ctrl_c(request):
    """A real SIGINT to this process while the loop waits for the answer (what Ctrl-C does)."""
    signal.raise_signal(signal.SIGINT)
    RELEASE.wait()
    return np.zeros(request.spatial_shape, dtype=bool)


class _BadTensor:
    """Looks like a torch tensor (``detach``) but cannot be converted."""

    def detach(self):
        raise RuntimeError("CUDA error: device-side assert triggered")


ANSWERS = {
    "hang": _hang,
    "ctrl_c": _ctrl_c,
    "system_exit_0": _raises(SystemExit(0)),
    "system_exit_1": _raises(SystemExit(1)),
    "keyboard_interrupt": _raises(KeyboardInterrupt()),
    "generator_exit": _raises(GeneratorExit()),
    "stop_iteration": _raises(StopIteration()),
    "runtime_error": _raises(RuntimeError("weights not loaded")),
    "memory_error": _raises(MemoryError()),
    "none": lambda r: None,
    "list": lambda r: np.zeros(r.spatial_shape, dtype=bool).tolist(),
    "scalar": lambda r: np.float32(1.0),
    "wrong_shape": lambda r: np.zeros((7, 7), dtype=bool),
    "transposed": lambda r: np.zeros(r.spatial_shape[::-1] + (2,), dtype=bool),
    "nan_logits": lambda r: np.full(r.spatial_shape, np.nan, dtype=np.float32),
    "one_nan_logit": lambda r: np.where(np.eye(*r.spatial_shape, dtype=bool), np.nan, 1.0),
    "complex": lambda r: np.ones(r.spatial_shape, dtype=np.complex64),
    "object": lambda r: np.ones(r.spatial_shape, dtype=object),
    "strings": lambda r: np.full(r.spatial_shape, "1"),
    "bad_tensor": lambda r: _BadTensor(),
}


def scripted(answer: str, fail_turn: str = "1") -> Scripted:
    """Factory for ``--model``: the named hostile answer from turn ``fail_turn`` on."""
    return Scripted(ANSWERS[answer], int(fail_turn))


class _Unsupported:
    supported_prompts = 5

    def predict(self, request):
        return np.zeros(request.spatial_shape, dtype=bool)


def unsupported() -> _Unsupported:
    return _Unsupported()


def exits_on_build():
    raise SystemExit(0)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_imis_demo(tmp_path_factory.mktemp("imis") / "demo")


@pytest.fixture(scope="module")
def first(demo) -> tuple[str, str]:
    """The first case and its first target (sorted): where a model failing at turn 1 is reported."""
    cfg = IMISConfig()
    case = load_cases(demo, cfg)[0][0]
    return case.case_id, sorted(read_case(case, cfg).masks)[0]


@pytest.fixture(autouse=True)
def _fresh_models():
    """Models are cached per process by spec: start each test without one; free any hung call afterwards."""
    load_model.cache_clear()
    RELEASE.clear()
    ENTERED.clear()
    yield
    RELEASE.set()
    load_model.cache_clear()


def _argv(demo: Path, out: Path, model: str, *extra: str) -> list[str]:
    return [
        "evaluate", "imis", "--ground-truth", str(demo), "--model", model, "--out", str(out),
        "--executor", "local", "--set", "imis.prompt_types=[point]", "--set", "imis.max_clicks=3",
        "--set", "bootstrap.n_resamples=20", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "turn", "needle"),
    [
        ("system_exit_0", 1, "SystemExit: 0"),
        ("system_exit_1", 2, "SystemExit: 1"),
        ("keyboard_interrupt", 1, "KeyboardInterrupt"),
        ("generator_exit", 3, "GeneratorExit"),
        ("stop_iteration", 1, "StopIteration"),
        ("runtime_error", 2, "RuntimeError: weights not loaded"),
        ("memory_error", 1, "MemoryError"),
        ("none", 1, "model returned NoneType, expected a numpy array"),
        ("list", 1, "model returned list"),
        ("scalar", 1, "model returned float32"),
        ("wrong_shape", 3, "model output has shape (7, 7)"),
        ("transposed", 1, "model output has shape"),
        ("nan_logits", 1, "NaN logits"),
        ("one_nan_logit", 2, "NaN logits"),
        ("complex", 1, "dtype complex64"),
        ("object", 1, "dtype object"),
        ("strings", 1, "dtype <U1"),
        ("bad_tensor", 1, "cannot be converted to numpy: RuntimeError: CUDA error"),
    ],
)
def test_a_misbehaving_model_is_a_model_error(cli, demo, first, tmp_path, answer, turn, needle):
    case, target = first
    out = tmp_path / "out"
    res = cli(*_argv(demo, out, f"{MODULE}:scripted", "--model-arg", f"answer={answer}", "--model-arg",
                     f"fail_turn={turn}"))  # fmt: skip
    res.one_line_error(
        needle, f"case {case}, target {target}, prompt point, turn {turn}", f"[case={case}, field=--model]", rc=2
    )
    assert not out.exists()


def test_a_hung_model_times_out_naming_case_target_turn(cli, demo, first, tmp_path):
    case, target = first
    out = tmp_path / "out"
    start = time.monotonic()
    res = cli(*_argv(demo, out, f"{MODULE}:scripted", "--model-arg", "answer=hang", "--model-arg", "fail_turn=2",
                     "--set", "imis.model_timeout_s=0.2"))  # fmt: skip
    res.one_line_error(
        "model did not answer within imis.model_timeout_s=0.2 s",
        f"case {case}, target {target}, prompt point, turn 2",
        f"case={case}",
        rc=2,
    )
    assert ENTERED.is_set()  # the call really started and was abandoned, not skipped
    assert time.monotonic() - start < scaled(60)
    assert not out.exists()


def test_ctrl_c_during_a_model_call_exits_130(cli, demo, tmp_path):
    """SIGINT raised on the model's thread: the run stops at once (not after ``imis.model_timeout_s``, 300 s)."""
    out = tmp_path / "out"
    start = time.monotonic()
    res = cli(*_argv(demo, out, f"{MODULE}:scripted", "--model-arg", "answer=ctrl_c"))
    res.one_line_error("trackeval evaluate imis: interrupted (Ctrl-C)", rc=130)
    assert time.monotonic() - start < scaled(60)
    assert not out.exists()


@pytest.mark.parametrize(
    ("factory", "needle", "field"),
    [
        ("exits_on_build", "cannot build model", "field=--model"),
        ("unsupported", "supported_prompts is not a collection", "field=supported_prompts"),
    ],
)
def test_a_model_that_cannot_be_built_or_declared(cli, demo, tmp_path, factory, needle, field):
    out = tmp_path / "out"
    cli(*_argv(demo, out, f"{MODULE}:{factory}")).one_line_error(needle, field, rc=2)
    assert not out.exists()


@pytest.mark.parametrize("timeout", ["0", "-1", ".inf", ".nan", "1e400", "604801"])
def test_model_timeout_must_be_finite_and_positive(cli, demo, tmp_path, timeout):
    out = tmp_path / "out"
    res = cli(*_argv(demo, out, f"{MODULE}:scripted", "--model-arg", "answer=none", "--set",
                     f"imis.model_timeout_s={timeout}"))  # fmt: skip
    res.one_line_error("invalid config", "field imis.model_timeout_s", rc=2)
    assert not out.exists()


def test_the_timeout_is_not_part_of_the_results(cli, demo, tmp_path):
    """A protocol-neutral knob: two runs that differ only in ``imis.model_timeout_s`` write identical results."""
    files = []
    for timeout in ("300", "61.5"):
        out = tmp_path / f"out_{timeout}"
        model = "trackeval.interactive.baselines:region_grower"
        assert cli(*_argv(demo, out, model, "--set", f"imis.model_timeout_s={timeout}")).rc == 0
        files.append((out / "results.json").read_bytes())
    assert files[0] == files[1] and b"model_timeout_s" not in files[0]


@pytest.mark.slow
def test_a_hung_model_does_not_keep_the_process_alive(demo, tmp_path):
    """A real process: the abandoned call's daemon thread never blocks the exit (exit 2 within the deadline)."""
    argv = _argv(demo, tmp_path / "out", f"{MODULE}:scripted", "--model-arg", "answer=hang", "--set",
                 "imis.model_timeout_s=0.5")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRACKEVAL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "trackeval.cli", *argv],
        capture_output=True, text=True, cwd=REPO, timeout=scaled(180), env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "did not answer within imis.model_timeout_s=0.5 s" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
