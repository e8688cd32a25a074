"""MLflow tracking, registry and promotion gate end to end: embedded SQLite store and a real ``mlflow server``.

Results come from real UMD evaluations (tests/gate_data.py). The server test starts ``mlflow server`` on
127.0.0.1 with a SQLite backend, kills it while a run is being logged, restarts it and re-tracks; the
browser tests open the HTML report and the MLflow UI in headless Chromium (screenshots under tmp_path).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests import gate_data
from tests.conftest import scaled, umd_argv
from trackeval.cli import main
from trackeval.io.results_folder import read_results
from trackeval.tracking.lineage import idempotency_key

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MLFLOW_BIN = Path(sys.executable).with_name("mlflow")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`; .ci/run installs it)"
)


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory) -> Path:
    """An empty MLflow SQLite database with every migration applied (copied per test: migrations are slow)."""
    path = tmp_path_factory.mktemp("mlflowdb") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    """Results folders of three versions of model ``seg`` on one ground truth (+ the inputs)."""
    root = tmp_path_factory.mktemp("evals")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out = {"gt": gt, "root": root}
    for version in ("champion", "organ_regress", "improved"):
        result, folder = gate_data.evaluate_version(root, gt, version, cfg)
        out[version] = (result, folder)
    return out


@pytest.fixture
def store(tmp_path, migrated_db, monkeypatch) -> tuple[list[str], MlflowClient]:
    """A fresh embedded store (copied migrated DB + artifact folder): ``--set`` overrides and a client."""
    db = tmp_path / "mlflow.db"
    shutil.copy(migrated_db, db)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{db}"
    sets = [
        f"tracking.uri={uri}",
        f"tracking.artifact_location={tmp_path / 'mlartifacts'}",
        f"tracking.dvc_root={tmp_path}",
        "tracking.backoff_s=0.05",
        # at 6 subjects a bootstrap p-value is at least the expanded 1 / B (stats.paired.bootstrap_pvalue): with
        # B = 1000 no group of 5 could pass Holm, so the worst-group guard could not refuse organ_regress
        "gate.n_resamples=20000",
    ]
    return [a for s in sets for a in ("--set", s)], MlflowClient(tracking_uri=uri, registry_uri=uri)


def _runs(client: MlflowClient, kind: str, status: str | None = None) -> list:
    exp = client.get_experiment_by_name("trackeval")
    flt = f"tags.`trackeval.kind` = '{kind}'" + (f" and attributes.status = '{status}'" if status else "")
    return client.search_runs([exp.experiment_id], flt)


def _aliases(client: MlflowClient) -> dict[str, str]:
    return {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()}


def _chromium(tmp_path: Path, url: str, shot: Path, budget_ms: int) -> str:
    """Headless Chromium: the DOM after ``budget_ms`` of virtual time, and a screenshot at ``shot``."""
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1000",
        f"--virtual-time-budget={budget_ms}",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", url], capture_output=True, text=True, timeout=scaled(120), check=True
    ).stdout
    subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, timeout=scaled(120), check=True)
    assert shot.stat().st_size > 1000
    return dom


# ------------------------------------------------------------------------------------ embedded SQLite


def test_track_logs_lineage_metrics_dataset_artifacts_once(store, evaluated, tmp_path):
    sets, client = store
    result, folder = evaluated["champion"]
    (tmp_path / "data.dvc").write_text("outs:\n- md5: 0123456789abcdef0123456789abcdef.dir\n  path: data\n")
    before = (folder / "results.json").read_bytes()
    assert main(["track", str(folder), *sets]) == 0
    assert main(["track", str(folder), *sets]) == 0  # idempotent
    (child,) = _runs(client, "benchmark")
    (parent,) = _runs(client, "evaluation")
    assert child.info.status == "FINISHED" and parent.info.status == "FINISHED"
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.metrics == pytest.approx(result.flat_metrics())
    assert child.data.params["umd.nsd_tolerance_mm"] == "1.0"
    assert child.data.params["bootstrap.n_resamples"] == "200"
    tags = child.data.tags
    assert tags["trackeval.params_hash"] == result.config_digest
    assert tags["trackeval.dvc_data_digest"] == "0123456789abcdef0123456789abcdef.dir"
    assert tags["trackeval.idempotency_key"] == idempotency_key(result)
    assert tags["trackeval.model_name"] == "seg" and tags["trackeval.model_version"] == "champion"
    assert tags["trackeval.leakage_audit"] == "pass"
    assert tags["trackeval.git_commit"] == tags["mlflow.source.git.commit"]
    (ds,) = client.get_run(child.info.run_id).inputs.dataset_inputs
    assert ds.dataset.digest == "0123456789abcdef0123456789abcdef.dir"
    assert {t.key: t.value for t in ds.tags}["mlflow.data.context"] == "eval"
    names = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"results.json", "metrics.json", "cases.parquet", "report.html", "figures"} <= names
    figures = {a.path for a in client.list_artifacts(child.info.run_id, "figures")}
    assert "figures/umd__dsc__by_organ.png" in figures and "figures/umd__dsc_gap__ct_vs_pet__by_organ.png" in figures
    (mv,) = client.search_model_versions("name = 'seg'")
    assert mv.tags["trackeval.model_version"] == "champion" and mv.run_id == parent.info.run_id
    assert mv.tags["trackeval.eval_run.umd"] == child.info.run_id
    assert _aliases(client) == {"challenger": str(mv.version)}
    assert (folder / "results.json").read_bytes() == before


def _alias_lines(out: str) -> list[str]:
    """The lines of ``promote``'s output saying how the aliases moved (after the verdict line)."""
    tail = out[out.index("verdict: ") :].splitlines()[1:]
    return [line for line in tail if line.startswith(("moved ", "would move ", "aliases unchanged"))]


