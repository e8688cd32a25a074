"""Secrets never reach a terminal, a log or a store (issue 20, section 2).

Credentials in the tracking URI (``--set tracking.uri=http://alice:PASSWORD@host``, ``tracking.uri`` in a params
file, ``MLFLOW_TRACKING_URI``) and MLflow's credential variables (``MLFLOW_TRACKING_PASSWORD``,
``MLFLOW_TRACKING_TOKEN``) are masked in every printed line, every error (trackeval's own, MLflow's exception text
quoted in it, an internal error, a ``--debug`` traceback), every log record (trackeval's loggers and MLflow's
handler) and in what is stored (results.json, params, tags, artifacts), by :mod:`trackeval.io.redact`. A real
``mlflow server`` on 127.0.0.1 (no auth app: it ignores the credentials) takes an evaluate-track-promote-compare
round; a closed port on 127.0.0.1 makes the "unavailable" error.
"""

from __future__ import annotations

import base64
import logging
import shutil
import socket
from pathlib import Path
from urllib.parse import quote

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from tests import gate_data
from tests.conftest import umd_argv
from tests.test_tracking import _start_server, _stop, evaluated, migrated_db, store  # noqa: F401 - shared fixtures
from trackeval.io.redact import MASK, RedactingStream, redact

#: the password in the URI, MLflow's password and token variables: none may appear anywhere
URI_PASSWORD = "S3cretPassw0rd!"
ENV_PASSWORD = "envPassw0rd-7Hq2"
ENV_TOKEN = "tok-Z9y8X7w6V5u4T3s2"
SECRETS = (URI_PASSWORD, ENV_PASSWORD, ENV_TOKEN)


def _forms(secret: str) -> list[str]:
    """A secret and the forms it could be printed in (percent-encoded; the basic-auth header's base64)."""
    return [secret, quote(secret, safe=""), base64.b64encode(f"alice:{secret}".encode()).decode()]


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            for form in _forms(secret):
                assert form not in text, (form, text[max(0, text.find(form) - 200) : text.find(form) + 200])


def _with_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own credential variables, as a CI job would set them (read by every MLflow client call)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ENV_PASSWORD)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", ENV_TOKEN)


def _secret_uri(url: str) -> str:
    """``http://alice:PASSWORD@127.0.0.1:PORT`` for the server at ``url``."""
    return url.replace("http://", f"http://alice:{URI_PASSWORD}@", 1)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.fixture(scope="module")
def server(tmp_path_factory, migrated_db):  # noqa: F811
    """A plain ``mlflow server`` on 127.0.0.1 shared by this module's tests (each uses its own experiment and
    model name)."""
    root = tmp_path_factory.mktemp("secrets-server")
    db = root / "server.db"
    shutil.copy(migrated_db, db)
    proc, url = _start_server(db, root / "artifacts", root / "server.log")
    yield url
    _stop(proc)


def _sets(uri: str, experiment: str) -> list[str]:
    overrides = [
        f"tracking.uri={uri}",
        f"tracking.experiment={experiment}",
        "tracking.backoff_s=0.05",
        *gate_data.OVERRIDES,
    ]
    return [a for s in overrides for a in ("--set", s)]


def _everything_stored(url: str, experiment: str, model: str, dst: Path) -> str:
    """Every param, tag and artifact of the experiment's runs (figures decoded leniently), its LoggedModels' tags
    and params, the registered versions' tags and sources, and the dataset inputs, as one text."""
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    exp = client.get_experiment_by_name(experiment)
    parts = [exp.artifact_location, *exp.tags.values()]
    for run in client.search_runs([exp.experiment_id], run_view_type=3):  # ViewType.ALL
        parts += [*run.data.params.values(), *run.data.tags.values(), run.info.artifact_uri]
        for ds in run.inputs.dataset_inputs:
            parts += [ds.dataset.source, ds.dataset.name, *(t.value for t in ds.tags)]
        folder = Path(client.download_artifacts(run.info.run_id, "", str(dst / run.info.run_id)))
        parts += [f.read_bytes().decode("utf-8", "replace") for f in folder.rglob("*") if f.is_file()]
    for logged in client.search_logged_models([exp.experiment_id]):
        parts += [*logged.tags.values(), *(logged.params or {}).values(), logged.artifact_location or ""]
    for mv in client.search_model_versions(f"name = '{model}'"):
        parts += [*mv.tags.values(), mv.source or "", mv.description or ""]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("secrets-data")
    gt = gate_data.make_ground_truth(root)
    return gt, {v: gate_data.make_predictions(root / v, v) for v in ("champion", "improved")}


