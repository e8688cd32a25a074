"""The promotion use case: gate a registered version against ``@champion``, record the decision and move the
aliases (:func:`promote`), or set every alias to the outcome of gating a list of versions in order
(:func:`reconcile`, the DVC pipeline's gate stage).

:func:`promote` holds a local store's lock and, on a server, moves ``@champion`` only if it is still the one it
decided against. Each decision is recorded (:mod:`trackeval.tracking.decision_runs`) and the candidate version
gets ``trackeval.gate.*`` tags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trackeval.attest.keys import Signer, configured_signer
from trackeval.config import GateConfig
from trackeval.errors import InputError
from trackeval.gate.decide import Decision, decide
from trackeval.gate.policy import UnitPolicy
from trackeval.io.redact import logger
from trackeval.results import BenchmarkResult
from trackeval.tracking.client import Mlflow, store_lock, tracking_error
from trackeval.tracking.decision_runs import mark_promoted, record_decision
from trackeval.tracking.evidence import version_evaluations
from trackeval.tracking.model_registry import registered_aliases, registered_version_name, resolve_version, set_alias
from trackeval.tracking.tags import PROMOTED_TAG, TAG
from trackeval.tracking.views import describe_version

log = logger(__name__)


def decide_versions(
    ml: Mlflow, name: str, cand_mv: Any, base_mv: Any | None, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> Decision:
    """The gate's decision for registered version ``cand_mv`` against ``base_mv`` (None: floors only), from the
    evaluation runs their ``eval_run`` tags point to, with the evidence digests of those runs' results (the
    sha256 of each results.json as read now); records and moves nothing."""
    return _decide(ml, name, cand_mv, base_mv, cfg, policies)[0]


def _decide(
    ml: Mlflow, name: str, cand_mv: Any, base_mv: Any | None, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[Decision, dict[str, BenchmarkResult], dict[str, BenchmarkResult] | None]:
    """:func:`decide_versions` and the results it was made on (candidate's, baseline's: None without one), each
    read once."""
    cand_results, cand_evidence = version_evaluations(ml, cand_mv)
    base_results, base_evidence = (None, {}) if base_mv is None else version_evaluations(ml, base_mv)
    decision = decide(
        name,
        registered_version_name(cand_mv),
        cand_results,
        None if base_mv is None else registered_version_name(base_mv),
        base_results,
        cfg,
        policies,
    )
    decision = decision.model_copy(update={"candidate_evidence": cand_evidence, "champion_evidence": base_evidence})
    return decision, cand_results, base_results


def judge(
    ml: Mlflow,
    name: str,
    cand_mv: Any,
    champ_mv: Any | None,
    cfg: GateConfig,
    policies: Mapping[str, UnitPolicy],
    signer: Signer | None = None,
) -> tuple[Decision, str]:
    """Gate ``cand_mv`` against ``champ_mv`` (None: floors only), record the decision (signed by ``signer``, if
    any) and tag the candidate (``trackeval.gate.verdict``, ``.reason``, ``.decision_run``) and describe it.
    Moves no alias."""
    decision, cand_results, champ_results = _decide(ml, name, cand_mv, champ_mv, cfg, policies)
    run_id = record_decision(ml, decision, cand_mv, champ_mv, results=(cand_results, champ_results), signer=signer)
    reason = "; ".join(decision.reasons)[:5000] or "all checks passed"
    for tag, value in (("gate.verdict", decision.verdict), ("gate.decision_run", run_id), ("gate.reason", reason)):
        if cand_mv.tags.get(TAG + tag) != value:
            ml.call("set_model_version_tag", ml.client.set_model_version_tag, name, cand_mv.version, TAG + tag, value)
    primary = {unit: p.key for unit, p in policies.items()}
    describe_version(ml, name, cand_mv, primary, (decision, run_id), results=cand_results)
    return decision, run_id


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and str(a) == str(b)


#: how often ``promote`` decides again when ``@champion`` moved while it was deciding (a server store)
PROMOTE_ROUNDS = 5


def promote(
    ml: Mlflow, name: str, candidate: str, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[Decision, str]:
    """Run the gate for ``candidate`` against ``name@champion``; move aliases on pass; record the decision.

    Returns the decision and the id of its decision run. Pass: ``previous`` -> old champion, ``champion`` ->
    candidate (``challenger`` removed if it pointed at the candidate), and the decision run is tagged
    ``trackeval.gate.promoted``. Fail: no alias moves. Either way the candidate gets tags
    ``trackeval.gate.verdict``, ``trackeval.gate.reason`` and ``trackeval.gate.decision_run``.

    Concurrency: a local store (SQLite, file store) is held under its lock
    (:func:`~trackeval.tracking.client.store_lock`, as ``track`` does), so two promotes take turns and the second
    decides against the champion the first left. A server store cannot be locked from here: the decision is
    made against the champion read at the start and the aliases move only if ``@champion`` is still that
    version; if it moved meanwhile, the candidate is gated again against the new champion (every decision is
    recorded), and if a concurrent promote overwrote the aliases just set (it had decided against the same old
    champion), likewise. Raises :class:`TrackingError` after :data:`PROMOTE_ROUNDS` such rounds.
    """
    signer = configured_signer(cfg.signing_key)  # an unreadable key fails before anything is recorded
    with store_lock(ml.uri, ml.cfg.lock_timeout_s):
        return _promote(ml, name, candidate, cfg, policies, signer)


def _promote(
    ml: Mlflow,
    name: str,
    candidate: str,
    cfg: GateConfig,
    policies: Mapping[str, UnitPolicy],
    signer: Signer | None,
) -> tuple[Decision, str]:
    cand_mv = resolve_version(ml, name, candidate)
    for _ in range(PROMOTE_ROUNDS):
        cand_mv = ml.call("get_model_version", ml.client.get_model_version, name, cand_mv.version)  # fresh tags
        aliases = registered_aliases(ml, name)
        champ_mv = None
        if "champion" in aliases:
            champ_mv = ml.call("get_model_version", ml.client.get_model_version, name, aliases["champion"])
        if champ_mv is not None and _same(champ_mv.version, cand_mv.version):
            raise InputError(f"version {cand_mv.version} of {name!r} is already the champion", field="candidate")
        decision, run_id = judge(ml, name, cand_mv, champ_mv, cfg, policies, signer)
        if decision.verdict != "pass":
            return decision, run_id
        now = registered_aliases(ml, name)
        if str(now.get("champion")) != str(aliases.get("champion")):
            if _same(now.get("champion"), cand_mv.version):  # a concurrent promote of this candidate did it
                return decision, run_id
            log.warning("%s@champion moved from %s to %s while deciding; gating version %s again against it",
                        name, aliases.get("champion"), now.get("champion"), cand_mv.version)  # fmt: skip
            continue
        mark_promoted(ml, run_id)
        if champ_mv is not None:
            set_alias(ml, name, "previous", champ_mv, now)
        set_alias(ml, name, "champion", cand_mv, now)
        if _same(now.get("challenger"), cand_mv.version):
            set_alias(ml, name, "challenger", None, now)
        after = registered_aliases(ml, name)
        # in place, or a later promote already decided against this candidate: done
        if _same(after.get("champion"), cand_mv.version) or _same(after.get("previous"), cand_mv.version):
            return decision, run_id
        log.warning("%s@champion was set to %s by a concurrent promote against the same champion; gating version "
                    "%s again against it", name, after.get("champion"), cand_mv.version)  # fmt: skip
        ml.call("set_tag", ml.client.set_tag, run_id, PROMOTED_TAG, "overwritten")
    raise tracking_error(
        f"{name}@champion kept moving while version {cand_mv.version} was being gated ({PROMOTE_ROUNDS} decisions, "
        "all recorded); run `trackeval promote` again"
    )


def dry_run_decision(
    ml: Mlflow, name: str, candidate: str, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[Decision | None, str, str]:
    """The gate decision :func:`promote` would take, without recording it,
    tagging the candidate or moving an alias.

    The baseline is ``@champion``; when the candidate is the champion, ``@previous`` (the decision that made it
    champion) if it exists, else there is nothing to gate (decision ``None``). Returns the decision, the
    baseline's alias and the candidate's label.
    """
    cand_mv = resolve_version(ml, name, candidate)
    aliases = registered_aliases(ml, name)
    baseline = "champion"
    if str(aliases.get("champion")) == str(cand_mv.version):
        if "previous" not in aliases:
            return None, baseline, registered_version_name(cand_mv)
        baseline = "previous"
    base_mv = None
    if baseline in aliases:
        base_mv = ml.call("get_model_version", ml.client.get_model_version, name, aliases[baseline])
    return decide_versions(ml, name, cand_mv, base_mv, cfg, policies), baseline, registered_version_name(cand_mv)


def reconcile(
    ml: Mlflow, name: str, versions: list[str], cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[list[tuple[str, Decision, str]], str | None]:
    """Make the registry follow the current results and gate config of ``versions`` (oldest first).

    The first version is gated against the floors; each later one against the champion so far. The aliases are
    then SET to the outcome (``champion``; ``previous`` = the champion it replaced; ``challenger`` = the last
    version when it is not the champion), whatever they said before: re-running after a revert of results or
    params puts the registry back where the workspace says it is. Decisions are recorded once each (a repeated
    decision reuses its run); every passing one made its version champion so far and is tagged
    ``trackeval.gate.promoted``. A local store is held under its lock, as by :func:`promote`. Returns
    ``[(version, decision, decision run)]`` and the champion's version.
    """
    signer = configured_signer(cfg.signing_key)
    with store_lock(ml.uri, ml.cfg.lock_timeout_s):
        champion: Any | None = None
        previous: Any | None = None
        out = []
        last = None
        for version in versions:
            last = resolve_version(ml, name, version)
            decision, run_id = judge(ml, name, last, champion, cfg, policies, signer)
            out.append((version, decision, run_id))
            if decision.verdict == "pass":
                previous, champion = champion, last
                mark_promoted(ml, run_id)
        aliases = registered_aliases(ml, name)
        challenger = (
            last if last is not None and not (champion is not None and _same(champion.version, last.version)) else None
        )
        for alias, mv in (("champion", champion), ("previous", previous), ("challenger", challenger)):
            set_alias(ml, name, alias, mv, aliases)
    return out, None if champion is None else registered_version_name(champion)


def passing_aliases(aliases: Mapping[str, Any], candidate: str) -> dict[str, str]:
    """The aliases a passing :func:`promote` of registry version ``candidate`` leaves, from ``aliases`` (the
    registered model's now): ``previous`` -> the old champion, ``champion`` -> the candidate, ``challenger``
    removed if it pointed at the candidate (what ``promote --dry-run`` says would move)."""
    after = {k: str(v) for k, v in aliases.items()}
    if "champion" in after:
        after["previous"] = after["champion"]
    after["champion"] = str(candidate)
    if after.get("challenger") == str(candidate):
        del after["challenger"]
    return after


def alias_moves(ml: Mlflow, name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """One line per alias of ``name`` that differs between ``before`` and ``after`` (``{alias: registry
    version}``), in alias order: ``@champion: v1 -> v2``, ``@previous: -> v1`` (set now), ``@challenger: v2 ->
    (removed)``; versions by their trackeval name (:func:`registered_version_name`)."""
    names: dict[str, str] = {}

    def label(version: Any) -> str:
        if version is None:
            return ""
        if str(version) not in names:
            mv = ml.call("get_model_version", ml.client.get_model_version, name, str(version))
            names[str(version)] = registered_version_name(mv)
        return names[str(version)]

    lines = []
    for alias in sorted(set(before) | set(after)):
        old, new = before.get(alias), after.get(alias)
        if str(old) != str(new):
            was = f"{label(old)} " if old is not None else ""
            lines.append(f"@{alias}: {was}-> {label(new) if new is not None else '(removed)'}")
    return lines
