"""MLflow model registry: model versions linked to their evaluation runs, aliases and the promotion gate.

A trackeval model version ``NAME`` / ``VERSION`` (as recorded in results.json) is a registered model version
of ``NAME`` carrying the tag ``trackeval.model_version = VERSION`` and created from the evaluation's parent run
(``run_id``). Its tags ``trackeval.eval_run.<unit>`` point to the latest evaluation run per benchmark unit (``umd``,
``xray/cls``...).
Aliases: ``champion`` (the promoted version), ``previous`` (the champion before it, one-call rollback),
``challenger`` (the newest tracked version that is not champion). Stages are never used.

Every gate decision is recorded as its own run (kind ``gate_decision``): params (model, versions, gate
config), metrics (deltas and CIs), the decision as JSON, markdown and HTML artifacts, and the verdict as a
tag; the candidate version gets ``trackeval.gate.*`` tags. MLflow keeps no alias history, so these runs are it.

Evidence: a decision records the digests (sha256 of results.json) of the evaluation runs on both sides, and a
pass that moved ``@champion`` is tagged ``trackeval.gate.promoted``. :func:`verify_aliases` checks that
``@champion`` / ``@previous`` rest on such a decision whose evidence still holds; :func:`withdraw_replaced` moves
the aliases that rested on a version's old evidence after ``track --replace``. :func:`promote` holds a local
store's lock and, on a server, moves ``@champion`` only if it is still the one it decided against.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackeval.config import GateConfig
from trackeval.errors import InputError
from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import Decision, compare_unit, decide
from trackeval.gate.policy import UnitPolicy
from trackeval.io.hashing import sha256_bytes, sha256_files
from trackeval.io.redact import logger
from trackeval.io.results_folder import RESULTS_JSON, read_results, read_results_files
from trackeval.results import BenchmarkResult, sha256_text
from trackeval.tracking.client import Mlflow, TrackingError, check_model_ref, error_code, quote, store_lock
from trackeval.tracking.lineage import flatten
from trackeval.tracking.tags import EVAL_RUN_TAG, KIND_GATE, PROMOTED_TAG, TAG, VERSION_TAG

log = logger(__name__)

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: ``NAME/VERSION`` or ``NAME@ALIAS``: the name ends at the first ``/`` or ``@`` (a model name holds neither, see
#: :func:`~trackeval.tracking.client.check_model_ref`), so a version may hold both (``seg/v2/b``: version ``v2/b``)
_MODEL_REF = re.compile(r"^([^/@]*)([/@])(.*)$", re.DOTALL)


def _registered_model(ml: Mlflow, name: str) -> Any | None:
    try:
        return ml.call("get_registered_model", ml.client.get_registered_model, name)
    except TrackingError as exc:
        if error_code(exc) == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise


def _tagged_versions(ml: Mlflow, name: str, version: str) -> list[Any]:
    """Registered versions of ``name`` tagged with trackeval model version ``version``, lowest number first."""
    flt = f"name = {quote(name)} and tags.`{VERSION_TAG}` = {quote(version)}"
    found = ml.call("search_model_versions", ml.client.search_model_versions, flt)
    return sorted(found, key=lambda mv: int(mv.version))


def find_version(ml: Mlflow, name: str, version: str) -> Any | None:
    """The registered version of ``name`` tagged with trackeval model version ``version`` (None if absent); the
    lowest-numbered one if two processes registered it at the same time (see :func:`create_version`)."""
    if _registered_model(ml, name) is None:
        return None
    versions = _tagged_versions(ml, name, version)
    return versions[0] if versions else None


def create_version(ml: Mlflow, name: str, version: str, source: str, run_id: str, model_id: str | None = None) -> Any:
    """Register ``source`` (``models:/<model_id>`` of a LoggedModel, or an artifact URI of ``run_id``) as a new
    version of ``name`` (created if missing), tagged with trackeval model version ``version``.

    Create, then deduplicate: when another process registered the same trackeval version meanwhile (a server
    store), the lowest-numbered version is kept and returned, and the one created here is deleted. Registry
    numbers only grow, so every process agrees on which one that is.
    """
    if _registered_model(ml, name) is None:
        try:
            ml.call("create_registered_model", ml.client.create_registered_model, name)
        except TrackingError as exc:  # created by another process since
            if error_code(exc) != "RESOURCE_ALREADY_EXISTS":
                raise
    mv = ml.call(
        "create_model_version",
        ml.client.create_model_version,
        name,
        source,
        run_id=run_id,
        tags={VERSION_TAG: version},
        await_creation_for=0,
        model_id=model_id,
    )
    winner = _tagged_versions(ml, name, version)[0]
    if str(winner.version) != str(mv.version):
        log.warning("%s/%s was registered concurrently as version %s; dropping version %s", name, version,
                    winner.version, mv.version)  # fmt: skip
        ml.call("delete_model_version", ml.client.delete_model_version, name, mv.version)
    return winner


def _logged_model_filter(name: str, version: str) -> str:
    return f"tags.`{TAG}model_name` = {quote(name)} AND tags.`{TAG}model_version` = {quote(version)}"


def _logged_models(ml: Mlflow, name: str, version: str) -> list[Any]:
    """LoggedModels of trackeval model version ``name``/``version``, oldest first."""
    found = ml.call(
        "search_logged_models",
        ml.client.search_logged_models,
        [ml.experiment_id()],
        filter_string=_logged_model_filter(name, version),
    )
    return sorted(found, key=lambda m: (m.creation_timestamp, m.model_id))


def find_logged_model(ml: Mlflow, name: str, version: str) -> Any | None:
    """The MLflow 3 LoggedModel of trackeval model version ``name``/``version`` in the experiment (or None); the
    oldest one if two processes created it at the same time."""
    found = _logged_models(ml, name, version)
    return found[0] if found else None


#: characters MLflow refuses in a LoggedModel's display name (its identity is in its tags)
_LOGGED_MODEL_NAME_FORBIDDEN = re.compile(r"[/:.%\"']")


def logged_model(ml: Mlflow, name: str, version: str, source_run_id: str, artifacts: Path | None = None) -> str:
    """The ``model_id`` of version ``name``/``version``'s LoggedModel, created once.

    With ``artifacts`` (a folder: the trained model's files, as the pipeline's train stage writes them) they
    become the model's artifacts; without, it is an external model (weights kept elsewhere) that records the
    name, version and source run. Either way an ``MLmodel`` file is written so the model can be registered as
    ``models:/<model_id>``. Evaluation metrics are linked to it with their dataset (see ``tracking.track``), so
    the experiment's Models tab and ``search_logged_models`` rank versions by benchmark.

    Re-runnable: a LoggedModel left PENDING by an interrupted process gets its files again and is finalized
    (an external one always; one with files when ``artifacts`` is given). Create, then deduplicate: of two
    created at the same time (a server store) the older is kept and the other deleted.
    """
    existing = find_logged_model(ml, name, version)
    if existing is not None:
        if str(existing.status) != "READY" and (artifacts is not None or _is_external(existing)):
            log.warning("LoggedModel %s of %s/%s was left %s by an interrupted run; finishing it",
                        existing.model_id, name, version, existing.status)  # fmt: skip
            _finish_logged_model(ml, existing, artifacts)
        return str(existing.model_id)
    tags = {TAG + "model_name": name, TAG + "model_version": version}
    if artifacts is None:
        tags["mlflow.model.isExternal"] = "true"
    model = ml.call(
        "create_logged_model",
        ml.client.create_logged_model,
        ml.experiment_id(),
        name=_LOGGED_MODEL_NAME_FORBIDDEN.sub("_", f"{name}-{version}"),
        source_run_id=source_run_id,
        tags=tags,
        model_type="trackeval",
    )
    _finish_logged_model(ml, model, artifacts)
    winner = find_logged_model(ml, name, version)
    if winner is not None and winner.model_id != model.model_id:
        ml.call("delete_logged_model", ml.client.delete_logged_model, model.model_id)
        return str(winner.model_id)
    return str(model.model_id)


def _is_external(model: Any) -> bool:
    return model.tags.get("mlflow.model.isExternal") == "true"


def _finish_logged_model(ml: Mlflow, model: Any, artifacts: Path | None) -> None:
    """Upload ``artifacts`` (if any) and the ``MLmodel`` file of ``model``, then mark it READY (re-runnable)."""
    from mlflow.entities import LoggedModelStatus
    from mlflow.models.utils import get_external_mlflow_model_spec

    with tempfile.TemporaryDirectory(prefix="trackeval-model-") as tmp:
        if artifacts is not None:
            shutil.copytree(artifacts, tmp, dirs_exist_ok=True)
        get_external_mlflow_model_spec(model).save(str(Path(tmp) / "MLmodel"))
        ml.call("log_model_artifacts", ml.client.log_model_artifacts, model.model_id, tmp)
    ml.call("finalize_logged_model", ml.client.finalize_logged_model, model.model_id, LoggedModelStatus.READY)


def link_version(
    ml: Mlflow,
    name: str,
    version: str,
    parent_id: str,
    children: dict[str, str],
    *,
    model_id: str,
    new: bool = True,
) -> tuple[Any, list[str]]:
    """Register (once) the model version of an evaluation and point its ``eval_run`` tags at ``children``.

    Every step checks first and is re-runnable, so a call after an interrupted one does only what is missing.
    The registered version's source is the LoggedModel ``models:/<model_id>`` (its run: ``parent_id``).
    ``new``: something was logged (or completed) now, so the version becomes ``challenger`` (unless it is the
    champion); a version registered now is new too. Returns the version and the steps done (``registered
    version 3``, ``eval_run.umd tag``, ``challenger alias``; [] when nothing was missing).
    """
    done = []
    mv = find_version(ml, name, version)
    if mv is None:
        mv = create_version(ml, name, version, f"models:/{model_id}", parent_id, model_id)
        done.append(f"registered version {mv.version}")
        new = True
    for unit, run_id in children.items():
        previous = mv.tags.get(EVAL_RUN_TAG + unit)
        if previous != run_id:
            set_tag = ml.client.set_model_version_tag
            ml.call("set_model_version_tag", set_tag, name, mv.version, EVAL_RUN_TAG + unit, run_id)
            done.append(f"{EVAL_RUN_TAG}{unit} tag")
            if previous:  # the previous evaluation stays; the new one says which it replaced
                ml.call("set_tag", ml.client.set_tag, run_id, TAG + "replaces", previous)
    if new:
        aliases = {k: str(v) for k, v in registered_aliases(ml, name).items()}
        if str(mv.version) not in (aliases.get("champion"), aliases.get("challenger")):
            ml.call("set_registered_model_alias", ml.client.set_registered_model_alias, name, "challenger", mv.version)
            done.append("challenger alias")
    return mv, done


def resolve_version(ml: Mlflow, name: str, ref: str) -> Any:
    """A registered version from ``@alias``, a trackeval model version, or a registry version number.

    Raises :class:`InputError`: ``name`` or the version cannot be a model name / version
    (:func:`~trackeval.tracking.client.check_model_ref`), or no such version or alias is registered.
    """
    from mlflow.exceptions import MlflowException

    check_model_ref(name, "name")
    if ref.startswith("@"):
        try:
            return ml.call("get_model_version_by_alias", ml.client.get_model_version_by_alias, name, ref[1:])
        except TrackingError as exc:
            if isinstance(exc.__cause__, MlflowException):
                raise InputError(f"model {name!r} has no alias {ref[1:]!r}", field="alias") from exc
            raise
    mv = find_version(ml, name, check_model_ref(ref, "version"))
    if mv is None and ref.isdigit() and _registered_model(ml, name) is not None:
        try:
            mv = ml.call("get_model_version", ml.client.get_model_version, name, ref)
        except TrackingError as exc:
            if not isinstance(exc.__cause__, MlflowException):
                raise
    if mv is None:
        raise InputError(f"model {name!r} has no tracked version {ref!r}; run `trackeval track` first", field="version")
    return mv


def run_evidence(ml: Mlflow, run_id: str) -> tuple[BenchmarkResult, str]:
    """The results.json artifact of an evaluation run, validated, and its evidence digest: the sha256 of the
    artifact's bytes (what ``track`` uploaded and tagged ``trackeval.results_digest``, unless it was overwritten)."""
    with tempfile.TemporaryDirectory(prefix="trackeval-results-") as tmp:
        path = ml.call("download_artifacts", ml.client.download_artifacts, run_id, RESULTS_JSON, tmp)
        verified = read_results_files(Path(path))
        return verified.result, sha256_bytes(verified.files[RESULTS_JSON])


