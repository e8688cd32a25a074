"""What MLflow shows people: the registered version's description (headline with CI, gate decision, per-group
champion/candidate/delta), the short ``version`` tag, and the comparison table artifact on the decision run and
the candidate's parent run; then the same pages in headless Chromium on a real ``mlflow server``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

import trackeval
from tests import gate_data
from tests.conftest import REPO
from tests.test_tracking import (  # noqa: F401 - shared fixtures
    _chromium,
    migrated_db,
    needs_chromium,
    served,
    store,
)
from trackeval.cli import main
from trackeval.tracking.views import shown

#: screenshots of the browser test, kept for people to look at (git-ignored)
SHOTS = REPO / ".test-artifacts" / "mlflow_views"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    """Two versions of model ``seg`` evaluated as users do (``trackeval.evaluate``: with the unit's declared
    plots, which the overlay figures draw) and written as results folders."""
    root = tmp_path_factory.mktemp("views")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out = {}
    for version in ("champion", "organ_regress"):
        inputs = {"ground_truth": gt, "predictions": gate_data.make_predictions(root / version, version)}
        result = trackeval.evaluate("umd", inputs, cfg, {"name": "seg", "version": version})
        trackeval.write_results(result, root / f"out_{version}")
        out[version] = (result, root / f"out_{version}")
    return out


def _track_and_gate(folders: dict, sets: list[str]) -> None:
    for version in ("champion", "organ_regress"):
        assert main(["track", str(folders[version][1]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "organ_regress", *sets]) == 1


def _table(client: MlflowClient, run_id: str, path: str, tmp_path: Path) -> dict[str, list]:
    raw = json.loads(Path(client.download_artifacts(run_id, path, str(tmp_path))).read_text())
    return {c: [row[i] for row in raw["data"]] for i, c in enumerate(raw["columns"])}


def test_version_description_tags_and_comparison_tables(store, evaluated, tmp_path):  # noqa: F811
    sets, client = store
    assert main(["track", str(evaluated["champion"][1]), *sets]) == 0
    first = client.get_model_version("seg", "1")
    dsc = evaluated["champion"][0].aggregates["umd/dsc"]
    headline = f"| umd | umd/dsc | {shown(dsc.value)} [{shown(dsc.ci95_low)}, {shown(dsc.ci95_high)}] |"
    assert first.tags["version"] == "champion" and headline in first.description
    assert "Gate:" not in first.description  # not gated yet
    _track_and_gate(evaluated, sets)  # tracking the champion again changes nothing

    v2 = client.get_model_version("seg", "2")
    run_id = v2.tags["trackeval.gate.decision_run"]
    assert v2.tags["version"] == "organ_regress"
    text = v2.description
    assert text.startswith("**organ_regress**: version 2 of `seg` (trackeval)")
    assert "Gate: **FAIL** (umd: worst_group: umd/dsc/by_organ/heart" in text
    assert f"[decision run](#/experiments/{client.get_run(run_id).info.experiment_id}/runs/{run_id})" in text
    assert "| umd | organ=heart | 1.000 | 0.8000 | -0.2000 [-0.2000, -0.2000] | 12 |" in text  # hand-built data
    assert "0.7165255946287141" not in text and "\\." not in text  # 4 significant digits, numbers not escaped

    table = _table(client, run_id, "comparison.json", tmp_path / "a")
    heart = table["group"].index("heart")
    assert (table["champion"][heart], table["candidate"][heart], table["delta"][heart]) == (
        "1.000",
        "0.8000",
        "-0.2000",
    )
    assert table["metric"][heart] == "umd/dsc/by_organ/heart" and table["n"][heart] == 12
    assert table["group"][0] == "(overall)" and len(table["unit"]) == 6  # headline + 3 organs + 2 modalities
    decision = json.loads(Path(client.download_artifacts(run_id, "decision.json", str(tmp_path / "b"))).read_text())
    rows = decision["comparisons"][0]["rows"]
    assert [shown(r["delta"]) for r in rows] == table["delta"]  # the same rows as the decision, rounded
    parent = _table(client, v2.run_id, "gate/comparison_vs_champion.json", tmp_path / "c")
    assert parent == table
    figures = {a.path for a in client.list_artifacts(run_id, "overlays/umd")}
    assert "overlays/umd/umd__dsc__by_organ__overlay.png" in figures and len(figures) == 4  # the 4 declared plots
    shown_on_parent = {a.path for a in client.list_artifacts(v2.run_id, "gate/overlays_vs_champion/umd")}
    assert {f.replace("overlays/", "gate/overlays_vs_champion/") for f in figures} == shown_on_parent
    # a second track of the gated version keeps the gate's description
    assert main(["track", str(evaluated["organ_regress"][1]), *sets]) == 0
    assert client.get_model_version("seg", "2").description == text


@pytest.mark.slow
@needs_chromium
def test_registered_version_page_and_decision_table_in_chromium(evaluated, served, tmp_path):  # noqa: F811
    url = served
    _track_and_gate(evaluated, ["--set", "tracking.backoff_s=0.05", "--set", "gate.n_resamples=20000"])
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    run_id = client.get_model_version("seg", "2").tags["trackeval.gate.decision_run"]
    exp = client.get_run(run_id).info.experiment_id
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _chromium(tmp_path, f"{url}/#/models/seg/versions/2", SHOTS / "registered_version.png", 8000)
    assert "organ_regress" in page and "umd/dsc" in page
    for value in ("organ=heart", "1.000", "0.8000", "-0.2000 [-0.2000, -0.2000]"):  # champion, candidate, delta
        assert value in page, value
    art = f"{url}/#/experiments/{exp}/runs/{run_id}/artifacts/comparison.json"
    table = _chromium(tmp_path, art, SHOTS / "decision_table.png", 8000)
    for value in ("champion", "candidate", "delta", "heart", "kidney_left", "0.8000", "-0.2000"):
        assert value in table, value
