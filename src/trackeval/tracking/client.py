"""A retrying MLflow client: every call is bounded in attempts and time; failures become :class:`TrackingError`.

Faults: each MLflow call is retried ``tracking.retries`` times with exponential backoff on transient errors
(unreachable server, 5xx, locked database), then :class:`TrackingError` says so. Any exception (or SIGTERM) while
a run is open ends it FAILED.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from trackeval.config import TrackingConfig
from trackeval.errors import TrackevalError

log = logging.getLogger(__name__)

T = TypeVar("T")


#: MLflow 3's experiment kind tag: this value opens the experiment in the model-training (not GenAI) view
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"


class TrackingError(TrackevalError):
    """MLflow could not be reached or refused a call after the bounded retries."""


def tracking_uri(cfg: TrackingConfig) -> str:
    """``MLFLOW_TRACKING_URI`` when set, else ``tracking.uri`` (default ``sqlite:///mlflow.db``)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or cfg.uri


def _transient(exc: Exception) -> bool:
    """Worth retrying: transport failures, 5xx answers, a locked SQLite database."""
    import requests
    from mlflow.exceptions import MlflowException

    if isinstance(exc, requests.exceptions.RequestException | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, MlflowException):
        text = str(exc)
        return exc.get_http_status_code() >= 500 or "database is locked" in text or "Max retries" in text
    return False


class Mlflow:
    """An ``MlflowClient`` whose calls go through :meth:`call` (bounded retries with backoff).

    MLflow's own HTTP retries are switched off (``MLFLOW_HTTP_REQUEST_MAX_RETRIES=0``) and the request
    timeout set to ``http_timeout_s`` while a call runs, so the worst-case wait is bounded by the config.
    """

    def __init__(self, cfg: TrackingConfig) -> None:
        from mlflow import MlflowClient

        self.cfg = cfg
        self.uri = tracking_uri(cfg)
        self.client = MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
        self._experiment_id: str | None = None

    @contextlib.contextmanager
    def _http_env(self) -> Iterator[None]:
        env = {
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.cfg.http_timeout_s),
            "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
            # the registry resolves `models:/<model_id>` sources through the default tracking store
            "MLFLOW_TRACKING_URI": self.uri,
        }
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with up to ``retries`` extra attempts on transient errors."""
        attempts = self.cfg.retries + 1
        for attempt in range(attempts):
            try:
                with self._http_env():
                    return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised as TrackingError
                if not _transient(exc):
                    raise TrackingError(f"MLflow refused {what} at {self.uri}: {_one_line(exc)}") from exc
                if attempt + 1 == attempts:
                    raise TrackingError(
                        f"MLflow tracking at {self.uri} unavailable ({what}) after {attempts} attempt(s): "
                        f"{_one_line(exc)}"
                    ) from exc
                delay = self.cfg.backoff_s * 2**attempt
                log.warning(
                    "MLflow %s failed (%s); retry %d/%d in %.1fs",
                    what,
                    _one_line(exc),
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def experiment_id(self) -> str:
        """The configured experiment, created on first use (local artifact folder on a non-HTTP store), tagged
        as a model-development experiment so the MLflow 3 UI opens it in the model-training view."""
        if self._experiment_id is None:
            name = self.cfg.experiment
            exp = self.call("get_experiment_by_name", self.client.get_experiment_by_name, name)
            if exp is not None:
                self._experiment_id = str(exp.experiment_id)
                if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
                    set_tag = self.client.set_experiment_tag
                    self.call("set_experiment_tag", set_tag, self._experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            else:
                location = None
                if not self.uri.startswith(("http://", "https://", "databricks")):
                    location = Path(self.cfg.artifact_location).resolve().as_uri()
                self._experiment_id = self.call(
                    "create_experiment",
                    self.client.create_experiment,
                    name,
                    artifact_location=location,
                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                )
        return self._experiment_id

    def ui_url(self) -> str:
        """The experiment's runs in the MLflow UI's model-training view (``?workflowType=machine_learning``; the
        experiment tag alone does not switch a fresh browser profile out of the GenAI overview). For a local
        store the address is the one ``mlflow ui`` serves by default."""
        base = self.uri.rstrip("/") if self.uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"
        return f"{base}/#/experiments/{self.experiment_id()}/runs?workflowType=machine_learning"

    def search(self, filter_string: str, order_by: list[str] | None = None) -> list[Any]:
        """Runs of the experiment matching ``filter_string`` (active runs only), newest first by default."""
        return list(
            self.call(
                "search_runs",
                self.client.search_runs,
                [self.experiment_id()],
                filter_string=filter_string,
                order_by=order_by or ["attributes.start_time DESC"],
            )
        )

    def terminate(self, run_id: str, status: str) -> None:
        """End a run with ``status``; failures here are logged, not raised (used on error paths)."""
        try:
            self.call("set_terminated", self.client.set_terminated, run_id, status)
        except TrackingError as exc:
            log.warning("could not mark run %s %s: %s", run_id, status, exc)

    @contextlib.contextmanager
    def run(self, run_name: str, tags: dict[str, str]) -> Iterator[str]:
        """Create a run; FINISHED when the block succeeds, FAILED on any exception or SIGTERM."""
        run = self.call("create_run", self.client.create_run, self.experiment_id(), tags=tags, run_name=run_name)
        run_id = run.info.run_id
        try:
            with _sigterm_raises():
                yield run_id
        except BaseException:
            self.terminate(run_id, "FAILED")
            raise
        self.call("set_terminated", self.client.set_terminated, run_id, "FINISHED")


def quote(value: str) -> str:
    """``value`` inside a single-quoted MLflow filter string (``tags.x = '<value>'``)."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit`` while a run is open (main thread only) so it ends FAILED."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
