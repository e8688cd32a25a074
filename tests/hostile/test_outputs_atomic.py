"""The three outputs change as one set: a fault at any step of a write leaves the previous complete set (or nothing).

Faults that the file system cannot be made to produce on demand (a failing ``rename``, ``fsync`` or ``link``, a
``KeyboardInterrupt``) are injected by wrapping ``os.replace`` / ``os.fsync`` / ``os.link`` to raise at their
k-th call; a full disk is real (``RLIMIT_FSIZE``: writes beyond the limit fail with ``EFBIG``); a kill is a real
``SIGKILL`` of a child process. After each, the folder holds the previous set, byte for byte and readable through
the verifying reader, or a set that the reader refuses, never a mixed set that reads as valid.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import gate_data
from tests.conftest import REPO, scaled, umd_argv
from trackeval.errors import InputError, OutputError
from trackeval.io import atomic
from trackeval.io.results_folder import CASES_PARQUET, METRICS_JSON, RESULTS_JSON, read_results, write_outputs
from trackeval.results import BenchmarkResult

SET = (RESULTS_JSON, METRICS_JSON, CASES_PARQUET)
#: files of an --out folder that are not part of the set (figures, a report): never touched by a write
BYSTANDERS = {"report.html": b"<html>kept</html>", "figures/umd__dsc__by_organ.png": b"\x89PNG kept"}


@pytest.fixture(scope="module")
def two_results(tmp_path_factory) -> tuple[BenchmarkResult, BenchmarkResult, Path]:
    """Two real UMD results of different model versions (every file of the set differs) and their ground truth."""
    root = tmp_path_factory.mktemp("umd")
    gt = gate_data.make_ground_truth(root)
    cfg = gate_data.config("engine.cache=false")
    old, _ = gate_data.evaluate_version(root, gt, "champion", cfg)
    new, _ = gate_data.evaluate_version(root, gt, "improved", cfg)
    return old, new, gt


def _previous_set(out: Path, result: BenchmarkResult) -> dict[str, bytes]:
    """Write ``result`` and the bystanders into ``out``; the folder's bytes by relative path."""
    write_outputs(result, out)
    for name, data in BYSTANDERS.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return _snapshot(out)


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _fail_at(real: Callable, k: int, *, persistent: bool = False, exc: BaseException | None = None) -> Callable:
    """``real`` raising ``exc`` (default an ``EIO`` OSError) at its k-th call (and after it, if ``persistent``)."""
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == k or (persistent and calls["n"] > k):
            raise exc if exc is not None else OSError(errno.EIO, "injected I/O error")
        return real(*args, **kwargs)

    return wrapped


# every step of a write that can fail: 3 fsyncs of the staged files + 1 of the folder, 3 renames
STEPS = [("fsync", k) for k in (1, 2, 3, 4)] + [("replace", k) for k in (1, 2, 3)]


@pytest.mark.parametrize(("call", "k"), STEPS)
def test_a_fault_at_any_step_keeps_the_previous_set(two_results, tmp_path, monkeypatch, call, k):
    old, new, _ = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    monkeypatch.setattr(os, call, _fail_at(getattr(os, call), k))
    with pytest.raises(OutputError, match="cannot write the outputs .* injected I/O error"):
        write_outputs(new, out)
    monkeypatch.undo()
    assert _snapshot(out) == before  # the previous set and the bystanders, byte for byte; no staging folder left
    assert read_results(out) == old


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_failed_backup_of_the_kth_file_keeps_the_previous_set(two_results, tmp_path, monkeypatch, k):
    """No hard links on this file system (``os.link`` fails), and the fallback copy of the k-th file fails too."""
    old, new, _ = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    monkeypatch.setattr(os, "link", _fail_at(os.link, 1, persistent=True))
    monkeypatch.setattr(shutil, "copy2", _fail_at(shutil.copy2, k))
    with pytest.raises(OutputError, match="injected I/O error"):
        write_outputs(new, out)
    monkeypatch.undo()
    assert _snapshot(out) == before and read_results(out) == old


