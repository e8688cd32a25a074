"""The hostile-input suite: inputs and faults a careless user, a malicious file or a flaky environment produce.

Every case asserts the exit code, the one-line message (and the file / case / field it names) and what is left
in ``--out`` and in the MLflow store afterwards. The catalogue is in the README's troubleshooting table.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trackeval.cli import main


@dataclass(frozen=True)
class CliOutcome:
    """Exit code and captured output of one in-process ``trackeval`` call."""

    rc: int
    out: str
    err: str

    def one_line_error(self, *needles: str, rc: int = 2) -> str:
        """Assert exit ``rc`` and a single ``trackeval: error:`` line on stderr (no traceback) holding every
        needle; returns that line."""
        assert self.rc == rc, (self.rc, self.err)
        assert "Traceback" not in self.err, self.err
        lines = [line for line in self.err.splitlines() if line.startswith("trackeval: error:")]
        assert len(lines) == 1, self.err
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        return lines[0]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """``cli(*argv)`` runs ``trackeval`` in-process and returns a :class:`CliOutcome`."""

    def run(*argv: str) -> CliOutcome:
        capsys.readouterr()
        rc = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliOutcome(rc, captured.out, captured.err)

    return run
