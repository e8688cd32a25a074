"""The `dvc repro` CI job (.github/workflows/pipeline.yml) and the summary writers it relies on.

The workflow file is checked as data (triggers, permissions, DVC cache, steps). The commands its steps run
(``trackeval compare --markdown -``, ``trackeval promote --dry-run --summary F``) run here for real on an
embedded MLflow store holding real UMD evaluations (tests/gate_data.py), as in tests/test_tracking.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from tests import gate_data
from tests.test_tracking import migrated_db, store  # noqa: F401 - shared fixtures
from trackeval.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "pipeline.yml"


# ------------------------------------------------------------------------------------------ the workflow


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps(workflow: dict) -> list[dict]:
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _run_steps(workflow: dict, *needles: str) -> list[dict]:
    return [s for s in _steps(workflow) if all(n in s.get("run", "") for n in needles)]


def test_workflow_triggers_and_permissions(workflow):
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "pull_request" in on
    assert on["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_workflow_restores_dvc_cache_keyed_on_dvc_lock(workflow):
    (cache,) = [s for s in _steps(workflow) if s.get("uses", "").startswith("actions/cache@")]
    assert cache["uses"] == "actions/cache@v4"
    assert cache["with"]["path"] == ".dvc/cache"
    assert "hashFiles('dvc.lock')" in cache["with"]["key"]
    steps = _steps(workflow)
    (setup,) = _run_steps(workflow, "make setup")
    (repro,) = [s for s in steps if s.get("run", "").strip() == "dvc repro"]
    assert steps.index(cache) < steps.index(setup) < steps.index(repro)


def test_workflow_setup_data_and_repro(workflow):
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    (ci_step,) = [s for s in ci["jobs"]["test"]["steps"] if "TORCH" in s.get("env", {})]
    assert job["env"]["TORCH"] == ci_step["env"]["TORCH"]  # the same torch build as the test job
    (data,) = _run_steps(workflow, "dvc remote list")
    assert "dvc pull" in data["run"] and "trackeval data fetch --out data" in data["run"]
    assert "dvc add" in data["run"] and "data.dvc" in data["run"]
    (verdict,) = _run_steps(workflow, "trackeval pipeline verdict")
    assert verdict["run"].strip() == "trackeval pipeline verdict --expect fail"  # the demo's v2 fails by design
    (verify,) = _run_steps(workflow, "trackeval verify")
    assert "--model seg --config params.yaml" in verify["run"]
    steps = _steps(workflow)
    (repro,) = [s for s in steps if s.get("run", "").strip() == "dvc repro"]
    assert steps.index(repro) < steps.index(verdict) < steps.index(verify)


def test_workflow_summary_gate_and_artifact(workflow):
    steps = _steps(workflow)
    (cmp,) = _run_steps(workflow, "trackeval compare", "--markdown -")
    assert "seg/v2 seg/v1 --config params.yaml" in cmp["run"]
    assert '>> "$GITHUB_STEP_SUMMARY"' in cmp["run"]
    assert cmp.get("shell") == "bash"  # bash -eo pipefail: a failing compare fails the step despite the tee
    (gate,) = _run_steps(workflow, "trackeval promote")
    for arg in (
        "--model seg",
        "--candidate v2",
        "--config params.yaml",
        "--dry-run",
        '--summary "$GITHUB_STEP_SUMMARY"',
    ):
        assert arg in gate["run"]
    # the expected fail (exit 1) is asserted by `pipeline verdict --expect fail`; an error (exit 2) fails the job
    assert gate["run"].endswith("|| test $? -eq 1") and gate.get("shell") == "bash"
    assert not any(s.get("continue-on-error") is True for s in steps)
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload["if"].strip("${} ") == "!cancelled()"  # uploaded when the gate failed too
    artifact = upload["with"]["path"]
    assert f"--summary {artifact}" in gate["run"] and f"tee {artifact}" in cmp["run"]
    assert steps.index(cmp) < steps.index(gate) < steps.index(upload)


# ------------------------------------------------------------------------ the summary writers, for real


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict[str, Path]:
    """Results folders of three versions of model ``seg`` on one ground truth."""
    root = tmp_path_factory.mktemp("evals")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    return {v: gate_data.evaluate_version(root, gt, v, cfg)[1] for v in ("champion", "organ_regress", "improved")}


def _gate_runs(client: MlflowClient) -> int:
    exp = client.get_experiment_by_name("trackeval")
    return len(client.search_runs([exp.experiment_id], "tags.`trackeval.kind` = 'gate_decision'"))


def _registry(client: MlflowClient) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Aliases and every version's tags (a dry run changes neither)."""
    aliases = {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()}
    return aliases, {str(mv.version): dict(mv.tags) for mv in client.search_model_versions("name = 'seg'")}


