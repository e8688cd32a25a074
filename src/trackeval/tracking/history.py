"""A model's audit trail (``trackeval history``): every gate decision and every replaced evaluation, in time
order, with each decision's record and signature checked (:mod:`trackeval.tracking.attestations`) and the alias
moves the decisions made, as :class:`~trackeval.attest.trail.History`.

MLflow keeps no alias history: the moves are derived from the decisions (a decision that promoted its candidate
moved ``@champion`` to it and ``@previous`` to the champion it was gated against), and the trail's end is
compared with the registry's aliases now (``trail_matches_registry``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from trackeval.attest.dsse import AttestationError
from trackeval.attest.trail import History, HistoryCheck, HistoryEvent
from trackeval.errors import TrackingError
from trackeval.tracking.attestations import DecisionRecord, disagreement, predicate_of, read_record
from trackeval.tracking.client import Mlflow, check_model_ref, error_code, quote
from trackeval.tracking.descriptions import REPLACED_BY_TAG
from trackeval.tracking.model_registry import registered_aliases, registered_model, unknown_model
from trackeval.tracking.tags import KIND_GATE, PROMOTED_TAG, TAG


def _time(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).isoformat(timespec="milliseconds")


def _signature(record: DecisionRecord, trusted: Mapping[str, Ed25519PublicKey]) -> tuple[str, str | None, str | None]:
    """``(signature state, signer key id, problem)`` of a decision record (:class:`HistoryEvent`)."""
    if record.problem:
        return "invalid", None, record.problem
    problem = None if record.decision is None else disagreement(record.run, record.decision)
    if record.envelope is None:
        return "unsigned", None, problem
    if not trusted:
        return "not checked", record.envelope.signatures[0].keyid or None, problem
    try:
        keyid, predicate = predicate_of(record, trusted)
    except AttestationError as exc:
        return "invalid", None, str(exc)
    decision = record.decision
    if decision is not None and (predicate.verdict, predicate.candidate) != (decision.verdict, decision.candidate):
        return "invalid", keyid, "the signed verdict or candidate differs from decision.json"
    return "verified", keyid, problem


def _decision_event(ml: Mlflow, run: Any, trusted: Mapping[str, Ed25519PublicKey]) -> HistoryEvent:
    tags, params = run.data.tags, run.data.params
    record = read_record(ml, run)
    state, signer, problem = _signature(record, trusted)
    decision = record.decision
    verdict = decision.verdict if decision is not None else tags.get(TAG + "gate.verdict")
    return HistoryEvent(
        time=_time(run.info.start_time),
        kind="decision",
        version=tags.get(TAG + "gate.candidate", ""),
        label=decision.candidate if decision is not None else params.get("candidate_model_version", ""),
        champion=tags.get(TAG + "gate.champion") or None,
        champion_label=None if decision is None else decision.champion,
        verdict=verdict if verdict in ("pass", "fail") else None,
        promoted=tags.get(PROMOTED_TAG) == "true",
        checks=[]
        if decision is None
        else [HistoryCheck(name=c.name, unit=c.unit, passed=c.passed, detail=c.detail) for c in decision.checks],
        signature=state,  # type: ignore[arg-type]
        signer=signer,
        candidate_evidence={} if decision is None else decision.candidate_evidence,
        champion_evidence={} if decision is None else decision.champion_evidence,
        run_id=run.info.run_id,
        run_url=ml.run_url(run.info.run_id),
        problem=problem,
    )


def _replaced_events(ml: Mlflow, name: str) -> list[HistoryEvent]:
    """One event per evaluation run of ``name`` that ``track --replace`` replaced (tag ``trackeval.replaced_by``),
    at the time of the run that replaced it."""
    flt = f"tags.`{TAG}model_name` = {quote(name)} and tags.`{TAG}kind` = 'benchmark'"
    out = []
    for run in ml.search(flt):
        new = run.data.tags.get(REPLACED_BY_TAG)
        if not new:
            continue
        try:
            when = ml.call("get_run", ml.client.get_run, new).info.start_time
        except TrackingError as exc:  # the replacing run was deleted: the replaced run's own end time
            if error_code(exc) is None:
                raise
            when = run.info.end_time
        out.append(
            HistoryEvent(
                time=_time(when),
                kind="replaced",
                version=run.data.tags.get(TAG + "model_version", ""),
                label=run.data.tags.get(TAG + "model_version", ""),
                unit=run.data.tags.get(TAG + "unit"),
                run_id=run.info.run_id,
                run_url=ml.run_url(run.info.run_id),
                replaced_by=new,
            )
        )
    return out


def _trail(events: list[HistoryEvent]) -> dict[str, str]:
    """Fill each decision's ``aliases_before``/``aliases_after`` from the ones before it; returns the end state."""
    state: dict[str, str] = {}
    for event in events:
        if event.kind != "decision":
            continue
        event.aliases_before = dict(state)
        if event.promoted:
            if state.get("champion"):
                state["previous"] = state["champion"]
            state["champion"] = event.version
            if state.get("challenger") == event.version:
                del state["challenger"]
        event.aliases_after = dict(state)
    return state


def model_history(ml: Mlflow, name: str, trusted: Mapping[str, Ed25519PublicKey] | None = None) -> History:
    """The audit trail of registered model ``name`` (module docstring); signatures checked under ``trusted``.

    Raises :class:`InputError` when ``name`` is not a registered model.
    """
    check_model_ref(name, "name")
    if registered_model(ml, name) is None:
        raise unknown_model(ml, name)
    trusted = dict(trusted or {})
    runs = ml.search(f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}model_name` = {quote(name)}")
    events = [_decision_event(ml, r, trusted) for r in runs] + _replaced_events(ml, name)
    events.sort(key=lambda e: (e.time, e.kind != "replaced"))
    end = _trail(events)
    now = {k: str(v) for k, v in registered_aliases(ml, name).items()}
    held = {k: v for k, v in now.items() if k in ("champion", "previous")}
    return History(
        model=name,
        trusted_keys=sorted(trusted),
        aliases_now=now,
        trail_matches_registry=held == {k: v for k, v in end.items() if k in ("champion", "previous")},
        events=events,
    )
