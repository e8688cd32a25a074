"""Tracking never loses or duplicates an evaluation: faults at every step of ``trackeval track`` and concurrent
``track`` processes.

Faults: the process dies (SIGKILL, in a real subprocess) or an MLflow call fails, right after each MLflow call
of the idempotent unit (parent run, LoggedModel, evaluation run, parent headlines, registered version, its
``eval_run`` tag, the ``challenger`` alias, the parent's FINISHED). A re-run must then complete the unit: one
FINISHED run per idempotency key, nothing RUNNING, a READY LoggedModel, one registered version with its tags and
alias, the headline metrics on the parent. Order: when other results replace a version's evaluation (``--replace``),
a failure at any step before the ``eval_run`` tag (drawing a figure or the report, any MLflow call, the process
killed) leaves the registry (tags, aliases) and the leaderboard as they were, and the re-run completes.
Concurrency: two real ``track`` processes released together by a barrier file, on an SQLite store (existing, and
not yet created) and on a real ``mlflow server``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from tests import test_tracking
from tests.conftest import scaled
from tests.test_tracking import _start_server, _stop
from trackeval.results import BenchmarkResult, headline_metrics
from trackeval.tracking import client as tracking_client
from trackeval.tracking.lineage import idempotency_key

# the fixtures of tests/test_tracking.py: an embedded store per test, the evaluated results folders
migrated_db, store, evaluated = test_tracking.migrated_db, test_tracking.store, test_tracking.evaluated

#: the MLflow calls of one ``track`` of one folder on a fresh store, in order: (method, nth call, what exists then)
STEPS = [
    ("create_run", 1, "parent run RUNNING"),
    ("create_logged_model", 1, "LoggedModel PENDING without files"),
    ("log_model_artifacts", 1, "LoggedModel PENDING with files"),
    ("create_run", 2, "evaluation run RUNNING, empty"),
    ("log_batch", 1, "evaluation run RUNNING with params and the non-headline metrics"),
    ("log_inputs", 1, "evaluation run RUNNING with its dataset"),
    ("log_artifacts", 1, "evaluation run RUNNING with artifacts, nothing linked to the LoggedModel"),
    ("log_batch", 2, "headline metrics linked to the LoggedModel, evaluation run RUNNING"),
    ("set_terminated", 1, "evaluation run FINISHED, nothing registered"),
    ("log_batch", 3, "parent headlines logged"),
    ("create_registered_model", 1, "registered model without version"),
    ("create_model_version", 1, "version without eval_run tag"),
    ("set_model_version_tag", 1, "eval_run tag without alias"),
    ("set_registered_model_alias", 1, "challenger set, parent RUNNING"),
    ("set_terminated", 2, "complete"),
]
#: the evaluation run is FINISHED from this step on: the re-run finds it ("already tracked") and completes the rest
FINISHED_FROM = next(i for i, (method, nth, _) in enumerate(STEPS) if (method, nth) == ("set_terminated", 1))
#: the MLflow calls of ``track --replace`` of other results for a tracked version, up to the one that re-points
#: its ``eval_run`` tag (the LoggedModel and the registered version exist: neither is created again)
REPLACE_STEPS = [
    ("create_run", 1, "parent run RUNNING"),
    ("create_run", 2, "evaluation run RUNNING, empty"),
    ("log_batch", 1, "evaluation run with params and the non-headline metrics"),
    ("log_inputs", 1, "evaluation run with its dataset"),
    ("log_artifacts", 1, "evaluation run with figures, report and results"),
    ("log_batch", 2, "headline metrics linked to the LoggedModel"),
    ("set_terminated", 1, "evaluation run FINISHED"),
    ("log_batch", 3, "parent headlines logged"),
    ("set_model_version_tag", 1, "eval_run tag re-pointed"),
]

#: runs ``trackeval`` after an optional barrier (a file to wait for) and with an optional SIGKILL right after the
#: nth call of an ``MlflowClient`` method: argv = barrier ('' for none), deadline s, method ('' for none), nth, ...
DRIVER = r"""
import os, signal, sys, time
from pathlib import Path
barrier, deadline, method, nth = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if method:
    from mlflow import MlflowClient
    original, calls = getattr(MlflowClient, method), []
    def dying(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls.append(method)
        if len(calls) == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    setattr(MlflowClient, method, dying)
end = time.monotonic() + deadline
while barrier and not Path(barrier).exists():
    if time.monotonic() > end:
        sys.exit("barrier never appeared")
    time.sleep(0.005)
from trackeval.cli import main
sys.exit(main(sys.argv[5:]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def spawn(argv: list[str], *, barrier: Path | None = None, kill_at: tuple[str, int] | None = None) -> subprocess.Popen:
    """A real ``trackeval`` process (see :data:`DRIVER`); stdout and stderr captured."""
    method, nth = kill_at or ("", 0)
    cmd = [sys.executable, "-c", DRIVER, str(barrier or ""), str(scaled(120)), method, str(nth), *map(str, argv)]
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=scaled(300))
    return proc.returncode, err


def _experiment(client: MlflowClient) -> str:
    return client.get_experiment_by_name("trackeval").experiment_id


def runs_of(client: MlflowClient, key: str, status: str | None = None) -> list:
    flt = f"tags.`trackeval.idempotency_key` = '{key}'" + (f" and attributes.status = '{status}'" if status else "")
    return client.search_runs([_experiment(client)], flt)


def versions_of(client: MlflowClient, name: str, version: str) -> list:
    if not client.search_registered_models(f"name = '{name}'"):
        return []
    return [v for v in client.search_model_versions(f"name = '{name}'") if v.tags["trackeval.model_version"] == version]


def assert_complete(client: MlflowClient, result: BenchmarkResult) -> str:
    """The whole unit of ``result`` is in the store exactly once; returns the evaluation run id."""
    name, version = result.model["name"], result.model["version"]
    exp = _experiment(client)
    (run,) = runs_of(client, idempotency_key(result), "FINISHED")
    assert not client.search_runs([exp], "attributes.status = 'RUNNING'")
    heads = headline_metrics(result)
    assert run.data.metrics == pytest.approx(result.flat_metrics())
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"
    assert {k: parent.data.metrics[k] for k in heads} == pytest.approx(heads)
    models = [m for m in client.search_logged_models([exp]) if m.tags.get("trackeval.model_version") == version]
    (model,) = [m for m in models if m.tags["trackeval.model_name"] == name]
    assert str(model.status) == "READY"
    assert {m.key for m in model.metrics if m.run_id == run.info.run_id} == set(heads)
    (mv,) = versions_of(client, name, version)
    assert mv.tags["trackeval.eval_run." + result.unit] == run.info.run_id
    assert mv.source == f"models:/{model.model_id}"
    aliases = {k: str(v) for k, v in client.get_registered_model(name).aliases.items()}
    assert str(mv.version) in (aliases.get("challenger"), aliases.get("champion")), aliases
    return run.info.run_id


# ------------------------------------------------------------------------------------ one step fails


@pytest.mark.slow
@pytest.mark.parametrize(("method", "nth", "state"), STEPS, ids=[f"{m}#{n}" for m, n, _ in STEPS])
def test_mlflow_call_refused_then_retrack_completes_the_unit(cli, store, evaluated, monkeypatch, method, nth, state):
    sets, client = store
    result, folder = evaluated["champion"]
    original, calls = getattr(MlflowClient, method), []

    def refused(self, *args, **kwargs):
        calls.append(method)
        if len(calls) == nth:
            raise MlflowException("injected refusal", error_code=INVALID_PARAMETER_VALUE)
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(MlflowClient, method, refused)
        res = cli("track", folder, *sets)
    res.one_line_error(f"MLflow refused {method}", f"trackeval track {folder}")
    finished_before = STEPS.index((method, nth, state)) > FINISHED_FROM  # the refused call did not happen
    assert len(runs_of(client, idempotency_key(result), "FINISHED")) == int(finished_before)
    res = cli("track", folder, *sets)
    assert res.rc == 0 and "Traceback" not in res.err, res.err
    assert_complete(client, result)
    assert cli("track", folder, *sets).rc == 0  # and now nothing is left to do
    assert len(runs_of(client, idempotency_key(result), "FINISHED")) == 1


# ------------------------------------------------------------------------------------ killed at each step


@pytest.mark.slow
@pytest.mark.parametrize(("method", "nth", "state"), STEPS, ids=[f"{m}#{n}" for m, n, _ in STEPS])
def test_sigkill_after_each_step_then_retrack_completes_the_unit(cli, store, evaluated, method, nth, state):
    sets, client = store
    result, folder = evaluated["champion"]
    rc, err = finish(spawn(["track", folder, *sets], kill_at=(method, nth)))
    assert rc == -9, err  # died at the step: no cleanup ran
    assert "Traceback" not in err
    index = STEPS.index((method, nth, state))
    assert len(runs_of(client, idempotency_key(result), "FINISHED")) == (1 if index >= FINISHED_FROM else 0)
    res = cli("track", folder, *sets)
    assert res.rc == 0 and "Traceback" not in res.err, res.err
    run_id = assert_complete(client, result)
    expected = "already tracked" if index >= FINISHED_FROM else "logged"
    assert f"{expected} as run {run_id}" in res.err
    if FINISHED_FROM <= index < len(STEPS) - 1:  # the old code called such a unit "already tracked" and stopped
        assert "completed now: " in res.err and "parent run" in res.err


# ------------------------------------------------------------------- a failed track changes nothing that is read


def _registry(client: MlflowClient) -> dict:
    """What compare, the gate and the leaderboard read of model ``seg``: every version's tags, and the aliases."""
    versions = {str(v.version): dict(v.tags) for v in client.search_model_versions("name = 'seg'")}
    aliases = {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()}
    return {"versions": versions, "aliases": aliases}


def _board_cell(cli, sets: list[str], version: str) -> str:
    """The leaderboard's ``umd/dsc`` cell of ``seg/<version>`` (``trackeval leaderboard --markdown -``)."""
    res = cli("leaderboard", "--model", "seg", "--markdown", "-", *sets)
    assert res.rc == 0, res.err
    (row,) = [line for line in res.out.splitlines() if line.startswith(f"| seg | {version} ")]
    return row.split("|")[3].strip()


def _cell(result: BenchmarkResult) -> str:
    s = result.aggregates["umd/dsc"]
    return f"{s.value:.4f} [{s.ci95_low:.4f}, {s.ci95_high:.4f}]"


@pytest.fixture
def replacing(cli, store, evaluated):
    """seg/champion tracked (complete); ``improved``'s results to track as seg/champion too (other results: they
    need ``--replace``). Returns the replacing argv, the replacing result (as seg/champion), the registry and
    the leaderboard cell as they were."""
    sets, client = store
    old, _ = evaluated["champion"]
    assert cli("track", evaluated["champion"][1], *sets).rc == 0
    new, folder = evaluated["improved"]
    new = new.model_copy(update={"model": {**new.model, "version": "champion"}})
    assert _cell(new) != _cell(old)
    argv = ["track", str(folder), "--model-version", "champion", "--replace", *sets]
    return argv, new, _registry(client), _board_cell(cli, sets, "champion")


def _unchanged_then_retrack_completes(cli, client, sets, replacing) -> None:
    """After a failed ``track --replace``: the registry and the leaderboard are as they were; the same command
    then completes the unit, re-points the tag at the new results and the leaderboard follows."""
    argv, new, registry, cell = replacing
    assert _registry(client) == registry
    assert _board_cell(cli, sets, "champion") == cell
    res = cli(*argv)
    assert res.rc == 0 and "Traceback" not in res.err, res.err
    run_id = assert_complete(client, new)
    tags = client.get_run(run_id).data.tags
    assert tags["trackeval.results_digest"] == hashlib.sha256((Path(argv[1]) / "results.json").read_bytes()).hexdigest()
    assert tags["trackeval.replaces"] == registry["versions"]["1"]["trackeval.eval_run.umd"]  # kept, not deleted
    assert _registry(client)["versions"]["1"]["trackeval.eval_run.umd"] == run_id
    assert _board_cell(cli, sets, "champion") == _cell(new)


@pytest.mark.parametrize(
    "target",
    ["trackeval.tracking.track_logging.save_figures", "trackeval.tracking.track_logging.result_report"],
    ids=["figure", "report"],
)
def test_drawing_fails_on_replace_registry_and_leaderboard_unchanged(cli, store, replacing, monkeypatch, target):
    """The fault of issue 20: ``track`` died drawing the figure after it had re-pointed the version's ``eval_run``
    tag, and the leaderboard showed numbers whose tracking failed. Figures and report are drawn before any run."""
    sets, client = store
    runs_before = len(runs_of(client, idempotency_key(replacing[1])))

    def broken(*args, **kwargs):
        raise ValueError("'yerr' must not contain negative values")

    with monkeypatch.context() as patch:
        patch.setattr(target, broken)
        res = cli(*replacing[0])
    res.one_line_error("internal error in trackeval track", "'yerr' must not contain negative values", rc=1)
    assert len(runs_of(client, idempotency_key(replacing[1]))) == runs_before == 0  # nothing was logged
    _unchanged_then_retrack_completes(cli, client, sets, replacing)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "nth", "state"), REPLACE_STEPS, ids=[f"{m}#{n}" for m, n, _ in REPLACE_STEPS])
