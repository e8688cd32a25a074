"""The per-case cache is evidence: an entry is used only for the exact computation that produced it.

Each case primes ``.trackeval-cache`` with a real UMD run (process pool, 2 workers: the warnings cross the process
boundary), breaks one entry (or the folder) the way an editor, a copy, a crash, an upgrade or a hostile file
system would, and re-runs: exit 0, ``results.json`` byte-identical to a ``--no-cache`` run, exactly one warning
naming the cache file, and (where the entry can be replaced) a healed entry that the next run uses silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scaled, umd_argv
from tests.results_doc import results_doc

CACHE = Path(".trackeval-cache")  # the default engine.cache_dir, relative to the test's own working directory
LOGGER = "trackeval.engine.cache"
POOL = ("--workers", "2", "--set", "bootstrap.n_resamples=100")


def _canonical(value: Any) -> bytes:
    """How an entry's record digest is taken (engine/cache.py): sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


@dataclass
class Primed:
    """A dataset, its ``--no-cache`` results and a cache primed by one run."""

    gt: Path
    pred: Path
    reference: bytes
    tmp: Path
    runs: int = 0

    def entries(self) -> dict[str, Path]:
        """``{case_id: entry path}`` of the valid-looking entries (as the cache names them: relative)."""
        out = {}
        for path in sorted((CACHE / "umd").rglob("*.json")):
            if path.is_file() and not path.is_symlink():
                out[_record(json.loads(path.read_text(encoding="utf-8")))["case_id"]] = path
        return out


def _record(entry: dict) -> dict:
    """The case record of an entry (trackeval 0.2.0 stored the bare record: the probes of the issue run on it too)."""
    return entry["record"] if "record" in entry else entry


def _run(cli, primed: Primed, *extra: str) -> bytes:
    primed.runs += 1
    out = primed.tmp / f"out{primed.runs}"
    outcome = cli(*umd_argv(primed.gt, primed.pred, out, *POOL, *extra))
    assert outcome.rc == 0, outcome.err
    return (out / "results.json").read_bytes()


def _cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "WARNING"]


def _fresh_code_identity() -> None:
    """Forget this process's code identity (computed once per process), so that it and the ``trackeval``
    subprocesses of a test hash the same source even when the tree was edited since this session began."""
    from trackeval.engine.cache import code_identity

    code_identity.cache_clear()


@pytest.fixture
def primed(cli, umd_dataset, tmp_path: Path, caplog) -> Primed:
    _fresh_code_identity()
    gt, pred = umd_dataset()
    p = Primed(gt, pred, b"", tmp_path)
    p.reference = _run(cli, p, "--no-cache")
    assert _run(cli, p) == p.reference
    assert sorted(p.entries()) == ["s1_ct", "s1_pet", "s2_ct", "s2_pet"]
    assert _cache_warnings(caplog) == []
    return p


def _rerun(cli, caplog, primed: Primed, named: Path | str, *needles: str, heals: bool = True) -> str:
    """Re-run: the no-cache results, exactly one warning naming ``named`` (and holding ``needles``), exit 0;
    with ``heals``, a further run is silent (the entry was rewritten and verifies)."""
    caplog.clear()
    assert _run(cli, primed) == primed.reference
    warnings = _cache_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert str(named) in warnings[0], warnings[0]
    for needle in needles:
        assert needle in warnings[0], (needle, warnings[0])
    if heals:
        caplog.clear()
        assert _run(cli, primed) == primed.reference
        assert _cache_warnings(caplog) == []
        assert sorted(primed.entries()) == ["s1_ct", "s1_pet", "s2_ct", "s2_pet"]
    return warnings[0]


def _edit(path: Path, change: Callable[[dict], None], *, redigest: bool = False) -> None:
    entry = json.loads(path.read_text(encoding="utf-8"))
    change(entry)
    if redigest and "record" in entry:  # a careful editor: the record digest matches the edited record
        entry["record_sha256"] = hashlib.sha256(_canonical(entry["record"])).hexdigest()
    path.write_text(json.dumps(entry), encoding="utf-8")


# --- tampered --------------------------------------------------------------------------------------------------


def test_edited_numbers_are_not_trusted(cli, caplog, primed):
    """The issue's probe: every Dice of a case set to 1.0 (0.355 -> 1.000 for the headline before the fix)."""
    path = primed.entries()["s1_pet"]

    def perfect(entry: dict) -> None:
        for values in _record(entry)["metrics"].values():
            if "dsc" in values:
                values["dsc"] = 1.0

    _edit(path, perfect)
    _rerun(cli, caplog, primed, path, "does not match its digest")