def run_results(ml: Mlflow, run_id: str) -> BenchmarkResult:
    """The results.json artifact of an evaluation run, validated."""
    return run_evidence(ml, run_id)[0]


def run_digest(ml: Mlflow, run_id: str) -> str:
    """The evidence digest of an evaluation run: the sha256 of its results.json artifact as stored now."""
    with tempfile.TemporaryDirectory(prefix="trackeval-results-") as tmp:
        path = ml.call("download_artifacts", ml.client.download_artifacts, run_id, RESULTS_JSON, tmp)
        return sha256_files(Path(path))


def _version_evaluations(ml: Mlflow, mv: Any) -> tuple[dict[str, BenchmarkResult], dict[str, str]]:
    """``({unit: results}, {tag unit: evidence digest})`` of a registered version's evaluation runs."""
    results: dict[str, BenchmarkResult] = {}
    evidence: dict[str, str] = {}
    for tag_unit, run_id in sorted(_eval_runs(mv).items(), key=lambda kv: kv[0].count("/")):  # legacy tags first
        result, digest = run_evidence(ml, run_id)
        results[result.unit] = result
        evidence[tag_unit] = digest
    return dict(sorted(results.items())), dict(sorted(evidence.items()))


def version_results(ml: Mlflow, mv: Any) -> dict[str, BenchmarkResult]:
    """``{unit: results}`` of a registered version's latest evaluation runs (its ``eval_run.<unit>`` tags).

    Keyed by each result's own unit, so a tag written before units existed (``eval_run.xray``) still lands on
    ``xray/<task>``; a unit-specific tag wins over such a legacy one.
    """
    return _version_evaluations(ml, mv)[0]