def test_a_link_free_file_system_falls_back_to_copies(two_results, tmp_path, monkeypatch):
    """``os.link`` unsupported (EPERM on some network file systems): backups are copies; the write succeeds,
    and a fault after it still restores the previous set."""
    old, new, _ = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    monkeypatch.setattr(os, "link", _fail_at(os.link, 1, persistent=True))
    monkeypatch.setattr(os, "replace", _fail_at(os.replace, 3))
    with pytest.raises(OutputError):
        write_outputs(new, out)
    assert _snapshot(out) == before
    write_outputs(new, out)
    monkeypatch.undo()
    assert read_results(out) == new and (out / "report.html").read_bytes() == BYSTANDERS["report.html"]


def test_keyboard_interrupt_mid_switch_restores_the_previous_set(two_results, tmp_path, monkeypatch):
    old, new, _ = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    monkeypatch.setattr(os, "replace", _fail_at(os.replace, 3, exc=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_outputs(new, out)
    monkeypatch.undo()
    assert _snapshot(out) == before and read_results(out) == old


# k=3 leaves both cases.parquet and metrics.json new: the case table, checked first, is named
@pytest.mark.parametrize(("k", "torn"), [(2, CASES_PARQUET), (3, CASES_PARQUET)])
def test_when_even_the_rollback_fails_the_torn_set_is_refused(two_results, tmp_path, monkeypatch, k, torn):
    """Every rename from the k-th on fails, the rollback's included: the folder is mixed, and the reader refuses
    it naming a file that disagrees with results.json (never reads a mix as valid)."""
    old, new, _ = two_results
    out = tmp_path / "out"
    _previous_set(out, old)
    monkeypatch.setattr(os, "replace", _fail_at(os.replace, k, persistent=True))
    with pytest.raises(OutputError):
        write_outputs(new, out)
    monkeypatch.undo()
    assert (out / RESULTS_JSON).read_bytes() == old.to_json().encode()  # results.json is renamed last
    with pytest.raises(InputError) as err:
        read_results(out)
    assert err.value.file == str(out / torn)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_failed_first_write_leaves_nothing(two_results, tmp_path, monkeypatch, k):
    _, new, _ = two_results
    out = tmp_path / "out"
    monkeypatch.setattr(os, "replace", _fail_at(os.replace, k))
    with pytest.raises(OutputError):
        write_outputs(new, out)
    monkeypatch.undo()
    assert list(out.iterdir()) == []
    with pytest.raises(InputError, match="file not found") as err:
        read_results(out)
    assert err.value.file == str(out / RESULTS_JSON)


def test_a_symlinked_output_is_replaced_never_written_through(two_results, tmp_path):
    old, new, _ = two_results
    out = tmp_path / "out"
    write_outputs(old, out)
    victim = tmp_path / "victim.json"
    victim.write_text("do not overwrite")
    (out / RESULTS_JSON).unlink()
    (out / RESULTS_JSON).symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link") as err:
        read_results(out)
    assert err.value.file == str(out / RESULTS_JSON)
    write_outputs(new, out)
    assert victim.read_text() == "do not overwrite" and not (out / RESULTS_JSON).is_symlink()
    assert read_results(out) == new


# ------------------------------------------------------------------------- through the CLI, real faults


_OVERRIDES = (
    "engine.executor=local",
    "engine.cache=false",
    "bootstrap.n_resamples=50",
    "umd.labels=" + str(gate_data.LABELS).replace("'", ""),
)


def _cli_umd(cli, gt: Path, pred: Path, out: Path):
    return cli(*umd_argv(gt, pred, out, *(a for s in _OVERRIDES for a in ("--set", s))))


@pytest.mark.parametrize("limit", ["smallest", "largest"])
def test_a_full_disk_at_evaluate_keeps_the_previous_set(two_results, tmp_path, cli, limit):
    """A real write failure: the file-size limit (``RLIMIT_FSIZE``) makes writing the smallest / largest file of
    the set fail with EFBIG; ``trackeval evaluate`` exits 2 with one line, and ``--out`` keeps the old set."""
    old, new, gt = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    sizes = sorted(len(b) for b in (new.to_json().encode(), (out / METRICS_JSON).read_bytes()))
    cap = sizes[0] // 2 if limit == "smallest" else sizes[-1] - 1
    pred = gate_data.make_predictions(tmp_path, "improved")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))
    try:
        res = _cli_umd(cli, gt, pred, out)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    res.one_line_error("cannot write the outputs", str(out), "File too large", rc=2)
    assert _snapshot(out) == before and read_results(out) == old


