"""trackeval in a user's own git + DVC repository: ``trackeval init`` after the user's own ``predict`` stage.

A throw-away repository with its own params section (``train``, a near miss of trackeval's ``tracking``) and its
own ``predict.py`` (v1: the bundled UMD example's predictions; v2: the ground truth itself, or empty masks when
``train.v2_quality`` is ``bad``), whose stage iterates over ``pipeline.versions`` as init's do: ``trackeval init``,
``dvc repro`` twice, then a params change that makes v2 fail. Checks: every ``dvc repro`` exits 0, the second
records no new decision, ``trackeval pipeline verdict`` exits 0 while v2 passes and 1 after it fails, ``dvc status``
lists only the always-changed stages, the user's params section is accepted without a "did you mean" warning,
init's next lines name the files to commit and the ``mlflow ui`` command, and a third version is one line in
params.yaml. Real git, DVC and an MLflow SQLite store; slow tier (each command has ``scaled(900)`` s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from tests.conftest import scaled
from trackeval.demo.umd_example import example_dirs

BIN = Path(sys.executable).parent

PREDICT = '''"""The user's own model: writes predictions/<version>/umd/<case>.nii.gz."""
import shutil, sys
from pathlib import Path

import nibabel as nib
import numpy as np
import yaml

version = sys.argv[1]
quality = yaml.safe_load(open("params.yaml"))["train"]["v2_quality"]
out = Path("predictions") / version / "umd"
shutil.rmtree(out.parent, ignore_errors=True)
out.mkdir(parents=True)
source = Path("reference_predictions") if version == "v1" else Path("data/umd")
for f in sorted(source.glob("*.nii.gz")):
    if version == "v2" and quality == "bad":
        img = nib.load(f)
        nib.save(nib.Nifti1Image(np.zeros(img.shape, np.uint8), img.affine, img.header), out / f.name)
    else:
        shutil.copy(f, out / f.name)