def resolve_ref(ml: Mlflow, ref: str) -> tuple[str, dict[str, BenchmarkResult]]:
    """``compare`` operands: a results folder, a run id (an evaluation run or its parent), ``name/version``
    or ``name@alias``. Returns a label and ``{unit: results}``."""
    path = Path(ref)
    if (path / RESULTS_JSON).is_file() or (path.suffix == ".json" and path.is_file()):
        result = read_results(path)
        return ref, {result.unit: result}
    if _RUN_ID.match(ref):
        children = ml.search(f"tags.`mlflow.parentRunId` = {quote(ref)} and attributes.status = 'FINISHED'")
        if children:
            results = [run_results(ml, r.info.run_id) for r in reversed(children)]
            return ref, {r.unit: r for r in results}
        result = run_results(ml, ref)
        return ref, {result.unit: result}
    found = _MODEL_REF.match(ref)
    if found is None:
        raise InputError(
            f"cannot resolve {ref!r}: expected a results folder, a run id, NAME/VERSION or NAME@ALIAS", field="ref"
        )
    name, sep, version = found.groups()
    version = "@" + version if sep == "@" else check_model_ref(version, "version")  # NAME/@x is no alias
    return ref, version_results(ml, resolve_version(ml, name, version))


def compare_refs(
    ml: Mlflow, a: str, b: str, g: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[list[BenchmarkComparison], list[tuple[BenchmarkResult, BenchmarkResult]]]:
    """Paired comparisons (``a - b``) of every unit both sides were evaluated on (each on its primary metric),
    and the ``(a, b)`` results of those units (for figures that overlay both versions)."""
    label_a, res_a = resolve_ref(ml, a)
    label_b, res_b = resolve_ref(ml, b)
    for ref, results in ((a, res_a), (b, res_b)):
        if not results:
            raise InputError(f"{ref} has no evaluation to compare (no trackeval.eval_run.<unit> tag)", field="ref")
    common = sorted(set(res_a) & set(res_b))
    if not common:
        raise InputError(f"{a} and {b} share no benchmark unit ({sorted(res_a)} vs {sorted(res_b)})", field="unit")
    out = []
    for name in common:
        policy = policies.get(name)
        if policy is None:
            raise InputError(f"{name} is not a registered benchmark unit (is its plug-in installed?)", field="unit")
        out.append(compare_unit(res_a[name], res_b[name], policy, g, (label_a, label_b)))
    return out, [(res_a[name], res_b[name]) for name in common]


def _eval_runs(mv: Any | None) -> dict[str, str]:
    """``{unit: evaluation run id}`` a registered version points to (its ``eval_run.<unit>`` tags)."""
    if mv is None:
        return {}
    return {k[len(EVAL_RUN_TAG) :]: v for k, v in sorted(mv.tags.items()) if k.startswith(EVAL_RUN_TAG)}


def decision_key(decision: Decision, cand_mv: Any, champ_mv: Any | None) -> str:
    """Identity of a gate decision: both versions, the evaluation runs on both sides and their evidence digests
    (an overwritten artifact is other evidence), and the gate config."""
    blob = {
        "model": decision.model,
        "candidate": [str(cand_mv.version), _eval_runs(cand_mv)],
        "champion": None if champ_mv is None else [str(champ_mv.version), _eval_runs(champ_mv)],
        "evidence": [decision.candidate_evidence, decision.champion_evidence],
        "gate": decision.gate_config,
    }
    return sha256_text(json.dumps(blob, sort_keys=True))


def _record(ml: Mlflow, decision: Decision, cand_mv: Any, champ_mv: Any | None) -> str:
    """Write the decision run (params, delta metrics, artifacts, verdict tag); returns its run id.

    Idempotent: the same decision (same versions, evaluation runs on both sides, gate config) is recorded once;
    asking again returns the existing run.
    """
    from mlflow.entities import Metric, Param

    from trackeval.report.comparison import decision_markdown
    from trackeval.report.html import decision_report

    key = decision_key(decision, cand_mv, champ_mv)
    found = ml.search(
        f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}decision_key` = {quote(key)} "
        "and attributes.status = 'FINISHED'"
    )
    if found:
        return str(found[0].info.run_id)
    tags = {
        TAG + "kind": KIND_GATE,
        TAG + "model_name": decision.model,
        TAG + "gate.verdict": decision.verdict,
        TAG + "gate.candidate": str(cand_mv.version),
        TAG + "gate.champion": "" if champ_mv is None else str(champ_mv.version),
        TAG + "decision_key": key,
    }
    name = f"gate {decision.model} v{cand_mv.version} vs {'none' if champ_mv is None else 'v' + str(champ_mv.version)}"
    with ml.run(name, tags) as run_id:
        params = {
            "model": decision.model,
            "candidate_version": str(cand_mv.version),
            "candidate_model_version": decision.candidate,
            "champion_version": "" if champ_mv is None else str(champ_mv.version),
            "candidate_runs": ",".join(f"{u}={r}" for u, r in _eval_runs(cand_mv).items()),
            "champion_runs": ",".join(f"{u}={r}" for u, r in _eval_runs(champ_mv).items()),
            "candidate_evidence": _evidence_param(decision.candidate_evidence),
            "champion_evidence": _evidence_param(decision.champion_evidence),
            **{f"gate.{k}": v for k, v in flatten(decision.gate_config).items()},
        }
        metrics = {"gate/pass": 1.0 if decision.verdict == "pass" else 0.0}
        for comp in decision.comparisons:
            for row in comp.rows:
                for suffix, x in (("", row.delta), ("/ci95_low", row.ci95_low), ("/ci95_high", row.ci95_high)):
                    if x is not None:
                        metrics[f"delta/{row.key}{suffix}"] = x
        ml.call(
            "log_batch",
            ml.client.log_batch,
            run_id,
            metrics=[Metric(k, v, 0, 0) for k, v in metrics.items() if _valid_key(k)],
            params=[Param(k, v[:6000]) for k, v in params.items()],
        )
        with tempfile.TemporaryDirectory(prefix="trackeval-gate-") as tmp:
            Path(tmp, "decision.json").write_text(decision.model_dump_json(indent=1), encoding="utf-8")
            Path(tmp, "decision.md").write_text(decision_markdown(decision), encoding="utf-8")
            Path(tmp, "decision.html").write_text(decision_report(decision), encoding="utf-8")
            ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp)
    return run_id


def _evidence_param(evidence: Mapping[str, str]) -> str:
    """``"umd=<sha256>,xray/cls=<sha256>"`` (a decision run's ``candidate_evidence`` / ``champion_evidence``)."""
    return ",".join(f"{u}={d}" for u, d in sorted(evidence.items()))


def _valid_key(key: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_\-./ ]{1,250}", key))


def version_label(mv: Any) -> str:
    """trackeval's version of a registered version (``v2``), or its registry number when untagged."""
    return str(mv.tags.get(VERSION_TAG, str(mv.version)))


def decide_versions(
    ml: Mlflow, name: str, cand_mv: Any, base_mv: Any | None, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> Decision:
    """The gate's decision for registered version ``cand_mv`` against ``base_mv`` (None: floors only), from the
    evaluation runs their ``eval_run`` tags point to, with the evidence digests of those runs' results (the
    sha256 of each results.json as read now); records and moves nothing."""
    cand_results, cand_evidence = _version_evaluations(ml, cand_mv)
    base_results, base_evidence = (None, {}) if base_mv is None else _version_evaluations(ml, base_mv)
    decision = decide(
        name,
        version_label(cand_mv),
        cand_results,
        None if base_mv is None else version_label(base_mv),
        base_results,
        cfg,
        policies,
    )
    return decision.model_copy(update={"candidate_evidence": cand_evidence, "champion_evidence": base_evidence})


def judge(
    ml: Mlflow, name: str, cand_mv: Any, champ_mv: Any | None, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
) -> tuple[Decision, str]:
    """Gate ``cand_mv`` against ``champ_mv`` (None: floors only), record the decision and tag the candidate
    (``trackeval.gate.verdict``, ``.reason``, ``.decision_run``). Moves no alias."""
    decision = decide_versions(ml, name, cand_mv, champ_mv, cfg, policies)
    run_id = _record(ml, decision, cand_mv, champ_mv)
    reason = "; ".join(decision.reasons)[:5000] or "all checks passed"
    for tag, value in (("gate.verdict", decision.verdict), ("gate.decision_run", run_id), ("gate.reason", reason)):
        if cand_mv.tags.get(TAG + tag) != value:
            ml.call("set_model_version_tag", ml.client.set_model_version_tag, name, cand_mv.version, TAG + tag, value)
    return decision, run_id


def registered_aliases(ml: Mlflow, name: str) -> dict[str, Any]:
    """The registered model's aliases now (``{alias: registry version}``)."""
    return dict(ml.call("get_registered_model", ml.client.get_registered_model, name).aliases)


def _set_alias(ml: Mlflow, name: str, alias: str, mv: Any | None, aliases: Mapping[str, Any]) -> None:
    """Point ``alias`` at ``mv`` (None: remove it); nothing is written when ``aliases`` (the registered model's
    aliases as read before) already say so."""
    _set_alias_to(ml, name, alias, None if mv is None else str(mv.version), aliases)


def _set_alias_to(ml: Mlflow, name: str, alias: str, version: str | None, aliases: Mapping[str, Any]) -> None:
    """:func:`_set_alias` by registry version number (None: remove the alias)."""
    from mlflow.exceptions import MlflowException

    current = aliases.get(alias)
    if version is not None and str(current) != version:
        ml.call("set_alias", ml.client.set_registered_model_alias, name, alias, version)
    elif version is None and current is not None:
        try:
            ml.call("delete_alias", ml.client.delete_registered_model_alias, name, alias)
        except TrackingError as exc:
            if not isinstance(exc.__cause__, MlflowException):
                raise


def _mark_promoted(ml: Mlflow, decision_run: str) -> None:
    """Tag a passing decision run as the one that made its candidate ``@champion`` (``trackeval.gate.promoted``):
    ``verify`` and the withdrawal of aliases after ``track --replace`` read the champions' history from these."""
    ml.call("set_tag", ml.client.set_tag, decision_run, PROMOTED_TAG, "true")


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
    with store_lock(ml.uri, ml.cfg.lock_timeout_s):
        return _promote(ml, name, candidate, cfg, policies)


def _promote(
    ml: Mlflow, name: str, candidate: str, cfg: GateConfig, policies: Mapping[str, UnitPolicy]
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
        decision, run_id = judge(ml, name, cand_mv, champ_mv, cfg, policies)
        if decision.verdict != "pass":
            return decision, run_id
        now = registered_aliases(ml, name)
        if str(now.get("champion")) != str(aliases.get("champion")):
            if _same(now.get("champion"), cand_mv.version):  # a concurrent promote of this candidate did it
                return decision, run_id
            log.warning("%s@champion moved from %s to %s while deciding; gating version %s again against it",
                        name, aliases.get("champion"), now.get("champion"), cand_mv.version)  # fmt: skip
            continue
        _mark_promoted(ml, run_id)
        if champ_mv is not None:
            _set_alias(ml, name, "previous", champ_mv, now)
        _set_alias(ml, name, "champion", cand_mv, now)
        if _same(now.get("challenger"), cand_mv.version):
            _set_alias(ml, name, "challenger", None, now)
        after = registered_aliases(ml, name)
        # in place, or a later promote already decided against this candidate: done
        if _same(after.get("champion"), cand_mv.version) or _same(after.get("previous"), cand_mv.version):
            return decision, run_id
        log.warning("%s@champion was set to %s by a concurrent promote against the same champion; gating version "
                    "%s again against it", name, after.get("champion"), cand_mv.version)  # fmt: skip
        ml.call("set_tag", ml.client.set_tag, run_id, PROMOTED_TAG, "overwritten")
    raise TrackingError(
        f"{name}@champion kept moving while version {cand_mv.version} was being gated ({PROMOTE_ROUNDS} decisions, "
        "all recorded); run `trackeval promote` again"
    )


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
    with store_lock(ml.uri, ml.cfg.lock_timeout_s):
        champion: Any | None = None
        previous: Any | None = None
        out = []
        last = None
        for version in versions:
            last = resolve_version(ml, name, version)
            decision, run_id = judge(ml, name, last, champion, cfg, policies)
            out.append((version, decision, run_id))
            if decision.verdict == "pass":
                previous, champion = champion, last
                _mark_promoted(ml, run_id)
        aliases = registered_aliases(ml, name)
        challenger = (
            last if last is not None and not (champion is not None and _same(champion.version, last.version)) else None
        )
        for alias, mv in (("champion", champion), ("previous", previous), ("challenger", challenger)):
            _set_alias(ml, name, alias, mv, aliases)
    return out, None if champion is None else version_label(champion)


def _runs_param(value: str) -> dict[str, str]:
    """``"umd=<run id>,xray/cls=<run id>"`` (a decision run's ``candidate_runs`` / ``champion_runs``)."""
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


def explain(
    ml: Mlflow, decision_run: str, registered: Mapping[str, UnitPolicy] | None = None
) -> tuple[Decision, Decision]:
    """Re-derive a recorded gate decision from the evaluation runs it names on both sides and the gate config
    and unit policies it recorded. Returns ``(recorded, recomputed)``; equal when the evidence did not drift.
    ``registered``: the installed units' policies, which supply what a decision cannot record (a corpus unit's
    headline function, e.g. ``xray/loc``'s mAP).

    Raises :class:`InputError` when ``decision_run`` is not a trackeval gate decision run.
    """
    run = ml.call("get_run", ml.client.get_run, decision_run)
    if run.data.tags.get(TAG + "kind") != KIND_GATE:
        raise InputError(f"run {decision_run} is not a trackeval gate decision run", field="--explain")
    with tempfile.TemporaryDirectory(prefix="trackeval-explain-") as tmp:
        path = ml.call("download_artifacts", ml.client.download_artifacts, decision_run, "decision.json", tmp)
        recorded = Decision.model_validate_json(Path(path).read_bytes())
    config = dict(recorded.gate_config)
    recorded_policies = config.pop("policies", {})
    policies = {
        unit: UnitPolicy(**{**p, "group_dimensions": tuple(p["group_dimensions"]),
                        "group_margins": tuple(tuple(kv) for kv in p["group_margins"]),
                        "protocol": None if p.get("protocol") is None else tuple(p["protocol"]),
                        "corpus": getattr((registered or {}).get(unit), "corpus", None)})
        for unit, p in recorded_policies.items()
    }  # fmt: skip
    params = run.data.params
    candidate = {u: run_evidence(ml, r) for u, r in _runs_param(params.get("candidate_runs", "")).items()}
    champion_runs = _runs_param(params.get("champion_runs", ""))
    champion = {u: run_evidence(ml, r) for u, r in champion_runs.items()} if recorded.champion is not None else None
    recomputed = decide(
        recorded.model,
        recorded.candidate,
        {r.unit: r for r, _ in candidate.values()},
        recorded.champion,
        None if champion is None else {r.unit: r for r, _ in champion.values()},
        GateConfig.model_validate(config),
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


# ----------------------------------------------------------------------------- evidence behind the aliases


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
                self._versions[version] = {u: self.run(r) for u, r in _eval_runs(mv).items()}
        return self._versions[version]


def _passing_decisions(ml: Mlflow, name: str, version: str | None = None) -> list[Any]:
    """FINISHED passing decision runs of model ``name`` (of candidate registry version ``version``), newest first,
    that made their candidate champion: tagged ``trackeval.gate.promoted=true``, or recorded before that tag
    and evidence digests existed."""
    flt = (
        f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}model_name` = {quote(name)} "
        f"and tags.`{TAG}gate.verdict` = 'pass' and attributes.status = 'FINISHED'"
    )
    if version is not None:
        flt += f" and tags.`{TAG}gate.candidate` = {quote(version)}"
    found = ml.search(flt)
    return [r for r in found if r.data.tags.get(PROMOTED_TAG) == "true" or "candidate_evidence" not in r.data.params]