# ------------------------------------------------------------------------------- a full round on a server


@pytest.mark.slow
def test_full_round_with_credentials_in_the_uri_and_env_leaks_nowhere(cli, server, data, tmp_path, monkeypatch, caplog):
    """evaluate --track, track, promote, compare (terminal, Markdown, HTML), leaderboard, verify with the password
    in ``--set tracking.uri`` and MLflow's password and token variables set: the secret is in no output line, log
    record, results file, param, tag or artifact; the URI is shown as ``http://alice:***@...`` and the UI link
    has no userinfo."""
    _with_credentials(monkeypatch)
    gt, preds = data
    sets = _sets(_secret_uri(server), "round")
    model = ["--model-name", "seg_round"]
    outs, printed = [], []
    for version in ("champion", "improved"):
        out = tmp_path / f"out_{version}"
        res = cli(*umd_argv(gt, preds[version], out, *model, "--model-version", version, "--track", *sets))
        assert res.rc == 0, res.err
        outs.append(out)
        printed += [res.out, res.err]
    res = cli("track", *outs, *sets)
    assert res.rc == 0, res.err
    printed += [res.out, res.err]
    port = server.rsplit(":", 1)[1]
    assert f"tracking URI: http://alice:{MASK}@127.0.0.1:{port}\n" in res.err
    assert f"MLflow UI: http://127.0.0.1:{port}/#/experiments/" in res.err  # a link to open: no userinfo at all
    for candidate in ("champion", "improved"):
        res = cli("promote", "--model", "seg_round", "--candidate", candidate, "--summary", tmp_path / "s.md", *sets)
        assert res.rc == 0, res.err
        printed += [res.out, res.err]
    md, html = tmp_path / "cmp.md", tmp_path / "cmp.html"
    for argv in (
        ("compare", "seg_round@champion", "seg_round/champion", "--markdown", md, "--html", html),
        ("leaderboard", "--model", "seg_round", "--markdown", "-"),
        ("verify", "--model", "seg_round"),
    ):
        res = cli(*argv, *sets)
        assert res.rc == 0, res.err
        printed += [res.out, res.err]
    files = [p.read_bytes().decode("utf-8", "replace") for o in outs for p in o.rglob("*") if p.is_file()]
    files += [p.read_text() for p in (md, html, tmp_path / "s.md")]
    stored = _everything_stored(server, "round", "seg_round", tmp_path / "download")
    assert '"verdict": "pass"' in stored and "umd/dsc" in stored  # the decision and evaluation artifacts were read
    assert_no_secret(*printed, caplog.text, *files, stored)


# ------------------------------------------------------------------------------- where a URI comes from