def test_promote_compare_and_evaluate_track_cli(store, evaluated, tmp_path, capsys):
    sets, client = store
    assert main(["track", str(evaluated["champion"][1]), *sets]) == 0
    capsys.readouterr()
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0  # first version: floor
    assert _aliases(client) == {"champion": "1"}
    assert _alias_lines(capsys.readouterr().out) == [
        "moved @challenger: champion -> (removed)",
        "moved @champion: -> champion",
    ]
    # an organ regressing: rejected, no alias moves, the decision recorded
    assert main(["track", str(evaluated["organ_regress"][1]), *sets]) == 0
    capsys.readouterr()
    assert main(["promote", "--model", "seg", "--candidate", "organ_regress", *sets]) == 1
    assert _aliases(client) == {"champion": "1", "challenger": "2"}
    assert _alias_lines(capsys.readouterr().out) == ["aliases unchanged"]
    assert main(["promote", "--model", "seg", "--candidate", "organ_regress", "--dry-run", *sets]) == 1
    assert _alias_lines(capsys.readouterr().out) == ["aliases unchanged"]
    v2 = client.get_model_version("seg", "2")
    assert v2.tags["trackeval.gate.verdict"] == "fail" and "by_organ/heart" in v2.tags["trackeval.gate.reason"]
    record = client.get_run(v2.tags["trackeval.gate.decision_run"])
    assert record.data.tags["trackeval.gate.verdict"] == "fail" and record.data.metrics["gate/pass"] == 0.0
    assert record.data.metrics["delta/umd/dsc/by_organ/heart"] == pytest.approx(-0.2)
    decision = json.loads(
        Path(client.download_artifacts(record.info.run_id, "decision.json", str(tmp_path))).read_text()
    )
    assert decision["verdict"] == "fail" and decision["champion"] == "champion"
    # evaluate --track, then a clear improvement is promoted: champion -> v3, previous -> v1
    gt, root = evaluated["gt"], evaluated["root"]
    pred = root / "improved" / "pred_improved"
    argv = umd_argv(gt, pred, tmp_path / "out_v3", "--track", "--model-name", "seg", "--model-version", "v3")
    assert (
        main(
            [
                *argv,
                *sets,
                "--set",
                "bootstrap.n_resamples=200",
                "--set",
                "engine.executor=local",
                "--set",
                "umd.labels={liver: 1, kidney_left: 2, heart: 5}",
            ]
        )
        == 0
    )
    (v3_run,) = [r for r in _runs(client, "benchmark") if r.data.tags["trackeval.model_version"] == "v3"]
    err = capsys.readouterr().err
    assert f"tracked: umd seg/v3 as MLflow run {v3_run.info.run_id}" in err
    assert "MLflow run: http" not in err  # a local store: no server serves a run page
    moves = ["@challenger: v3 -> (removed)", "@champion: champion -> v3", "@previous: -> champion"]
    assert main(["promote", "--model", "seg", "--candidate", "v3", "--dry-run", *sets]) == 0
    assert _alias_lines(capsys.readouterr().out) == [f"would move {m}" for m in moves]
    assert _aliases(client) == {"champion": "1", "challenger": "3"}
    assert main(["promote", "--model", "seg", "--candidate", "v3", *sets]) == 0
    assert _aliases(client) == {"champion": "3", "previous": "1"}
    assert _alias_lines(capsys.readouterr().out) == [f"moved {m}" for m in moves]
    assert len(_runs(client, "gate_decision")) == 3
    capsys.readouterr()
    md, html = tmp_path / "cmp.md", tmp_path / "cmp.html"
    assert main(["compare", "seg@champion", "seg@previous", "--markdown", str(md), "--html", str(html), *sets]) == 0
    out = capsys.readouterr().out
    assert "umd/dsc" in out and "organ=kidney_left" in out
    text = md.read_text()
    assert "| (overall) | 1.0000 | 0.7534 | +0.2466 [" in text and "seg@previous" in text
    page = html.read_text()
    assert "<table>" in page and "<h2>Overlays: umd, A = seg/v3, B = seg/champion</h2>" in page
    assert page.count('src="data:image/png;base64,') >= 4  # both versions on the same axes, one per plot
    assert main(["compare", "seg@nope", "seg@champion", *sets]) == 2
    assert "has no alias 'nope'" in capsys.readouterr().err
    # a typo of the model name: the registered name it is close to, not "no tracked version"
    assert main(["promote", "--model", "sge", "--candidate", "v3", *sets]) == 2
    assert "no registered model 'sge' (did you mean 'seg'?) [field=model]" in capsys.readouterr().err
    assert main(["promote", "--model", "brain", "--candidate", "v3", *sets]) == 2
    assert "no registered model 'brain'; run `trackeval track` first" in capsys.readouterr().err
    assert main(["promote", "--model", "seg", "--candidate", "v9", *sets]) == 2
    assert "model 'seg' has no tracked version 'v9'" in capsys.readouterr().err


