"""MLflow sink: log results folders as runs (one parent per model version, one child per benchmark).

What a child run holds (all derived from ``results.json``; trackers never compute metrics):

- params: the result's validated config, flattened to dotted keys (``umd.nsd_tolerance_mm``);
- metrics: ``BenchmarkResult.flat_metrics()`` (the same keys as metrics.json);
- tags: lineage (``trackeval.git_commit`` + ``mlflow.source.git.commit``, ``trackeval.dvc_data_digest``,
  ``trackeval.params_hash`` = config digest, ``trackeval.version``, ``trackeval.protocol_version``, model
  name/version, data digests, ``trackeval.leakage_audit``) and ``trackeval.idempotency_key``;
- a dataset input (``mlflow.data``, context ``eval``): the case table with the DVC data digest;
- artifacts: results.json, metrics.json, cases.parquet, ``figures/*.png`` and ``report.html``.

Idempotent: the key ``sha256(benchmark, data digest, model name, model version, config digest)`` is looked up
among FINISHED runs first; a match is not logged again. Faults: each MLflow call is retried
``tracking.retries`` times with exponential backoff on transient errors (unreachable server, 5xx, locked
database), then :class:`TrackingError` says so; the results stay on disk. Any exception (or SIGTERM) while a
run is open ends it FAILED; a run left RUNNING by a killed process or a dead server is marked FAILED by the
next ``track`` of the same model version. SQLite wants one writer: only this (parent) process logs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from trackeval.config import TrackingConfig
from trackeval.errors import InputError, TrackevalError
from trackeval.results import BenchmarkResult
from trackeval.tracking.files import CASES_PARQUET, METRICS_JSON, RESULTS_JSON, cases_frame

log = logging.getLogger(__name__)

T = TypeVar("T")

TAG = "trackeval."
KIND_PARENT, KIND_BENCHMARK, KIND_GATE = "evaluation", "benchmark", "gate_decision"


class TrackingError(TrackevalError):
    """MLflow could not be reached or refused a call after the bounded retries."""


# ----------------------------------------------------------------------------------------------- inputs


def read_results(folder: Path) -> BenchmarkResult:
    """Load and validate ``folder/results.json`` (a results folder, or the file itself)."""
    path = folder if folder.suffix == ".json" else folder / RESULTS_JSON
    try:
        return BenchmarkResult.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read results: {exc.strerror or exc}", file=str(path)) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"not a trackeval results file: {first['msg']}",
            file=str(path),
            field=".".join(str(p) for p in first["loc"]),
        ) from exc


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"a.b.c": "value"}`` with JSON-encoded leaves (lists, None) for MLflow params."""
    out: dict[str, str] = {}
    for key, value in sorted(tree.items()):
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def git_commit(cwd: Path) -> str:
    """``git rev-parse HEAD`` of the working directory's repository, or ``unknown``."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def dvc_data_digest(root: Path) -> str | None:
    """The DVC digest of the benchmark data: the ``md5`` of ``data.dvc``'s output(s), else a sha256 over the
    ``path:md5`` of every dependency and output recorded in ``dvc.lock``; None without either file."""
    dvc_file, lock = root / "data.dvc", root / "dvc.lock"
    try:
        if dvc_file.is_file():
            outs = (yaml.safe_load(dvc_file.read_text(encoding="utf-8")) or {}).get("outs", [])
            md5s = [o["md5"] for o in outs if isinstance(o, dict) and "md5" in o]
            if len(md5s) == 1:
                return str(md5s[0])
            if md5s:
                return hashlib.sha256("\n".join(sorted(md5s)).encode()).hexdigest()
        if lock.is_file():
            stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {})
            entries = sorted(
                f"{e['path']}:{e['md5']}"
                for stage in stages.values()
                for e in (stage.get("deps", []) + stage.get("outs", []))
                if "md5" in e
            )
            return hashlib.sha256("\n".join(entries).encode()).hexdigest() if entries else None
    except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError) as exc:
        raise InputError(
            f"cannot read the DVC digest: {exc}", file=str(dvc_file if dvc_file.exists() else lock)
        ) from exc
    return None


def idempotency_key(result: BenchmarkResult) -> str:
    """Identity of a tracked evaluation: benchmark, data digest, model name and version, config digest."""
    parts = [
        result.benchmark,
        result.data.digest,
        result.model.get("name", ""),
        result.model.get("version", ""),
        result.config_digest,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------- client


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
        """The configured experiment, created on first use (local artifact folder on a non-HTTP store)."""
        if self._experiment_id is None:
            name = self.cfg.experiment
            exp = self.call("get_experiment_by_name", self.client.get_experiment_by_name, name)
            if exp is not None:
                self._experiment_id = exp.experiment_id
            else:
                location = None
                if not self.uri.startswith(("http://", "https://", "databricks")):
                    location = Path(self.cfg.artifact_location).resolve().as_uri()
                self._experiment_id = self.call(
                    "create_experiment", self.client.create_experiment, name, artifact_location=location
                )
        return self._experiment_id

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


# ----------------------------------------------------------------------------------------------- track


@dataclass(frozen=True)
class Tracked:
    """Outcome for one results folder: the child run id and whether it was logged now or found already."""

    folder: Path
    benchmark: str
    model: str
    run_id: str
    logged: bool


def _q(value: str) -> str:
    return value.replace("'", "\\'")


def _child_tags(result: BenchmarkResult, lineage: dict[str, str], parent_id: str) -> dict[str, str]:
    from trackeval.gate.decide import audit_problems

    return {
        "mlflow.parentRunId": parent_id,
        "mlflow.source.git.commit": lineage["git_commit"],
        TAG + "kind": KIND_BENCHMARK,
        TAG + "benchmark": result.benchmark,
        TAG + "model_name": result.model.get("name", ""),
        TAG + "model_version": result.model.get("version", ""),
        TAG + "idempotency_key": idempotency_key(result),
        TAG + "data_digest": result.data.digest,
        TAG + "ground_truth_digest": result.data.ground_truth_digest,
        TAG + "predictions_digest": result.data.predictions_digest,
        TAG + "dvc_data_digest": lineage["dvc"] or result.data.ground_truth_digest,
        TAG + "params_hash": result.config_digest,
        TAG + "version": result.trackeval_version,
        TAG + "protocol_version": f"{result.benchmark}/schema-{result.schema_version}",
        TAG + "git_commit": lineage["git_commit"],
        TAG + "leakage_audit": "fail" if audit_problems(result) else "pass",
    }


def _dataset(result: BenchmarkResult, folder: Path, digest: str) -> Any:
    """The evaluated cases as an ``mlflow.data`` dataset entity (digest: the DVC / ground-truth digest)."""
    import mlflow.data
    import pandas as pd
    from mlflow.entities import Dataset, DatasetInput, InputTag

    frame = pd.DataFrame(
        [{"case_id": c.case_id, "subject_id": c.subject_id, **c.groups, "status": c.status} for c in result.cases]
    )
    with warnings.catch_warnings():  # "source can be interpreted in multiple ways": both are local folders
        warnings.simplefilter("ignore", UserWarning)
        ds = mlflow.data.from_pandas(
            frame, source=str(folder.resolve()), name=f"{result.benchmark}-cases", digest=digest
        )
    entity = Dataset(**ds.to_dict())
    return DatasetInput(entity, tags=[InputTag("mlflow.data.context", "eval")])


def _stage_artifacts(result: BenchmarkResult, folder: Path, staging: Path) -> None:
    """results.json / metrics.json / cases.parquet (copied, or rebuilt from the result), figures, report."""
    from trackeval.report.figures import save_figures
    from trackeval.report.html import result_report

    for name in (RESULTS_JSON, METRICS_JSON, CASES_PARQUET):
        src = folder / name
        if src.is_file():
            (staging / name).write_bytes(src.read_bytes())
    if not (staging / CASES_PARQUET).exists():
        cases_frame(result).to_parquet(staging / CASES_PARQUET, index=False)
    if not (staging / METRICS_JSON).exists():
        (staging / METRICS_JSON).write_text(json.dumps(result.flat_metrics(), sort_keys=True, indent=1) + "\n")
    figures = save_figures(result, staging / "figures")
    (staging / "report.html").write_text(result_report(result, figures), encoding="utf-8")


def _log_child(ml: Mlflow, result: BenchmarkResult, folder: Path, lineage: dict[str, str], parent_id: str) -> str:
    from mlflow.entities import Metric, Param

    tags = _child_tags(result, lineage, parent_id)
    name = f"{result.benchmark} {result.model.get('name', '')}/{result.model.get('version', '')}"
    with ml.run(name, tags) as run_id:
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in result.flat_metrics().items()]
        params = [Param(k, v) for k, v in flatten({"benchmark": result.benchmark, **result.config}).items()]
        ml.call("log_batch", ml.client.log_batch, run_id, metrics=metrics, params=params)
        digest = (lineage["dvc"] or result.data.ground_truth_digest)[:36]
        ml.call("log_inputs", ml.client.log_inputs, run_id, datasets=[_dataset(result, folder, digest)])
        with tempfile.TemporaryDirectory(prefix="trackeval-artifacts-") as tmp:
            _stage_artifacts(result, folder, Path(tmp))
            ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp)
    return run_id


def _fail_stale(ml: Mlflow, model_name: str, model_version: str) -> None:
    """Runs of this model version still RUNNING (a killed process or server) are ended FAILED."""
    stale = ml.search(
        f"tags.`{TAG}model_name` = '{_q(model_name)}' and tags.`{TAG}model_version` = '{_q(model_version)}' "
        "and attributes.status = 'RUNNING'"
    )
    for run in stale:
        log.warning("run %s was left RUNNING by an interrupted track; marking it FAILED", run.info.run_id)
        ml.call("set_tag", ml.client.set_tag, run.info.run_id, TAG + "failure", "interrupted; superseded")
        ml.call("set_terminated", ml.client.set_terminated, run.info.run_id, "FAILED")


def track_results(folders: list[Path], cfg: TrackingConfig, model: dict[str, str] | None = None) -> list[Tracked]:
    """Log each results folder (see the module docstring); returns one :class:`Tracked` per folder.

    ``model`` (``name``/``version``) fills in or overrides the model recorded in results.json. Results
    without a model name and version are refused (a run must belong to a model version).
    """
    from trackeval.tracking.registry import link_version

    results = []
    for folder in folders:
        result = read_results(folder)
        if model:
            result = result.model_copy(update={"model": {**result.model, **model}})
        for field in ("name", "version"):
            if not result.model.get(field):
                raise InputError(
                    "results have no model name/version; pass --model-name and --model-version",
                    file=str(folder / RESULTS_JSON),
                    field=f"model.{field}",
                )
        results.append((folder, result))
    ml = Mlflow(cfg)
    root = Path(cfg.dvc_root)
    lineage = {"git_commit": git_commit(root), "dvc": dvc_data_digest(root) or ""}
    out: list[Tracked] = []
    by_model: dict[tuple[str, str], list[tuple[Path, BenchmarkResult]]] = {}
    for folder, result in results:
        by_model.setdefault((result.model["name"], result.model["version"]), []).append((folder, result))
    try:
        for (name, version), items in by_model.items():
            todo = []
            for folder, result in items:
                key = idempotency_key(result)
                found = ml.search(f"tags.`{TAG}idempotency_key` = '{key}' and attributes.status = 'FINISHED'")
                if found:
                    out.append(Tracked(folder, result.benchmark, f"{name}/{version}", found[0].info.run_id, False))
                else:
                    todo.append((folder, result))
            if not todo:
                continue
            _fail_stale(ml, name, version)
            parent_tags = {
                TAG + "kind": KIND_PARENT,
                TAG + "model_name": name,
                TAG + "model_version": version,
                TAG + "git_commit": lineage["git_commit"],
                "mlflow.source.git.commit": lineage["git_commit"],
            }
            with ml.run(f"{name}/{version}", parent_tags) as parent_id:
                children = {}
                for folder, result in todo:
                    run_id = _log_child(ml, result, folder, lineage, parent_id)
                    children[result.benchmark] = run_id
                    out.append(Tracked(folder, result.benchmark, f"{name}/{version}", run_id, True))
                link_version(ml, name, version, parent_id, children)
    except TrackingError as exc:
        where = " ".join(str(f) for f in folders)
        raise TrackingError(f"{exc}; the results stay on disk, log them later with: trackeval track {where}") from exc
    return out