'''


def _run(cwd: Path, *cmd: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRACKEVAL_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=scaled(900))
    if done.returncode not in ok:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def _user_repo(root: Path) -> Path:
    """A git + DVC repository with the user's data, reference predictions, params and predict stage."""
    repo = root / "myrepo"
    gt, pred = example_dirs()
    shutil.copytree(gt, repo / "data" / "umd")
    shutil.copytree(pred, repo / "reference_predictions")
    (repo / "predict.py").write_text(PREDICT, encoding="utf-8")
    (repo / "params.yaml").write_text("# my model's knobs\ntrain:\n  v2_quality: good\n", encoding="utf-8")
    # the versions listed once: the user's stage iterates over the list init writes (docs/pipeline.md)
    stage = {"foreach": "${pipeline.versions}", "do": {"cmd": "python predict.py ${item}", "deps": ["predict.py"],
             "params": ["train"], "outs": ["predictions/${item}"]}}  # fmt: skip
    (repo / "dvc.yaml").write_text("# my pipeline\n" + yaml.safe_dump({"stages": {"predict": stage}}), encoding="utf-8")
    _run(repo, "git", "init", "-q")
    _run(repo, str(BIN / "dvc"), "init", "-q")
    return repo


def _decisions(repo: Path) -> int:
    uri = f"sqlite:///{repo / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("trackeval")
    return len(client.search_runs([exp.experiment_id], "tags.`trackeval.kind` = 'gate_decision'"))


@pytest.mark.slow
def test_init_repro_twice_then_a_failing_candidate(tmp_path: Path) -> None:
    repo = _user_repo(tmp_path)
    trackeval, dvc = str(BIN / "trackeval"), str(BIN / "dvc")
    shown = _run(repo, trackeval, "init", "--model", "myseg").stdout
    assert "params.yaml: sections pipeline, bootstrap, tracking, gate, umd (kept yours: train)" in shown
    commit = "commit now: params.yaml dvc.yaml .gitignore .dvc/config .dvc/plots/ .github/workflows/trackeval.yml"
    assert commit in shown
    assert "work/eval/*/*/metrics.json, work/eval/*/*/headline.json, work/eval/*/*/plot.csv" in shown
    ui = "MLflow UI: run `mlflow ui --backend-store-uri sqlite:///mlflow.db`, then open http://127.0.0.1:5000"
    assert ui in shown
    assert "dvc_plots/" in (repo / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "dvc.yaml: stages trackeval_evaluate_umd, trackeval_track, trackeval_gate; plots trackeval_umd" in shown
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    assert params["train"] == {"v2_quality": "good"} and params["pipeline"]["versions"] == ["v1", "v2"]
    assert "# my pipeline" in (repo / "dvc.yaml").read_text(encoding="utf-8")  # the user's file, comments kept
    again = _run(repo, trackeval, "init", "--model", "myseg", ok=(2,))
    assert "already has a 'pipeline' section" in again.stderr  # never overwritten without --force

    repro = _run(repo, dvc, "repro")
    first = repro.stdout
    assert "Running stage 'predict@v1'" in first and "Running stage 'trackeval_evaluate_umd@v2'" in first
    assert "did you mean" not in first + repro.stderr  # `train` is the user's, not a misspelt `tracking`
    assert _run(repo, trackeval, "pipeline", "verdict").returncode == 0  # v2 = the ground truth: passes
    n_decisions = _decisions(repo)
    assert n_decisions == 2  # v1 against the floor, v2 against v1

    second = _run(repo, dvc, "repro").stdout
    assert "Running stage 'trackeval_evaluate_umd" not in second and "Running stage 'predict" not in second
    assert _decisions(repo) == n_decisions  # the same decisions: recorded once
    status = _run(repo, dvc, "status").stdout
    changed = {line.rstrip(":").strip() for line in status.splitlines() if line and not line.startswith("\t")}
    assert changed == {"trackeval_track", "trackeval_gate"}, status

    mine = (repo / "params.yaml").read_text(encoding="utf-8").replace("v2_quality: good", "v2_quality: bad")
    (repo / "params.yaml").write_text(mine, encoding="utf-8")
    third = _run(repo, dvc, "repro")  # a failing gate completes the stage
    assert "Running stage 'trackeval_evaluate_umd@v2'" in third.stdout
    assert "Running stage 'trackeval_evaluate_umd@v1'" not in third.stdout  # v1's predictions did not change
    verdict = _run(repo, trackeval, "pipeline", "verdict", ok=(1,))
    assert "gate verdict for myseg/v2 (registry): FAIL" in verdict.stdout
    assert "candidate myseg/v2: gate verdict fail, expected pass" in verdict.stderr
    assert "myseg@champion (registry): v1" in verdict.stdout
    assert _run(repo, trackeval, "pipeline", "verdict", "--expect", "fail").returncode == 0

    # add a version: one entry in pipeline.versions; the user's stage and trackeval's follow
    text = (repo / "params.yaml").read_text(encoding="utf-8")
    (repo / "params.yaml").write_text(text.replace("versions: [v1, v2]", "versions: [v1, v2, v3]", 1), encoding="utf-8")
    stages = _run(repo, dvc, "stage", "list", "--name-only").stdout.split()
    assert {"predict@v3", "trackeval_evaluate_umd@v3"} <= set(stages), stages


def test_the_demo_lists_its_versions_once(tmp_path: Path) -> None:
    """The demo's train, predict and evaluate stages iterate over params.yaml's pipeline.versions (a mapping:
    its keys), and DVC resolves them to exactly the stage names dvc.lock holds (train@v1, evaluate@umd-v1...)."""
    from tests.conftest import REPO

    repo = tmp_path / "demo"
    repo.mkdir()
    _run(repo, "git", "init", "-q")
    _run(repo, str(BIN / "dvc"), "init", "-q")
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, repo / name)
    demo = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert demo["train"]["foreach"] == demo["predict"]["foreach"] == "${pipeline.versions}"
    assert demo["evaluate"]["matrix"]["version"] == "${pipeline.versions}"
    stages = _run(repo, str(BIN / "dvc"), "stage", "list", "--name-only").stdout.split()
    locked = yaml.safe_load((REPO / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    assert stages == list(locked)