def test_mlflow_refuses_a_step_of_replace_registry_and_leaderboard_unchanged(
    cli, store, replacing, monkeypatch, method, nth, state
):
    sets, client = store
    original, calls = getattr(MlflowClient, method), []

    def refused(self, *args, **kwargs):
        calls.append(method)
        if len(calls) == nth:
            raise MlflowException("injected refusal", error_code=INVALID_PARAMETER_VALUE)
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(MlflowClient, method, refused)
        res = cli(*replacing[0])
    res.one_line_error(f"MLflow refused {method}")
    _unchanged_then_retrack_completes(cli, client, sets, replacing)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "nth", "state"), REPLACE_STEPS[:-1], ids=[f"{m}#{n}" for m, n, _ in REPLACE_STEPS[:-1]]
)
def test_killed_during_replace_registry_and_leaderboard_unchanged(cli, store, replacing, method, nth, state):
    sets, client = store
    rc, err = finish(spawn(replacing[0], kill_at=(method, nth)))
    assert rc == -9, err
    _unchanged_then_retrack_completes(cli, client, sets, replacing)


# ------------------------------------------------------------------------------------ concurrency


def _race(argv: list[str], tmp_path: Path) -> list[tuple[int, str]]:
    """Two ``trackeval`` processes released at the same moment by a barrier file."""
    barrier = tmp_path / "go"
    procs = [spawn(argv, barrier=barrier) for _ in range(2)]
    barrier.touch()
    return [finish(p) for p in procs]