def test_first_track_on_a_fresh_store_prints_no_mlflow_log_lines_unless_debug(evaluated, tmp_path):
    """Creating a SQLite store runs MLflow's database migrations, which log INFO lines (``alembic``, ``Creating
    initial MLflow database tables``): off the terminal by default, shown with ``--debug``. A new process each
    time: MLflow configures its loggers when it is first imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    folder = evaluated["champion"][1]

    def track(*flags: str, db: str) -> subprocess.CompletedProcess:
        sets = ["--set", f"tracking.uri=sqlite:///{tmp_path / db}", "--set", f"tracking.dvc_root={tmp_path}"]
        argv = [str(MLFLOW_BIN.with_name("trackeval")), *flags, "track", str(folder), *sets]
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=scaled(300))

    quiet = track(db="quiet.db")
    assert quiet.returncode == 0, quiet.stderr
    assert "alembic" not in quiet.stderr and "INFO" not in quiet.stderr
    assert "umd seg/champion logged as run" in quiet.stderr
    loud = track("--debug", db="loud.db")
    assert loud.returncode == 0, loud.stderr
    assert "INFO alembic.runtime.migration: Running upgrade" in loud.stderr
    assert "INFO mlflow.store.db.utils: Creating initial MLflow database tables" in loud.stderr


def test_crash_drawing_figures_logs_nothing_then_retrack_logs_once(store, evaluated, monkeypatch, capsys):
    """The figures and the report are drawn before any run is created: a crash there leaves no run behind."""
    sets, client = store
    _, folder = evaluated["champion"]

    def crash(*args, **kwargs):
        raise RuntimeError("figure backend crashed")

    with monkeypatch.context() as patch:  # undoes this patch only (monkeypatch.undo() would undo the fixtures' too)
        patch.setattr("trackeval.tracking.track_logging.save_figures", crash)
        assert main(["track", str(folder), *sets]) == 1  # an internal error: one line, exit 1
    assert "RuntimeError: figure backend crashed" in capsys.readouterr().err
    assert _runs(client, "benchmark") == [] and _runs(client, "evaluation") == []
    assert main(["track", str(folder), *sets]) == 0
    assert len(_runs(client, "benchmark", "FINISHED")) == 1
    assert len(_runs(client, "benchmark")) == 1


def test_unreachable_server_bounded_retries_then_clear_error(evaluated, monkeypatch, capsys, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    _, folder = evaluated["champion"]
    before = (folder / "results.json").read_bytes()
    t0 = time.monotonic()
    rc = main(["track", str(folder), "--set", "tracking.retries=2", "--set", "tracking.backoff_s=0.2"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 2
    assert "unavailable" in err and "after 3 attempt(s)" in err and f"trackeval track {folder}" in err
    waits = [r.getMessage().rsplit(" in ", 1)[1] for r in caplog.records if "retry" in r.getMessage()]
    assert waits == ["0.2s", "0.4s"]  # exponential backoff, bounded by tracking.retries
    assert 0.6 <= elapsed < 30
    assert (folder / "results.json").read_bytes() == before


@pytest.mark.slow
@needs_chromium
def test_html_report_in_chromium(store, evaluated, tmp_path):
    sets, client = store
    result, folder = evaluated["champion"]
    assert main(["track", str(folder), *sets]) == 0
    (child,) = _runs(client, "benchmark")
    report = Path(client.download_artifacts(child.info.run_id, "report.html", str(tmp_path / "dl")))
    dom = _chromium(tmp_path, report.as_uri(), tmp_path / "report.png", 2000)
    value = result.aggregates["umd/dsc/by_organ/liver"].value
    assert "umd/dsc/by_organ/liver" in dom and f"{value:.4f}" in dom
    n_figures = len(client.list_artifacts(child.info.run_id, "figures"))
    assert n_figures >= 3 and dom.count('src="data:image/png;base64,') == n_figures  # self-contained


# ------------------------------------------------------------------------------------- mlflow server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(
    db: Path,
    artifacts: Path,
    log: Path,
    *,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """A real ``mlflow server`` on 127.0.0.1 with its own store; returns the process and its URL.

    A free port can be taken by another test's server between choosing and binding it: the server that then
    answers ``/health`` is not ours. So the artifacts folder holds a marker file unique to this server, and a port
    counts only once that server lists the marker; otherwise ours is stopped and another port is tried.
    ``args`` are extra server options (``--app-name basic-auth``), ``env`` extra variables of the server process
    and ``auth`` the ``(user, password)`` that the marker probe sends (HTTP basic authentication).
    """
    artifacts.mkdir(parents=True, exist_ok=True)
    marker = f"server-{os.getpid()}-{time.monotonic_ns()}"
    (artifacts / marker).touch()
    for _ in range(3):
        port = _free_port()
        cmd = [
            str(MLFLOW_BIN),
            "server",
            "--backend-store-uri",
            f"sqlite:///{db}",
            "--artifacts-destination",
            str(artifacts),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            *args,
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
        )
        url = f"http://127.0.0.1:{port}"
        probe = urllib.request.Request(f"{url}/api/2.0/mlflow-artifacts/artifacts?path=")
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            probe.add_header("Authorization", f"Basic {token}")
        deadline = time.monotonic() + scaled(90)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(probe, timeout=scaled(2)) as r:
                    files = {f["path"] for f in json.load(r).get("files", [])}
                if marker in files:
                    return proc, url
                break  # another server holds the port: try another one
            except OSError:
                time.sleep(0.3)  # polling interval while the server starts, not a wait for an outcome
        _stop(proc)
    pytest.fail(f"mlflow server did not start: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=scaled(30))


@pytest.fixture
def served(migrated_db, tmp_path, monkeypatch) -> Iterator[str]:
    """A real ``mlflow server`` on 127.0.0.1 with a fresh store (a copy of the migrated database), made the
    tracking URI (``MLFLOW_TRACKING_URI``) of a test that runs in ``tmp_path``; yields its URL, stops it after."""
    db = tmp_path / "server.db"
    shutil.copy(migrated_db, db)
    proc, url = _start_server(db, tmp_path / "artifacts", tmp_path / "server.log")
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        monkeypatch.chdir(tmp_path)
        yield url
    finally:
        _stop(proc)


@pytest.mark.slow
def test_server_killed_mid_logging_then_resumed_and_ui(evaluated, migrated_db, tmp_path, monkeypatch, capsys):
    db = tmp_path / "server.db"
    shutil.copy(migrated_db, db)
    artifacts, log = tmp_path / "artifacts", tmp_path / "server.log"
    proc, url = _start_server(db, artifacts, log)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        monkeypatch.chdir(tmp_path)
        sets = ["--set", "tracking.backoff_s=0.05", "--set", "tracking.retries=2", "--set", "gate.n_resamples=500"]
        assert main(["track", str(evaluated["champion"][1]), *sets]) == 0
        assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0

        result, folder = evaluated["improved"]
        before = (folder / "results.json").read_bytes()
        original = MlflowClient.log_artifacts

        def kill_then_upload(self, *args, **kwargs):
            _stop(proc)  # the server dies after the run was created and its metrics logged
            return original(self, *args, **kwargs)

        monkeypatch.setattr(MlflowClient, "log_artifacts", kill_then_upload)
        assert main(["track", str(folder), *sets]) == 2
        assert "unavailable" in capsys.readouterr().err
        assert (folder / "results.json").read_bytes() == before
        monkeypatch.setattr(MlflowClient, "log_artifacts", original)

        proc, url = _start_server(db, artifacts, log)  # same database, new port
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        capsys.readouterr()
        assert main(["track", str(folder), *sets]) == 0
        assert main(["track", str(folder), *sets]) == 0
        assert "View run" not in capsys.readouterr().out  # MLflow's own stdout link (a server) is silenced
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        key = idempotency_key(result)
        exp = client.get_experiment_by_name("trackeval").experiment_id
        runs = client.search_runs([exp], f"tags.`trackeval.idempotency_key` = '{key}'")
        assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]  # the interrupted one, never RUNNING
        assert not client.search_runs([exp], "attributes.status = 'RUNNING'")
        (done,) = [r for r in runs if r.info.status == "FINISHED"]
        assert done.data.metrics == pytest.approx(result.flat_metrics())
        assert {a.path for a in client.list_artifacts(done.info.run_id)} >= {"results.json", "report.html"}
        assert main(["promote", "--model", "seg", "--candidate", "improved", *sets]) == 0
        assert _aliases(client) == {"champion": "2", "previous": "1"}
        assert (folder / "results.json").read_bytes() == before and read_results(folder) == result

        # evaluate --track against the server: the run id and its page in the MLflow UI, without the credentials
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url.replace("http://", "http://alice:s3cret@"))
        gt, pred = evaluated["gt"], evaluated["root"] / "improved" / "pred_improved"
        capsys.readouterr()
        argv = umd_argv(gt, pred, tmp_path / "out_v3", "--track", "--model-name", "seg", "--model-version", "v3")
        labels = "umd.labels={liver: 1, kidney_left: 2, heart: 5}"
        evaluate = [*argv, *sets, "--set", "bootstrap.n_resamples=200", "--set", "engine.executor=local"]
        assert main([*evaluate, "--set", labels]) == 0
        err = capsys.readouterr().err
        (v3,) = client.search_runs(
            [exp], "tags.`trackeval.model_version` = 'v3' and tags.`trackeval.kind` = 'benchmark'"
        )
        assert f"tracked: umd seg/v3 as MLflow run {v3.info.run_id}" in err
        assert f"MLflow run: {url}/#/experiments/{exp}/runs/{v3.info.run_id}" in err
        assert "s3cret" not in err and "alice" not in err

        if CHROMIUM is not None:  # the MLflow UI (a JS app) renders the run page with its metrics
            dom = _chromium(tmp_path, f"{url}/#/experiments/{exp}/runs/{done.info.run_id}", tmp_path / "ui.png", 5000)
            assert "umd seg/improved" in dom
            assert "umd/dsc/by_organ/kidney_left" in dom
            assert repr(result.aggregates["umd/dsc"].value) in dom
    finally:
        _stop(proc)


def test_the_evaluation_dataset_is_the_entity_mlflow_builds_of_the_cases(evaluated, tmp_path):
    """``evaluation_dataset`` writes the schema from the columns (no per-value inference): the entity equals the
    one ``mlflow.data.from_pandas`` builds of the cases frame, a group some case lacks included (not required)."""
    import warnings

    import mlflow.data
    import pandas as pd
    from mlflow.entities import Dataset

    from trackeval.tracking.track_logging import evaluation_dataset

    result = evaluated["champion"][0]
    cases = [c.model_copy(update={"groups": {**c.groups, "site": "a"}}) for c in list(result.cases)[:5]]
    result = result.model_copy(update={"cases": [*cases, *list(result.cases)[5:]]})
    frame = pd.DataFrame(
        {name: result.cases.field(name) for name in ["case_id", "subject_id", "modality", "site", "status"]}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = mlflow.data.from_pandas(frame, source=str(tmp_path.resolve()), name="umd-cases", digest="d1")
    got = evaluation_dataset(result, tmp_path, "d1")
    assert got.dataset.to_dictionary() == Dataset(**ds.to_dict()).to_dictionary()
    assert '"name": "site", "required": false' in got.dataset.schema
    assert [t.value for t in got.tags] == ["eval"]