def test_compare_markdown_to_stdout(store, evaluated, capsys):  # noqa: F811
    sets, _ = store
    for version in ("champion", "improved"):
        assert main(["track", str(evaluated[version]), *sets]) == 0
    capsys.readouterr()
    assert main(["compare", "seg/improved", "seg/champion", "--markdown", "-", *sets]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("## umd/dsc: A = seg/improved, B = seg/champion")
    assert "| group |" in captured.out and "| (overall) | 1.0000 | 0.7534 | +0.2466 [" in captured.out
    assert "┃" not in captured.out and "━" not in captured.out  # the rich tables went to stderr
    assert "umd/dsc" in captured.err
    assert not Path("-").exists()


def test_promote_dry_run_summary_records_nothing(store, evaluated, tmp_path, capsys):  # noqa: F811
    sets, client = store
    for version in ("champion", "organ_regress", "improved"):
        assert main(["track", str(evaluated[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0  # floors: v1 champion
    before, n_gate = _registry(client), _gate_runs(client)
    assert before[0] == {"champion": "1", "challenger": "3"} and n_gate == 1
    summary = tmp_path / "summary.md"
    dry = ["promote", "--model", "seg", "--dry-run", "--summary", str(summary), *sets]

    # a regressing organ: the gate fails, exit 1, the summary written anyway
    assert main([*dry, "--candidate", "organ_regress"]) == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# Gate seg: candidate organ_regress vs champion champion: **FAIL**")
    assert "| worst_group | umd | NO |" in text and "| group |" in text and "Dry run" in text
    assert "verdict: fail (seg organ_regress)" in capsys.readouterr().out

    # a clear improvement: pass, exit 0, appended after the first decision
    assert main([*dry, "--candidate", "improved"]) == 0
    appended = summary.read_text(encoding="utf-8")
    assert appended.startswith(text) and len(appended) > len(text)
    assert "# Gate seg: candidate improved vs champion champion: **PASS**" in appended[len(text) :]

    # the champion itself with no @previous: nothing to gate, exit 0; to stdout with `-`
    capsys.readouterr()
    assert main(["promote", "--model", "seg", "--candidate", "champion", "--dry-run", "--summary", "-", *sets]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Gate seg: candidate champion is the champion") and "no @previous" in out

    # nothing recorded: same aliases, same version tags (no trackeval.gate.* on the candidates), no decision run
    assert _registry(client) == before and _gate_runs(client) == n_gate
    assert not any(k.startswith("trackeval.gate.") for k in before[1]["2"]) and "3" in before[1]

    # the real promotion (recorded) then a dry run of the new champion: gated against @previous, as recorded
    assert main(["promote", "--model", "seg", "--candidate", "improved", *sets]) == 0
    assert _registry(client)[0] == {"champion": "3", "previous": "1"}
    after = _gate_runs(client)
    capsys.readouterr()
    assert main(["promote", "--model", "seg", "--candidate", "improved", "--dry-run", "--summary", "-", *sets]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Gate seg: candidate improved vs previous champion: **PASS**")
    assert _gate_runs(client) == after and _registry(client)[0] == {"champion": "3", "previous": "1"}


def test_summary_write_error_names_the_file(store, evaluated, tmp_path, capsys):  # noqa: F811
    sets, _ = store
    assert main(["track", str(evaluated["champion"]), *sets]) == 0
    bad = tmp_path / "missing-folder" / "summary.md"
    argv = ["promote", "--model", "seg", "--candidate", "champion", "--dry-run", "--summary", str(bad), *sets]
    assert main(argv) == 2
    assert f"cannot write {bad}" in capsys.readouterr().err
