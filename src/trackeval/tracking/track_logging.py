"""Writing a model version's evaluation runs for ``track`` (:mod:`trackeval.tracking.track`): the verified folder
to log (:class:`FolderToTrack`), the runs' tags, params, metrics and dataset, and their artifacts, staged (figures
drawn, report written) before anything is written to MLflow.

The headline metrics are linked to the version's LoggedModel and to the unit's evaluation set (what the Models tab
and the leaderboard read), and logged only once every run of the batch holds its files (:func:`log_children`).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackeval.gate.decide import audit_problems
from trackeval.io.redact import redact
from trackeval.io.results_folder import OUTPUT_FILES, output_bytes
from trackeval.report.figures import save_figures
from trackeval.report.html import result_report
from trackeval.results import BenchmarkResult, headline_metrics
from trackeval.tracking.client import Mlflow
from trackeval.tracking.lineage import flatten, idempotency_key
from trackeval.tracking.tags import KIND_BENCHMARK, KIND_PARENT, RESULTS_DIGEST_TAG, TAG


@dataclass(frozen=True)
class FolderToTrack:
    """A verified results folder to track: its result (model filled in), the verified file bytes, its key and its
    evidence digest (the sha256 of the results.json bytes, uploaded as they are)."""

    folder: Path
    result: BenchmarkResult
    files: dict[str, bytes]
    key: str
    digest: str


def child_tags(result: BenchmarkResult, lineage: dict[str, str], parent_id: str) -> dict[str, str]:
    return {
        "mlflow.parentRunId": parent_id,
        "mlflow.source.git.commit": lineage["git_commit"],
        TAG + "kind": KIND_BENCHMARK,
        TAG + "benchmark": result.benchmark,
        TAG + "unit": result.unit,
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


def parent_tags(name: str, version: str, lineage: dict[str, str]) -> dict[str, str]:
    """The tags of a model version's parent run."""
    return {
        TAG + "kind": KIND_PARENT,
        TAG + "model_name": name,
        TAG + "model_version": version,
        TAG + "git_commit": lineage["git_commit"],
        "mlflow.source.git.commit": lineage["git_commit"],
    }


def evaluation_dataset(result: BenchmarkResult, folder: Path, digest: str) -> Any:
    """The evaluated cases (``case_id``, ``subject_id``, the case groups, ``status``) as an ``mlflow.data`` dataset
    entity (digest: the DVC / ground-truth digest): the entity ``mlflow.data.from_pandas`` builds of that frame
    (tests/test_tracking.py compares them), its schema written from the columns (all strings; ``required`` where
    no case lacks the value) instead of inferred value by value (3 s at 100,000 cases)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.types import ColSpec, Schema

    cases = result.cases
    columns = {name: cases.field(name) for name in ["case_id", "subject_id", *cases.groups, "status"]}
    schema = Schema([ColSpec("string", name, required=None not in values) for name, values in columns.items()])
    with warnings.catch_warnings():  # "source can be interpreted in multiple ways": both are local folders
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(str(folder.resolve()))
    entity = Dataset(
        name=f"{result.unit.replace('/', '-')}-cases",
        digest=digest,
        source_type=source._get_source_type(),
        source=source.to_json(),
        schema=json.dumps({"mlflow_colspec": schema.to_dict()}),
        profile=json.dumps({"num_rows": len(cases), "num_elements": len(cases) * len(columns)}),
    )
    return DatasetInput(entity, tags=[InputTag("mlflow.data.context", "eval")])


def _stage_artifacts(result: BenchmarkResult, files: dict[str, bytes], staging: Path) -> None:
    """results.json / metrics.json / cases.parquet (the verified bytes read from the folder, or rebuilt from the
    result for a lone results.json), figures, report. Nothing is read from the folder again: what was verified
    is what is uploaded."""
    if len(files) < len(OUTPUT_FILES):  # a lone results.json: the other two derived as evaluate writes them
        files = {**output_bytes(result), **files}
    for name, data in files.items():
        (staging / name).write_bytes(data)
    figures = save_figures(result, staging / "figures")
    (staging / "report.html").write_text(result_report(result, figures), encoding="utf-8")


def stage_all(stack: contextlib.ExitStack, evaluations: list[FolderToTrack]) -> dict[str, Path]:
    """``{key: folder}``: the artifacts of every evaluation staged (figures drawn, report written) in temporary
    folders that live as long as ``stack``, before anything is written to MLflow."""
    staged = {}
    for ev in evaluations:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trackeval-artifacts-")))
        _stage_artifacts(ev.result, ev.files, folder)
        staged[ev.key] = folder
    return staged


def linked_metrics(result: BenchmarkResult, model_id: str, keys: set[str] | None = None) -> list[Any]:
    """``result``'s flat metrics (only ``keys`` when given) as MLflow metrics; the headline ones are linked to the
    LoggedModel ``model_id`` and to the unit's evaluation set (name = unit, digest = the ground-truth digest),
    which is what the Models tab and ``search_logged_models`` rank by."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    heads = headline_metrics(result)
    linked = {"model_id": model_id, "dataset_name": result.unit, "dataset_digest": result.data.ground_truth_digest[:36]}
    return [
        Metric(k, v, now, 0, **(linked if k in heads else {}))
        for k, v in result.flat_metrics().items()
        if keys is None or k in keys
    ]


