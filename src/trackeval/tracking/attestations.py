"""A decision run's signed record: written by ``promote`` (:func:`sign_decision`), read back and checked by
``verify`` and ``history`` (:func:`read_record`, :func:`vouch`).

A decision run holds its decision four times: the tags (``trackeval.gate.verdict``, ``.candidate``,
``.champion``), the metric ``gate/pass``, the params (versions, evidence digests) and ``decision.json``; a signed
one also holds ``attestation.dsse.json`` (:mod:`trackeval.attest`). Anyone who can write the store can edit the
first four; only the holder of the gate's private key can write the fifth. :func:`vouch` accepts a run only when
all of them agree, and, with trusted keys, only when the attestation verifies and names this model, this
registry version, ``pass``, this run and this decision.json.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from trackeval.attest import dsse
from trackeval.attest.dsse import AttestationError
from trackeval.attest.keys import Signer
from trackeval.attest.statement import GateDecisionPredicate, read_predicate, statement
from trackeval.errors import TrackingError
from trackeval.gate.decide import Decision
from trackeval.io.hashing import sha256_bytes
from trackeval.tracking.client import Mlflow
from trackeval.tracking.tags import SIGNATURE_TAG, TAG

#: the artifact names of a decision run's record and of its signed attestation
DECISION_JSON, ATTESTATION = "decision.json", "attestation.dsse.json"
#: the value of :data:`SIGNATURE_TAG` on a decision recorded without a key
UNSIGNED = "unsigned"


def decision_bytes(decision: Decision) -> bytes:
    """The exact bytes of a decision's ``decision.json`` (what the attestation's ``decision_digest`` covers)."""
    return decision.model_dump_json(indent=1).encode("utf-8")


def sign_decision(
    ml: Mlflow, run_id: str, decision: Decision, cand_mv: Any, champ_mv: Any | None, signer: Signer
) -> None:
    """Sign ``decision`` (recorded in run ``run_id``) and log ``attestation.dsse.json`` and the ``decision.json``
    it covers to the run; tag the run ``trackeval.gate.signature=<key id>``."""
    record = decision_bytes(decision)
    body = statement(
        decision,
        record,
        registry_version=str(cand_mv.version),
        champion_registry_version=None if champ_mv is None else str(champ_mv.version),
        decision_run=run_id,
    )
    envelope = dsse.sign(body, dsse.IN_TOTO, signer)
    with tempfile.TemporaryDirectory(prefix="trackeval-attest-") as tmp:
        Path(tmp, DECISION_JSON).write_bytes(record)
        Path(tmp, ATTESTATION).write_text(envelope.model_dump_json(indent=1), encoding="utf-8")
        ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp)
    ml.call("set_tag", ml.client.set_tag, run_id, SIGNATURE_TAG, signer.keyid)


@dataclass(frozen=True)
class DecisionRecord:
    """A decision run as read back: the run, its decision.json (bytes and parsed; None when absent or
    unreadable, ``problem`` says why) and its attestation envelope (None when absent)."""

    run: Any
    raw: bytes | None
    decision: Decision | None
    envelope: dsse.Envelope | None
    problem: str | None = None

    @property
    def run_id(self) -> str:
        return str(self.run.info.run_id)


def _artifact(ml: Mlflow, run_id: str, name: str, tmp: str) -> bytes | None:
    """The bytes of artifact ``name`` of run ``run_id`` (None when the run has none)."""
    try:
        path = ml.call("download_artifacts", ml.client.download_artifacts, run_id, name, tmp)
    except (TrackingError, OSError):
        return None
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def read_decision_json(ml: Mlflow, run_id: str, tmp: str) -> tuple[bytes | None, Decision | None, str | None]:
    """``(bytes, decision, problem)`` of decision run ``run_id``'s decision.json, downloaded into folder ``tmp``:
    the decision is None when it is missing or not a decision record, and ``problem`` says which."""
    raw = _artifact(ml, run_id, DECISION_JSON, tmp)
    if raw is None:
        return None, None, "no decision.json (not a decision recorded by trackeval promote)"
    try:
        return raw, Decision.model_validate_json(raw), None
    except ValidationError as exc:
        return raw, None, f"decision.json is not a decision record ({exc.errors()[0]['msg']})"


def read_record(ml: Mlflow, run: Any) -> DecisionRecord:
    """Read decision run ``run``'s decision.json and attestation (each may be missing: the record says so)."""
    with tempfile.TemporaryDirectory(prefix="trackeval-record-") as tmp:
        raw, decision, problem = read_decision_json(ml, run.info.run_id, tmp)
        signed = _artifact(ml, run.info.run_id, ATTESTATION, tmp)
    envelope = None
    if signed is not None:
        try:
            envelope = dsse.parse(signed)
        except AttestationError as exc:
            problem = problem or f"attestation.dsse.json: {exc}"
    return DecisionRecord(run, raw, decision, envelope, problem)


@dataclass(frozen=True)
class Vouched:
    """What a decision run vouches for once :func:`vouch` accepted it: who signed it (None: unsigned, or no
    trusted key configured), the registry version of the champion it was gated against, and the evidence
    digests it was made on (``{unit: sha256}``; ``None``: a record older than evidence digests)."""

    signer: str | None
    champion_version: str | None
    candidate_evidence: dict[str, str] | None
    champion_evidence: dict[str, str] | None


