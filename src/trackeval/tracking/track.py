"""The track use case: log results folders as runs (one parent per model version, one child per benchmark unit).

What a child run holds (all derived from ``results.json``; trackers never compute metrics):

- params: the result's validated config, flattened to dotted keys (``umd.nsd_tolerance_mm``);
- metrics: ``BenchmarkResult.flat_metrics()`` (the same keys as metrics.json);
- tags: lineage (``trackeval.git_commit`` + ``mlflow.source.git.commit``, ``trackeval.dvc_data_digest``,
  ``trackeval.params_hash`` = config digest, ``trackeval.version``, ``trackeval.protocol_version``, model
  name/version, data digests, ``trackeval.leakage_audit``) and ``trackeval.idempotency_key``;
- a dataset input (``mlflow.data``, context ``eval``): the case table with the DVC data digest;
- artifacts: results.json, metrics.json, cases.parquet, ``figures/*.png`` and ``report.html``.

Idempotent: the key ``sha256(benchmark, data digest, model name, model version, config digest)`` is looked up
among FINISHED runs first; a match is not logged again, but the version's ``eval_run.<unit>`` tags are pointed
at it all the same, so the registry follows the results that were tracked last (e.g. after a revert).
Faults (see :mod:`trackeval.tracking.client`): the results stay on disk when MLflow fails; a run left RUNNING
by a killed process or a dead server is marked FAILED by the next ``track`` of the same model version. SQLite
wants one writer: only this (parent) process logs.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackeval.config import TrackingConfig
from trackeval.errors import InputError
from trackeval.io.results_folder import (
    CASES_PARQUET,
    METRICS_JSON,
    RESULTS_JSON,
    cases_frame,
    metrics_file,
    read_results,
)
from trackeval.results import BenchmarkResult, headline_metrics
from trackeval.tracking.client import Mlflow, TrackingError, quote
from trackeval.tracking.lineage import dvc_data_digest, flatten, git_commit, idempotency_key
from trackeval.tracking.model_registry import link_version, logged_model
from trackeval.tracking.tags import EVAL_RUN_TAG, KIND_BENCHMARK, KIND_PARENT, TAG

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tracked:
    """Outcome for one results folder: the child run id, whether it was logged now or found already, and the
    evaluation's idempotency key (the same on every machine, unlike the run id)."""

    folder: Path
    unit: str
    model: str
    run_id: str
    logged: bool
    key: str


def _child_tags(result: BenchmarkResult, lineage: dict[str, str], parent_id: str) -> dict[str, str]:
    from trackeval.gate.decide import audit_problems

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
            frame, source=str(folder.resolve()), name=f"{result.unit.replace('/', '-')}-cases", digest=digest
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
        (staging / METRICS_JSON).write_text(json.dumps(metrics_file(result), sort_keys=True, indent=1) + "\n")
    figures = save_figures(result, staging / "figures")
    (staging / "report.html").write_text(result_report(result, figures), encoding="utf-8")


def _log_child(
    ml: Mlflow, result: BenchmarkResult, folder: Path, lineage: dict[str, str], parent_id: str, model_id: str
) -> str:
    """One unit's evaluation run. Its headline metrics are also linked to the version's LoggedModel
    (``model_id``) and to the unit's evaluation set as an MLflow dataset (name = unit, digest = the ground-truth
    digest), which is what the Models tab and ``search_logged_models`` rank by."""
    from mlflow.entities import Metric, Param

    tags = _child_tags(result, lineage, parent_id)
    name = f"{result.unit} {result.model.get('name', '')}/{result.model.get('version', '')}"
    with ml.run(name, tags) as run_id:
        now = int(time.time() * 1000)
        heads = headline_metrics(result)
        linked = {
            "model_id": model_id,
            "dataset_name": result.unit,
            "dataset_digest": result.data.ground_truth_digest[:36],
        }
        metrics = [Metric(k, v, now, 0, **(linked if k in heads else {})) for k, v in result.flat_metrics().items()]
        params = [Param(k, v) for k, v in flatten({"benchmark": result.benchmark, **result.config}).items()]
        ml.call("log_batch", ml.client.log_batch, run_id, metrics=metrics, params=params)
        digest = (lineage["dvc"] or result.data.ground_truth_digest)[:36]
        ml.call("log_inputs", ml.client.log_inputs, run_id, datasets=[_dataset(result, folder, digest)])
        with tempfile.TemporaryDirectory(prefix="trackeval-artifacts-") as tmp:
            _stage_artifacts(result, folder, Path(tmp))
            ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp)
    return run_id


