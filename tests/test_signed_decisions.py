"""Signed gate decisions: keys, DSSE attestations, ``verify`` against a user with write access to the store,
``verify-attestation`` without MLflow, and ``history``. Embedded SQLite stores and a real ``mlflow server`` on
127.0.0.1, real UMD results (tests/gate_data.py), real ``trackeval`` commands.

The model: v1 (every organ right) passes its floors and becomes champion; v2 (liver and kidney off by two
voxels) is refused against it. Each attack below is what the MLflow UI (or its API) lets a user with write
access do; each must make ``verify`` exit 1 with a line naming the alias and the reason.
"""

from __future__ import annotations

import base64
import json
import stat
import tempfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mlflow import MlflowClient
from mlflow.entities import Metric

from tests import gate_data
from tests.test_tracking import _chromium, migrated_db, needs_chromium, served, store  # noqa: F401
from trackeval.cli import main

KEY_ENV = "TRACKEVAL_GATE_KEY"


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> dict[str, Path]:
    """Results folders of model ``seg``: ``v1`` (improved predictions) and ``v2`` (the worse champion's)."""
    root = tmp_path_factory.mktemp("signed")
    cfg = gate_data.config()
    gt = gate_data.make_ground_truth(root)
    return {
        "v1": gate_data.evaluate_version(root, gt, "improved", cfg, model_version="v1")[1],
        "v2": gate_data.evaluate_version(root, gt, "champion", cfg, model_version="v2")[1],
        "v2@other": gate_data.evaluate_version(root / "other", gt, "noise", cfg, model_version="v2")[1],
    }


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    """The gate's key pair (``trackeval keygen``) and an attacker's."""
    root = tmp_path_factory.mktemp("keys")
    assert main(["keygen", "--out", str(root / "gate")]) == 0
    assert main(["keygen", "--out", str(root / "attacker")]) == 0
    return {
        "key": root / "gate" / "gate.key",
        "pub": root / "gate" / "gate.pub",
        "attacker_key": root / "attacker" / "gate.key",
        "attacker_pub": root / "attacker" / "gate.pub",
    }


def _history_store(sets: list[str], versions: dict[str, Path]) -> None:
    for v in ("v1", "v2"):
        assert main(["track", str(versions[v]), *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "v1", *sets]) == 0
    assert main(["promote", "--model", "seg", "--candidate", "v2", *sets]) == 1


@pytest.fixture
def signed(store, versions, keys, monkeypatch):  # noqa: F811
    """A store holding v1 (@champion, signed pass) and v2 (signed refusal); ``sets`` carry the trusted key."""
    sets, client = store
    monkeypatch.setenv(KEY_ENV, str(keys["key"]))
    _history_store(sets, versions)
    monkeypatch.delenv(KEY_ENV)
    return sets, client