def predicate_of(record: DecisionRecord, trusted: Mapping[str, Ed25519PublicKey]) -> tuple[str, GateDecisionPredicate]:
    """``(signer key id, predicate)`` of the record's attestation, verified under ``trusted``. Raises
    :class:`AttestationError` when there is none or it does not verify, or its predicate does not name this
    run and this decision.json."""
    if record.envelope is None:
        raise AttestationError("no attestation.dsse.json: the decision is unsigned")
    keyid, body = dsse.verify(record.envelope, trusted)
    predicate = read_predicate(dsse.statement_of(record.envelope, body))
    if predicate.decision_run != record.run_id:
        raise AttestationError(f"the attestation was made for decision run {predicate.decision_run}")
    if record.raw is None or predicate.decision_digest != sha256_bytes(record.raw):
        raise AttestationError("decision.json is not the one the attestation signed (digest differs)")
    return keyid, predicate


def vouch(record: DecisionRecord, model: str, version: str, trusted: Mapping[str, Ed25519PublicKey]) -> Vouched:
    """Accept decision run ``record`` as a passing decision of registry version ``version`` of ``model``, or raise
    :class:`AttestationError` saying which condition failed: its tags, metric ``gate/pass``, params and
    decision.json must agree and say pass for this model and version; with ``trusted`` keys its attestation
    must verify under one of them (:func:`predicate_of`) and name this model, version and ``pass``."""
    run, decision = record.run, record.decision
    if record.problem or decision is None:
        raise AttestationError(record.problem or "no decision.json")
    _agree(run, decision, model, version)
    params, tags = run.data.params, run.data.tags
    champion_version = params.get("champion_version", tags.get(TAG + "gate.champion", "")) or None
    if decision.candidate_evidence:
        cand_ev, champ_ev = decision.candidate_evidence, decision.champion_evidence
    else:  # recorded before decision.json held evidence: the params' (None: older still, the runs they name)
        cand_ev, champ_ev = (_evidence(params, side) for side in ("candidate", "champion"))
    if not trusted:
        return Vouched(None, champion_version, cand_ev, champ_ev)
    keyid, pred = predicate_of(record, trusted)
    said = {
        "model": (pred.model, model),
        "registry version": (pred.registry_version, version),
        "verdict": (pred.verdict, "pass"),
        "candidate": (pred.candidate, decision.candidate),
        "champion registry version": (pred.champion_registry_version, champion_version),
    }
    for what, (signed, here) in said.items():
        if signed != here:
            raise AttestationError(f"the signed {what} is {signed!r}, the run says {here!r}")
    return Vouched(keyid, pred.champion_registry_version, pred.candidate_evidence, pred.champion_evidence)


def disagreement(run: Any, decision: Decision) -> str | None:
    """Where decision run ``run``'s tags, ``gate/pass`` metric and params disagree with its decision.json (None:
    they agree), whatever its verdict."""
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    verdict = tags.get(TAG + "gate.verdict")
    if verdict != decision.verdict:
        return f"tag trackeval.gate.verdict says {verdict}, its decision.json says {decision.verdict}"
    gate_pass = metrics.get("gate/pass")
    if gate_pass is None:
        return "it has no gate/pass metric"
    if gate_pass != (1.0 if decision.verdict == "pass" else 0.0):
        return f"metric gate/pass is {gate_pass}, its decision.json says {decision.verdict}"
    if tags.get(TAG + "model_name") != decision.model:
        return f"tag trackeval.model_name says {tags.get(TAG + 'model_name')!r}, its decision.json {decision.model!r}"
    candidate = tags.get(TAG + "gate.candidate")
    if params.get("candidate_version", candidate) != candidate:
        recorded = params["candidate_version"]
        return f"tag trackeval.gate.candidate says version {candidate}, param candidate_version {recorded}"
    if tags.get(TAG + "gate.promoted") == "true" and decision.verdict != "pass":
        return "tagged trackeval.gate.promoted although its decision.json says fail"
    for side in ("candidate", "champion"):
        recorded = params.get(f"{side}_evidence")
        if recorded is not None and decision.candidate_evidence:
            if pairs_param(recorded) != getattr(decision, f"{side}_evidence"):
                return f"param {side}_evidence differs from its decision.json"
    return None


def _agree(run: Any, decision: Decision, model: str, version: str) -> None:
    """Raise :class:`AttestationError` unless the run agrees with its decision.json (:func:`disagreement`) and
    both say pass for this model and this registry version."""
    problem = disagreement(run, decision)
    if problem:
        raise AttestationError(problem)
    if decision.verdict != "pass":
        raise AttestationError("its decision.json says fail")
    if decision.model != model:
        raise AttestationError(f"its decision.json is of model {decision.model!r}")
    if run.data.tags.get(TAG + "gate.candidate") != version:
        raise AttestationError(f"tag trackeval.gate.candidate says version {run.data.tags.get(TAG + 'gate.candidate')}")


def pairs_param(value: str) -> dict[str, str]:
    """``{unit: value}`` of a decision run's ``"umd=<x>,xray/cls=<y>"`` param (``candidate_runs``,
    ``candidate_evidence``, ...)."""
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


def _evidence(params: dict[str, str], side: str) -> dict[str, str] | None:
    """``{unit: digest}`` of a decision run's ``<side>_evidence`` param (None when it has none)."""
    value = params.get(f"{side}_evidence")
    return None if value is None else pairs_param(value)
