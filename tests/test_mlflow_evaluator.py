"""trackeval as an MLflow evaluator plug-in (``mlflow.models.evaluate(..., evaluators="trackeval")``), on a real
MLflow SQLite store: the entry point is installed, UMD from a DataFrame of NIfTI paths gives trackeval.evaluate's
numbers and logs what an evaluation run holds, xray/cls from a DataFrame of labels and scores gives sklearn's
AUROC, and ``track=True`` feeds the registry as ``trackeval track`` does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient
from sklearn.metrics import roc_auc_score

import trackeval
from tests.conftest import REPO, scaled
from trackeval.api import EVALUATION_RUN_TAG
from trackeval.demo.umd_example import example_dirs
from trackeval.errors import ConfigError, InputError
from trackeval.io.results_folder import metrics_file

OVERRIDES = ["engine.executor=local", "engine.cache=false"]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MlflowClient, str]:
    """A fresh SQLite store as MLflow's tracking URI (environment only: nothing leaks) and an experiment whose
    artifacts go under ``tmp_path``; yields the client and the experiment id."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("evaluate", artifact_location=str(tmp_path / "artifacts"))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment)
    return client, experiment


def _umd_frame() -> pd.DataFrame:
    gt, pred = example_dirs()
    frame = pd.read_csv(gt / "manifest.csv")  # case_id, subject_id, modality, site
    frame["ground_truth"] = [str(gt / f"{c}.nii.gz") for c in frame.case_id]
    frame["prediction"] = [str(pred / f"{c}.nii.gz") for c in frame.case_id]
    return frame


def test_the_entry_point_registers_trackeval() -> None:
    assert "trackeval" in mlflow.models.list_evaluators()


@pytest.mark.slow
def test_umd_from_a_dataframe_equals_trackeval_evaluate_and_logs_an_evaluation_run(store) -> None:
    client, _ = store
    with mlflow.start_run() as run:
        evaluated = mlflow.models.evaluate(
            data=_umd_frame(),
            targets="ground_truth",
            predictions="prediction",
            model_type="segmentation",
            evaluators="trackeval",
            evaluator_config={"unit": "umd", "overrides": OVERRIDES},
        )
    gt, pred = example_dirs()
    reference = trackeval.evaluate(
        "umd", {"ground_truth": gt, "predictions": pred}, trackeval.load_config(None, OVERRIDES)
    )
    expected = metrics_file(reference)  # what metrics.json holds
    assert set(evaluated.metrics) == set(expected)
    assert evaluated.metrics["umd/dsc"] == pytest.approx(reference.aggregates["umd/dsc"].value, abs=1e-9)
    assert all(evaluated.metrics[k] == pytest.approx(v, rel=1e-9, abs=1e-12) for k, v in expected.items())
    assert evaluated.metrics == reference.flat_metrics()

    logged = client.get_run(run.info.run_id)
    assert logged.data.metrics == pytest.approx(reference.flat_metrics(), rel=1e-12)
    tags = logged.data.tags
    assert tags["trackeval.unit"] == "umd" and tags["trackeval.leakage_audit"] == "pass"
    # the same prediction files (the ground-truth digest also covers the manifest's bytes: the bundled one has CRLF
    # line ends, the one written from the DataFrame LF)
    assert tags["trackeval.predictions_digest"] == reference.data.predictions_digest
    assert not {"trackeval.kind", "trackeval.idempotency_key", "trackeval.model_name"} & set(tags)
    assert logged.data.params["umd.nsd_tolerance_mm"] == str(reference.config["umd"]["nsd_tolerance_mm"])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "metrics.json", "cases.parquet", "report.html", "figures"} <= artifacts
    assert {a.path.split("/")[-1] for a in client.list_artifacts(run.info.run_id, "figures")} >= {
        "umd__dsc__by_organ.png"
    }
    assert evaluated.artifacts["trackeval_metrics"].content == pytest.approx(expected)
    contexts = [t.value for i in logged.inputs.dataset_inputs for t in i.tags if t.key == "mlflow.data.context"]
    assert "eval" in contexts


def _cls_frame(n: int = 80) -> pd.DataFrame:
    """``n`` images, two findings (labels as numpy ints, and floats with NaN); scores that separate the classes
    partly; a few uncertain labels."""
    rng = np.random.default_rng(7)
    effusion = rng.integers(0, 2, n)  # numpy ints
    edema = rng.integers(0, 2, n).astype(float)
    edema[[3, 17, 40]] = np.nan  # uncertain: left out under xray.cls.uncertain=ignore
    return pd.DataFrame(
        {
            "case_id": [f"img{i:03d}" for i in range(n)],
            "label": effusion,
            "score": np.clip(0.35 * effusion + rng.uniform(0, 0.65, n), 0, 1),
            "edema_label": edema,
            "edema_score": np.clip(0.2 * np.nan_to_num(edema) + rng.uniform(0, 0.8, n), 0, 1),
        }
    )