def test_uri_in_a_params_file_is_shown_redacted(cli, server, evaluated, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = tmp_path / "params.yaml"
    params.write_text(f"tracking: {{uri: '{_secret_uri(server)}', experiment: from_config}}\n", encoding="utf-8")
    res = cli("track", evaluated["champion"][1], "--config", params, "--model-name", "seg_config")
    assert res.rc == 0, res.err
    assert f"tracking URI: http://alice:{MASK}@127.0.0.1:" in res.err
    assert_no_secret(res.out, res.err)


def test_uri_in_mlflow_tracking_uri_is_shown_redacted(cli, server, evaluated, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _secret_uri(server))
    res = cli("track", evaluated["champion"][1], "--model-name", "seg_env", "--set", "tracking.experiment=from_env")
    assert res.rc == 0, res.err
    assert f"tracking URI: http://alice:{MASK}@127.0.0.1:" in res.err
    assert_no_secret(res.out, res.err)


def test_leaderboard_error_naming_the_store_is_redacted(cli, server, monkeypatch):
    _with_credentials(monkeypatch)
    res = cli("leaderboard", "--model", "nobody", *_sets(_secret_uri(server), "empty_board"))
    res.one_line_error("no tracked version of model 'nobody'", f"http://alice:{MASK}@127.0.0.1:")
    assert_no_secret(res.out, res.err)


# ------------------------------------------------------------------------------- errors


def test_unavailable_error_quotes_mlflow_without_the_password(cli, evaluated, monkeypatch, caplog):  # noqa: F811
    """A closed port: MLflow's own exception text (``API request to http://alice:...@127.0.0.1:PORT/api/...``) is
    quoted in the one-line error and in the retry warnings: redacted in both."""
    _with_credentials(monkeypatch)
    uri = f"http://alice:{URI_PASSWORD}@127.0.0.1:{_closed_port()}"
    res = cli("track", evaluated["champion"][1], *_sets(uri, "closed"), "--set", "tracking.retries=1")
    line = res.one_line_error("unavailable", "after 2 attempt(s)", f"http://alice:{MASK}@127.0.0.1:")
    assert f"API request to http://alice:{MASK}@127.0.0.1:" in line  # MLflow's text, quoted
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retries and all(f"alice:{MASK}@" in m for m in retries)
    assert_no_secret(res.out, res.err, caplog.text)


def test_debug_traceback_is_redacted(cli, evaluated, monkeypatch):  # noqa: F811
    _with_credentials(monkeypatch)
    uri = f"http://alice:{URI_PASSWORD}@127.0.0.1:{_closed_port()}"
    res = cli("--debug", "track", evaluated["champion"][1], *_sets(uri, "closed"), "--set", "tracking.retries=0")
    assert res.rc == 2
    (line,) = [x for x in res.err.splitlines() if x.startswith("trackeval: error:")]
    assert "unavailable" in line and f"alice:{MASK}@" in line
    assert "Traceback" in res.err and "MlflowException" in res.err  # the chain is printed, masked
    assert_no_secret(res.out, res.err)


def test_mlflow_refusal_quoting_uri_header_and_token_is_redacted(cli, store, evaluated, monkeypatch):  # noqa: F811
    """An MLflow error whose text quotes a URI with userinfo, a basic-auth header and the token (as a server's or
    a proxy's error page may)."""
    sets, _ = store
    _with_credentials(monkeypatch)
    header = base64.b64encode(f"alice:{ENV_PASSWORD}".encode()).decode()

    def refused(self, *args, **kwargs):
        raise MlflowException(
            f"API request to http://alice:{URI_PASSWORD}@proxy:8080/api/2.0/mlflow/runs/create failed: "
            f"request headers {{'Authorization': 'Basic {header}'}}, token={ENV_TOKEN}, password={ENV_PASSWORD}",
            error_code=INVALID_PARAMETER_VALUE,
        )

    monkeypatch.setattr(MlflowClient, "create_run", refused)
    res = cli("track", evaluated["champion"][1], *sets)
    line = res.one_line_error("MLflow refused create_run", f"http://alice:{MASK}@proxy:8080")
    assert f"'Authorization': 'Basic {MASK}'" in line and f"token={MASK}" in line
    assert_no_secret(res.out, res.err)


def test_internal_error_quoting_the_env_token_is_redacted(cli, evaluated, monkeypatch):  # noqa: F811
    """A bug whose message holds MLflow's token (as is and percent-encoded): the internal-error line masks it."""
    _with_credentials(monkeypatch)

    def broken(*args, **kwargs):
        raise RuntimeError(f"header Bearer-less {ENV_TOKEN} / {quote(ENV_PASSWORD, safe='')}")

    monkeypatch.setattr("trackeval.tracking.track.track_results", broken)
    res = cli("track", evaluated["champion"][1])
    res.one_line_error("internal error in trackeval track: RuntimeError", rc=1)
    assert_no_secret(res.out, res.err)


# ------------------------------------------------------------------------------- logs


def test_mlflow_and_trackeval_log_records_are_redacted(cli, store, evaluated, monkeypatch, caplog):  # noqa: F811
    """MLflow's logger prints through its own handler (to standard error, not propagated); trackeval's loggers
    carry the filter themselves: neither shows a secret."""
    sets, _ = store
    _with_credentials(monkeypatch)
    original = MlflowClient.create_run

    def chatty(self, *args, **kwargs):
        logging.getLogger("mlflow.tracking").warning("retrying http://bob:%s@host:5000 (%s)", URI_PASSWORD, ENV_TOKEN)
        logging.getLogger("trackeval.tracking.track").warning("sending password=%s", ENV_PASSWORD)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "create_run", chatty)
    res = cli("track", evaluated["champion"][1], *sets)
    assert res.rc == 0, res.err
    assert f"http://bob:{MASK}@host:5000" in res.err  # MLflow's handler, through the redacted standard error
    assert f"sending password={MASK}" in caplog.text
    assert_no_secret(res.out, res.err, caplog.text)


