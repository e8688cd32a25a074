"""The evidence behind the aliases: whether ``@champion`` and ``@previous`` rest on a recorded passing decision
whose evidence still holds (:func:`verify_aliases`), and the withdrawal of the aliases that rested on a
version's old evidence after ``track --replace`` (:func:`withdraw_replaced`).

A decision records the digests (sha256 of results.json) of the evaluation runs on both sides
(:mod:`trackeval.tracking.decision_runs`); the evidence holds while those versions' evaluation runs still give
the same digests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from trackeval.attest.dsse import AttestationError, short
from trackeval.errors import TrackingError
from trackeval.tracking.attestations import DecisionRecord, Vouched, pairs_param, read_record, vouch
from trackeval.tracking.client import Mlflow, check_model_ref, error_code, quote
from trackeval.tracking.evidence import run_digest
from trackeval.tracking.model_registry import (
    eval_runs,
    registered_aliases,
    registered_model,
    registered_version_name,
    set_alias_to,
    unknown_model,
)
from trackeval.tracking.tags import KIND_GATE, PROMOTED_TAG, TAG


class _Evidence:
    """The evidence digests of a model's versions now (``{unit: sha256 of results.json}`` per registry version),
    each read once; ``override`` replaces a version's (the evidence it had before ``track --replace``)."""

    def __init__(self, ml: Mlflow, name: str, override: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.ml, self.name = ml, name
        self._versions: dict[str, dict[str, str] | None] = {k: dict(v) for k, v in (override or {}).items()}
        self._runs: dict[str, str] = {}

    def run(self, run_id: str) -> str:
        """The evidence digest of one evaluation run (``missing`` when it has no readable results.json)."""
        if run_id not in self._runs:
            try:
                self._runs[run_id] = run_digest(self.ml, run_id)
            except (TrackingError, OSError):
                self._runs[run_id] = "missing"
        return self._runs[run_id]

    def of(self, version: str) -> dict[str, str] | None:
        """``{unit: digest}`` of registry version ``version`` (None when there is no such version)."""
        if version not in self._versions:
            try:
                mv = self.ml.call("get_model_version", self.ml.client.get_model_version, self.name, version)
            except TrackingError as exc:
                if error_code(exc) is None:
                    raise
                self._versions[version] = None
            else:
                self._versions[version] = {u: self.run(r) for u, r in eval_runs(mv).items()}
        return self._versions[version]


def _passing_decisions(ml: Mlflow, name: str, version: str | None = None) -> list[Any]:
    """FINISHED decision runs of model ``name`` (of candidate registry version ``version``), newest first, that are
    tagged as passing decisions that made their candidate champion: tagged ``trackeval.gate.promoted=true``, or
    recorded before that tag and evidence digests existed. Tags are only where to look: :func:`_holding` checks
    each run's record (:func:`~trackeval.tracking.attestations.vouch`)."""
    flt = (
        f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}model_name` = {quote(name)} "
        f"and tags.`{TAG}gate.verdict` = 'pass' and attributes.status = 'FINISHED'"
    )
    if version is not None:
        flt += f" and tags.`{TAG}gate.candidate` = {quote(version)}"
    found = ml.search(flt)
    return [r for r in found if r.data.tags.get(PROMOTED_TAG) == "true" or "candidate_evidence" not in r.data.params]


class _Records:
    """Decision runs' records (:func:`~trackeval.tracking.attestations.read_record`), each read once."""

    def __init__(self, ml: Mlflow) -> None:
        self.ml = ml
        self._records: dict[str, DecisionRecord] = {}

    def of(self, run: Any) -> DecisionRecord:
        if run.info.run_id not in self._records:
            self._records[run.info.run_id] = read_record(self.ml, run)
        return self._records[run.info.run_id]


def _evidence_problem(ev: _Evidence, run: Any, vouched: Vouched, version: str) -> str | None:
    """Why decision ``run`` (accepted as :class:`Vouched`) no longer holds (None: it does): the evidence it was
    made on, on either side (the candidate's, and the champion's it was gated against), differs from what those
    versions' evaluation runs hold now. A decision recorded before evidence digests existed is compared through
    the runs it names."""
    params = run.data.params
    sides = [("candidate", version, vouched.candidate_evidence)]
    if vouched.champion_version:
        sides.append(("champion", vouched.champion_version, vouched.champion_evidence))
    for side, side_version, recorded in sides:
        if recorded is None:  # legacy: the digests of the runs it names, as they are now
            recorded = {u: ev.run(r) for u, r in pairs_param(params.get(f"{side}_runs", "")).items()}
        current = ev.of(side_version)
        whose = "its" if side == "candidate" else f"the champion's it was gated against (version {side_version})"
        if current is None:
            return f"decision run {run.info.run_id}: {whose} registered version no longer exists"
        for unit, digest in sorted(recorded.items()):
            now = current.get(unit)
            if now != digest:
                shown = "no evaluation" if now is None else now[:12]
                return (
                    f"evidence changed since decision run {run.info.run_id} made it so: {whose} {unit} results "
                    f"digest {digest[:12]} then, {shown} now"
                )
    return None


@dataclass(frozen=True)
class _Trust:
    """How decision runs are checked: the trusted public keys (``{key id: key}``; empty: the records'
    consistency only) and the cache of records read."""

    keys: Mapping[str, Ed25519PublicKey]
    records: _Records


def _holding(
    ml: Mlflow, name: str, ev: _Evidence, trust: _Trust, version: str
) -> tuple[Any, Vouched | None, str | None]:
    """The newest decision that made registry version ``version`` champion and still holds, with what it vouches
    for, or ``(None, None, problem)``: ``moved outside the gate`` (no such decision) or why the newest one does
    not hold (its record disagrees with itself or is not signed by a trusted key, or its evidence changed)."""
    decisions = _passing_decisions(ml, name, version)
    if not decisions:
        return None, None, "moved outside the gate"
    problems = []
    for run in decisions:
        try:
            vouched = vouch(trust.records.of(run), name, version, trust.keys)
        except AttestationError as exc:
            problems.append(f"decision run {run.info.run_id}: {exc}")
            continue
        problem = _evidence_problem(ev, run, vouched, version)
        if problem is None:
            return run, vouched, None
        problems.append(problem)
    return None, None, problems[0]


@dataclass(frozen=True)
class AliasStatus:
    """One alias as ``verify`` found it: the registry version it names, trackeval's label of it, the problem (None:
    it holds), the decision run that made it so (``champion`` / ``previous``), the key id that signed that
    decision and whether signatures were checked at all (trusted keys configured)."""

    alias: str
    version: str
    label: str
    problem: str | None
    decision_run: str | None = None
    signer: str | None = None
    checked_signatures: bool = False

    def line(self) -> str:
        """``@champion -> version 3 (v3): moved outside the gate`` (or ``...: ok (...)``); every line ends with
        ``[unsigned]`` when no trusted key was configured (signatures not checked)."""
        if self.problem:
            what = self.problem
        elif self.decision_run:
            signed = f"; signed by key {short(self.signer)}" if self.signer else ""
            what = f"ok (decision run {self.decision_run}{signed}; evidence unchanged)"
        else:
            what = "ok (a tracked version)"
        return f"@{self.alias} -> version {self.version} ({self.label}): {what}" + (
            "" if self.checked_signatures else " [unsigned]"
        )


#: the aliases ``verify`` checks, in this order
VERIFIED_ALIASES = ("champion", "previous", "challenger")


def verify_aliases(ml: Mlflow, name: str, trusted: Mapping[str, Ed25519PublicKey] | None = None) -> list[AliasStatus]:
    """Check that every alias of registered model ``name`` rests on evidence that passed: ``@champion`` and
    ``@previous`` each name a version made champion by a recorded passing decision (``trackeval.gate.promoted``)
    whose record agrees with itself (tags, ``gate/pass``, params and decision.json all say pass for this model
    and version), whose attestation verifies under one of the ``trusted`` keys (``{key id: public key}``; none
    given: not checked, every line says unsigned) and names this model, version and pass, and whose evidence
    still holds (the results digests it recorded for the candidate, and for the champion it was gated against,
    equal those of the runs the versions' ``eval_run`` tags point to now, artifacts re-read). ``@challenger``
    names a tracked version (one with an ``eval_run`` tag). A unit tracked after the decision does not count
    against it. Returns one status per alias present.

    Raises :class:`InputError` when ``name`` is not a registered model (or not a valid model name).
    """
    check_model_ref(name, "name")
    if registered_model(ml, name) is None:
        raise unknown_model(ml, name)
    aliases = {k: str(v) for k, v in registered_aliases(ml, name).items()}
    ev, trust = _Evidence(ml, name), _Trust(dict(trusted or {}), _Records(ml))
    checked = bool(trust.keys)
    out = []
    for alias in VERIFIED_ALIASES:
        if alias not in aliases:
            continue
        version = aliases[alias]
        try:
            mv = ml.call("get_model_version", ml.client.get_model_version, name, version)
        except TrackingError as exc:
            if error_code(exc) is None:
                raise
            out.append(AliasStatus(alias, version, "?", "names no registered version", checked_signatures=checked))
            continue
        label = registered_version_name(mv)
        if alias == "challenger":
            problem = None if eval_runs(mv) else "not a tracked version (no trackeval.eval_run.<unit> tag)"
            out.append(AliasStatus(alias, version, label, problem, checked_signatures=checked))
            continue
        run, vouched, problem = _holding(ml, name, ev, trust, version)
        out.append(
            AliasStatus(
                alias,
                version,
                label,
                problem,
                None if run is None else run.info.run_id,
                None if vouched is None else vouched.signer,
                checked,
            )
        )
    return out


def withdraw_replaced(ml: Mlflow, name: str, version: str, old: Mapping[str, str]) -> list[str]:
    """After ``track --replace`` changed the evidence of registry version ``version`` (``old``: its ``{unit:
    digest}`` before), withdraw every alias that rested on the old evidence: one that held before and no longer
    holds (:func:`verify_aliases`' rule), i.e. the version itself and any champion gated against it.

    A withdrawn ``@champion`` returns to the most recent earlier champion (a ``promoted`` decision, newest first,
    of another version) whose decision still holds, with ``@previous`` = the champion that decision was made
    against when that one holds too; none left: both are removed. A withdrawn ``@previous`` alone is removed. The
    replaced version becomes ``@challenger`` (unless it is still champion), so ``promote`` gates it again on the
    new evidence. Returns what was done, one line per alias moved.
    """
    after = _Evidence(ml, name)
    before = _Evidence(ml, name, override={version: old})
    trust = _Trust({}, _Records(ml))
    aliases = {k: str(v) for k, v in registered_aliases(ml, name).items()}

    def rested(alias: str) -> bool:
        held = aliases.get(alias)
        return (
            bool(held)
            and _holding(ml, name, before, trust, held)[0] is not None
            and _holding(ml, name, after, trust, held)[0] is None
        )

    target = dict(aliases)
    if rested("champion"):
        target["champion"] = target["previous"] = None  # type: ignore[assignment]
        for run in _passing_decisions(ml, name):
            candidate = run.data.tags.get(TAG + "gate.candidate", "")
            if candidate in (version, aliases["champion"]) or _holding(ml, name, after, trust, candidate)[0] is None:
                continue
            target["champion"] = candidate
            base = run.data.tags.get(TAG + "gate.champion", "")
            if base and _holding(ml, name, after, trust, base)[0] is not None:
                target["previous"] = base
            break
    elif rested("previous"):
        target["previous"] = None  # type: ignore[assignment]
    if target.get("champion") != version:
        target["challenger"] = version
    done = []
    for alias in VERIFIED_ALIASES:
        if target.get(alias) != aliases.get(alias):
            set_alias_to(ml, name, alias, target.get(alias), aliases)
            was = aliases.get(alias)
            now = "removed" if target.get(alias) is None else f"-> version {target[alias]}"
            why = f" (it rested on the replaced evidence of version {version})" if alias != "challenger" else ""
            done.append(f"@{alias} {now}" + (f", was version {was}{why}" if was else ""))
    return done