@pytest.mark.slow
def test_xray_cls_from_labels_and_scores_gives_sklearns_auroc(store) -> None:
    frame = _cls_frame()
    config = {
        "unit": "xray/cls",
        "finding": "effusion",
        "findings": {"edema": ["edema_label", "edema_score"]},
        "overrides": OVERRIDES,
    }
    with mlflow.start_run():
        evaluated = mlflow.models.evaluate(
            data=frame,
            targets="label",
            predictions="score",
            model_type="classifier",
            evaluators="trackeval",
            evaluator_config=config,
        )
    m = evaluated.metrics
    effusion = roc_auc_score(frame.label, frame.score)
    known = frame.edema_label.notna()
    edema = roc_auc_score(frame.edema_label[known], frame.edema_score[known])
    assert m["xray/cls/auroc/by_finding/effusion"] == pytest.approx(effusion, abs=1e-12)
    assert m["xray/cls/auroc/by_finding/edema"] == pytest.approx(edema, abs=1e-12)
    assert m["xray/cls/auroc"] == pytest.approx((effusion + edema) / 2, abs=1e-12)
    assert m["xray/n_images"] == 80 and m["xray/n_uncertain_labels"] == 3


@pytest.mark.slow
def test_track_true_registers_the_version_and_links_the_evaluated_run(store) -> None:
    client, _ = store
    config = {"unit": "xray/cls", "overrides": OVERRIDES, "model_name": "cxr", "model_version": "v1", "track": True}
    with mlflow.start_run() as run:
        evaluated = mlflow.models.evaluate(
            data=_cls_frame().rename(columns={"label": "effusion"}),
            targets="effusion",
            predictions="score",
            model_type="classifier",
            evaluators="trackeval",
            evaluator_config=config,
        )
    mine = client.get_run(run.info.run_id)
    assert mine.info.status == "FINISHED"  # not taken for a stale trackeval run
    (version,) = client.search_model_versions("name = 'cxr'")
    child = client.get_run(version.tags["trackeval.eval_run.xray/cls"])
    assert child.data.tags["trackeval.kind"] == "benchmark"
    assert (
        child.data.metrics["xray/cls/auroc"]
        == evaluated.metrics["xray/cls/auroc"]
        == mine.data.metrics["xray/cls/auroc"]
    )
    assert mine.data.tags[EVALUATION_RUN_TAG] == child.data.tags["mlflow.parentRunId"]
    history = client.get_metric_history(run.info.run_id, "xray/cls/auroc")
    assert len(history) == 1  # the headline logged once, by the link


@pytest.mark.slow
def test_refusals_name_the_evaluator_config(store) -> None:
    frame = _umd_frame()
    common = {"data": frame, "targets": "ground_truth", "predictions": "prediction", "evaluators": "trackeval"}
    with mlflow.start_run():
        with pytest.raises(ConfigError, match=r"evaluator_config\[\"unit\"\] 'umd' is evaluated with model_type"):
            mlflow.models.evaluate(model_type="regressor", evaluator_config={"unit": "umd"}, **common)
        with pytest.raises(ConfigError, match=r"unknown key\(s\) \['overides'\]"):
            mlflow.models.evaluate(
                model_type="segmentation", evaluator_config={"unit": "umd", "overides": []}, **common
            )
        broken = frame.assign(ground_truth=frame.ground_truth.str.replace(".nii.gz", ".png"))
        with pytest.raises(InputError, match="not a .nii.gz / .nii file"):
            mlflow.models.evaluate(
                **{**common, "data": broken}, model_type="segmentation", evaluator_config={"unit": "umd"}
            )
    # MLflow itself refuses model_type=None without extra_metrics, before any evaluator runs
    with pytest.raises(mlflow.exceptions.MlflowException, match="extra_metrics"):
        mlflow.models.evaluate(model_type=None, evaluator_config={"unit": "umd"}, **common)


@pytest.mark.slow
def test_the_docs_example_runs(tmp_path: Path) -> None:
    """docs/tracking.md's example, as written, in a fresh process in an empty folder (its own ``mlflow.db``)."""
    text = (REPO / "docs" / "tracking.md").read_text(encoding="utf-8")
    (block,) = re.findall(
        r"<!-- tested: tests/test_mlflow_evaluator.py runs this block -->\n```python\n(.*?)```", text, re.S
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(600)
    )
    assert done.returncode == 0, done.stderr
    gt, pred = example_dirs()
    reference = trackeval.evaluate(
        "umd", {"ground_truth": gt, "predictions": pred}, trackeval.load_config(None, OVERRIDES)
    )
    assert done.stdout.split() == [str(round(reference.aggregates["umd/dsc"].value, 4)), "True"]
    assert (tmp_path / "mlflow.db").is_file()
