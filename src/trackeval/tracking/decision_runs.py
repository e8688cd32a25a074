"""Gate decision runs (kind ``gate_decision``): written once per decision, read back and re-derived.

Every gate decision is recorded as its own run: params (model, versions, the evaluation runs and evidence
digests on both sides, the gate config), metrics (deltas and CIs), the decision as JSON, markdown and HTML
artifacts, and the verdict as a tag. A pass that moved ``@champion`` is tagged ``trackeval.gate.promoted``
(:func:`mark_promoted`). MLflow keeps no alias history, so these runs are it.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trackeval.attest.keys import Signer
from trackeval.errors import InputError
from trackeval.gate.decide import Decision, decide
from trackeval.gate.policy import Policy, PolicyRecord
from trackeval.registry import metric_info
from trackeval.report.comparison import decision_markdown
from trackeval.report.html import decision_report
from trackeval.results import sha256_text
from trackeval.tracking.attestations import (
    DECISION_JSON,
    UNSIGNED,
    decision_bytes,
    pairs_param,
    read_decision_json,
    sign_decision,
)
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.evidence import run_evidence
from trackeval.tracking.lineage import flatten
from trackeval.tracking.model_registry import eval_runs
from trackeval.tracking.tags import KIND_GATE, PROMOTED_TAG, SIGNATURE_TAG, TAG
from trackeval.tracking.views import SidesResults, describe_decision, log_comparison_tables


def decision_key(decision: Decision, cand_mv: Any, champ_mv: Any | None) -> str:
    """Identity of a gate decision: both versions, the evaluation runs on both sides and their evidence digests
    (an overwritten artifact is other evidence), and the gate config."""
    blob = {
        "model": decision.model,
        "candidate": [str(cand_mv.version), eval_runs(cand_mv)],
        "champion": None if champ_mv is None else [str(champ_mv.version), eval_runs(champ_mv)],
        "evidence": [decision.candidate_evidence, decision.champion_evidence],
        "gate": decision.gate_config.model_dump(mode="json"),
    }
    return sha256_text(json.dumps(blob, sort_keys=True))


def record_decision(
    ml: Mlflow,
    decision: Decision,
    cand_mv: Any,
    champ_mv: Any | None,
    *,
    results: SidesResults,
    signer: Signer | None = None,
) -> str:
    """Write the decision run (params, delta metrics, artifacts, verdict tag); returns its run id. ``results``:
    the candidate's and the champion's results the decision was made on (for the overlay figures). ``signer``:
    sign it (``attestation.dsse.json``, :func:`~trackeval.tracking.attestations.sign_decision`); None: it is
    tagged ``trackeval.gate.signature=unsigned``.

    Idempotent: the same decision (same versions, evaluation runs on both sides, gate config) is recorded once;
    asking again returns the existing run, signed now by ``signer`` if it was not signed by that key.
    """
    from mlflow.entities import Metric, Param

    key = decision_key(decision, cand_mv, champ_mv)
    found = ml.search(
        f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}decision_key` = {quote(key)} "
        "and attributes.status = 'FINISHED'"
    )
    if found:
        run_id = str(found[0].info.run_id)
        if signer is not None and found[0].data.tags.get(SIGNATURE_TAG) != signer.keyid:
            sign_decision(ml, run_id, decision, cand_mv, champ_mv, signer)
        return run_id
    name = f"gate {decision.model} v{cand_mv.version} vs {'none' if champ_mv is None else 'v' + str(champ_mv.version)}"
    with ml.run(name, _decision_tags(decision, key, cand_mv, champ_mv)) as run_id:
        params = _decision_params(decision, cand_mv, champ_mv)
        metrics = _decision_metrics(decision)
        ml.call(
            "log_batch",
            ml.client.log_batch,
            run_id,
            metrics=[Metric(k, v, 0, 0) for k, v in metrics.items() if _valid_key(k)],
            params=[Param(k, v[:6000]) for k, v in params.items()],
        )
        _log_decision_artifacts(ml, run_id, decision)
        log_comparison_tables(ml, run_id, decision, cand_mv, results)
        describe_decision(ml, run_id, decision, cand_mv, champ_mv)  # the run's description: verdict, checks, figures
        if signer is None:
            ml.call("set_tag", ml.client.set_tag, run_id, SIGNATURE_TAG, UNSIGNED)
        else:
            sign_decision(ml, run_id, decision, cand_mv, champ_mv, signer)
    return run_id


def _decision_tags(decision: Decision, key: str, cand_mv: Any, champ_mv: Any | None) -> dict[str, str]:
    """The tags of a decision run: its kind, model, verdict, both versions (champion ``""`` when there is none)
    and its :func:`decision_key` ``key``."""
    return {
        TAG + "kind": KIND_GATE,
        TAG + "model_name": decision.model,
        TAG + "gate.verdict": decision.verdict,
        TAG + "gate.candidate": str(cand_mv.version),
        TAG + "gate.champion": "" if champ_mv is None else str(champ_mv.version),
        TAG + "decision_key": key,
    }


def _decision_params(decision: Decision, cand_mv: Any, champ_mv: Any | None) -> dict[str, str]:
    """The params of a decision run: model, both versions, the evaluation runs (``unit=run_id,...``) and evidence
    digests on both sides, and the gate config flattened under ``gate.``; unbounded (the caller cuts values)."""
    return {
        "model": decision.model,
        "candidate_version": str(cand_mv.version),
        "candidate_model_version": decision.candidate,
        "champion_version": "" if champ_mv is None else str(champ_mv.version),
        "candidate_runs": ",".join(f"{u}={r}" for u, r in eval_runs(cand_mv).items()),
        "champion_runs": ",".join(f"{u}={r}" for u, r in eval_runs(champ_mv).items()),
        "candidate_evidence": _evidence_param(decision.candidate_evidence),
        "champion_evidence": _evidence_param(decision.champion_evidence),
        **{f"gate.{k}": v for k, v in flatten(decision.gate_config.model_dump(mode="json")).items()},
    }


def _decision_metrics(decision: Decision) -> dict[str, float]:
    """The metrics of a decision run: ``gate/pass`` (1.0 or 0.0), then per compared row ``delta/<key>`` and its
    ``/ci95_low`` and ``/ci95_high`` bounds, each only where it is known (not None); keys are not yet checked
    against what MLflow accepts."""
    metrics = {"gate/pass": 1.0 if decision.verdict == "pass" else 0.0}
    for comp in decision.comparisons:
        for row in comp.rows:
            for suffix, x in (("", row.delta), ("/ci95_low", row.ci95_low), ("/ci95_high", row.ci95_high)):
                if x is not None:
                    metrics[f"delta/{row.key}{suffix}"] = x
    return metrics


def _log_decision_artifacts(ml: Mlflow, run_id: str, decision: Decision) -> None:
    """Log ``decision.json``, ``decision.md`` and ``decision.html`` (the decision as data, markdown and an HTML
    report) as the artifacts of run ``run_id``."""
    with tempfile.TemporaryDirectory(prefix="trackeval-gate-") as tmp:
        Path(tmp, DECISION_JSON).write_bytes(decision_bytes(decision))
        Path(tmp, "decision.md").write_text(decision_markdown(decision), encoding="utf-8")
        Path(tmp, "decision.html").write_text(decision_report(decision), encoding="utf-8")
        ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp)


def _evidence_param(evidence: Mapping[str, str]) -> str:
    """``"umd=<sha256>,xray/cls=<sha256>"`` (a decision run's ``candidate_evidence`` / ``champion_evidence``)."""
    return ",".join(f"{u}={d}" for u, d in sorted(evidence.items()))


def _valid_key(key: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_\-./ ]{1,250}", key))


def mark_promoted(ml: Mlflow, decision_run: str) -> None:
    """Tag a passing decision run as the one that made its candidate ``@champion`` (``trackeval.gate.promoted``):
    ``verify`` and the withdrawal of aliases after ``track --replace`` read the champions' history from these."""
    ml.call("set_tag", ml.client.set_tag, decision_run, PROMOTED_TAG, "true")


def read_decision(ml: Mlflow, decision_run: str) -> tuple[Any, Decision]:
    """The run and the recorded decision (its ``decision.json``) of decision run ``decision_run``.

    Raises :class:`InputError` when ``decision_run`` is not a trackeval gate decision run, or its decision.json is
    missing or not a decision record.
    """
    run = ml.call("get_run", ml.client.get_run, decision_run)
    if run.data.tags.get(TAG + "kind") != KIND_GATE:
        raise InputError(f"run {decision_run} is not a trackeval gate decision run", field="--explain")
    with tempfile.TemporaryDirectory(prefix="trackeval-explain-") as tmp:
        _, decision, problem = read_decision_json(ml, decision_run, tmp)
    if decision is None:
        raise InputError(f"run {decision_run}: {problem}", field="--explain")
    return run, decision


def installed_facts(recorded: Mapping[str, PolicyRecord]) -> dict[str, Policy]:
    """The policy each record was decided under (:meth:`~trackeval.gate.policy.PolicyRecord.policy`): the installed
    unit's declaration of the recorded metric (:func:`~trackeval.registry.metric_info`) with the recorded facts
    applied, which supplies what a record cannot hold, its corpus function (code), and the facts an older record
    lacks. A unit not installed, or a metric it does not declare, keeps the record as it is."""
    return {unit: policy.policy(metric_info(unit, policy.metric)) for unit, policy in recorded.items()}


def explain(ml: Mlflow, decision_run: str) -> tuple[Decision, Decision]:
    """Re-derive a recorded gate decision from the evaluation runs it names on both sides and the gate config
    and unit policies it recorded (:func:`installed_facts` supplies what a record cannot hold, e.g. ``xray/loc``'s
    mAP function). Returns ``(recorded, recomputed)``; equal when the evidence did not drift. A decision recorded
    before its policies held every fact is returned with the facts it was explained with.

    Raises :class:`InputError` when ``decision_run`` is not a trackeval gate decision run.
    """
    run, recorded = read_decision(ml, decision_run)
    policies = installed_facts(recorded.gate_config.policies)
    gate = recorded.gate_config.model_copy(update={"policies": {u: p.record() for u, p in policies.items()}})
    recorded = recorded.model_copy(update={"gate_config": gate})
    params = run.data.params
    candidate = {u: run_evidence(ml, r) for u, r in pairs_param(params.get("candidate_runs", "")).items()}
    champion_runs = pairs_param(params.get("champion_runs", ""))
    champion = {u: run_evidence(ml, r) for u, r in champion_runs.items()} if recorded.champion is not None else None
    recomputed = decide(
        recorded.model,
        recorded.candidate,
        {r.unit: r for r, _ in candidate.values()},
        recorded.champion,
        None if champion is None else {r.unit: r for r, _ in champion.values()},
        gate,
        policies,
    )
    if recorded.candidate_evidence:  # recorded before evidence digests existed: nothing to compare them with
        recomputed = recomputed.model_copy(
            update={
                "candidate_evidence": {u: d for u, (_, d) in sorted(candidate.items())},
                "champion_evidence": {u: d for u, (_, d) in sorted((champion or {}).items())},
            }
        )
    return recorded, recomputed