def _verify(sets: list[str], capsys, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["verify", "--model", "seg", *sets, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _decision(client: MlflowClient, candidate: str):
    exp = client.get_experiment_by_name("trackeval").experiment_id
    flt = f"tags.`trackeval.kind` = 'gate_decision' and tags.`trackeval.gate.candidate` = '{candidate}'"
    (run,) = client.search_runs([exp], flt)
    return run


def _artifact(client: MlflowClient, run_id: str, name: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return Path(client.download_artifacts(run_id, name, tmp)).read_bytes()


# ------------------------------------------------------------------------------------------------ keys


def test_keygen_writes_pem_pair_private_0600_and_never_overwrites(tmp_path, capsys):
    out = tmp_path / "k"
    assert main(["keygen", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    private = serialization.load_pem_private_key((out / "gate.key").read_bytes(), password=None)
    public = serialization.load_pem_public_key((out / "gate.pub").read_bytes())
    assert isinstance(private, Ed25519PrivateKey)
    assert private.public_key().public_bytes_raw() == public.public_bytes_raw()
    assert stat.S_IMODE((out / "gate.key").stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in (out / "gate.key").read_bytes()  # PKCS8
    assert b"BEGIN PUBLIC KEY" in (out / "gate.pub").read_bytes()  # SubjectPublicKeyInfo
    import hashlib

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert f"key id {hashlib.sha256(der).hexdigest()}" in printed
    before = (out / "gate.key").read_bytes()
    assert main(["keygen", "--out", str(out)]) == 2
    assert "never overwrites" in capsys.readouterr().err
    assert (out / "gate.key").read_bytes() == before


# ------------------------------------------------------------------------------- honest store, signed


def test_honest_signed_store_verifies_and_the_attestation_is_standard_dsse(signed, keys, capsys):
    sets, client = signed
    rc, out, err = _verify(sets, capsys, "--trusted-key", str(keys["pub"]))
    assert rc == 0, out + err
    assert "@champion -> version 1 (v1): ok (decision run" in err and "signed by key" in err

    # an independent DSSE + Ed25519 check: only `cryptography`, json and base64, none of trackeval's verify code
    run = _decision(client, "1")
    envelope = json.loads(_artifact(client, run.info.run_id, "attestation.dsse.json"))
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    body = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    pae = b"DSSEv1 " + str(len(kind)).encode() + b" " + kind + b" " + str(len(body)).encode() + b" " + body
    public = serialization.load_pem_public_key(keys["pub"].read_bytes())
    (sig,) = envelope["signatures"]
    public.verify(base64.b64decode(sig["sig"]), pae)  # raises InvalidSignature if not
    import hashlib

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert sig["keyid"] == hashlib.sha256(der).hexdigest()
    statement = json.loads(body)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    pred = statement["predicate"]
    assert (pred["model"], pred["candidate"], pred["registry_version"], pred["verdict"]) == ("seg", "v1", "1", "pass")
    assert pred["champion"] is None and pred["decision_run"] == run.info.run_id
    decision_json = _artifact(client, run.info.run_id, "decision.json")
    assert pred["decision_digest"] == hashlib.sha256(decision_json).hexdigest()
    assert [c["name"] for c in pred["checks"] if c["name"] == "floor"] == ["floor"]
    assert run.data.tags["trackeval.gate.signature"] == sig["keyid"]
    # the subject is the candidate's evidence: the sha256 of the results.json that track uploaded
    (subject,) = statement["subject"]
    assert subject["name"] == "seg/v1/umd/results.json"
    assert subject["digest"]["sha256"] == pred["candidate_evidence"]["umd"]
    refused = _decision(client, "2")
    assert json.loads(base64.b64decode(json.loads(_artifact(client, refused.info.run_id, "attestation.dsse.json"))[
        "payload"]))["predicate"]["verdict"] == "fail"  # fmt: skip


def test_subject_digest_is_the_uploaded_results_json(signed, versions, keys, tmp_path, capsys):
    sets, client = signed
    run = _decision(client, "1")
    exported = tmp_path / "attestation.dsse.json"
    exported.write_bytes(_artifact(client, run.info.run_id, "attestation.dsse.json"))
    capsys.readouterr()
    ok = ["verify-attestation", str(exported), "--trusted-key", str(keys["pub"])]
    assert main([*ok, "--results", str(versions["v1"] / "results.json")]) == 0
    out = capsys.readouterr().out
    assert "verified, signed by key" in out and "seg v1 (registry version 1) floors: PASS" in out
    assert main([*ok, "--results", str(versions["v2"] / "results.json")]) == 1  # not its evidence
    assert "not one of the attestation's subjects" in capsys.readouterr().out
    assert main(["verify-attestation", str(exported), "--trusted-key", str(keys["attacker_pub"])]) == 1
    assert "NOT verified: no signature verifies under a trusted key" in capsys.readouterr().out
    tampered = json.loads(exported.read_bytes())
    statement = json.loads(base64.b64decode(tampered["payload"]))
    statement["predicate"]["registry_version"] = "2"
    tampered["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    exported.write_text(json.dumps(tampered))
    assert main(["verify-attestation", str(exported), "--trusted-key", str(keys["pub"])]) == 1


# ----------------------------------------------------------------------------------------- the attacks


def _move_champion_to_2(client: MlflowClient) -> None:
    client.set_registered_model_alias("seg", "champion", "2")


def _edit_refusal_tags(client: MlflowClient) -> None:
    """Attack 1: two tag edits on the decision run that refused v2, and @champion moved to v2."""
    run = _decision(client, "2")
    client.set_tag(run.info.run_id, "trackeval.gate.verdict", "pass")
    client.set_tag(run.info.run_id, "trackeval.gate.promoted", "true")
    _move_champion_to_2(client)


def _bare_run(client: MlflowClient) -> None:
    """Attack 2: a run created by hand with four tags, no params, metrics or artifacts."""
    exp = client.get_experiment_by_name("trackeval").experiment_id
    tags = {"trackeval.kind": "gate_decision", "trackeval.model_name": "seg", "trackeval.gate.verdict": "pass",
            "trackeval.gate.candidate": "2"}  # fmt: skip
    run = client.create_run(exp, tags=tags)
    client.set_terminated(run.info.run_id)
    _move_champion_to_2(client)


def _forge_pass(client: MlflowClient, sign_with: Ed25519PrivateKey | None, keyid: str) -> None:
    """Attacks 3 and 4: a complete, self-consistent passing decision of v2 in the refusal's run: decision.json
    edited to pass, tags edited, ``gate/pass`` logged as 1.0 (a new value at a later step), and the attestation
    re-signed by ``sign_with`` (the payload edited to say pass); ``None``: the honest pass of v1 copied in."""
    run = _decision(client, "2")
    rid = run.info.run_id
    decision = json.loads(_artifact(client, rid, "decision.json"))
    decision["verdict"] = "pass"
    for check in decision["checks"]:
        check["passed"] = True
    raw = json.dumps(decision, indent=1).encode()
    if sign_with is None:
        envelope = json.loads(_artifact(client, _decision(client, "1").info.run_id, "attestation.dsse.json"))
    else:
        envelope = json.loads(_artifact(client, rid, "attestation.dsse.json"))
        statement = json.loads(base64.b64decode(envelope["payload"]))
        import hashlib

        statement["predicate"].update(verdict="pass", decision_digest=hashlib.sha256(raw).hexdigest())
        body = json.dumps(statement).encode()
        kind = envelope["payloadType"].encode()
        pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)
        envelope["payload"] = base64.b64encode(body).decode()
        envelope["signatures"] = [{"keyid": keyid, "sig": base64.b64encode(sign_with.sign(pae)).decode()}]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "decision.json").write_bytes(raw)
        Path(tmp, "attestation.dsse.json").write_text(json.dumps(envelope))
        client.log_artifacts(rid, tmp)
    client.log_batch(rid, metrics=[Metric("gate/pass", 1.0, 10**13, 1)])
    client.set_tag(rid, "trackeval.gate.verdict", "pass")
    client.set_tag(rid, "trackeval.gate.promoted", "true")
    _move_champion_to_2(client)


def _resign_untrusted(client: MlflowClient, keys: dict[str, Path]) -> None:
    key = serialization.load_pem_private_key(keys["attacker_key"].read_bytes(), password=None)
    _forge_pass(client, key, "0" * 64)


def _retag_other_versions_pass(client: MlflowClient) -> None:
    """Attack 5: v1's honest, signed pass re-tagged as a decision of version 2, and @champion moved to v2."""
    client.set_tag(_decision(client, "1").info.run_id, "trackeval.gate.candidate", "2")
    _move_champion_to_2(client)


ATTACKS = {
    "tag_edits": (_edit_refusal_tags, "tag trackeval.gate.verdict says pass, its decision.json says fail",
                  "tag trackeval.gate.verdict says pass, its decision.json says fail"),
    "bare_tagged_run": (_bare_run, "no decision.json", "no decision.json"),
    "resigned_untrusted_key": (lambda c, k: _resign_untrusted(c, k), "no signature verifies under a trusted key",
                               None),
    "retagged_other_versions_pass": (
        lambda c, k: _retag_other_versions_pass(c),
        "tag trackeval.gate.candidate says version 2, param candidate_version 1",
        "tag trackeval.gate.candidate says version 2, param candidate_version 1",
    ),
    "other_versions_attestation": (lambda c, k: _forge_pass(c, None, ""), "the attestation was made for decision run",
                                   None),
}  # fmt: skip


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_store_level_attacks_fail_verify(attack, signed, keys, capsys):
    sets, client = signed
    forge, signed_reason, unsigned_reason = ATTACKS[attack]
    if forge in (_edit_refusal_tags, _bare_run):
        forge(client)
    else:
        forge(client, keys)
    rc, out, err = _verify(sets, capsys, "--trusted-key", str(keys["pub"]))
    assert rc == 1, out + err
    line = next(x for x in out.splitlines() if x.startswith("@champion"))
    assert line.startswith("@champion -> version 2 (v2): decision run "), line
    assert signed_reason in line
    rc, out, err = _verify(sets, capsys)  # no trusted key: the records' consistency alone
    if unsigned_reason is None:  # a complete forgery: only a key tells it from the gate's decisions
        assert rc == 0 and "@champion -> version 2 (v2): ok (decision run" in err
        assert all(x.endswith("[unsigned]") for x in err.splitlines() if x.startswith("@"))
    else:
        assert rc == 1 and unsigned_reason in out and out.rstrip().endswith("[unsigned]")


def test_unsigned_promote_records_unsigned_and_trusted_verify_refuses_it(store, versions, keys, capsys):  # noqa: F811
    sets, client = store
    _history_store(sets, versions)
    assert _decision(client, "1").data.tags["trackeval.gate.signature"] == "unsigned"
    rc, out, err = _verify(sets, capsys)
    assert rc == 0 and "ok (decision run" in err
    assert all(x.endswith(" [unsigned]") for x in err.splitlines() if x.startswith("@")) and "@champion" in err
    rc, out, _ = _verify(sets, capsys, "--trusted-key", str(keys["pub"]))
    assert rc == 1 and "no attestation.dsse.json: the decision is unsigned" in out


def test_promote_signs_an_already_recorded_decision_and_names_the_key(store, versions, keys, monkeypatch, capsys):  # noqa: F811
    sets, client = store
    _history_store(sets, versions)
    monkeypatch.setenv(KEY_ENV, keys["key"].read_text())  # the PEM text itself, as a CI secret variable holds it
    capsys.readouterr()
    assert main(["promote", "--model", "seg", "--candidate", "v2", *sets]) == 1  # the same decision: reused
    err = capsys.readouterr().err
    assert "signed by key" in err and "BEGIN" not in err
    assert _decision(client, "2").data.tags["trackeval.gate.signature"] != "unsigned"
    monkeypatch.setenv(KEY_ENV, str(keys["pub"]))  # a public key where the private one belongs
    assert main(["promote", "--model", "seg", "--candidate", "v2", *sets]) == 2
    assert "not an unencrypted PEM private key" in capsys.readouterr().err


def test_history_lists_every_decision_with_signature_and_alias_moves(signed, versions, keys, tmp_path, capsys):
    sets, client = signed
    out = tmp_path / "history.json"
    html = tmp_path / "history.html"
    capsys.readouterr()
    assert main(["history", "--model", "seg", *sets, "--trusted-key", str(keys["pub"]), "--json", str(out),
                 "--html", str(html)]) == 0  # fmt: skip
    history = json.loads(out.read_text())
    assert history["schema"] == "trackeval.history/1" and history["trail_matches_registry"] is True
    events = [(e["label"], e["verdict"], e["promoted"], e["signature"]) for e in history["events"]]
    assert events == [("v1", "pass", True, "verified"), ("v2", "fail", False, "verified")]
    first, second = history["events"]
    assert first["aliases_before"] == {} and first["aliases_after"] == {"champion": "1"}
    assert any(not c["passed"] and c["name"] == "non_inferiority" for c in second["checks"])
    assert history["aliases_now"]["champion"] == "1"
    page = html.read_text()
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    _edit_refusal_tags(client)
    assert main(["track", str(versions["v2@other"]), "--replace", *sets]) == 0  # v2's evidence replaced
    assert main(["history", "--model", "seg", *sets, "--trusted-key", str(keys["pub"]), "--json", str(out)]) == 0
    history = json.loads(out.read_text())
    replaced = [e for e in history["events"] if e["kind"] == "replaced"]
    assert [(e["label"], e["unit"]) for e in replaced] == [("v2", "umd")]
    assert replaced[0]["replaced_by"] == client.get_model_version("seg", "2").tags["trackeval.eval_run.umd"]
    assert history["events"][-1]["kind"] == "replaced"  # the newest event
    assert history["trail_matches_registry"] is False
    refusal = history["events"][1]
    assert refusal["signature"] == "verified" and refusal["verdict"] == "fail"  # the signed record still says fail
    assert refusal["problem"] == "tag trackeval.gate.verdict says pass, its decision.json says fail"


# ------------------------------------------------------------------------------------ a real server


@pytest.mark.slow
def test_attacks_on_a_real_mlflow_server(versions, keys, served, monkeypatch, capsys):  # noqa: F811
    url = served
    sets = ["--set", "tracking.backoff_s=0.05", "--set", "gate.n_resamples=1000"]
    monkeypatch.setenv(KEY_ENV, str(keys["key"]))
    _history_store(sets, versions)
    monkeypatch.delenv(KEY_ENV)
    trusted = ("--trusted-key", str(keys["pub"]))
    rc, out, err = _verify(sets, capsys, *trusted)
    assert rc == 0 and "signed by key" in err
    client = MlflowClient(tracking_uri=url, registry_uri=url)
    _edit_refusal_tags(client)
    rc, out, _ = _verify(sets, capsys, *trusted)
    assert rc == 1 and "@champion -> version 2 (v2): decision run" in out
    _resign_untrusted(client, keys)
    rc, out, _ = _verify(sets, capsys, *trusted)
    assert rc == 1 and "no signature verifies under a trusted key" in out


def test_history_html_escapes_user_data():
    from trackeval.attest.trail import History, HistoryCheck, HistoryEvent
    from trackeval.report.history import history_html

    hostile = '<img src=x onerror="alert(1)">'
    event = HistoryEvent(
        time="2026-01-01T00:00:00.000+00:00",
        kind="decision",
        version="1",
        label=hostile,
        verdict="fail",
        checks=[HistoryCheck(name="floor", unit="umd", passed=False, detail=hostile)],
        signature="unsigned",
        run_id="r1",
        run_url="javascript:alert(1)",
    )
    page = history_html(History(model="seg", trusted_keys=[], aliases_now={}, trail_matches_registry=True,
                                events=[event]))  # fmt: skip
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "javascript:" not in page.replace("r1", "")  # a link only for an http(s) run URL
    assert "<a " not in page


@pytest.mark.slow
@needs_chromium
def test_history_page_renders_in_headless_chromium(signed, keys, tmp_path, capsys):
    sets, _ = signed
    html = tmp_path / "history.html"
    assert main(["history", "--model", "seg", *sets, "--trusted-key", str(keys["pub"]), "--html", str(html)]) == 0
    shots = Path(__file__).resolve().parents[1] / ".test-artifacts" / "signed_decisions"
    shots.mkdir(parents=True, exist_ok=True)
    dom = _chromium(tmp_path, html.as_uri(), shots / "history.png", 2000)
    assert "Gate history of seg" in dom
    assert '<span class="pass">PASS</span>' in dom and '<span class="fail">FAIL</span>' in dom
    assert dom.count("signed ") >= 2 and "non_inferiority" in dom
