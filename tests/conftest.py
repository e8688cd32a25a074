"""Shared fixtures: small UMD-layout datasets written as real NIfTI files with nibabel; test isolation (own cwd,
no leaked environment or MLflow state); load-tolerant timeouts (:func:`scaled`, :func:`wait_for`); the
Hypothesis profiles (``HYPOTHESIS_PROFILE``: ``dev`` by default, ``ci`` in .ci/run)."""

from __future__ import annotations

import csv
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

REPO = Path(__file__).resolve().parents[1]
#: multiplies every timeout and deadline of the tests (default 1; CI sets 3: its machines are shared)
TIMEOUT_FACTOR_ENV = "TRACKEVAL_TEST_TIMEOUT_FACTOR"
#: environment variables a test must leave as it found them (MLflow reads its store, experiment... from these)
WATCHED_ENV_PREFIXES = ("MLFLOW_", "TRACKEVAL_")

# ci: derandomized (the same examples on every run, whatever pytest-randomly's seed) and no example database;
# dev: random examples, failures remembered under .pytest_cache/ (git-ignored) and replayed first.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", database=DirectoryBasedExampleDatabase(REPO / ".pytest_cache" / "hypothesis"))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def scaled(seconds: float) -> float:
    """``seconds`` times ``TRACKEVAL_TEST_TIMEOUT_FACTOR`` (default 1): every subprocess, server, browser and DVC
    timeout of the tests goes through here, so a loaded machine (CI sets 3) gets proportionally more time.

    Raises:
        pytest.UsageError: the factor is not a finite number > 0.
    """
    raw = os.environ.get(TIMEOUT_FACTOR_ENV, "1")
    try:
        factor = float(raw)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise pytest.UsageError(f"{TIMEOUT_FACTOR_ENV} must be a finite number > 0, got {raw!r}")
    return seconds * factor


def wait_for(condition: Callable[[], bool], seconds: float, what: str, *, poll_s: float = 0.01) -> None:
    """Return as soon as ``condition()`` is true; fail the test naming ``what`` after ``scaled(seconds)``.

    The way tests wait (never a fixed sleep): ``condition`` is polled every ``poll_s`` seconds.
    """
    limit = scaled(seconds)
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {limit:g} s ({TIMEOUT_FACTOR_ENV}={os.environ.get(TIMEOUT_FACTOR_ENV, '1')}) "
                f"waiting for {what}"
            )
        time.sleep(poll_s)


SPACING = (1.5, 1.0, 2.0)


def save_nifti(path: Path, array: np.ndarray, spacing=SPACING, dtype=np.uint8) -> Path:
    img = nib.Nifti1Image(np.asarray(array).astype(dtype), np.diag([*spacing, 1.0]))
    img.header.set_data_dtype(dtype)
    nib.save(img, path)
    return path


