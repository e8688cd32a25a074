"""A retrying MLflow client: every call is bounded in attempts and time; failures become :class:`TrackingError`.

Faults: each MLflow call is retried ``tracking.retries`` times with exponential backoff on transient errors
(unreachable server, 5xx, locked database), then :class:`TrackingError` says so. Any exception (or SIGTERM) while
a run is open ends it FAILED.

Concurrency: a local store (SQLite database or file store) is written under :func:`store_lock`, a file lock beside
it, so two ``trackeval track`` processes take turns (also on a store that does not exist yet: the first one creates
it). A server store cannot be locked from here; writers there create, then deduplicate (``trackeval.tracking.track``).

Filter strings: :func:`quote` is the one way a value enters an MLflow filter, and :func:`check_model_ref` the one
rule for what a model name or version may hold.

Secrets: the tracking URI's password is remembered for redaction (:func:`tracking_uri`), every
:class:`TrackingError` and every record of this module's logger is redacted, and :meth:`Mlflow.ui_url` is a link
without userinfo (:mod:`trackeval.io.redact`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from trackeval.config import TrackingConfig
from trackeval.errors import InputError, TrackingError
from trackeval.io.redact import logger, redact, remember_uri, without_userinfo

log = logger(__name__)

T = TypeVar("T")


#: MLflow 3's experiment kind tag: this value opens the experiment in the model-training (not GenAI) view
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"


def tracking_error(message: str) -> TrackingError:
    """The :class:`~trackeval.errors.TrackingError` trackeval raises, its message redacted (the URI's userinfo,
    credentials quoted by MLflow's exception: :func:`~trackeval.io.redact.redact`)."""
    return TrackingError(redact(message))


def error_code(exc: BaseException) -> str | None:
    """MLflow's error code (``RESOURCE_DOES_NOT_EXIST``, ``RESOURCE_ALREADY_EXISTS``...) behind a
    :class:`TrackingError`, or None when the cause was not an MLflow answer (e.g. a transport failure)."""
    from mlflow.exceptions import MlflowException

    cause = exc.__cause__
    return str(cause.error_code) if isinstance(cause, MlflowException) else None


def tracking_uri(cfg: TrackingConfig) -> str:
    """``MLFLOW_TRACKING_URI`` when set, else ``tracking.uri`` (default ``sqlite:///mlflow.db``); its password (if
    it holds one) is masked in everything printed from now on (:func:`~trackeval.io.redact.remember_uri`)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or cfg.uri
    remember_uri(uri)
    return uri


def _transient(exc: Exception) -> bool:
    """Worth retrying: transport failures, 5xx answers, a locked SQLite database, and a unique-constraint race
    (another writer inserted the same row first: MLflow's get-or-create of a dataset in ``log_inputs`` is not
    atomic, so two ``track`` processes on one server can collide; the retry finds the row and reuses it)."""
    import requests
    from mlflow.exceptions import MlflowException

    if isinstance(exc, requests.exceptions.RequestException | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, MlflowException):
        text = str(exc)
        return (
            exc.get_http_status_code() >= 500
            or "database is locked" in text
            or "Max retries" in text
            or "UNIQUE constraint failed" in text
        )
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
        # opening a client opens (and on first use creates) the store: retried and reported like any call
        self.client = self.call("open the store", MlflowClient, tracking_uri=self.uri, registry_uri=self.uri)
        self._experiment_id: str | None = None

    @contextlib.contextmanager
    def _http_env(self) -> Iterator[None]:
        env = {
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.cfg.http_timeout_s),
            "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
            # MLflow writes "View run ... at: <url>" straight to stdout when a run on a server ends (not logging,
            # so the CLI's quiet levels miss it); trackeval prints its own, redacted, `MLflow UI:` link
            "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
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
                    raise tracking_error(f"MLflow refused {what} at {self.uri}: {_one_line(exc)}") from exc
                if attempt + 1 == attempts:
                    raise tracking_error(
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
        as a model-development experiment so the MLflow 3 UI opens it in the model-training view. When another
        process creates it at the same moment (a server store), the one it created is used."""
        if self._experiment_id is None:
            name = self.cfg.experiment
            exp = self.call("get_experiment_by_name", self.client.get_experiment_by_name, name)
            if exp is None:
                try:
                    self._experiment_id = str(self._create_experiment(name))
                    return self._experiment_id
                except TrackingError as exc:
                    if error_code(exc) != "RESOURCE_ALREADY_EXISTS":
                        raise
                exp = self.call("get_experiment_by_name", self.client.get_experiment_by_name, name)
            self._experiment_id = str(exp.experiment_id)
            if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
                set_tag = self.client.set_experiment_tag
                self.call("set_experiment_tag", set_tag, self._experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return self._experiment_id

    def _create_experiment(self, name: str) -> str:
        location = None  # a server chooses its own
        if not self.uri.startswith(("http://", "https://", "databricks")):
            location = Path(self.cfg.artifact_location).resolve().as_uri()
        create, tags = self.client.create_experiment, {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
        return self.call("create_experiment", create, name, artifact_location=location, tags=tags)

    def ui_url(self) -> str:
        """The experiment's runs in the MLflow UI's model-training view (``?workflowType=machine_learning``; the
        experiment tag alone does not switch a fresh browser profile out of the GenAI overview). For a local
        store the address is the one ``mlflow ui`` serves by default. A link to open: without the URI's userinfo
        (the browser asks for credentials itself)."""
        http = self.uri.startswith(("http://", "https://"))
        base = without_userinfo(self.uri).rstrip("/") if http else "http://127.0.0.1:5000"
        return f"{base}/#/experiments/{self.experiment_id()}/runs?workflowType=machine_learning"

    def run_url(self, run_id: str) -> str | None:
        """The run's page in the MLflow UI of an HTTP(S) tracking server (``<uri>/#/experiments/<exp>/runs/<run>``,
        without the URI's userinfo: the browser asks for credentials itself); None for a local store, which no
        server serves."""
        if not self.uri.startswith(("http://", "https://")):
            return None
        return f"{without_userinfo(self.uri).rstrip('/')}/#/experiments/{self.experiment_id()}/runs/{run_id}"

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


#: the longest model name or version: an evaluation run is named ``<unit> <name>/<version>``, and MLflow keeps
#: run names (and SQL stores their columns) to 250 characters
MAX_MODEL_REF_CHARS = 100
#: characters a model name cannot hold: MLflow refuses ``/`` and ``:`` in registered model names; ``@`` separates
#: ``NAME@ALIAS`` (``compare``, ``promote --candidate``), ``/`` also ``NAME/VERSION``
_NAME_FORBIDDEN = "/:@"


def quote(value: str) -> str:
    """``value`` as a single-quoted MLflow filter literal (``'seg'``, for ``tags.x = 'seg'``).

    MLflow reads the text between the quotes as is: it never unescapes (``\\'`` stays two characters), and its
    LoggedModel search accepts single quotes only, so a value holding ``'`` cannot be spelled at all; its parser
    (sqlparse) also reads a backslash before the closing quote as escaping it, so a value cannot end with ``\\``.
    Anything else (``"``, other backslashes, ``%``, ``_``, backticks, spaces, unicode) is matched exactly. Model
    names and versions are checked up front (:func:`check_model_ref`); other values are hex digests and constants.

    Raises:
        ValueError: ``value`` holds a single quote or ends with a backslash (a bug: the caller should have
            checked it).
    """
    if "'" in value or value.endswith("\\"):
        raise ValueError(f"{value!r} cannot be quoted in an MLflow filter string")
    return f"'{value}'"


def check_model_ref(value: str, part: Literal["name", "version"], *, file: str | None = None) -> str:
    """``value`` if MLflow can store and find it as a model ``part``; else :class:`InputError` (field
    ``model.name`` / ``model.version``, and ``file`` when it came from a results file).

    Refused: empty, longer than :data:`MAX_MODEL_REF_CHARS`, leading or trailing whitespace, control or
    line-separator characters, a single quote or a trailing backslash (:func:`quote`); for a name also ``/``,
    ``:``, ``@`` and a name MLflow reads as a path (``.``, ``..x``); for a version a leading ``@`` (it reads as
    an alias). Everything else (``"``, other backslashes, spaces, ``%``, ``_``, backticks, unicode; a version
    holding ``/`` or ``@``) works end to end: track, promote, compare.
    """
    problem = _model_ref_problem(value, part)
    if problem:
        raise InputError(f"model {part} {value[:60]!r} {problem}", file=file, field=f"model.{part}")
    return value


def _model_ref_problem(value: str, part: str) -> str | None:
    """Why ``value`` cannot be a model ``part`` (None when it can): the first problem found, checking its size,
    then its characters (:func:`_character_problem`), then how MLflow would read it (:func:`_reading_problem`)."""
    if not value.strip():
        return "is empty: pass --model-name and --model-version (or set them in results.json)"
    if len(value) > MAX_MODEL_REF_CHARS:
        return f"is {len(value)} characters long; at most {MAX_MODEL_REF_CHARS} are allowed"
    return _character_problem(value, part) or _reading_problem(value, part)


def _character_problem(value: str, part: str) -> str | None:
    """Why the characters of ``value`` cannot be a model ``part``, in this order: control or line-separator
    characters (all of them, by code point), leading or trailing whitespace, then a single quote or (for a name)
    :data:`_NAME_FORBIDDEN` characters (all of them); None when none of these applies."""
    bad = sorted({c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})
    forbidden = sorted({c for c in value if c == "'" or (part == "name" and c in _NAME_FORBIDDEN)})
    if bad:
        return f"holds control character(s) {', '.join(f'U+{ord(c):04X}' for c in bad)}"
    if value != value.strip():
        return "starts or ends with whitespace"
    if forbidden:
        return f"holds {' '.join(forbidden)}, which MLflow cannot store or search in a model {part}"
    return None


def _reading_problem(value: str, part: str) -> str | None:
    """Why MLflow would misread ``value`` as a model ``part``: a trailing backslash (its filter parser), a name
    that reads as a relative path, a version that reads as an alias; None when it reads as it is."""
    if value.endswith("\\"):
        return "ends with a backslash, which MLflow's filter parser reads as escaping the closing quote"
    if part == "name" and (value == "." or value.startswith("..")):
        return "reads as a relative path, which MLflow refuses as a registered model name"
    if part == "version" and value.startswith("@"):
        return "starts with @, which reads as an alias (NAME@ALIAS)"
    return None


def local_store(uri: str) -> Path | None:
    """The file or folder of a local store: the database of ``sqlite:///PATH`` (relative to the working
    directory; ``sqlite:////abs``), the folder of ``file:///PATH`` or of a plain path; None for anything else
    (an HTTP or database server, an in-memory database)."""
    from urllib.parse import unquote, urlparse

    if uri.startswith("databricks"):
        return None
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :].split("?", 1)[0]
        return Path(path) if path and path != ":memory:" else None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":  # a plain path
        return Path(uri)
    return None


#: suffix of the lock file beside a local store (``mlflow.db`` -> ``mlflow.db.trackeval.lock``)
LOCK_SUFFIX = ".trackeval.lock"


@contextlib.contextmanager
def store_lock(uri: str, timeout_s: float) -> Iterator[Path | None]:
    """Hold the file lock beside the local store of ``uri`` (yields its path); a server store: nothing to lock
    (yields None). The lock is an OS lock (``flock``): a holder that dies releases it, so a stale lock file is
    harmless.

    Raises:
        InputError: the store's folder does not exist (field ``tracking.uri``).
        TrackingError: another process held the lock for ``timeout_s`` seconds (``tracking.lock_timeout_s``).
    """
    from filelock import FileLock, Timeout

    store = local_store(uri)
    if store is None:
        yield None
        return
    if not store.resolve().parent.is_dir():
        raise InputError(
            f"the folder of the tracking store {uri} does not exist: {store.resolve().parent}", field="tracking.uri"
        )
    path = Path(f"{store}{LOCK_SUFFIX}")
    lock = FileLock(str(path))
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.warning("another trackeval process is writing to %s; waiting up to %gs for %s", uri, timeout_s, path)
            lock.acquire(timeout=timeout_s)
    except Timeout as exc:
        raise tracking_error(
            f"another trackeval process kept the tracking store {uri} locked for {timeout_s:g}s (lock {path}); "
            "wait for it to finish, then run the command again"
        ) from exc
    try:
        yield path
    finally:
        lock.release()


def _one_line(exc: BaseException) -> str:
    """``exc`` on one line, redacted before it is cut (a cut through a URI's userinfo would hide it from the
    redaction and show part of the secret)."""
    return redact(" ".join(str(exc).split()))[:300]


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