def test_swapped_slots_do_not_duplicate_a_case(cli, caplog, primed):
    """One case's entry copied into another case's slot: each case is listed once, with its own numbers."""
    entries = primed.entries()
    entries["s1_pet"].write_bytes(entries["s1_ct"].read_bytes())
    _rerun(cli, caplog, primed, entries["s1_pet"], "for another case", heals=False)
    cases = [c["case_id"] for c in results_doc(primed.tmp / f"out{primed.runs}")["cases"]]
    assert sorted(cases) == ["s1_ct", "s1_pet", "s2_ct", "s2_pet"]


def test_record_for_another_case_under_a_consistent_envelope(cli, caplog, primed):
    """Key, material and digest all consistent, but the record names another case."""
    path = primed.entries()["s2_ct"]
    _edit(path, lambda e: _record(e).update(case_id="s1_ct"), redigest=True)
    _rerun(cli, caplog, primed, path, "its record is for another case")


# --- damaged ---------------------------------------------------------------------------------------------------


def test_truncated_entry(cli, caplog, primed):
    path = primed.entries()["s2_pet"]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _rerun(cli, caplog, primed, path, "not JSON")


def test_empty_entry(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    path.write_bytes(b"")
    _rerun(cli, caplog, primed, path, "not JSON")


def test_binary_garbage_entry(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" + os.urandom(64))
    _rerun(cli, caplog, primed, path, "not UTF-8")


def test_json_that_is_not_an_object(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    path.write_text("[0.355, 1.0]", encoding="utf-8")
    _rerun(cli, caplog, primed, path, "a JSON list")


def test_deeply_nested_json_is_not_fatal(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    _rerun(cli, caplog, primed, path, "RecursionError")


def test_valid_json_but_not_a_valid_record(cli, caplog, primed):
    """The issue's probe: exit 2 ``invalid CaseRecord ... [field=subject_id]`` before the fix; now a miss."""
    path = primed.entries()["s2_ct"]
    _edit(path, lambda e: _record(e).pop("subject_id"), redigest=True)
    _rerun(cli, caplog, primed, path, "not a valid case record (subject_id")


def test_entry_of_the_previous_format(cli, caplog, primed):
    """What trackeval 0.2.0 wrote: the bare record, no key, no digest."""
    path = primed.entries()["s2_ct"]
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8"))["record"]), encoding="utf-8")
    _rerun(cli, caplog, primed, path, "not a cache entry of format")


def test_oversized_entry(cli, caplog, primed):
    path = primed.entries()["s1_pet"]
    with path.open("ab") as f:
        f.write(b" " * (16 * 2**20 + 1))
    _rerun(cli, caplog, primed, path, "larger than")


# --- foreign or stale --------------------------------------------------------------------------------------------


def test_wrong_key_inside(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    _edit(path, lambda e: e.update(key="0" * 64))
    _rerun(cli, caplog, primed, path, "not its own")


def test_wrong_case_identity(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    _edit(path, lambda e: e["case"].update(subject_id="s9"))
    _rerun(cli, caplog, primed, path, "for another case")


def test_stale_code_version(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    _edit(path, lambda e: e.update(code="trackeval 0.1.0+src.0000000000000000 numpy 1.0 scipy 1.0"))
    _rerun(cli, caplog, primed, path, "another version of the scoring code")


def test_other_config(cli, caplog, primed):
    path = primed.entries()["s1_ct"]
    _edit(path, lambda e: e.update(config_sha256=hashlib.sha256(b"{}").hexdigest()))
    _rerun(cli, caplog, primed, path, "for another configuration")


@pytest.mark.parametrize("role", ["truth", "prediction"])
def test_other_input_digest(cli, caplog, primed, role):
    path = primed.entries()["s2_pet"]
    _edit(path, lambda e: e["inputs"].update({role: "0" * 64}))
    _rerun(cli, caplog, primed, path, "for other input files")


def test_changed_code_identity_recomputes_without_a_warning(cli, caplog, primed, monkeypatch):
    """A real code change (another trackeval, an edited module) is a plain miss: new keys, nothing stale read."""
    import trackeval.engine.cache as cache

    monkeypatch.setattr(cache, "code_identity", lambda: "trackeval 9.9.9+src.ffffffffffffffff numpy 1 scipy 1")
    caplog.clear()
    assert _run(cli, primed) == primed.reference
    assert _cache_warnings(caplog) == []
    assert len(list((CACHE / "umd").rglob("*.json"))) == 8  # the old entries stay; new ones for the new code


def test_the_code_identity_covers_every_layer_scoring_can_import():
    """The digest covers ``benchmarks`` and every layer the import rules let it reach, so no per-case number can
    change without a new key (a new layer for ``benchmarks`` must be added to the digest too)."""
    from tests.test_units import ALLOWED, LEAVES
    from trackeval.engine.cache import SCORING_CODE, code_identity

    covered = {name.removesuffix(".py") for name in SCORING_CODE}
    # _moved only forwards the former module paths (aliases no scoring code imports): no number depends on it
    assert covered == {"benchmarks"} | ALLOWED["benchmarks"] | (LEAVES - {"_moved"})
    assert code_identity().startswith("trackeval ") and "+src." in code_identity()


def test_changed_config_recomputes_without_a_warning(cli, caplog, primed):
    reference = _run(cli, primed, "--no-cache", "--set", "umd.nsd_tolerance_mm=3")
    caplog.clear()
    assert _run(cli, primed, "--set", "umd.nsd_tolerance_mm=3") == reference != primed.reference
    assert _cache_warnings(caplog) == []


# --- not a file, not a folder ------------------------------------------------------------------------------------


def test_symlink_as_an_entry(cli, caplog, primed):
    """A symlink to another (valid) entry is never followed."""
    entries = primed.entries()
    entries["s1_pet"].unlink()
    entries["s1_pet"].symlink_to(entries["s1_ct"].resolve())
    _rerun(cli, caplog, primed, entries["s1_pet"], "symbolic link")
    assert not entries["s1_pet"].is_symlink()


def test_fifo_as_an_entry_does_not_hang(cli, caplog, primed):
    path = primed.entries()["s2_ct"]
    path.unlink()
    os.mkfifo(path)
    _rerun(cli, caplog, primed, path, "a FIFO")


def test_folder_as_an_entry(cli, caplog, primed):
    """A folder where an entry should be cannot be replaced: still one warning per run, folded."""
    path = primed.entries()["s2_ct"]
    path.unlink()
    path.mkdir()
    _rerun(cli, caplog, primed, path, "a folder", "could not be replaced", heals=False)


def test_cache_folder_that_is_a_file(cli, caplog, primed):
    import shutil

    shutil.rmtree(CACHE)
    CACHE.write_text("not a folder\n", encoding="utf-8")
    _rerun(cli, caplog, primed, CACHE, "not usable", heals=False)
    assert CACHE.read_text(encoding="utf-8") == "not a folder\n"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_cache_folder(cli, caplog, primed):
    import shutil

    shutil.rmtree(CACHE)
    CACHE.mkdir()
    CACHE.chmod(0o555)
    try:
        _rerun(cli, caplog, primed, CACHE, "not usable", heals=False)
    finally:
        CACHE.chmod(0o755)


# --- concurrency -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_writers_share_one_cache(cli, caplog, umd_dataset, tmp_path: Path):
    """Two evaluations at once on one cold cache (real processes, each with its pool): both give the no-cache
    results with no warning, and a third run is served from what they wrote, silently."""
    _fresh_code_identity()
    gt, pred = umd_dataset()
    primed = Primed(gt, pred, b"", tmp_path)
    primed.reference = _run(cli, primed, "--no-cache")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "trackeval.cli", *umd_argv(gt, pred, tmp_path / f"w{i}", *POOL)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for i, proc in enumerate(procs):
        _, err = proc.communicate(timeout=scaled(300))
        assert proc.returncode == 0, err
        assert "case cache" not in err, err
        assert (tmp_path / f"w{i}" / "results.json").read_bytes() == primed.reference
    assert sorted(primed.entries()) == ["s1_ct", "s1_pet", "s2_ct", "s2_pet"]
    assert not [p for p in (CACHE / "umd").rglob("*") if p.is_file() and not p.name.endswith(".json")]  # no temp
    caplog.clear()
    assert _run(cli, primed) == primed.reference
    assert _cache_warnings(caplog) == []


@pytest.mark.slow
def test_the_warning_reaches_the_terminal_once(cli, primed):
    """Through the real command (its own process and logging): one ``WARNING:`` line on stderr naming the file."""
    path = primed.entries()["s1_pet"]
    _edit(path, lambda e: e["record"]["metrics"]["liver"].update(dsc=1.0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    out = primed.tmp / "terminal"
    proc = subprocess.run(
        [sys.executable, "-m", "trackeval.cli", *umd_argv(primed.gt, primed.pred, out, *POOL)],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "case cache" in line]
    assert lines == [
        f"WARNING: ignored case cache entry {path}: its record does not match its digest (edited or "
        "corrupted); the case was recomputed"
    ], proc.stderr
    assert (out / "results.json").read_bytes() == primed.reference