def _decision_problem(ev: _Evidence, run: Any) -> str | None:
    """Why passing decision ``run`` no longer holds (None: it does): the evidence it recorded on either side (the
    candidate's, and the champion's it was gated against) differs from what those versions' evaluation runs hold
    now. A decision recorded before evidence digests existed is compared through the runs it names."""
    params, tags = run.data.params, run.data.tags
    sides = [("candidate", tags.get(TAG + "gate.candidate", ""))]
    if tags.get(TAG + "gate.champion"):
        sides.append(("champion", tags[TAG + "gate.champion"]))
    for side, version in sides:
        recorded = _runs_param(params.get(f"{side}_evidence", ""))
        if f"{side}_evidence" not in params:  # legacy: the digests of the runs it names, as they are now
            recorded = {u: ev.run(r) for u, r in _runs_param(params.get(f"{side}_runs", "")).items()}
        current = ev.of(version)
        whose = "its" if side == "candidate" else f"the champion's it was gated against (version {version})"
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


def _holding(ml: Mlflow, name: str, ev: _Evidence, version: str) -> tuple[Any | None, str | None]:
    """The newest decision that made registry version ``version`` champion and still holds, or ``(None,
    problem)``: ``moved outside the gate`` (no such decision) or why the newest one no longer holds."""
    decisions = _passing_decisions(ml, name, version)
    if not decisions:
        return None, "moved outside the gate"
    problems = []
    for run in decisions:
        problem = _decision_problem(ev, run)
        if problem is None:
            return run, None
        problems.append(problem)
    return None, problems[0]


