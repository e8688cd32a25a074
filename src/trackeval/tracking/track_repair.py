"""What makes ``track`` (:mod:`trackeval.tracking.track`) idempotent and safe to run twice at once: the FINISHED
run of an evaluation's key (:func:`settle`, duplicates of a concurrent writer marked FAILED), runs a killed process
left RUNNING (:func:`fail_stale`) and the steps of a unit still missing after its run FINISHED
(:func:`complete_units`: headline metrics on the parent run and the LoggedModel, the registry's tags and alias).
"""

from __future__ import annotations

from typing import Any

from trackeval.errors import TrackingError
from trackeval.io.redact import logger
from trackeval.results import headline_metrics
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.evidence import run_digest
from trackeval.tracking.model_registry import link_version
from trackeval.tracking.tags import RESULTS_DIGEST_TAG, TAG
from trackeval.tracking.track_logging import FolderToTrack, linked_metrics, log_batches, log_headlines

log = logger(__name__)


def settle(ml: Mlflow, key: str, digest: str) -> Any | None:
    """The FINISHED evaluation run of ``key`` holding the results of evidence digest ``digest`` (None if there is
    none; a run of the same key with other results, e.g. written by another trackeval version, is another
    evaluation and is left alone). When there are several (two processes logged it at the same time on a server
    store), the first to have finished is kept (earliest end time, then run id: every process picks the same one)
    and the others are marked FAILED with ``trackeval.duplicate_of``."""
    runs = ml.search(f"tags.`{TAG}idempotency_key` = {quote(key)} and attributes.status = 'FINISHED'")
    runs = [r for r in runs if run_evidence_digest(ml, r) in (digest, None)]
    if not runs:
        return None
    winner = min(runs, key=lambda r: (r.info.end_time or 0, r.info.run_id))
    for run in runs:
        if run.info.run_id != winner.info.run_id:
            demote(ml, run.info.run_id, winner.info.run_id)
    return winner


def run_evidence_digest(ml: Mlflow, run: Any) -> str | None:
    """The evidence digest of an evaluation run: its ``trackeval.results_digest`` tag, else (a run tracked before
    the tag existed) the sha256 of its results.json artifact; None when that cannot be read."""
    tagged = run.data.tags.get(RESULTS_DIGEST_TAG)
    if tagged:
        return str(tagged)
    try:
        return run_digest(ml, run.info.run_id)
    except (TrackingError, OSError):
        return None


def demote(ml: Mlflow, run_id: str, winner_id: str) -> None:
    """Mark run ``run_id`` FAILED as a duplicate of ``winner_id`` (``trackeval.duplicate_of``)."""
    log.warning("run %s duplicates run %s (logged at the same time); marking it FAILED", run_id, winner_id)
    ml.call("set_tag", ml.client.set_tag, run_id, TAG + "duplicate_of", winner_id)
    ml.call("set_terminated", ml.client.set_terminated, run_id, "FAILED")


def fail_stale(ml: Mlflow, model_name: str, model_version: str, keep: set[str]) -> None:
    """Runs of this model version still RUNNING (a killed process or server) are ended FAILED, except ``keep``
    (parents of FINISHED evaluations: the repair finishes them)."""
    stale = ml.search(
        f"tags.`{TAG}model_name` = {quote(model_name)} and tags.`{TAG}model_version` = {quote(model_version)} "
        "and attributes.status = 'RUNNING'"
    )
    for run in stale:
        if run.info.run_id in keep:
            continue
        log.warning("run %s was left RUNNING by an interrupted track; marking it FAILED", run.info.run_id)
        ml.call("set_tag", ml.client.set_tag, run.info.run_id, TAG + "failure", "interrupted; superseded")
        ml.call("set_terminated", ml.client.set_terminated, run.info.run_id, "FAILED")


def complete_units(
    ml: Mlflow,
    name: str,
    version: str,
    runs: dict[str, Any],
    evaluations: list[FolderToTrack],
    model_id: str,
    new: bool,
) -> list[str]:
    """Do what is missing of each evaluation's unit after its run FINISHED (``runs``: key -> that run): the
    headline metrics on its parent run and on the LoggedModel, the registered version, its ``eval_run`` tags and
    the ``challenger`` alias (``new``). Returns the steps done ([] when nothing was missing)."""
    done = []
    model = ml.call("get_logged_model", ml.client.get_logged_model, model_id)
    on_model = {(m.key, m.run_id) for m in model.metrics or []}
    by_parent: dict[str, dict[str, float]] = {}
    for ev in evaluations:
        run_id = runs[ev.key].info.run_id
        heads = headline_metrics(ev.result)
        missing = {k for k in heads if (k, run_id) not in on_model}
        if missing:
            log_batches(ml, run_id, linked_metrics(ev.result, model_id, missing))
            done.append(f"{ev.result.unit} metrics on LoggedModel {model_id}")
        by_parent.setdefault(runs[ev.key].data.tags.get("mlflow.parentRunId", ""), {}).update(heads)
    by_parent.pop("", None)  # an evaluation run without a parent (logged by hand): nothing to complete there
    for parent_id, heads in sorted(by_parent.items()):
        logged = ml.call("get_run", ml.client.get_run, parent_id).data.metrics
        missing = {k: v for k, v in heads.items() if logged.get(k) != v}
        if missing:
            log_headlines(ml, parent_id, missing)
            done.append(f"headline metrics on parent run {parent_id}")
    source = next(iter(by_parent), None) or next(iter(runs.values())).info.run_id
    children = {ev.result.unit: runs[ev.key].info.run_id for ev in evaluations}
    _, linked = link_version(ml, name, version, source, children, model_id=model_id, new=new)
    return done + linked
