"""``trackeval evaluate xray --task T`` from a test: the results.json of a run that must succeed, the one error
line of a run that must fail (exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trackeval.cli import main

#: a local executor and few resamples: the tests check values and errors, not interval widths
FAST = ("--executor", "local", "--set", "bootstrap.n_resamples=200")


def _argv(task: str, gt: Path, pred: Path, out: Path) -> list[str]:
    return [
        "evaluate",
        "xray",
        "--task",
        task,
        "--ground-truth",
        str(gt),
        "--predictions",
        str(pred),
        "--out",
        str(out),
    ]


def run_task(task: str, gt: Path, pred: Path, out: Path, *extra: str) -> dict:
    """The results.json of a run that exits 0."""
    assert main([*_argv(task, gt, pred, out), *FAST, *extra]) == 0
    return json.loads((out / "results.json").read_text())


def fail_line(
    capsys: pytest.CaptureFixture[str],
    task: str,
    gt: Path,
    pred: Path,
    out: Path,
    *needles: str,
    extra: tuple[str, ...] = (),
) -> str:
    """The one ``trackeval: error:`` line of a run that exits 2, holding every ``needle``; ``out`` not created."""
    rc = main([*_argv(task, gt, pred, out), *FAST, *extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [x for x in err.splitlines() if x.startswith("trackeval: error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists()
    return lines[0]
