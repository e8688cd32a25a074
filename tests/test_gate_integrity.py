"""Every alias rests on evidence that passed, and anything else is detected: embedded SQLite stores and a real
``mlflow server`` on 127.0.0.1 (also with MLflow's basic-auth app), real results folders, real ``trackeval``
processes.

A decision records the results digests it was made on; re-tracking a version with other results is refused
unless ``--replace``, which withdraws the aliases that rested on the old evidence; ``promote`` takes turns on a
local store and decides again when ``@champion`` moved while it was deciding; ``trackeval verify`` checks the
aliases against the recorded decisions.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests import gate_data
from tests.hostile.test_tracking_faults import finish, spawn
from tests.test_tracking import _start_server, _stop, migrated_db, store  # noqa: F401 - shared fixtures
from trackeval.cli import main
from trackeval.tracking import promotion

# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> dict[str, Path]:
    """Results folders of model ``seg`` on one ground truth: ``champion``; ``improved``; ``improved2`` (the same
    predictions as ``improved``: it passes against it with a zero delta); and ``<version>@regress``, the
    ``organ_regress`` predictions tracked as that version (other results for the same version and unit)."""
    root = tmp_path_factory.mktemp("integrity")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    out = {v: gate_data.evaluate_version(root, gt, v, cfg)[1] for v in ("champion", "improved", "organ_regress")}
    out["improved2"] = gate_data.evaluate_version(root, gt, "improved", cfg, model_version="improved2")[1]
    for version in ("improved", "improved2"):
        other = root / f"{version}-regress"
        out[f"{version}@regress"] = gate_data.evaluate_version(other, gt, "organ_regress", cfg, model_version=version)[
            1
        ]
    return out


def _aliases(client: MlflowClient) -> dict[str, str]:
    return {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()}


def _digest(folder: Path) -> str:
    return hashlib.sha256((folder / "results.json").read_bytes()).hexdigest()


def _decisions(client: MlflowClient) -> list:
    exp = client.get_experiment_by_name("trackeval").experiment_id
    return client.search_runs([exp], "tags.`trackeval.kind` = 'gate_decision'", order_by=["attributes.start_time ASC"])


def _chain(sets: list[str], versions: dict[str, Path]) -> None:
    """champion (floors) -> improved -> improved2: @champion = 3, @previous = 2."""
    for version in ("champion", "improved", "improved2"):
        assert main(["track", str(versions[version]), *sets]) == 0
    for version in ("champion", "improved", "improved2"):
        assert main(["promote", "--model", "seg", "--candidate", version, *sets]) == 0


def _verify(sets: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["verify", "--model", "seg", *sets])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# --------------------------------------------------------------------------- evidence and --replace


def test_retrack_other_results_refused_identical_idempotent_replace_withdraws(store, versions, capsys):  # noqa: F811
    sets, client = store
    _chain(sets, versions)
    assert _aliases(client) == {"champion": "3", "previous": "2"}
    assert _verify(sets, capsys)[0] == 0
    v3 = client.get_model_version("seg", "3")
    old_run = v3.tags["trackeval.eval_run.umd"]
    assert client.get_run(old_run).data.tags["trackeval.results_digest"] == _digest(versions["improved2"])
    # the decision records the digests of exactly the results it passed on, on both sides
    decision = client.get_run(v3.tags["trackeval.gate.decision_run"])
    assert decision.data.params["candidate_evidence"] == f"umd={_digest(versions['improved2'])}"
    assert decision.data.params["champion_evidence"] == f"umd={_digest(versions['improved'])}"
    assert decision.data.tags["trackeval.gate.promoted"] == "true"
    recorded = json.loads(Path(client.download_artifacts(decision.info.run_id, "decision.json")).read_text())
    assert recorded["candidate_evidence"] == {"umd": _digest(versions["improved2"])}

    # other results for seg/improved2 (same ground truth, other predictions): refused, nothing moves
    other = versions["improved2@regress"]
    capsys.readouterr()
    assert main(["track", str(other), *sets]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("trackeval: error:")]
    assert "seg/improved2" in line and _digest(other) in line and _digest(versions["improved2"]) in line
    assert "--replace" in line and "field=results_digest" in line and str(other / "results.json") in line
    assert client.get_model_version("seg", "3").tags["trackeval.eval_run.umd"] == old_run
    assert _aliases(client) == {"champion": "3", "previous": "2"}

    # identical results again: idempotent
    assert main(["track", str(versions["improved2"]), *sets]) == 0
    assert f"already tracked as run {old_run}" in capsys.readouterr().err
    assert _aliases(client) == {"champion": "3", "previous": "2"}

    # --replace: the new evidence is logged; @champion returns to the most recent earlier champion whose evidence
    # holds (2, gated against 1), the replaced version becomes @challenger
    assert main(["track", str(other), "--replace", *sets]) == 0
    err = capsys.readouterr().err
    assert _aliases(client) == {"champion": "2", "previous": "1", "challenger": "3"}
    assert "@champion -> version 2, was version 3" in err and "@challenger -> version 3" in err
    new_run = client.get_model_version("seg", "3").tags["trackeval.eval_run.umd"]
    assert new_run != old_run and client.get_run(new_run).data.tags["trackeval.replaces"] == old_run
    assert client.get_run(old_run).info.status == "FINISHED"  # kept
    rc, out, _ = _verify(sets, capsys)
    assert (rc, out) == (0, "")

    # promote looks again, on the new evidence, against the restored champion (no "already the champion")
    assert main(["promote", "--model", "seg", "--candidate", "improved2", *sets]) == 1
    again = client.get_run(client.get_model_version("seg", "3").tags["trackeval.gate.decision_run"])
    assert again.data.params["candidate_runs"] == f"umd={new_run}" and again.data.params["champion_version"] == "2"
    assert _aliases(client) == {"champion": "2", "previous": "1", "challenger": "3"}
    # re-tracking the replaced results again needs --replace too (they are other results than the current ones)
    assert main(["track", str(versions["improved2"]), *sets]) == 2
    assert main(["track", str(versions["improved2"]), "--replace", *sets]) == 0
    # back on the evidence its passing decision recorded: the decision holds again, but the aliases stay
    assert _aliases(client) == {"champion": "2", "previous": "1", "challenger": "3"}
    assert _verify(sets, capsys)[0] == 0


def test_replacing_the_predecessor_withdraws_the_champion_gated_against_it(store, versions, capsys):  # noqa: F811
    sets, client = store
    _chain(sets, versions)
    assert main(["track", str(versions["improved@regress"]), "--replace", *sets]) == 0
    # @previous (2) was replaced and @champion (3) was gated against its old evidence: back to 1 (floors)
    assert _aliases(client) == {"champion": "1", "challenger": "2"}
    assert _verify(sets, capsys)[0] == 0
    # 3 is gated again, against the champion it now faces
    assert main(["promote", "--model", "seg", "--candidate", "improved2", *sets]) == 0
    assert _aliases(client) == {"champion": "3", "previous": "1", "challenger": "2"}
    assert _verify(sets, capsys)[0] == 0


# ------------------------------------------------------------------------------------------- verify


def test_verify_detects_an_alias_moved_outside_the_gate_and_changed_evidence(store, versions, tmp_path, capsys):  # noqa: F811
    sets, client = store
    for version in ("champion", "organ_regress"):
        assert main(["track", str(versions[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "organ_regress", *sets]) == 1  # rejected
    rc, out, err = _verify(sets, capsys)
    assert (rc, out) == (0, "")
    assert "@champion -> version 1 (champion): ok" in err and "@challenger -> version 2 (organ_regress): ok" in err

    client.set_registered_model_alias("seg", "champion", "2")  # by hand: the gate rejected it
    rc, out, _ = _verify(sets, capsys)
    assert rc == 1 and out == "@champion -> version 2 (organ_regress): moved outside the gate [unsigned]\n"

    client.set_registered_model_alias("seg", "champion", "1")
    client.set_registered_model_alias("seg", "previous", "2")
    rc, out, _ = _verify(sets, capsys)
    assert rc == 1 and out == "@previous -> version 2 (organ_regress): moved outside the gate [unsigned]\n"
    client.delete_registered_model_alias("seg", "previous")

    # the champion's evaluation artifact overwritten after the decision: its evidence no longer holds
    run_id = client.get_model_version("seg", "1").tags["trackeval.eval_run.umd"]
    tampered = tmp_path / "tampered" / "results.json"
    tampered.parent.mkdir()
    tampered.write_text((versions["organ_regress"] / "results.json").read_text())
    client.log_artifact(run_id, str(tampered))
    rc, out, _ = _verify(sets, capsys)
    (line,) = out.splitlines()
    assert rc == 1 and line.startswith("@champion -> version 1 (champion): evidence changed since decision run")
    assert (
        f"umd results digest {_digest(versions['champion'])[:12]} then, {_digest(versions['organ_regress'])[:12]}"
        in line
    )

    capsys.readouterr()
    assert main(["verify", "--model", "nope", *sets]) == 2
    assert "no registered model 'nope'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- concurrency


def test_promote_decides_again_when_the_champion_moved_while_deciding(store, versions, monkeypatch):  # noqa: F811
    """What two promotes on a server store do (no lock there): the champion read at the start moved before the
    aliases were set, so the candidate is gated again against the new champion; both decisions are recorded."""
    sets, client = store
    for version in ("champion", "improved", "improved2"):
        assert main(["track", str(versions[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    original, calls = promotion.judge, []

    def judge_while_another_promotes(ml, name, cand_mv, champ_mv, cfg, policies, signer=None):
        out = original(ml, name, cand_mv, champ_mv, cfg, policies, signer)
        calls.append(None if champ_mv is None else str(champ_mv.version))
        if len(calls) == 1:  # meanwhile another promote moved @champion to version 2
            client.set_registered_model_alias("seg", "previous", "1")
            client.set_registered_model_alias("seg", "champion", "2")
        return out

    monkeypatch.setattr(promotion, "judge", judge_while_another_promotes)
    assert main(["promote", "--model", "seg", "--candidate", "improved2", *sets]) == 0
    assert calls == ["1", "2"]
    assert _aliases(client) == {"champion": "3", "previous": "2"}
    mine = [
        (r.data.tags["trackeval.gate.champion"], r.data.tags.get("trackeval.gate.promoted"))
        for r in _decisions(client)
        if r.data.tags["trackeval.gate.candidate"] == "3"
    ]
    assert mine == [("1", None), ("2", "true")]  # both recorded; only the second moved the alias


def _race(argv_a: list[str], argv_b: list[str], tmp_path: Path) -> list[tuple[int, str]]:
    """Two ``trackeval`` processes released at the same moment by a barrier file."""
    barrier = tmp_path / "go"
    procs = [spawn(argv, barrier=barrier) for argv in (argv_a, argv_b)]
    barrier.touch()
    return [finish(p) for p in procs]


def assert_consistent_after_race(client: MlflowClient, sets: list[str], capsys) -> None:
    """After ``improved`` (2) and ``improved2`` (3) were promoted at once over champion 1: both passed, the one
    that went second was gated against the first; @champion = the last version that passed against its
    predecessor = @previous; every decision is recorded against the champion it saw; verify holds."""
    aliases = _aliases(client)
    assert sorted((aliases["champion"], aliases["previous"])) == ["2", "3"], aliases
    first, second = aliases["previous"], aliases["champion"]
    seen = {
        (
            r.data.tags["trackeval.gate.candidate"],
            r.data.tags["trackeval.gate.champion"],
            r.data.tags["trackeval.gate.verdict"],
            r.data.tags.get("trackeval.gate.promoted"),
        )
        for r in _decisions(client)
    }
    assert (first, "1", "pass", "true") in seen, seen
    assert (second, first, "pass", "true") in seen, seen
    for candidate, champion, _, _ in seen - {("1", "", "pass", "true")}:
        assert champion in ("1", "2", "3") and champion != candidate
    promoted = [s for s in seen if s[3] == "true"]
    assert len(promoted) == 3, seen  # 1 (floors), then one promotion each
    assert _verify(sets, capsys)[0] == 0


@pytest.mark.slow
def test_two_promote_processes_on_sqlite_take_turns(store, versions, tmp_path, capsys):  # noqa: F811
    sets, client = store
    for version in ("champion", "improved", "improved2"):
        assert main(["track", str(versions[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    outcomes = _race(
        ["promote", "--model", "seg", "--candidate", "improved", *sets],
        ["promote", "--model", "seg", "--candidate", "improved2", *sets],
        tmp_path,
    )
    for rc, err in outcomes:
        assert rc == 0 and "Traceback" not in err, err
    assert_consistent_after_race(client, sets, capsys)
    assert len(_decisions(client)) == 3  # they took turns: the second decided once, against the first


# ------------------------------------------------------------------------------------- mlflow server


def _server_sets(url: str) -> list[str]:
    return ["--set", f"tracking.uri={url}", "--set", "tracking.backoff_s=0.05", "--set", "gate.n_resamples=500"]


@pytest.mark.slow
def test_two_promote_processes_on_a_server_end_consistent(versions, migrated_db, tmp_path, capsys):  # noqa: F811
    """No lock on a server: each promote decides against the champion it read and moves the aliases only if that
    is still the champion, else decides again against the new one."""
    db = tmp_path / "server.db"
    shutil.copy(migrated_db, db)
    proc, url = _start_server(db, tmp_path / "artifacts", tmp_path / "server.log")
    try:
        sets = _server_sets(url)
        for version in ("champion", "improved", "improved2"):
            assert main(["track", str(versions[version]), *sets]) == 0
        assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
        outcomes = _race(
            ["promote", "--model", "seg", "--candidate", "improved", *sets],
            ["promote", "--model", "seg", "--candidate", "improved2", *sets],
            tmp_path,
        )
        for rc, err in outcomes:
            assert rc == 0 and "Traceback" not in err, err
        assert_consistent_after_race(MlflowClient(tracking_uri=url, registry_uri=url), sets, capsys)
    finally:
        _stop(proc)


def _as(monkeypatch: pytest.MonkeyPatch, user: str, password: str) -> None:
    """MLflow's own credentials variables (read by every MLflow client call of this process)."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)