def write_manifest(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def evaluate_argv(benchmark: str, gt: Path, pred: Path, out: Path, *extra: str) -> list[str]:
    """``trackeval evaluate <benchmark>`` arguments for the CLI entry point."""
    return ["evaluate", benchmark, "--ground-truth", str(gt), "--predictions", str(pred), "--out", str(out), *extra]


def umd_argv(gt: Path, pred: Path, out: Path, *extra: str) -> list[str]:
    """``trackeval evaluate umd`` arguments for the CLI entry point."""
    return evaluate_argv("umd", gt, pred, out, *extra)


def cube(shape, lo, hi, label: int, out: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros(shape, np.uint8) if out is None else out
    out[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = label
    return out


def _watched_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(WATCHED_ENV_PREFIXES)}


def _mlflow_globals() -> dict[str, object]:
    """MLflow's process-wide fluent state that is not None / empty (only the modules already imported).

    ``mlflow.set_tracking_uri`` / ``set_registry_uri`` / ``set_experiment`` / ``start_run`` set these; a later
    test in the same process would silently log into this test's store.
    """
    found: dict[str, object] = {}
    service = sys.modules.get("mlflow.tracking._tracking_service.utils")
    registry = sys.modules.get("mlflow.tracking._model_registry.utils")
    fluent = sys.modules.get("mlflow.tracking.fluent")
    if service is not None and service._tracking_uri is not None:
        found["mlflow.set_tracking_uri"] = service._tracking_uri
    if registry is not None and registry._registry_uri is not None:
        found["mlflow.set_registry_uri"] = registry._registry_uri
    if fluent is not None and fluent._active_experiment_id is not None:
        found["mlflow.set_experiment"] = fluent._active_experiment_id
    if fluent is not None and fluent.active_run() is not None:
        found["mlflow.start_run (never ended)"] = fluent.active_run().info.run_id
    return found


def _reset_mlflow_globals() -> None:
    """Undo what :func:`_mlflow_globals` found, so one leaking test does not break the ones after it."""
    service = sys.modules.get("mlflow.tracking._tracking_service.utils")
    registry = sys.modules.get("mlflow.tracking._model_registry.utils")
    fluent = sys.modules.get("mlflow.tracking.fluent")
    if fluent is not None:
        while fluent.active_run() is not None:
            fluent._active_run_stack.get().pop()
        fluent._active_experiment_id = None
    if service is not None:
        service._tracking_uri = None
    if registry is not None:
        registry._registry_uri = None


@pytest.fixture(autouse=True)
def _no_leaked_state() -> Iterator[None]:
    """Fail (at teardown) a test that leaves an ``MLFLOW_*`` / ``TRACKEVAL_*`` variable of ``os.environ`` changed
    or MLflow's process-wide tracking URI / registry URI / experiment / active run set, then restore them.

    Checked after every function-scoped fixture (``monkeypatch`` included) has been undone. The fix in the test:
    ``monkeypatch.setenv``, explicit ``tracking_uri=`` arguments, ``MlflowClient`` rather than ``mlflow.set_*``.
    """
    before = _watched_env()
    yield
    after = _watched_env()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    leaked = _mlflow_globals()
    if not changed and not leaked:
        return
    for key in changed:
        if key in before:
            os.environ[key] = before[key]
        else:
            del os.environ[key]
    _reset_mlflow_globals()
    diff = [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in changed]
    diff += [f"{what} left set ({value!r})" for what, value in leaked.items()]
    pytest.fail("the test leaked state into the tests after it: " + "; ".join(diff), pytrace=False)


@pytest.fixture(autouse=True)
def _isolated_cwd(_no_leaked_state: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test in its own folder, so the default case cache (``.trackeval-cache``) is per test.

    Depends on :func:`_no_leaked_state` so that the leak check runs after ``monkeypatch`` is undone.
    """
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def umd_dataset(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    """Factory: two subjects x (ct, pet), organs 1 (liver) and 5 (heart) as boxes; returns (gt, pred) dirs.

    CT predictions shift the liver box by one voxel; PET predictions shrink it; heart is perfect on CT and
    missed on PET for subject s2.
    """

    def make(shape=(20, 18, 12), n_subjects: int = 2) -> tuple[Path, Path]:
        gt, pred = tmp_path / "gt", tmp_path / "pred"
        gt.mkdir()
        pred.mkdir()
        rows = []
        for i in range(n_subjects):
            s, subject = i % 2, f"s{i + 1}"
            truth = cube(shape, (2 + s, 2, 2), (10 + s, 10, 8), 1)
            cube(shape, (12, 11, 3), (17, 16, 9), 5, truth)
            for modality in ("ct", "pet"):
                case = f"{subject}_{modality}"
                if modality == "ct":
                    p = cube(shape, (3 + s, 2, 2), (11 + s, 10, 8), 1)
                    cube(shape, (12, 11, 3), (17, 16, 9), 5, p)
                else:
                    p = cube(shape, (3 + s, 3, 3), (9 + s, 9, 7), 1)
                    if subject == "s1":
                        cube(shape, (12, 11, 3), (16, 16, 9), 5, p)
                save_nifti(gt / f"{case}.nii.gz", truth)
                save_nifti(pred / f"{case}.nii.gz", p)
                rows.append({"case_id": case, "subject_id": subject, "modality": modality, "site": "a"})
        write_manifest(gt / "manifest.csv", rows)
        return gt, pred

    return make
