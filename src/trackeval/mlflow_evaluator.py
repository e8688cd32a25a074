"""trackeval as an MLflow evaluator plug-in (entry-point group ``mlflow.model_evaluator``, name ``trackeval``).

A team that evaluates through ``mlflow.models.evaluate`` scores a benchmark unit with trackeval's engine::

    mlflow.models.evaluate(data=df, targets="ground_truth", predictions="prediction", model_type="segmentation",
                           evaluators="trackeval", evaluator_config={"unit": "umd", "overrides": [...]})

``df`` has one row per case. The unit's inputs are built from it in a temporary folder, scored by
:func:`trackeval.api.evaluate` (the same engine as the CLI), and the run MLflow evaluates in gets what a
trackeval evaluation run holds (:mod:`trackeval.tracking.track_logging`): every key of metrics.json (full
precision), the config as params, the lineage and digest tags, the case table as a dataset (context ``eval``)
and results.json, metrics.json, cases.parquet, ``figures/*.png`` and report.html as artifacts. The returned
:class:`~mlflow.models.EvaluationResult`'s metrics are :meth:`~trackeval.results.BenchmarkResult.flat_metrics`:
metrics.json's keys, with the values metrics.json rounds to 10 significant digits.

Units and their DataFrames (``model_type`` as MLflow is called):

- ``umd``, ``model_type="segmentation"`` (MLflow passes any model type but None, ``regressor`` and
  ``classifier`` through to the evaluators unchecked): columns ``case_id``, ``subject_id``, ``modality`` and any
  group column (the manifest.csv of :mod:`trackeval.benchmarks.umd`), ``targets`` = the ground-truth NIfTI path
  (``.nii.gz`` / ``.nii``), ``predictions`` = the predicted NIfTI path (empty or NaN: a missing prediction,
  under ``umd.missing_prediction``).
- ``xray/cls``, ``model_type="classifier"`` (MLflow's own: it requires ``targets``): ``case_id`` (or
  ``image_id``) = the image; ``targets`` = its label (1, 0, -1 or NaN/None = uncertain, ``xray.cls.uncertain``),
  ``predictions`` = its score in [0, 1], for the finding ``evaluator_config["finding"]`` (default: the targets
  column's name); ``evaluator_config["findings"] = {finding: [label_column, score_column], ...}`` adds more.
  trackeval's generic layout has no subject or group columns: other columns are not read.

``evaluator_config`` keys: ``unit`` (required), ``config`` (the :func:`trackeval.load_config` object, or a
params.yaml path), ``overrides`` (``key=value`` strings, as ``--set``), ``model_name`` / ``model_version``
(recorded in the results), ``track`` (True: also :func:`trackeval.track` the result into the version's
trackeval runs and registered model, as ``trackeval track`` does, linked to the evaluated run), ``finding`` /
``findings`` (xray/cls). MLflow's ``col_mapping`` is read by MLflow itself. Static predictions only: with a
``model``, trackeval would not know how to write its outputs as the unit's files.

The run's tags leave out those trackeval's own searches read (``trackeval.kind``, ``trackeval.idempotency_key``,
``trackeval.model_name`` / ``model_version``): the evaluated run is the user's, never taken for (or repaired as)
a trackeval evaluation run.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.models.evaluation.base import EvaluationResult, ModelEvaluator

from trackeval.errors import ConfigError, InputError

#: the units this plug-in builds inputs for, and the ``model_type`` each is evaluated under
MODEL_TYPES = {"umd": "segmentation", "xray/cls": "classifier"}
#: the keys ``evaluator_config`` may hold (``col_mapping`` is MLflow's own, applied before the plug-in runs)
CONFIG_KEYS = ("unit", "config", "overrides", "model_name", "model_version", "track", "finding", "findings")
#: tags of a trackeval evaluation run kept off the user's run (trackeval's searches read them; MLflow owns the rest)
_NOT_ON_USER_RUN = ("kind", "idempotency_key", "model_name", "model_version")
WHERE = 'evaluator_config["{}"]'


@dataclass(frozen=True)
class Settings:
    """``evaluator_config`` read and checked: the unit, the evaluation config (its tracking URI = the run's
    store), the model recorded in the results, and whether to track into trackeval's runs too."""

    unit: str
    config: Any
    model: dict[str, str]
    track: bool
    raw: Mapping[str, Any]