def _log_headlines(ml: Mlflow, parent_id: str, results: list[BenchmarkResult]) -> None:
    """Every unit's headline metrics (with CIs) on the version's parent run too, so that selecting two versions
    in the MLflow runs table compares something."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    flat = {k: v for r in results for k, v in headline_metrics(r).items()}
    metrics = [Metric(k, v, now, 0) for k, v in sorted(flat.items())]
    for i in range(0, len(metrics), 1000):  # MLflow's log_batch limit
        ml.call("log_batch", ml.client.log_batch, parent_id, metrics=metrics[i : i + 1000])


def _fail_stale(ml: Mlflow, model_name: str, model_version: str) -> None:
    """Runs of this model version still RUNNING (a killed process or server) are ended FAILED."""
    stale = ml.search(
        f"tags.`{TAG}model_name` = '{quote(model_name)}' and tags.`{TAG}model_version` = '{quote(model_version)}' "
        "and attributes.status = 'RUNNING'"
    )
    for run in stale:
        log.warning("run %s was left RUNNING by an interrupted track; marking it FAILED", run.info.run_id)
        ml.call("set_tag", ml.client.set_tag, run.info.run_id, TAG + "failure", "interrupted; superseded")
        ml.call("set_terminated", ml.client.set_terminated, run.info.run_id, "FAILED")


def _check_repoint(
    ml: Mlflow, name: str, version: str, items: list[tuple[Path, BenchmarkResult]], replace: bool
) -> None:
    """Refuse (unless ``replace``) to point a version's ``eval_run.<unit>`` tag away from an evaluation on other
    data: a different ground truth (truth files, manifest, case set) would silently change what the version, and
    any gate decision read from its tags, stands for. Nothing is deleted either way: the previous evaluation run
    stays, and the new one records it in ``trackeval.replaces``."""
    from trackeval.tracking.model_registry import find_version

    mv = find_version(ml, name, version)
    if mv is None:
        return
    for folder, result in items:
        current = mv.tags.get(EVAL_RUN_TAG + result.unit)
        if not current:
            continue
        old = ml.call("get_run", ml.client.get_run, current).data.tags.get(TAG + "ground_truth_digest", "")
        if old and old != result.data.ground_truth_digest and not replace:
            raise InputError(
                f"{name}/{version} was evaluated on {result.unit} with other ground truth (digest {old[:12]}, "
                f"now {result.data.ground_truth_digest[:12]}: other files or cases); re-pointing its "
                f"trackeval.eval_run.{result.unit} would change what it (and any gate decision) stands for. Track "
                "under a new model version, or pass --replace (the previous evaluation run is kept)",
                file=str(folder / RESULTS_JSON),
                field="ground_truth_digest",
            )


def track_results(
    folders: list[Path], cfg: TrackingConfig, model: dict[str, str] | None = None, *, replace: bool = False
) -> list[Tracked]:
    """Log each results folder (see the module docstring); returns one :class:`Tracked` per folder.

    ``model`` (``name``/``version``) fills in or overrides the model recorded in results.json. Results
    without a model name and version are refused (a run must belong to a model version). ``replace``: allow
    re-pointing a version at an evaluation on other ground truth (see :func:`_check_repoint`).
    """
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
            _check_repoint(ml, name, version, items, replace)
            todo = []
            children: dict[str, str] = {}  # unit -> evaluation run the version's eval_run tag must point to
            parent_id = ""
            for folder, result in items:
                key = idempotency_key(result)
                found = ml.search(f"tags.`{TAG}idempotency_key` = '{key}' and attributes.status = 'FINISHED'")
                if found:
                    run_id = found[0].info.run_id
                    out.append(Tracked(folder, result.unit, f"{name}/{version}", run_id, False, key))
                    children[result.unit] = run_id
                    parent_id = parent_id or found[0].data.tags.get("mlflow.parentRunId", "")
                else:
                    todo.append((folder, result))
            if todo:
                _fail_stale(ml, name, version)
                parent_tags = {
                    TAG + "kind": KIND_PARENT,
                    TAG + "model_name": name,
                    TAG + "model_version": version,
                    TAG + "git_commit": lineage["git_commit"],
                    "mlflow.source.git.commit": lineage["git_commit"],
                }
                with ml.run(f"{name}/{version}", parent_tags) as parent_id:
                    model_id = logged_model(ml, name, version, parent_id)
                    for folder, result in todo:
                        run_id = _log_child(ml, result, folder, lineage, parent_id, model_id)
                        children[result.unit] = run_id
                        out.append(
                            Tracked(folder, result.unit, f"{name}/{version}", run_id, True, idempotency_key(result))
                        )
                    _log_headlines(ml, parent_id, [r for _, r in todo])
                    link_version(ml, name, version, parent_id, children, model_id=model_id)
            else:  # already tracked: still point the version at THESE results (a revert must not leave it elsewhere)
                link_version(ml, name, version, parent_id, children, new=False)
    except TrackingError as exc:
        where = " ".join(str(f) for f in folders)
        raise TrackingError(f"{exc}; the results stay on disk, log them later with: trackeval track {where}") from exc
    return out
