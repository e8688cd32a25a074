"""The in-toto Statement v1 of one gate decision (:func:`statement`) and its reading back
(:func:`read_predicate`).

Its ``subject`` is the candidate's evidence: one entry per benchmark unit, named ``<model>/<version>/<unit>/
results.json``, with the sha256 of that results.json. Its ``predicate`` (:class:`GateDecisionPredicate`, type
:data:`PREDICATE_TYPE`) holds what a verifier needs without the MLflow store: model, both versions (trackeval's
names and registry numbers), the verdict, both sides' evidence digests, the digests of the gate config and of
the decision record (``decision.json``), every check with its numbers, the run it was recorded in, trackeval's
version and the time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trackeval._version import __version__
from trackeval.attest.dsse import AttestationError
from trackeval.gate.decide import Decision
from trackeval.io.hashing import sha256_bytes
from trackeval.results import sha256_text

#: in-toto's Statement type
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: trackeval's predicate type: one promotion-gate decision, version 1 of its schema (docs/gate.md)
PREDICATE_TYPE = "urn:medtrackeval:predicate:gate-decision:v1"


class PredicateCheck(BaseModel):
    """One check of the decision as signed: its rule, unit (``*``: the decision as a whole), outcome and numbers."""

    model_config = ConfigDict(extra="forbid")

    name: str
    unit: str
    passed: bool
    detail: str


class GateDecisionPredicate(BaseModel):
    """The predicate of :data:`PREDICATE_TYPE` (docs/gate.md lists the fields)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    candidate: str
    registry_version: str
    champion: str | None
    champion_registry_version: str | None
    verdict: Literal["pass", "fail"]
    candidate_evidence: dict[str, str]
    champion_evidence: dict[str, str]
    gate_config_digest: str
    decision_digest: str
    checks: list[PredicateCheck]
    decision_run: str
    trackeval_version: str
    time: str


class StatementSubject(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    digest: dict[str, str] = Field(min_length=1)


class Statement(BaseModel):
    """An in-toto Statement v1 whose predicate is a gate decision."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[StatementSubject] = Field(min_length=1)
    predicateType: Literal["urn:medtrackeval:predicate:gate-decision:v1"]  # noqa: N815 - in-toto's name
    predicate: GateDecisionPredicate


def gate_config_digest(decision: Decision) -> str:
    """sha256 of the decision's recorded gate config (JSON, keys sorted)."""
    return sha256_text(json.dumps(decision.gate_config.model_dump(mode="json"), sort_keys=True))


def statement(
    decision: Decision,
    decision_json: bytes,
    *,
    registry_version: str,
    champion_registry_version: str | None,
    decision_run: str,
    now: datetime | None = None,
) -> bytes:
    """The Statement of ``decision`` (recorded as ``decision_json``, the exact bytes of decision.json, in run
    ``decision_run``) as the JSON bytes that are signed."""
    subject = [
        {"name": f"{decision.model}/{decision.candidate}/{unit}/results.json", "digest": {"sha256": digest}}
        for unit, digest in sorted(decision.candidate_evidence.items())
    ] or [  # no evaluation on the candidate's side (a refusal): the decision record itself is the subject
        {
            "name": f"{decision.model}/{decision.candidate}/decision.json",
            "digest": {"sha256": sha256_bytes(decision_json)},
        }
    ]
    predicate = GateDecisionPredicate(
        model=decision.model,
        candidate=decision.candidate,
        registry_version=registry_version,
        champion=decision.champion,
        champion_registry_version=champion_registry_version,
        verdict=decision.verdict,
        candidate_evidence=dict(sorted(decision.candidate_evidence.items())),
        champion_evidence=dict(sorted(decision.champion_evidence.items())),
        gate_config_digest=gate_config_digest(decision),
        decision_digest=sha256_bytes(decision_json),
        checks=[PredicateCheck(name=c.name, unit=c.unit, passed=c.passed, detail=c.detail) for c in decision.checks],
        decision_run=decision_run,
        trackeval_version=__version__,
        time=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
    )
    body = {"_type": STATEMENT_TYPE, "subject": subject, "predicateType": PREDICATE_TYPE, "predicate": predicate}
    return json.dumps(body, default=lambda m: m.model_dump(mode="json"), sort_keys=True).encode("utf-8")


def read_predicate(statement_json: dict) -> GateDecisionPredicate:
    """The gate-decision predicate of a verified Statement; its subject must be the predicate's candidate evidence.

    Raises :class:`AttestationError` when the Statement is not a trackeval gate decision's.
    """
    try:
        parsed = Statement.model_validate(statement_json)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "statement"
        raise AttestationError(f"not a trackeval gate-decision statement: {where}: {first['msg']}") from None
    pred = parsed.predicate
    named = {s.name: s.digest.get("sha256") for s in parsed.subject}
    for unit, digest in pred.candidate_evidence.items():
        if named.get(f"{pred.model}/{pred.candidate}/{unit}/results.json") != digest:
            raise AttestationError(f"subject does not carry the candidate's {unit} evidence digest")
    return pred