def _everything_logged(client: MlflowClient, dst: Path) -> str:
    """Every param, tag and artifact of the experiment's runs, its LoggedModels' tags and params, and the
    registry's tags, as one text (artifacts decoded leniently: figures are PNG)."""
    exp = client.get_experiment_by_name("trackeval").experiment_id
    parts = []
    for run in client.search_runs([exp], run_view_type=3):  # ViewType.ALL
        parts += [*run.data.params.values(), *run.data.tags.values()]
        folder = Path(client.download_artifacts(run.info.run_id, "", str(dst / run.info.run_id)))
        parts += [f.read_bytes().decode("utf-8", "replace") for f in folder.rglob("*") if f.is_file()]
    for model in client.search_logged_models([exp]):
        parts += [*model.tags.values(), *(model.params or {}).values()]
    for mv in client.search_model_versions("name = 'seg'"):
        parts += [*mv.tags.values(), mv.source or "", mv.description or ""]
    return "\n".join(parts)


@pytest.mark.slow
def test_only_the_gate_user_moves_champion_on_a_basic_auth_server(
    versions,
    migrated_db,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    caplog,
):
    """MLflow's basic-auth app (docs/gate.md): everybody reads, the gate's user manages the registered model. A
    read-only user cannot move @champion; `trackeval promote` with the gate user's credentials (MLflow's
    MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD) can, and its password appears nowhere it logs or prints."""
    from mlflow.exceptions import MlflowException
    from mlflow.server.auth.client import AuthServiceClient

    admin_pw, gate_pw, reader_pw = (f"{who}-{secrets.token_urlsafe(16)}" for who in ("admin", "gate", "reader"))
    ini = tmp_path / "basic_auth.ini"
    ini.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{tmp_path / 'basic_auth.db'}\n"
        f"admin_username = admin\nadmin_password = {admin_pw}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        "auth_cache_ttl_seconds = 600\n",  # one password hash per user, not one per request
        encoding="utf-8",
    )
    db = tmp_path / "server.db"
    shutil.copy(migrated_db, db)
    env = {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16)}
    proc, url = _start_server(
        db, tmp_path / "artifacts", tmp_path / "server.log", args=("--app-name", "basic-auth"), env=env,
        auth=("admin", admin_pw),
    )  # fmt: skip
    try:
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        sets = _server_sets(url)
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        _as(monkeypatch, "admin", admin_pw)  # the tracking side (CI's evaluation job)
        for version in ("champion", "improved"):
            assert main(["track", str(versions[version]), *sets]) == 0
        auth = AuthServiceClient(url)
        auth.create_user("gate", gate_pw)
        auth.create_user("reader", reader_pw)
        auth.grant_user_permission("gate", "registered_model", "seg", "MANAGE")
        experiment = client.get_experiment_by_name("trackeval").experiment_id
        auth.grant_user_permission("gate", "experiment", experiment, "EDIT")  # its decision runs

        _as(monkeypatch, "reader", reader_pw)
        assert main(["verify", "--model", "seg", *sets]) == 0  # reading is everybody's
        with pytest.raises(MlflowException) as refused:
            client.set_registered_model_alias("seg", "champion", "1")
        assert refused.value.error_code == "PERMISSION_DENIED"
        assert "champion" not in client.get_registered_model("seg").aliases

        _as(monkeypatch, "gate", gate_pw)
        capsys.readouterr()
        caplog.clear()
        assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
        assert main(["promote", "--model", "seg", "--candidate", "improved", *sets]) == 0
        assert main(["verify", "--model", "seg", *sets]) == 0
        printed = capsys.readouterr()
        assert {k: str(v) for k, v in client.get_registered_model("seg").aliases.items()} == {
            "champion": "2",
            "previous": "1",
        }

        _as(monkeypatch, "reader", reader_pw)
        with pytest.raises(MlflowException):
            client.set_registered_model_alias("seg", "champion", "1")  # still only the gate
        logged = _everything_logged(client, tmp_path / "download")
        assert '"verdict": "pass"' in logged  # the decision artifacts were read
        for text in (printed.out, printed.err, caplog.text, logged):
            assert gate_pw not in text and admin_pw not in text
    finally:
        _stop(proc)