@pytest.mark.slow
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-store", "store-created-by-the-race"])
def test_two_track_processes_on_sqlite_log_once(evaluated, migrated_db, tmp_path, fresh):
    result, folder = evaluated["champion"]
    db = tmp_path / "race.db"
    if not fresh:
        shutil.copy(migrated_db, db)
    uri = f"sqlite:///{db}"
    sets = ["--set", f"tracking.uri={uri}", "--set", f"tracking.artifact_location={tmp_path / 'art'}"]
    outcomes = _race(["track", folder, *sets], tmp_path)
    for rc, err in outcomes:
        assert rc == 0 and "Traceback" not in err, err
    states = sorted("logged as run" in err for _, err in outcomes)
    assert states == [False, True]  # one logged it, the other found it complete
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert_complete(client, result)
    assert len(runs_of(client, idempotency_key(result))) == 1  # not even a FAILED duplicate: they took turns
    assert Path(f"{db}{tracking_client.LOCK_SUFFIX}").exists()


@pytest.mark.slow
def test_two_track_processes_on_a_fresh_mlflow_server_dedupe(evaluated, tmp_path):
    result, folder = evaluated["champion"]
    proc, url = _start_server(tmp_path / "server.db", tmp_path / "artifacts", tmp_path / "server.log")
    try:
        sets = ["--set", f"tracking.uri={url}", "--set", "tracking.backoff_s=0.05"]
        outcomes = _race(["track", folder, *sets], tmp_path)
        for rc, err in outcomes:
            assert rc == 0 and "Traceback" not in err, err
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        run_id = assert_complete(client, result)
        for run in runs_of(client, idempotency_key(result)):  # a loser of the race is FAILED and names the winner
            assert run.info.run_id == run_id or run.data.tags["trackeval.duplicate_of"] == run_id
        assert len(client.search_experiments(filter_string="name = 'trackeval'")) == 1
    finally:
        _stop(proc)


