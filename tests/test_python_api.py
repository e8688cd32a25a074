"""The Python API's whole loop on a real MLflow SQLite store: evaluate -> write_results -> track inside the user's
active run -> compare -> promote -> verify, each returning the typed object the CLI prints and raising the CLI's
errors as exceptions."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

import trackeval
from tests import gate_data
from trackeval.api import EVALUATION_RUN_TAG, SOURCE_RUN_TAG
from trackeval.errors import InputError
from trackeval.gate.decide import Decision
from trackeval.tracking.verification import AliasStatus


@pytest.fixture
def api_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[trackeval.api.EvalConfig, str]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = gate_data.config(
        f"tracking.uri={uri}",
        f"tracking.artifact_location={tmp_path / 'mlartifacts'}",
        f"tracking.dvc_root={tmp_path}",
        "tracking.backoff_s=0.05",
    )
    return cfg, uri


def _evaluate(root: Path, gt: Path, version: str, cfg: trackeval.api.EvalConfig) -> trackeval.results.BenchmarkResult:
    pred = gate_data.make_predictions(root / version, version)
    return trackeval.evaluate(
        "umd", {"ground_truth": gt, "predictions": pred}, cfg, {"name": "seg", "version": version}
    )


def test_the_public_names_are_the_loop() -> None:
    assert {"evaluate", "write_results", "track", "compare", "promote", "verify", "load_config"} <= set(
        trackeval.__all__
    )
    assert set(trackeval.__all__) <= set(dir(trackeval))


def test_every_public_name_is_one_function_of_the_api_and_the_former_loop_module_an_alias() -> None:
    """``trackeval.api`` is the one module of the Python API; ``trackeval.loop`` (its loop's former home) forwards
    to it with a DeprecationWarning."""
    from trackeval import api, loop

    for name in set(trackeval.__all__) - {"__version__"}:
        assert getattr(trackeval, name) is getattr(api, name) and name in api.__all__, name
    with pytest.warns(DeprecationWarning, match="use trackeval.api"):
        assert loop.promote is api.promote
    with pytest.raises(AttributeError):
        loop.no_such_name  # noqa: B018


def test_evaluate_write_track_in_an_active_run_compare_promote_verify(api_config, tmp_path: Path) -> None:
    cfg, uri = api_config
    gt = gate_data.make_ground_truth(tmp_path)
    champion = _evaluate(tmp_path, gt, "champion", cfg)
    files = trackeval.write_results(champion, str(tmp_path / "out_champion"))  # a str path works
    assert (tmp_path / "out_champion" / "results.json") == files["results.json"]
    (tracked,) = trackeval.track(tmp_path / "out_champion", config=cfg)
    assert tracked.unit == "umd" and tracked.logged and tracked.model == "seg/champion"
    first = trackeval.promote("seg", "champion", config=cfg)
    assert isinstance(first, Decision) and first.verdict == "pass"

    improved = _evaluate(tmp_path, gt, "improved", cfg)
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(run_name="train-v2") as active:
            (linked,) = trackeval.track(improved, config=cfg)  # a result object, no folder
    finally:
        mlflow.set_tracking_uri(None)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    mine = client.get_run(active.info.run_id)
    parent_id = client.get_run(linked.run_id).data.tags["mlflow.parentRunId"]
    assert mine.data.tags[EVALUATION_RUN_TAG] == parent_id
    assert client.get_run(parent_id).data.tags[SOURCE_RUN_TAG] == active.info.run_id
    dsc = improved.aggregates["umd/dsc"]
    assert mine.data.metrics["umd/dsc"] == pytest.approx(dsc.value)
    assert mine.data.metrics["umd/dsc/ci95_low"] == pytest.approx(dsc.ci95_low)
    assert not [k for k in mine.data.metrics if "/by_" in k]  # headlines only: breakdowns stay on the eval run

    (comparison,) = trackeval.compare("seg/improved", "seg@champion", config=cfg)
    assert comparison.unit == "umd" and comparison.rows[0].delta > 0
    would = trackeval.promote("seg", "improved", dry_run=True, config=cfg)
    assert would is not None and would.verdict == "pass"
    by_number = trackeval.promote("seg", 2, dry_run=True, config=cfg)  # registry version 2, as `--candidate 2`
    assert by_number is not None and by_number.verdict == "pass" and by_number.candidate == would.candidate
    assert str(client.get_registered_model("seg").aliases["champion"]) == "1"  # a dry run moves nothing
    decision = trackeval.promote("seg", "improved", config=cfg)
    assert decision.verdict == "pass"
    statuses = trackeval.verify("seg", config=cfg)
    assert all(isinstance(s, AliasStatus) for s in statuses)
    assert {s.alias: (s.label, s.problem) for s in statuses}["champion"] == ("improved", None)
    again = trackeval.promote("seg", "improved", config=cfg)  # idempotent: the recorded decision, nothing moved
    assert again.verdict == "pass" and again.candidate == "improved" and again.champion == "champion"
    with pytest.raises(InputError, match="did you mean 'seg'"):
        trackeval.verify("sge", config=cfg)
    with pytest.raises(InputError, match=r"or pass replace=True \(") as refused:  # Python's wording, not --replace
        trackeval.track(tmp_path / "out_champion", version="improved", config=cfg)
    assert "--replace" not in str(refused.value)
