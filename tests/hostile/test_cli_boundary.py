"""The CLI boundary: whatever escapes a command is one ``trackeval: error:`` line with a documented exit status.

Exit 2 for bad input (deliberate errors, OSError on a path, pydantic ValidationError), 1 for internal errors
(a bug: any other exception), 130 for Ctrl-C; ``--debug`` / ``TRACKEVAL_DEBUG=1`` add the traceback. Real faults
where the input can cause them (a file where a folder should be, a missing data folder, broken YAML); injected
exceptions (``monkeypatch`` on :func:`trackeval.api.evaluate`) for internal errors, which no input causes on
purpose. After every failed ``evaluate``, ``--out`` does not exist.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from tests.conftest import REPO, scaled, umd_argv
from trackeval.errors import DEBUG_HINT, ConfigError, InputError, OutputError

FAST = ("--executor", "local", "--set", "bootstrap.n_resamples=20")


class _Strict(BaseModel):
    threshold: float


def _validation_error() -> ValidationError:
    try:
        _Strict.model_validate({"threshold": "high"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def _raise(exc: BaseException):
    def fail(*args, **kwargs):
        raise exc

    return fail


#: (exception raised inside ``evaluate``, exit status, needles of the one line)
INJECTED = [
    pytest.param(ZeroDivisionError("division by zero"), 1, ["internal error in trackeval evaluate umd:",
                 "ZeroDivisionError: division by zero", "please report it"], id="zero-division"),
    pytest.param(KeyError("dsc"), 1, ["internal error", "KeyError: 'dsc'"], id="key-error"),
    pytest.param(RuntimeError("first line\nsecond line\n\tthird"), 1,
                 ["RuntimeError: first line second line third"], id="multi-line-message"),
    pytest.param(AssertionError(), 1, ["internal error in trackeval evaluate umd: AssertionError:"], id="assert"),
    pytest.param(RecursionError("maximum recursion depth exceeded"), 1, ["RecursionError"], id="recursion"),
    pytest.param(MemoryError(), 1, ["internal error", "MemoryError"], id="memory"),
    pytest.param(TypeError("x" * 5000), 1, ["TypeError: xxx", "..."], id="huge-message-cut"),
    pytest.param(GeneratorExit(), 1, ["internal error", "GeneratorExit"], id="generator-exit"),
    pytest.param(PermissionError(errno.EACCES, "Permission denied", "/data/gt/manifest.csv"), 2,
                 ["trackeval evaluate umd: PermissionError: Permission denied", "file=/data/gt/manifest.csv"],
                 id="permission"),
    pytest.param(OSError(errno.ENOSPC, "No space left on device"), 2,
                 ["trackeval evaluate umd: OSError: No space left on device"], id="disk-full"),
    pytest.param(FileNotFoundError(errno.ENOENT, "No such file or directory", "a.nii.gz", "b.nii.gz"), 2,
                 ["FileNotFoundError", "file=a.nii.gz"], id="not-found-two-names"),
    pytest.param(ConnectionError("connection refused by 127.0.0.1:5000"), 2,
                 ["ConnectionError: connection refused by 127.0.0.1:5000"], id="connection"),
    pytest.param(_validation_error(), 2, ["invalid _Strict", "field=threshold"], id="pydantic-validation"),
    pytest.param(InputError("bad\nvoxel", file="x.nii.gz", case_id="c1", field="dim"), 2,
                 ["bad voxel [file=x.nii.gz, case=c1, field=dim]"], id="input-error"),
    pytest.param(ConfigError("invalid config (x): field a: b"), 2, ["invalid config (x): field a: b"], id="config"),
    pytest.param(OutputError("cannot write the outputs to o: Read-only"), 2, ["cannot write"], id="output"),
    pytest.param(KeyboardInterrupt(), 130, ["trackeval evaluate umd: interrupted (Ctrl-C)"], id="ctrl-c"),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "rc", "needles"), INJECTED)
def test_every_exception_is_one_line_with_a_documented_status(
    cli, monkeypatch, umd_dataset, tmp_path, exc, rc, needles
):
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    monkeypatch.setattr("trackeval.api.evaluate", _raise(exc))
    line = cli(*umd_argv(gt, pred, out, *FAST)).one_line_error(*needles, rc=rc)
    deliberate = isinstance(exc, (InputError, ConfigError, OutputError, KeyboardInterrupt))
    assert (DEBUG_HINT in line) != deliberate, line  # the hint on every unexpected exception
    assert len(line) < 1200
    assert not out.exists()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_prints_the_traceback_then_the_line(cli, monkeypatch, umd_dataset, tmp_path, how):
    gt, pred = umd_dataset()
    monkeypatch.setattr("trackeval.api.evaluate", _raise(ZeroDivisionError("boom")))
    argv = umd_argv(gt, pred, tmp_path / "out", *FAST)
    if how == "flag":
        res = cli("--debug", *argv)
    else:
        monkeypatch.setenv("TRACKEVAL_DEBUG", "1")
        res = cli(*argv)
    assert res.rc == 1
    assert "Traceback (most recent call last)" in res.err and "ZeroDivisionError: boom" in res.err
    assert res.err.rstrip().splitlines()[-1].startswith("trackeval: error: internal error in trackeval evaluate umd")
    assert not (tmp_path / "out").exists()


def test_real_oserror_on_a_user_path_exits_2_naming_it(cli, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    res = cli("data", "umd-example", "--out", blocker / "example")
    res.one_line_error("trackeval data umd-example: NotADirectoryError", f"file={blocker / 'example'}", DEBUG_HINT)
    assert blocker.read_text() == "not a folder"


def test_missing_pipeline_data_exits_2_naming_the_file(cli, tmp_path):
    (tmp_path / "params.yaml").write_text("")
    res = cli("pipeline", "prepare", "--params", tmp_path / "params.yaml", "--data", tmp_path / "nodata")
    res.one_line_error("trackeval pipeline prepare: FileNotFoundError", f"{tmp_path / 'nodata'}", DEBUG_HINT)
    assert not (tmp_path / "work").exists()


def test_multi_line_yaml_error_is_one_line(cli, umd_dataset, tmp_path):
    gt, pred = umd_dataset()
    bad = tmp_path / "params.yaml"
    bad.write_text("umd:\n  nsd_tolerance_mm: [1, 2\nbootstrap: {}\n")
    res = cli(*umd_argv(gt, pred, tmp_path / "out", "--config", bad))
    res.one_line_error("cannot read config file", str(bad), rc=2)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["evaluate", "umd", "--out", "o"], "required"),
        (["evaluate", "nope", "--out", "o"], "invalid choice"),
        (["--debug"], "required"),
    ],
    ids=["missing-option", "unknown-benchmark", "no-command"],
)
def test_usage_errors_stay_argparse_exit_2(capsys, argv, needle):
    from trackeval.cli import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle in err and "Traceback" not in err
    assert not Path("o").exists()


@pytest.mark.slow
def test_a_real_process_exits_2_with_one_line_and_no_traceback(tmp_path):
    """The console entry point end to end: a missing ground-truth folder, exit 2, one line."""
    proc = subprocess.run(
        [sys.executable, "-m", "trackeval.cli", "evaluate", "umd", "--ground-truth", "nope", "--predictions",
         "nope", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=scaled(120), env={"PATH": "", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("trackeval: error:")]
    assert lines == ["trackeval: error: ground-truth folder not found [file=nope]"], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