def test_library_use_without_the_cli_is_redacted(evaluated, monkeypatch, caplog):  # noqa: F811
    """``trackeval.tracking.track.track_results`` called from Python (no CLI streams): the ``TrackingError`` and
    the log records are redacted at their source."""
    from trackeval.config import TrackingConfig
    from trackeval.errors import TrackingError
    from trackeval.tracking.track import track_results

    _with_credentials(monkeypatch)
    cfg = TrackingConfig(uri=f"http://alice:{URI_PASSWORD}@127.0.0.1:{_closed_port()}", retries=1, backoff_s=0.01)
    with pytest.raises(TrackingError) as failed:
        track_results([evaluated["champion"][1]], cfg)
    assert f"alice:{MASK}@127.0.0.1" in str(failed.value)
    assert any("retry" in r.getMessage() for r in caplog.records)
    assert_no_secret(str(failed.value), caplog.text)


# ------------------------------------------------------------------------------- the mechanism


def test_a_secret_split_over_two_writes_of_one_line_is_masked():
    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> int:
            self.text += text
            return len(text)

        def flush(self) -> None:
            pass

    sink = Sink()
    stream = RedactingStream(sink)
    stream.write("tracking URI: http://alice:S3cret")
    stream.write("Passw0rd!@127.0.0.1:5000\npartial ")
    stream.write(f"{URI_PASSWORD[:4]}")
    stream.flush()
    assert sink.text == f"tracking URI: http://alice:{MASK}@127.0.0.1:5000\npartial S3cr"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://alice:S3cretPassw0rd!@host:5000/x", f"http://alice:{MASK}@host:5000/x"),
        ("https://ghp_TOKEN123@github.com/org/repo", f"https://{MASK}@github.com/org/repo"),
        ("postgresql://mlflow:pw@db:5432/mlflow", f"postgresql://mlflow:{MASK}@db:5432/mlflow"),
        ("http://alice:p@ss@host/api", f"http://alice:{MASK}@host/api"),  # an unencoded @ in the password
        ('{"password": "hunter22", "api_key": "k-1"}', f'{{"password": "{MASK}", "api_key": "{MASK}"}}'),
        ("MLFLOW_TRACKING_TOKEN=abc123 next", f"MLFLOW_TRACKING_TOKEN={MASK} next"),
        ("Authorization: Bearer eyJhbGciOi.x.y", f"Authorization: Bearer {MASK}"),
        # kept: no credential in these
        ("sqlite:///mlflow.db models:/seg@champion seg/v@1", "sqlite:///mlflow.db models:/seg@champion seg/v@1"),
        ("http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning", None),
        ("authorization_function = mlflow.server.auth:authenticate_request_basic_auth", None),
        ("trackeval.idempotency_key=0a1b tags.`trackeval.results_digest` = 'ff00'", None),
    ],
)
def test_redact_masks_credentials_and_keeps_the_rest(text, shown):
    assert redact(text) == (text if shown is None else shown)
    assert redact(redact(text)) == redact(text)  # idempotent: redacted text stays as it is