def test_pipeline_verdict_runs_verify(store, versions, tmp_path, capsys):  # noqa: F811
    """`trackeval pipeline verdict` (the CI pipeline job's check) prints `verify`'s problems and exits 1 on one."""
    sets, client = store
    for version in ("champion", "organ_regress"):
        assert main(["track", str(versions[version]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "champion", *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "organ_regress", *sets]) == 1
    uri = client.tracking_uri
    params = tmp_path / "params.yaml"
    params.write_text(
        f"tracking: {{uri: '{uri}', artifact_location: '{tmp_path / 'mlartifacts'}'}}\n"
        "pipeline: {model_name: seg, versions: {champion: {}, organ_regress: {}}}\n",
        encoding="utf-8",
    )
    (tmp_path / "work" / "gate").mkdir(parents=True)
    (tmp_path / "work" / "gate" / "verdict.json").write_text('{"champion": "champion"}\n', encoding="utf-8")
    verdict = ["pipeline", "verdict", "--params", str(params), "--work", str(tmp_path / "work"), "--expect", "fail"]
    capsys.readouterr()
    assert main(verdict[:-2]) == 1  # the candidate (the last version) failed the gate: exit 1, and why
    assert "candidate seg/organ_regress: gate verdict fail, expected pass" in capsys.readouterr().err
    assert main(verdict) == 0  # as expected
    assert "seg@champion (registry): champion" in capsys.readouterr().out
    client.set_registered_model_alias("seg", "previous", "2")  # by hand
    assert main(verdict) == 1
    captured = capsys.readouterr()
    assert "@previous -> version 2 (organ_regress): moved outside the gate [unsigned]\n" in captured.out
    assert "do not rest on evidence that passed the gate" in captured.err