def test_an_injected_rename_fault_at_evaluate_is_one_line_and_keeps_the_set(two_results, tmp_path, cli, monkeypatch):
    old, _, gt = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    pred = gate_data.make_predictions(tmp_path, "improved")
    real = os.replace
    staged = _fail_at(real, 2)
    monkeypatch.setattr(os, "replace", lambda a, b: staged(a, b) if atomic.STAGING_PREFIX in str(a) else real(a, b))
    _cli_umd(cli, gt, pred, out).one_line_error("cannot write the outputs", "injected I/O error", rc=2)
    assert _snapshot(out) == before


_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from trackeval.io.results_folder import read_results, write_outputs

    result = read_results(Path(sys.argv[1]))
    k, calls, real = int(sys.argv[3]), [0], os.replace

    def replace(a, b):
        calls[0] += 1
        if calls[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(a, b)

    os.replace = replace
    write_outputs(result, Path(sys.argv[2]))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(("k", "torn"), [(1, None), (2, CASES_PARQUET), (3, CASES_PARQUET)])
def test_a_writer_killed_mid_switch_leaves_the_old_set_or_a_refused_one(two_results, tmp_path, k, torn):
    """SIGKILL before the k-th rename (no rollback can run): before any rename the old set is intact; after one,
    the reader refuses the torn set naming the file that disagrees; the next write repairs the folder."""
    old, new, _ = two_results
    out = tmp_path / "out"
    before = _previous_set(out, old)
    src = tmp_path / "new"
    write_outputs(new, src)
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, str(src), str(out), str(k)],
        cwd=REPO,
        capture_output=True,
        timeout=scaled(120),
    )
    assert proc.returncode == -9, proc.stderr
    assert [p.name for p in out.iterdir() if p.name.startswith(atomic.STAGING_PREFIX)]  # left by the kill
    if torn is None:
        assert {k: v for k, v in _snapshot(out).items() if k in before} == before and read_results(out) == old
    else:
        with pytest.raises(InputError) as err:
            read_results(out)
        assert err.value.file == str(out / torn)
    write_outputs(new, out)
    assert read_results(out) == new


# ------------------------------------------------------------------------- file modes


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_every_output_gets_the_mode_a_plain_open_gives(two_results, tmp_path, cli, mask, mode):
    """The results set (library and CLI), the DVC pipeline's headline.json and plot CSV and a bare
    :func:`~trackeval.io.atomic.atomic_path` write are ``0o666`` less the umask, never ``mkstemp``'s 0600."""
    from trackeval.pipeline.stages import write_headline, write_plot

    old, _, gt = two_results
    pred = gate_data.make_predictions(tmp_path, "improved")
    with _umask(mask):
        written = list(write_outputs(old, tmp_path / "lib").values())
        assert _cli_umd(cli, gt, pred, tmp_path / "cli").rc == 0
        written += [tmp_path / "cli" / name for name in SET]
        write_headline(tmp_path / "dvc" / "headline.json", old)
        write_plot(tmp_path / "dvc" / "plot.csv", [{"case_id": "c1", "dsc": 0.5}])
        with atomic.atomic_path(tmp_path / "bare.txt") as tmp:
            tmp.write_text("x")
        written += [tmp_path / "dvc" / "headline.json", tmp_path / "dvc" / "plot.csv", tmp_path / "bare.txt"]
    assert {p.relative_to(tmp_path).as_posix(): oct(_mode(p)) for p in written} == {
        p.relative_to(tmp_path).as_posix(): oct(mode) for p in written
    }
    assert len(written) == 9


def test_atomic_path_retries_a_taken_temporary_name(tmp_path, monkeypatch):
    """A temporary name already in use (a leftover of a killed writer) is skipped, never opened or removed."""
    names = iter(["taken", "free"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(names))
    leftover = tmp_path / ".out.txt.taken.tmp"
    leftover.write_text("leftover")
    with atomic.atomic_path(tmp_path / "out.txt") as tmp:
        assert tmp.name == ".out.txt.free.tmp"
        tmp.write_text("new")
    assert (tmp_path / "out.txt").read_text() == "new" and leftover.read_text() == "leftover"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.txt.taken.tmp", "out.txt"]