class TrackevalEvaluator(ModelEvaluator):
    """The ``trackeval`` evaluator of ``mlflow.models.evaluate`` (module docstring)."""

    @classmethod
    def can_evaluate(cls, *, model_type: str | None, evaluator_config: Any, **kwargs: Any) -> bool:
        """True when ``evaluator_config`` names a ``unit``: a wrong unit or model type is then an error that says
        so (:meth:`evaluate`), not MLflow's "could not be evaluated by any of the registered evaluators"."""
        return isinstance(evaluator_config, Mapping) and "unit" in evaluator_config

    def evaluate(
        self,
        *,
        model_type: str | None,
        dataset: Any,
        run_id: str,
        evaluator_config: Mapping[str, Any],
        model: Any = None,
        extra_metrics: Any = None,
        custom_artifacts: Any = None,
        predictions: Any = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Score ``dataset`` (MLflow's :class:`~mlflow.data.evaluation_dataset.EvaluationDataset`) with the unit,
        log it to run ``run_id`` and return its metrics (metrics.json's keys) and artifacts.

        Raises:
            ConfigError: an unknown unit or key, or a unit evaluated under another ``model_type``.
            InputError: a model given (static predictions only), a missing column, file or bad label; the unit's
                own input errors (naming the case).
            TrackingError: MLflow failed while logging (the result is lost with the temporary inputs: re-run).
        """
        import trackeval.api as api

        settings = read_settings(model_type, evaluator_config)
        if model is not None:
            raise InputError(
                "the trackeval evaluator scores static predictions: call mlflow.models.evaluate(model=None, "
                "data=df, predictions=COLUMN, ...) with the model's outputs in the DataFrame",
                field="model",
            )
        with tempfile.TemporaryDirectory(prefix="trackeval-mlflow-") as scratch:
            inputs = BUILDERS[settings.unit](dataset, settings, Path(scratch))
            result = api.evaluate(settings.unit, inputs, settings.config, settings.model or None)
            linked = settings.track and _is_active(run_id)
            artifacts = log_to_run(run_id, result, settings.config, Path(scratch), headlines=not linked)
        if settings.track:
            api.track(result, config=settings.config)  # the active run gets the headline metrics and the link
        return EvaluationResult(result.flat_metrics(), artifacts, run_id)


def _is_active(run_id: str) -> bool:
    import mlflow

    active = mlflow.active_run()
    return active is not None and active.info.run_id == run_id


def read_settings(model_type: str | None, evaluator_config: Mapping[str, Any]) -> Settings:
    """``evaluator_config`` checked against the unit and ``model_type`` (module docstring).

    Raises:
        ConfigError: an unknown key or unit, a model type other than the unit's, a bad config or override, a
            model name or version that is not a str, ``track`` without both.
    """
    unknown = sorted(set(evaluator_config) - {*CONFIG_KEYS, "col_mapping"})
    if unknown:
        raise ConfigError(
            f"evaluator_config: unknown key(s) {unknown}; the trackeval evaluator reads {list(CONFIG_KEYS)}"
        )
    unit = evaluator_config["unit"]
    if unit not in MODEL_TYPES:
        raise ConfigError(
            f"{WHERE.format('unit')}: the trackeval evaluator scores {sorted(MODEL_TYPES)} from a DataFrame, "
            f"not {unit!r}"
        )
    if model_type != MODEL_TYPES[unit]:
        raise ConfigError(
            f"{WHERE.format('unit')} {unit!r} is evaluated with model_type={MODEL_TYPES[unit]!r}, not {model_type!r}"
        )
    model = {}
    for part in ("name", "version"):
        value = evaluator_config.get(f"model_{part}")
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{WHERE.format(f'model_{part}')} must be a str, not {type(value).__name__}")
        if value is not None:
            model[part] = value
    track = evaluator_config.get("track", False)
    if not isinstance(track, bool):
        raise ConfigError(f"{WHERE.format('track')} must be True or False, not {track!r}")
    if track and len(model) < 2:
        raise ConfigError(f"{WHERE.format('track')}: tracking needs model_name and model_version in evaluator_config")
    return Settings(unit, _config(evaluator_config), model, track, evaluator_config)


def _config(evaluator_config: Mapping[str, Any]) -> Any:
    """The evaluation config of ``config`` (a :func:`trackeval.load_config` object, a params.yaml path or None)
    and ``overrides``, its tracking URI MLflow's current one: the store of the run being evaluated."""
    import mlflow

    from trackeval.api import load_config
    from trackeval.config import EvalConfig

    given, overrides = evaluator_config.get("config"), evaluator_config.get("overrides")
    if isinstance(given, EvalConfig):
        if overrides:
            raise ConfigError(f"{WHERE.format('overrides')}: give them to trackeval.load_config with the config")
        cfg = given
    else:
        cfg = load_config(given, overrides)
    return cfg.model_copy(update={"tracking": cfg.tracking.model_copy(update={"uri": mlflow.get_tracking_uri()})})


# --- the unit's inputs from the DataFrame ------------------------------------------------------------------------


def _column(frame: Any, name: str, unit: str) -> list[Any]:
    if name not in frame.columns:
        raise InputError(
            f"{unit}: the DataFrame has no {name!r} column (columns besides targets and predictions: "
            f"{list(frame.columns)})",
            field=name,
        )
    return list(frame[name])


def _blank(value: Any) -> bool:
    """None, NaN, ``pd.NA`` / ``NaT`` or an empty string: no value."""
    import pandas as pd

    return (isinstance(value, str) and value == "") or (not isinstance(value, str) and bool(pd.isna(value)))


def _place(source: Any, folder: Path, case_id: str, what: str) -> None:
    """Put the NIfTI file ``source`` at ``folder/<case_id><suffix>``: a hard link (no copy), or a copy across
    file systems. The unit reads it as it reads its own layout (links outside the folder are refused there)."""
    from trackeval.io.paths import check_case_id

    check_case_id(case_id, file="the DataFrame")
    path = Path(os.fspath(source))
    suffix = next((s for s in (".nii.gz", ".nii") if path.name.endswith(s)), None)
    if suffix is None or not path.is_file():
        problem = "is not a file" if suffix else "is not a .nii.gz / .nii file"
        raise InputError(f"the {what} {problem}", file=str(path), case_id=case_id, field=what)
    target = folder / (case_id + suffix)
    try:
        os.link(path, target)
    except OSError:
        shutil.copyfile(path, target)


def umd_inputs(dataset: Any, settings: Settings, scratch: Path) -> dict[str, Path]:
    """UMD's generic layout from the DataFrame: ``gt/manifest.csv`` (every column but targets and predictions)
    with ``gt/<case_id>.nii.gz`` and ``pred/<case_id>.nii.gz`` (a row with an empty prediction: none)."""
    frame = dataset.features_data
    if dataset.labels_data is None or dataset.predictions_data is None:
        raise InputError("umd: pass targets= (ground-truth paths) and predictions= (predicted paths)", field="targets")
    case_ids = [str(c) for c in _column(frame, "case_id", "umd")]
    gt, pred = scratch / "gt", scratch / "pred"
    gt.mkdir()
    pred.mkdir()
    for case_id, truth, predicted in zip(case_ids, dataset.labels_data, dataset.predictions_data, strict=True):
        _place(truth, gt, case_id, "ground truth")
        if not _blank(predicted):
            _place(predicted, pred, case_id, "prediction")
    rows = [[("" if _blank(v) else str(v)) for v in row] for row in frame.itertuples(index=False)]
    _write_csv(gt / "manifest.csv", [str(c) for c in frame.columns], rows)
    return {"ground_truth": gt, "predictions": pred}


def _label(value: Any, case_id: str, finding: str) -> str:
    """A label as the generic layout writes it: ``1``, ``0``, ``-1`` (uncertain) or blank (uncertain); numbers of
    any type (numpy's included) and their strings."""
    if _blank(value):
        return ""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if number not in (1.0, 0.0, -1.0):
        raise InputError(f"label {value!r} is not 1, 0, -1 or empty", case_id=case_id, field=finding)
    return str(int(number))


def _finding_columns(dataset: Any, settings: Settings) -> dict[str, tuple[list[Any], list[Any]]]:
    """``{finding: (labels, scores)}``: the targets/predictions pair (named ``finding``, else the targets column),
    then each of ``findings`` (``{finding: [label_column, score_column]}``)."""
    if dataset.labels_data is None or dataset.predictions_data is None:
        raise InputError("xray/cls: pass targets= (the labels) and predictions= (the scores)", field="predictions")
    name = str(settings.raw.get("finding") or dataset.targets_name)
    pairs = {name: (list(dataset.labels_data), list(dataset.predictions_data))}
    extra = settings.raw.get("findings") or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"{WHERE.format('findings')} must map a finding to [label_column, score_column]")
    frame = dataset.features_data
    for finding, columns in extra.items():
        if not (isinstance(columns, (list, tuple)) and len(columns) == 2):
            raise ConfigError(f"{WHERE.format('findings')}[{finding!r}] must be [label_column, score_column]")
        pairs[str(finding)] = (_column(frame, columns[0], "xray/cls"), _column(frame, columns[1], "xray/cls"))
    return pairs


def cls_inputs(dataset: Any, settings: Settings, scratch: Path) -> dict[str, Path]:
    """xray/cls's generic layout from the DataFrame: ``labels.csv`` and ``scores.csv`` (``image_id`` + one column
    per finding of :func:`_finding_columns`)."""
    frame = dataset.features_data
    pairs = _finding_columns(dataset, settings)
    ids = [str(i) for i in _column(frame, "case_id" if "case_id" in frame.columns else "image_id", "xray/cls")]
    findings = list(pairs)
    labels = [[i, *(_label(pairs[f][0][r], i, f) for f in findings)] for r, i in enumerate(ids)]
    scores = [[i, *(_score(pairs[f][1][r], i, f) for f in findings)] for r, i in enumerate(ids)]
    _write_csv(scratch / "labels.csv", ["image_id", *findings], labels)
    _write_csv(scratch / "scores.csv", ["image_id", *findings], scores)
    return {"ground_truth": scratch / "labels.csv", "predictions": scratch / "scores.csv"}


def _score(value: Any, case_id: str, finding: str) -> str:
    """A score at full precision (``repr``), blank for none (the unit's reader then names the case)."""
    if _blank(value):
        return ""
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        raise InputError(f"score {value!r} is not a number", case_id=case_id, field=finding) from None


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """A CSV for the unit's reader (not a spreadsheet: cells are written as they are, quoted by :mod:`csv`)."""
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


#: unit -> the function that writes its inputs from MLflow's dataset
BUILDERS: dict[str, Callable[[Any, Settings, Path], dict[str, Path]]] = {"umd": umd_inputs, "xray/cls": cls_inputs}


# --- logging to the evaluated run ---------------------------------------------------------------------------------


def log_to_run(run_id: str, result: Any, cfg: Any, scratch: Path, *, headlines: bool = True) -> dict[str, Any]:
    """Log ``result`` to the run ``run_id`` as ``track`` logs an evaluation run (module docstring): params, tags,
    every flat metric (``headlines`` False: not the headline ones, which :func:`trackeval.track`'s link of the
    active run logs), the case table and the staged files; returns the files as MLflow evaluation artifacts."""
    from mlflow.entities import Metric, Param
    from mlflow.models.evaluation.artifacts import JsonEvaluationArtifact, ParquetEvaluationArtifact

    from trackeval.io.hashing import sha256_bytes
    from trackeval.io.redact import redact
    from trackeval.io.results_folder import output_bytes
    from trackeval.results import headline_metrics
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.lineage import dvc_data_digest, flatten, git_commit, idempotency_key
    from trackeval.tracking.track_logging import FolderToTrack, evaluation_dataset, log_batches, stage_all

    ml = Mlflow(cfg.tracking)
    files = output_bytes(result)
    evaluation = FolderToTrack(scratch, result, files, idempotency_key(result), sha256_bytes(files["results.json"]))
    root = Path(cfg.tracking.dvc_root)
    lineage = {"git_commit": git_commit(root), "dvc": dvc_data_digest(root) or ""}
    params = [Param(k, redact(v)) for k, v in flatten({"benchmark": result.benchmark, **result.config}).items()]
    skip = set() if headlines else set(headline_metrics(result))
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in result.flat_metrics().items() if k not in skip]
    with contextlib.ExitStack() as stack:
        staged = stage_all(stack, [evaluation])[evaluation.key]  # first: a figure that cannot be drawn logs nothing
        tags = _tags(result, lineage, evaluation.digest)
        ml.call("log_batch", ml.client.log_batch, run_id, params=params, tags=tags)
        log_batches(ml, run_id, metrics)
        digest = (lineage["dvc"] or result.data.ground_truth_digest)[:36]
        ml.call("log_inputs", ml.client.log_inputs, run_id, datasets=[evaluation_dataset(result, root, digest)])
        ml.call("log_artifacts", ml.client.log_artifacts, run_id, str(staged))
    base = ml.call("get_run", ml.client.get_run, run_id).info.artifact_uri.rstrip("/")
    return {
        "trackeval_results": JsonEvaluationArtifact(f"{base}/results.json"),
        "trackeval_metrics": JsonEvaluationArtifact(f"{base}/metrics.json"),
        "trackeval_cases": ParquetEvaluationArtifact(f"{base}/cases.parquet"),
    }


def _tags(result: Any, lineage: dict[str, str], digest: str) -> list[Any]:
    """An evaluation run's tags (:mod:`trackeval.tracking.track_logging`) without those trackeval's searches read
    and MLflow's own (the parent run, the source commit MLflow set from the user's script)."""
    from mlflow.entities import RunTag

    from trackeval.tracking.tags import RESULTS_DIGEST_TAG, TAG
    from trackeval.tracking.track_logging import child_tags

    tags = {**child_tags(result, lineage, ""), RESULTS_DIGEST_TAG: digest}
    for key in ("mlflow.parentRunId", "mlflow.source.git.commit", *(TAG + k for k in _NOT_ON_USER_RUN)):
        tags.pop(key)
    return [RunTag(k, v) for k, v in sorted(tags.items())]
