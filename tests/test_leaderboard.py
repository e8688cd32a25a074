"""MLflow 3 model-centric tracking: LoggedModels per version with metrics linked to the unit's dataset, registry
versions created from them, headline metrics on the parent run, the experiment kind, and ``trackeval
leaderboard`` (embedded SQLite store)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_tracking import _chromium, evaluated, migrated_db, needs_chromium, served, store  # noqa: F401
from trackeval.cli import main


def _promote(sets: list[str], version: str) -> int:
    return main(["promote", "--model", "seg", "--candidate", version, *sets])


def test_logged_models_registry_sources_and_leaderboard(store, evaluated, tmp_path, capsys):  # noqa: F811
    sets, client = store
    (champ, champ_dir), (better, better_dir) = evaluated["champion"], evaluated["improved"]
    assert main(["track", str(champ_dir), str(better_dir), *sets]) == 0
    exp = client.get_experiment_by_name("trackeval")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"

    models = {m.tags["trackeval.model_version"]: m for m in client.search_logged_models([exp.experiment_id])}
    assert sorted(models) == ["champion", "improved"]
    for version, result in (("champion", champ), ("improved", better)):
        linked = {(m.key, m.dataset_name, m.dataset_digest): m.value for m in models[version].metrics}
        key = ("umd/dsc", "umd", result.data.ground_truth_digest[:36])
        assert linked[key] == pytest.approx(result.aggregates["umd/dsc"].value)
        assert ("umd/dsc/ci95_low", "umd", key[2]) in linked
        assert not any("/by_" in k for k, _, _ in linked)  # headline keys only, not hundreds of breakdowns
        mv = next(
            v for v in client.search_model_versions("name = 'seg'") if v.tags["trackeval.model_version"] == version
        )
        assert mv.source == f"models:/{models[version].model_id}"
        parent = client.get_run(mv.run_id)
        assert parent.data.metrics["umd/dsc"] == pytest.approx(result.aggregates["umd/dsc"].value)
        assert parent.data.metrics["umd/dsc/ci95_high"] == pytest.approx(result.aggregates["umd/dsc"].ci95_high)

    assert main(["track", str(champ_dir), *sets]) == 0  # already tracked: no second LoggedModel
    assert len(client.search_logged_models([exp.experiment_id])) == 2

    assert _promote(sets, "champion") == 0 and _promote(sets, "improved") == 0
    capsys.readouterr()
    md, html = tmp_path / "board.md", tmp_path / "board.html"
    assert main(["leaderboard", "--model", "seg", "--markdown", str(md), "--html", str(html), *sets]) == 0
    text = md.read_text()
    s = better.aggregates["umd/dsc"]
    assert f"| seg | improved (champion) | {s.value:.4f} [{s.ci95_low:.4f}, {s.ci95_high:.4f}] |" in text
    c = champ.aggregates["umd/dsc"]
    assert f"| seg | champion | {c.value:.4f} [{c.ci95_low:.4f}, {c.ci95_high:.4f}] |" in text
    assert "| model | version | umd/dsc |" in text and 'class="champion"' in html.read_text()
    assert "workflowType=machine_learning" in capsys.readouterr().err

    assert main(["leaderboard", "--markdown", "-", "--benchmark", "umd", *sets]) == 0
    assert capsys.readouterr().out.startswith("## Leaderboard")
    assert main(["leaderboard", "--benchmark", "nope", *sets]) == 2
    assert "unknown benchmark unit(s) ['nope']" in capsys.readouterr().err
    assert main(["leaderboard", "--model", "other", *sets]) == 2


def test_decision_records_both_sides_and_is_recorded_once(store, evaluated):  # noqa: F811
    sets, client = store
    for version in ("champion", "improved"):
        assert main(["track", str(evaluated[version][1]), *sets]) == 0
    assert _promote(sets, "champion") == 0 and _promote(sets, "improved") == 0
    exp = client.get_experiment_by_name("trackeval")
    (decision,) = client.search_runs(
        [exp.experiment_id], "tags.`trackeval.kind` = 'gate_decision' and tags.`trackeval.gate.champion` != ''"
    )
    versions = {v.tags["trackeval.model_version"]: v for v in client.search_model_versions("name = 'seg'")}
    assert decision.data.params["candidate_runs"] == f"umd={versions['improved'].tags['trackeval.eval_run.umd']}"
    assert decision.data.params["champion_runs"] == f"umd={versions['champion'].tags['trackeval.eval_run.umd']}"
    assert len(decision.data.tags["trackeval.decision_key"]) == 64


#: where browser tests keep their screenshots (uploaded by CI as the test run's artifacts)
SHOTS = Path(os.environ.get("TRACKEVAL_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / ".test-artifacts"))


@pytest.mark.slow
@needs_chromium
def test_mlflow_ui_models_tab_and_model_training_view(evaluated, served, tmp_path):  # noqa: F811
    """A real ``mlflow server`` and headless Chromium: the printed link opens the runs in the model-training view,
    the Models tab lists both versions, a version's page shows its benchmark metrics by dataset, and the run's
    artifacts hold the figures. Screenshots are kept in ``SHOTS``."""
    from mlflow import MlflowClient

    url = served
    for version in ("champion", "improved"):
        assert main(["track", str(evaluated[version][1])]) == 0
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    exp = client.get_experiment_by_name("trackeval").experiment_id
    SHOTS.mkdir(parents=True, exist_ok=True)
    runs = _chromium(
        tmp_path, f"{url}/#/experiments/{exp}/runs?workflowType=machine_learning", SHOTS / "runs.png", 8000
    )
    assert "seg/improved" in runs and "seg/champion" in runs and "Model training" in runs  # parent runs
    models = _chromium(
        tmp_path, f"{url}/#/experiments/{exp}/models?workflowType=machine_learning", SHOTS / "models.png", 8000
    )
    assert "seg-champion" in models and "seg-improved" in models
    model = next(m for m in client.search_logged_models([exp]) if m.name == "seg-improved")
    page = _chromium(
        tmp_path, f"{url}/#/experiments/{exp}/models/{model.model_id}?workflowType=machine_learning",
        SHOTS / "model_improved.png", 8000,
    )  # fmt: skip
    value = evaluated["improved"][0].aggregates["umd/dsc"].value
    assert "umd/dsc" in page and repr(value) in page
    child = client.get_run(client.get_model_version("seg", "2").tags["trackeval.eval_run.umd"])
    figures = {a.path for a in client.list_artifacts(child.info.run_id, "figures")}
    assert "figures/umd__dsc__by_organ.png" in figures
    artifacts = _chromium(
        tmp_path,
        f"{url}/#/experiments/{exp}/runs/{child.info.run_id}/artifacts/figures/umd__dsc__by_organ.png",
        SHOTS / "run_figure.png",
        8000,
    )
    assert "umd__dsc__by_organ.png" in artifacts and "report.html" in artifacts