@dataclass(frozen=True)
class AliasStatus:
    """One alias as ``verify`` found it: the registry version it names, trackeval's label of it, the decision run
    that made it so (``champion`` / ``previous``) and the problem (None: it holds)."""

    alias: str
    version: str
    label: str
    problem: str | None
    decision_run: str | None = None

    def line(self) -> str:
        """``@champion -> version 3 (v3): moved outside the gate`` (or ``...: ok, ...``)."""
        if self.problem:
            what = self.problem
        elif self.decision_run:
            what = f"ok (decision run {self.decision_run}; evidence unchanged)"
        else:
            what = "ok (a tracked version)"
        return f"@{self.alias} -> version {self.version} ({self.label}): {what}"


#: the aliases ``verify`` checks, in this order
VERIFIED_ALIASES = ("champion", "previous", "challenger")


def verify_aliases(ml: Mlflow, name: str) -> list[AliasStatus]:
    """Check that every alias of registered model ``name`` rests on evidence that passed: ``@champion`` and
    ``@previous`` each name a version made champion by a recorded passing decision (``trackeval.gate.promoted``)
    whose evidence still holds (the results digests it recorded for the candidate, and for the champion it was
    gated against, equal those of the runs the versions' ``eval_run`` tags point to now, artifacts re-read);
    ``@challenger`` names a tracked version (one with an ``eval_run`` tag). A unit tracked after the decision
    does not count against it. Returns one status per alias present.

    Raises :class:`InputError` when ``name`` is not a registered model (or not a valid model name).
    """
    check_model_ref(name, "name")
    if _registered_model(ml, name) is None:
        raise InputError(
            f"model {name!r} is not registered: nothing to verify (run `trackeval track`)", field="--model"
        )
    aliases = {k: str(v) for k, v in registered_aliases(ml, name).items()}
    ev = _Evidence(ml, name)
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
            out.append(AliasStatus(alias, version, "?", "names no registered version"))
            continue
        label = version_label(mv)
        if alias == "challenger":
            problem = None if _eval_runs(mv) else "not a tracked version (no trackeval.eval_run.<unit> tag)"
            out.append(AliasStatus(alias, version, label, problem))
            continue
        run, problem = _holding(ml, name, ev, version)
        out.append(AliasStatus(alias, version, label, problem, None if run is None else run.info.run_id))
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
    aliases = {k: str(v) for k, v in registered_aliases(ml, name).items()}

    def rested(alias: str) -> bool:
        held = aliases.get(alias)
        return (
            bool(held)
            and _holding(ml, name, before, held)[0] is not None
            and _holding(ml, name, after, held)[0] is None
        )

    target = dict(aliases)
    if rested("champion"):
        target["champion"] = target["previous"] = None  # type: ignore[assignment]
        for run in _passing_decisions(ml, name):
            candidate = run.data.tags.get(TAG + "gate.candidate", "")
            if candidate in (version, aliases["champion"]) or _decision_problem(after, run) is not None:
                continue
            target["champion"] = candidate
            base = run.data.tags.get(TAG + "gate.champion", "")
            if base and _holding(ml, name, after, base)[0] is not None:
                target["previous"] = base
            break
    elif rested("previous"):
        target["previous"] = None  # type: ignore[assignment]
    if target.get("champion") != version:
        target["challenger"] = version
    done = []
    for alias in VERIFIED_ALIASES:
        if target.get(alias) != aliases.get(alias):
            _set_alias_to(ml, name, alias, target.get(alias), aliases)
            was = aliases.get(alias)
            now = "removed" if target.get(alias) is None else f"-> version {target[alias]}"
            why = f" (it rested on the replaced evidence of version {version})" if alias != "challenger" else ""
            done.append(f"@{alias} {now}" + (f", was version {was}{why}" if was else ""))
    return done