def test_duplicate_finished_runs_are_settled_on_the_first_finished(cli, store, evaluated):
    """Two FINISHED runs with one key (two processes on a server, or an older trackeval): the next track keeps the
    one that finished first and marks the other FAILED, pointing at it."""
    sets, client = store
    result, folder = evaluated["champion"]
    assert cli("track", folder, *sets).rc == 0
    (first,) = runs_of(client, idempotency_key(result), "FINISHED")
    twin = client.create_run(_experiment(client), tags=dict(first.data.tags)).info.run_id
    client.set_terminated(twin, "FINISHED")
    res = cli("track", folder, *sets)
    assert res.rc == 0 and f"already tracked as run {first.info.run_id}" in res.err, res.err
    assert assert_complete(client, result) == first.info.run_id
    dup = client.get_run(twin)
    assert dup.info.status == "FAILED" and dup.data.tags["trackeval.duplicate_of"] == first.info.run_id


def test_store_lock_held_elsewhere_times_out_with_one_line(cli, store, evaluated, tmp_path, monkeypatch):
    sets, client = store
    result, folder = evaluated["champion"]
    lock = tmp_path / f"mlflow.db{tracking_client.LOCK_SUFFIX}"
    with FileLock(str(lock)):  # another process's lock: filelock locks are per file object
        res = cli("track", folder, *sets, "--set", "tracking.lock_timeout_s=0.2")
    res.one_line_error("kept the tracking store", "locked for 0.2s", str(lock))
    assert client.get_experiment_by_name("trackeval") is None  # nothing was written
    assert cli("track", folder, *sets).rc == 0  # released: the next one proceeds
    assert_complete(client, result)


def test_store_in_a_missing_folder_is_refused_before_anything_is_created(cli, evaluated, tmp_path):
    _, folder = evaluated["champion"]
    uri = f"sqlite:///{tmp_path / 'no' / 'such' / 'mlflow.db'}"
    cli("track", folder, "--set", f"tracking.uri={uri}").one_line_error(
        "the folder of the tracking store", "field=tracking.uri"
    )
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("message", "code", "retried"),
    [
        ("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.name", "BAD_REQUEST", True),
        ("(sqlite3.OperationalError) database is locked", "BAD_REQUEST", True),
        ("Invalid value for parameter 'x'", "INVALID_PARAMETER_VALUE", False),
    ],
)
def test_a_unique_constraint_race_on_a_server_is_retried(message, code, retried):
    """Two ``track`` processes on one server can insert the same dataset row at once (MLflow's get-or-create in
    ``log_inputs`` is not atomic): the loser's call is retried (it then finds the row), not reported as refused."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos import databricks_pb2

    error = MlflowException(message, error_code=getattr(databricks_pb2, code))
    assert error.get_http_status_code() == 400  # a client error: retried only for the race
    assert tracking_client._transient(error) is retried
