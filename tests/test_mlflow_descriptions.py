"""MLflow shows only current evidence, and the verdict where people look (issue 32, item 5): ``track --replace``
marks the replaced run and its parent; decision runs say their verdict, failed checks and figures in their
description; a registered version's description links its current evaluation runs and lists its gate history;
``trackeval leaderboard`` has a gate column. Embedded SQLite store, then the same pages in headless Chromium on a
real ``mlflow server``.
"""

from __future__ import annotations

import json
import re
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
from trackeval.report.checks import shown, signed

SHOTS = REPO / ".test-artifacts" / "mlflow_views"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Results folders of model ``seg``: ``champion`` and ``improved``; ``worse`` (the champion's predictions,
    tracked as a third version: refused against ``improved``); ``worse@other`` (the ``organ_regress`` predictions
    as ``worse``: other results for the same version, which need ``--replace``)."""
    root = tmp_path_factory.mktemp("descriptions")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out = {}
    for name, version, variant in (
        ("champion", "champion", "champion"),
        ("improved", "improved", "improved"),
        ("worse", "worse", "champion"),
        ("worse@other", "worse", "organ_regress"),
    ):  # evaluated as users do (trackeval.evaluate: with the declared plots, which the overlay figures draw)
        inputs = {"ground_truth": gt, "predictions": gate_data.make_predictions(root / name, variant)}
        result = trackeval.evaluate("umd", inputs, cfg, {"name": "seg", "version": version})
        trackeval.write_results(result, root / f"out_{name}")
        out[name] = root / f"out_{name}"
    return out


def _decision(client: MlflowClient, run_id: str, tmp_path: Path) -> dict:
    return json.loads(Path(client.download_artifacts(run_id, "decision.json", str(tmp_path / run_id))).read_text())


def _mv(client: MlflowClient, version: str):
    return client.get_model_version("seg", version)


def _leaderboard(sets: list[str], tmp_path: Path) -> dict[str, str]:
    """``{version cell: gate cell}`` of ``trackeval leaderboard --markdown``."""
    md = tmp_path / "board.md"
    assert main(["leaderboard", "--model", "seg", "--markdown", str(md), *sets]) == 0
    rows = [line.split(" | ") for line in md.read_text().splitlines() if line.startswith("| seg | ")]
    return {cells[1]: cells[-1].rstrip(" |") for cells in rows}


def test_decision_descriptions_gate_history_and_leaderboard_column(store, folders, tmp_path, capsys):  # noqa: F811
    sets, client = store
    for version in ("champion", "improved", "worse"):
        assert main(["track", str(folders[version]), *sets]) == 0
    exp = client.get_experiment_by_name("trackeval").experiment_id

    # a first version: its pass names the floor it reached, with the number
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    first = _mv(client, "1").tags["trackeval.gate.decision_run"]
    floor = next(c for c in _decision(client, first, tmp_path)["checks"] if c["name"] == "floor")
    assert re.fullmatch(r"umd/dsc ci95_low 0\.\d{4} >= 0\.5", floor["detail"])
    run = client.get_run(first)
    assert run.data.tags["trackeval.gate.summary"] == f"pass: floor {floor['detail']}"
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**PASS**: gate of `seg` champion ([version 1](#/models/seg/versions/1)) against champion")
    assert "none (first version: held to the absolute floors)" in note and f"- floor {floor['detail']}" in note

    assert main(["promote", "--model", "seg", "--candidate", "improved", *sets]) == 0
    capsys.readouterr()
    # the champion's predictions against the improved champion: refused on non-inferiority, with its numbers
    assert main(["promote", "--model", "seg", "--candidate", "worse", *sets]) == 1
    out = capsys.readouterr().out
    assert " * " not in out and not re.search(r"^(pass|FAIL) \* ", out, re.M)  # "*" is never printed as a unit
    refused = _mv(client, "3").tags["trackeval.gate.decision_run"]
    decision = _decision(client, refused, tmp_path)
    head = decision["comparisons"][0]["rows"][0]
    interval = f"{signed(head['delta'])} [{signed(head['ci95_low'])}, {signed(head['ci95_high'])}]"
    short = f"non_inferiority umd {interval}, margin 0.01"
    run = client.get_run(refused)
    summary = run.data.tags["trackeval.gate.summary"]
    assert summary.startswith(f"fail: {short}") and head["delta"] < -0.1
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith(
        "**FAIL**: gate of `seg` worse ([version 3](#/models/seg/versions/3)) against champion improved "
        "([version 2](#/models/seg/versions/2))"
    )
    assert f"- {short}" in note and "Failed checks (" in note
    figure = f"#/experiments/{exp}/runs/{refused}/artifacts/overlays/umd/umd__dsc__by_organ__overlay.png"
    assert f"]({figure})" in note
    assert f"[comparison.json](#/experiments/{exp}/runs/{refused}/artifacts/comparison.json)" in note

    # the version description: headline linked to its evaluation run, verdict, gate history
    v3 = _mv(client, "3")
    text = v3.description
    eval_run = v3.tags["trackeval.eval_run.umd"]
    assert f"| [{eval_run[:12]}](#/experiments/{exp}/runs/{eval_run}) |" in text
    assert "Gate history (newest first):" in text
    row = next(line for line in text.splitlines() if f"{refused})" in line and line.startswith("| "))
    assert "| FAIL | improved (version 2) | fail: non_inferiority umd" in row and "| current |" in row
    v1_history = _mv(client, "1").description
    assert "| PASS | none (floors) | pass: floor umd/dsc ci95_low" in v1_history

    board = _leaderboard(sets, tmp_path)
    assert board["improved (champion)"] == "pass"
    assert board["champion"] == f"pass: floor {floor['detail']}"
    assert board["worse"].startswith(f"fail: {short}")


def test_replace_marks_the_old_run_and_the_version_links_the_current_one(store, folders, tmp_path, capsys):  # noqa: F811
    sets, client = store
    for version in ("champion", "improved", "worse"):
        assert main(["track", str(folders[version]), *sets]) == 0
    for version in ("champion", "improved"):
        assert main(["promote", "--model", "seg", "--candidate", version, *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "worse", *sets]) == 1
    exp = client.get_experiment_by_name("trackeval").experiment_id
    old = _mv(client, "3").tags["trackeval.eval_run.umd"]
    old_parent = client.get_run(old).data.tags["mlflow.parentRunId"]
    decision_run = _mv(client, "3").tags["trackeval.gate.decision_run"]
    capsys.readouterr()

    assert main(["track", str(folders["worse@other"]), "--replace", *sets]) == 0
    new = _mv(client, "3").tags["trackeval.eval_run.umd"]
    new_parent = client.get_run(new).data.tags["mlflow.parentRunId"]
    assert new != old
    assert f"umd seg/worse replaced run {old} by {new}" in capsys.readouterr().err

    # the old run and its parent: tag, name, description linking the current run
    run = client.get_run(old)
    assert run.data.tags["trackeval.replaced_by"] == new and run.info.run_name == "umd seg/worse (replaced)"
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**Replaced** (trackeval): this evaluation on umd is no longer the evidence of `seg`")
    assert f"[{new}](#/experiments/{exp}/runs/{new})" in note and "[version 3](#/models/seg/versions/3)" in note
    parent = client.get_run(old_parent)
    assert parent.data.tags["trackeval.replaced_by"] == new_parent and parent.info.run_name == "seg/worse (replaced)"
    assert f"(#/experiments/{exp}/runs/{new_parent})" in parent.data.tags["mlflow.note.content"]
    current = client.get_run(new)
    assert "trackeval.replaced_by" not in current.data.tags and current.info.run_name == "umd seg/worse"

    # the version page: the current run linked beside its numbers, the Source Run explained, not gated on it yet
    v3 = _mv(client, "3")
    assert v3.run_id == old_parent  # MLflow cannot re-point a version's source run
    text = v3.description
    s = gate_data_headline(client, new)
    assert f"| umd | umd/dsc | {s} | " in text and f"| [{new[:12]}](#/experiments/{exp}/runs/{new}) |" in text
    assert "Current evidence: the evaluation runs linked above" in text and "`... (replaced)`" in text
    assert f"the [last decision](#/experiments/{exp}/runs/{decision_run}) was made on replaced evaluations" in text
    row = next(line for line in text.splitlines() if f"{decision_run})" in line and line.startswith("| "))
    assert "| FAIL |" in row and "| replaced |" in row
    assert _leaderboard(sets, tmp_path)["worse"].endswith("(evidence replaced since)")

    # a re-run completes nothing more and prints no second "replaced"
    assert main(["track", str(folders["worse@other"]), *sets]) == 0
    assert "replaced run" not in capsys.readouterr().err

    # gated again on the new evidence: newest first in the history
    main(["promote", "--model", "seg", "--candidate", "worse", *sets])
    again = _mv(client, "3").tags["trackeval.gate.decision_run"]
    lines = [line for line in _mv(client, "3").description.splitlines() if "(#/experiments/" in line and "| " in line]
    order = [i for i, line in enumerate(lines) if again in line or decision_run in line]
    assert again != decision_run and again in lines[order[0]] and "| current |" in lines[order[0]]

    # back to the first results (a revert): the first run is current again and loses its marks; the second has them
    assert main(["track", str(folders["worse"]), "--replace", *sets]) == 0
    assert f"replaced run {new} by {old}" in capsys.readouterr().err
    run = client.get_run(old)
    assert "trackeval.replaced_by" not in run.data.tags and run.info.run_name == "umd seg/worse"
    assert "mlflow.note.content" not in run.data.tags
    assert client.get_run(old_parent).info.run_name == "seg/worse"
    assert client.get_run(new).data.tags["trackeval.replaced_by"] == old
    assert client.get_run(new).info.run_name == "umd seg/worse (replaced)"
    assert "Current evidence:" not in _mv(client, "3").description  # the source run holds the evidence again


def gate_data_headline(client: MlflowClient, run_id: str) -> str:
    m = client.get_run(run_id).data.metrics
    return f"{shown(m['umd/dsc'])} [{shown(m['umd/dsc/ci95_low'])}, {shown(m['umd/dsc/ci95_high'])}]"


@pytest.mark.slow
@needs_chromium
def test_replaced_run_version_page_and_decision_run_in_chromium(folders, served, tmp_path):  # noqa: F811
    """On a real ``mlflow server``: the replaced run's page says so and links the current run, the version's
    page links the current run (the link, followed, opens that run), the decision run's page states its verdict."""
    url = served
    sets = ["--set", "tracking.backoff_s=0.05", "--set", "gate.n_resamples=500"]
    for version in ("improved", "worse"):
        assert main(["track", str(folders[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "improved", *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "worse", *sets]) == 1
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    old = client.get_model_version("seg", "2").tags["trackeval.eval_run.umd"]
    decision = client.get_model_version("seg", "2").tags["trackeval.gate.decision_run"]
    assert main(["track", str(folders["worse@other"]), "--replace", *sets]) == 0
    new = client.get_model_version("seg", "2").tags["trackeval.eval_run.umd"]
    exp = client.get_run(new).info.experiment_id
    SHOTS.mkdir(parents=True, exist_ok=True)

    page = _chromium(tmp_path, f"{url}/#/experiments/{exp}/runs/{old}", SHOTS / "replaced_run.png", 8000)
    assert "umd seg/worse (replaced)" in page and "no longer the evidence of" in page
    assert f'href="#/experiments/{exp}/runs/{new}"' in page  # the description's link, rendered
    page = _chromium(tmp_path, f"{url}/#/models/seg/versions/2", SHOTS / "version_after_replace.png", 8000)
    assert f'href="#/experiments/{exp}/runs/{new}"' in page and "Current evidence" in page
    assert "Gate history" in page and "not gated on the current evidence yet" in page
    followed = _chromium(tmp_path, f"{url}/#/experiments/{exp}/runs/{new}", SHOTS / "current_run.png", 8000)
    assert "umd seg/worse" in followed and "(replaced)" not in followed.split("umd seg/worse", 1)[1][:20]
    page = _chromium(tmp_path, f"{url}/#/experiments/{exp}/runs/{decision}", SHOTS / "decision_run.png", 8000)
    assert "FAIL" in page and "non_inferiority umd" in page and "umd__dsc__by_organ__overlay.png" in page
    board = tmp_path / "board.md"
    assert main(["leaderboard", "--model", "seg", "--markdown", str(board), *sets]) == 0
    assert "| seg | worse | " in board.read_text() and "(evidence replaced since) |" in board.read_text()
