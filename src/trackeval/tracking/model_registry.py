"""The MLflow model registry: trackeval's model versions as registered versions, their evaluation runs and aliases.

A trackeval model version ``NAME`` / ``VERSION`` (as recorded in results.json) is a registered model version
of ``NAME`` carrying the tag ``trackeval.model_version = VERSION`` (:func:`registered_version_name`) and created
from the evaluation's parent run (``run_id``) with a LoggedModel as its source
(:mod:`trackeval.tracking.logged_models`). Its tags ``trackeval.eval_run.<unit>`` point to the latest evaluation
run per benchmark unit (``umd``, ``xray/cls``...: :func:`eval_runs`).
Aliases: ``champion`` (the promoted version), ``previous`` (the champion before it, one-call rollback),
``challenger`` (the newest tracked version that is not champion). Stages are never used. Only the gate moves
``champion`` and ``previous`` (:mod:`trackeval.tracking.promotion`, :mod:`trackeval.tracking.verification`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trackeval.errors import InputError, TrackingError
from trackeval.io.redact import logger
from trackeval.tracking.client import Mlflow, check_model_ref, error_code, quote
from trackeval.tracking.tags import EVAL_RUN_TAG, TAG, VERSION_TAG

log = logger(__name__)


def registered_model(ml: Mlflow, name: str) -> Any | None:
    """The registered model ``name``, or None when it is not registered."""
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
    if registered_model(ml, name) is None:
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
    if registered_model(ml, name) is None:
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
                if registered_model(ml, name) is None:
                    raise unknown_model(ml, name) from exc
                raise InputError(f"model {name!r} has no alias {ref[1:]!r}", field="alias") from exc
            raise
    mv = find_version(ml, name, check_model_ref(ref, "version"))
    if mv is None and ref.isdigit() and registered_model(ml, name) is not None:
        try:
            mv = ml.call("get_model_version", ml.client.get_model_version, name, ref)
        except TrackingError as exc:
            if not isinstance(exc.__cause__, MlflowException):
                raise
    if mv is None:
        if registered_model(ml, name) is None:
            raise unknown_model(ml, name)
        raise InputError(f"model {name!r} has no tracked version {ref!r}; run `trackeval track` first", field="version")
    return mv


def registered_model_names(ml: Mlflow) -> list[str]:
    """The names of every registered model of the store (all pages of the search)."""
    names: list[str] = []
    token = None
    while True:
        page = ml.call(
            "search_registered_models", ml.client.search_registered_models, max_results=1000, page_token=token
        )
        names += [m.name for m in page]
        token = getattr(page, "token", None)
        if not token:
            return names


def unknown_model(ml: Mlflow, name: str) -> InputError:
    """The error for a model ``name`` that is not registered: ``no registered model 'myseeg' (did you mean
    'myseg'?)``, the suggestion the closest registered name (:func:`difflib.get_close_matches`); when no name
    is close, the hint to track it instead."""
    import difflib

    close = difflib.get_close_matches(name, registered_model_names(ml), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else "; run `trackeval track` first"
    return InputError(f"no registered model {name!r}{hint}", field="model")


def eval_runs(mv: Any | None) -> dict[str, str]:
    """``{unit: evaluation run id}`` a registered version points to (its ``eval_run.<unit>`` tags)."""
    if mv is None:
        return {}
    return {k[len(EVAL_RUN_TAG) :]: v for k, v in sorted(mv.tags.items()) if k.startswith(EVAL_RUN_TAG)}


def registered_version_name(mv: Any) -> str:
    """The team's name of a registered version: its trackeval model version (``v2``, the tag
    ``trackeval.model_version``), or its registry number when untagged. (Not
    :func:`trackeval.report.labels.version_label`, a results' label in figures.)"""
    return str(mv.tags.get(VERSION_TAG, str(mv.version)))


def registered_aliases(ml: Mlflow, name: str) -> dict[str, Any]:
    """The registered model's aliases now (``{alias: registry version}``)."""
    return dict(ml.call("get_registered_model", ml.client.get_registered_model, name).aliases)


def set_alias(ml: Mlflow, name: str, alias: str, mv: Any | None, aliases: Mapping[str, Any]) -> None:
    """Point ``alias`` at ``mv`` (None: remove it); nothing is written when ``aliases`` (the registered model's
    aliases as read before) already say so."""
    set_alias_to(ml, name, alias, None if mv is None else str(mv.version), aliases)


def set_alias_to(ml: Mlflow, name: str, alias: str, version: str | None, aliases: Mapping[str, Any]) -> None:
    """:func:`set_alias` by registry version number (None: remove the alias)."""
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