def log_children(
    ml: Mlflow,
    todo: list[FolderToTrack],
    lineage: dict[str, str],
    parent_id: str,
    model_id: str,
    staged: dict[str, Path],
) -> set[str]:
    """The evaluation runs of ``todo`` (artifacts from ``staged``); returns their ids. Each run gets its params,
    the metrics that are not headline ones, its dataset and its files; only when every run has its files are the
    headline metrics logged (linked to the LoggedModel ``model_id``, which is what the leaderboard shows), and the
    runs set FINISHED on leaving (FAILED on any error: nothing the leaderboard or the registry reads changed)."""
    from mlflow.entities import Param

    ids: dict[str, str] = {}
    with contextlib.ExitStack() as open_runs:
        for ev in todo:
            result = ev.result
            tags = {**child_tags(result, lineage, parent_id), RESULTS_DIGEST_TAG: ev.digest}
            name = f"{result.unit} {result.model['name']}/{result.model['version']}"
            run_id = open_runs.enter_context(ml.run(name, tags))
            config = flatten({"benchmark": result.benchmark, **result.config})
            params = [Param(k, redact(v)) for k, v in config.items()]
            heads = headline_metrics(result)
            others = [m for m in linked_metrics(result, model_id) if m.key not in heads]
            ml.call("log_batch", ml.client.log_batch, run_id, metrics=others, params=params)
            digest = (lineage["dvc"] or result.data.ground_truth_digest)[:36]
            ml.call(
                "log_inputs", ml.client.log_inputs, run_id, datasets=[evaluation_dataset(result, ev.folder, digest)]
            )
            ml.call("log_artifacts", ml.client.log_artifacts, run_id, str(staged[ev.key]))
            ids[ev.key] = run_id
        for ev in todo:  # last: the numbers the leaderboard and the Models tab read
            log_batches(ml, ids[ev.key], linked_metrics(ev.result, model_id, set(headline_metrics(ev.result))))
    return set(ids.values())


def log_batches(ml: Mlflow, run_id: str, metrics: list[Any]) -> None:
    """Log ``metrics`` on run ``run_id`` in batches MLflow accepts."""
    for i in range(0, len(metrics), 1000):  # MLflow's log_batch limit
        ml.call("log_batch", ml.client.log_batch, run_id, metrics=metrics[i : i + 1000])


def log_headlines(ml: Mlflow, parent_id: str, heads: dict[str, float]) -> None:
    """Headline metrics (with CIs) on the version's parent run too, so that selecting two versions in the MLflow
    runs table compares something."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    log_batches(ml, parent_id, [Metric(k, v, now, 0) for k, v in sorted(heads.items())])
