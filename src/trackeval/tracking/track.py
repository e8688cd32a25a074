"""The track use case: log results folders as runs (one parent per model version, one child per benchmark unit).

What a child run holds (all derived from ``results.json``; trackers never compute metrics):

- params: the result's validated config, flattened to dotted keys (``umd.nsd_tolerance_mm``);
- metrics: ``BenchmarkResult.flat_metrics()`` (the same keys as metrics.json);
- tags: lineage (``trackeval.git_commit`` + ``mlflow.source.git.commit``, ``trackeval.dvc_data_digest``,
  ``trackeval.params_hash`` = config digest, ``trackeval.version``, ``trackeval.protocol_version``, model
  name/version, data digests, ``trackeval.leakage_audit``) and ``trackeval.idempotency_key``;
- a dataset input (``mlflow.data``, context ``eval``): the case table with the DVC data digest;
- artifacts: results.json, metrics.json, cases.parquet, ``figures/*.png`` and ``report.html``.

Order: every figure and report of the units to log is drawn first, before anything is written to MLflow (a figure
that cannot be drawn changes nothing); then the evaluation runs are created with their params, other metrics,
dataset and files; then, once every unit's files are uploaded, the headline metrics (linked to the LoggedModel:
what the leaderboard and the Models tab read) and FINISHED; the registered version's ``eval_run.<unit>`` tags
(what compare and the gate read) and the ``challenger`` alias come after all of it. So a failure at any step
before them leaves the registry tags and the leaderboard as they were, and the next ``track`` completes the unit.

Secrets: params are stored redacted and this module's log records are redacted (:mod:`trackeval.io.redact`).

Idempotent, as one unit per evaluation: the key ``sha256(benchmark, data digest, model name, model version, config
digest)`` names it, and it is complete when (1) a FINISHED evaluation run carries the key, (2) the version's
LoggedModel is READY and holds the run's headline metrics, (3) the parent run holds them too and is FINISHED,
(4) the registered version exists with its ``trackeval.eval_run.<unit>`` tag on the run and (5) the version was
made ``challenger`` (unless champion). The parent run is set FINISHED last, so a FINISHED parent marks a
complete unit. ``track`` checks each step and does only what is missing: a process killed (or failing) between
any two steps leaves a state that the next ``track`` of the same folder completes, and reports as repaired.
A complete unit is not logged again, but the version's ``eval_run.<unit>`` tags are pointed at it all the same, so
the registry follows the results that were tracked last (e.g. after a revert). Pointing them at other results
than the ones they hold (another results.json digest, ``trackeval.results_digest``) needs ``replace``, which then
withdraws the aliases that rested on the old evidence (:func:`~trackeval.tracking.verification.withdraw_replaced`),
and marks the replaced run and its parent (``trackeval.replaced_by``, the name ``... (replaced)``, a description
linking the current run: :func:`~trackeval.tracking.descriptions.mark_replaced`).

Faults (see :mod:`trackeval.tracking.client`): the results stay on disk when MLflow fails; a run left RUNNING
by a killed process or a dead server is marked FAILED by the next ``track`` of the same model version. SQLite
wants one writer: only this (parent) process logs.

Concurrency: a local store is written under its file lock (:func:`~trackeval.tracking.client.store_lock`), so
two ``track`` processes take turns and the second finds the unit complete. On a server store both may log the
same evaluation; each then keeps the first run to have FINISHED with the key (earliest end time, then run id, so
every process agrees) and marks the others FAILED with ``trackeval.duplicate_of`` (create, then deduplicate; the
registry version and the LoggedModel likewise, see :mod:`trackeval.tracking.model_registry` and
:mod:`trackeval.tracking.logged_models`).

By job: this module reads the folders and runs the use case; :mod:`trackeval.tracking.track_logging` writes the runs
(tags, params, metrics, dataset, staged artifacts) and :mod:`trackeval.tracking.track_repair` settles duplicates,
fails stale runs and completes what a unit is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackeval.config import TrackingConfig
from trackeval.errors import InputError, TrackingError, worded
from trackeval.io.hashing import sha256_bytes
from trackeval.io.results_folder import RESULTS_JSON, read_results_files
from trackeval.tracking.client import Mlflow, check_model_ref, store_lock, tracking_error, tracking_uri
from trackeval.tracking.descriptions import mark_replaced
from trackeval.tracking.evidence import run_digest
from trackeval.tracking.lineage import dvc_data_digest, git_commit, idempotency_key
from trackeval.tracking.logged_models import logged_model
from trackeval.tracking.model_registry import find_version
from trackeval.tracking.tags import EVAL_RUN_TAG, TAG
from trackeval.tracking.track_logging import FolderToTrack, log_children, parent_tags, stage_all
from trackeval.tracking.track_repair import complete_units, demote, fail_stale, run_evidence_digest, settle
from trackeval.tracking.verification import withdraw_replaced
from trackeval.tracking.views import declared_primary, describe_version


@dataclass(frozen=True)
class Tracked:
    """Outcome for one results folder: the evaluation run id, whether it was logged now or found already, the
    evaluation's idempotency key (the same on every machine, unlike the run id), the steps of its unit that
    were missing and done now (``repaired``, see the module docstring) and the result's
    ``summary["n_missing_predictions"]`` (0 when the unit does not count them)."""

    folder: Path
    unit: str
    model: str
    run_id: str
    logged: bool
    key: str
    repaired: tuple[str, ...] = ()
    n_missing_predictions: int = 0
    #: aliases moved because ``--replace`` changed the evidence they rested on (one line each)
    aliases: tuple[str, ...] = ()
    #: the evaluation run this one replaced as the version's evidence and marked now (``--replace``; "" if none)
    replaced: str = ""


def _read(folder: Path, model: dict[str, str] | None) -> FolderToTrack:
    """Read and verify ``folder``; ``model`` fills in or overrides the model of results.json, whose name and
    version must be ones MLflow can store and find (:func:`~trackeval.tracking.client.check_model_ref`)."""
    verified = read_results_files(folder)
    result = verified.result
    if model:
        result = result.model_copy(update={"model": {**result.model, **model}})
    file = str(folder if folder.suffix == ".json" else folder / RESULTS_JSON)
    for part in ("name", "version"):
        check_model_ref(result.model.get(part, ""), part, file=file)
    return FolderToTrack(
        folder, result, verified.files, idempotency_key(result), sha256_bytes(verified.files[RESULTS_JSON])
    )


def _check_repoint(ml: Mlflow, name: str, version: str, evaluations: list[FolderToTrack], replace: bool) -> Any | None:
    """Refuse (unless ``replace``) to point a version's ``eval_run.<unit>`` tag away from an evaluation with other
    results: a different ground truth (truth files, manifest, case set), or any other results.json (another
    evidence digest), would silently change what the version, and any gate decision and alias resting on it,
    stands for. Identical results pass (re-tracking is idempotent). Nothing is deleted either way: the previous
    evaluation run stays, and the new one records it in ``trackeval.replaces``. Returns the registered version as
    it was (None: not registered yet)."""
    mv = find_version(ml, name, version)
    if mv is None:
        return None
    for ev in evaluations:
        result = ev.result
        current = mv.tags.get(EVAL_RUN_TAG + result.unit)
        if not current:
            continue
        run = ml.call("get_run", ml.client.get_run, current)
        old = run.data.tags.get(TAG + "ground_truth_digest", "")
        if old and old != result.data.ground_truth_digest and not replace:
            raise InputError(
                f"{name}/{version} was evaluated on {result.unit} with other ground truth (digest {old[:12]}, "
                f"now {result.data.ground_truth_digest[:12]}: other files or cases); re-pointing its "
                f"trackeval.eval_run.{result.unit} would change what it (and any gate decision) stands for. Track "
                "under a new model version, or pass --replace (the previous evaluation run is kept)",
                file=str(ev.folder / RESULTS_JSON),
                field="ground_truth_digest",
            )
        held = run_evidence_digest(ml, run)
        if held and held != ev.digest and not replace:
            raise InputError(
                f"{name}/{version} (registered version {mv.version}) already has other results for {result.unit}: "
                f"results.json digest {held} is tracked (run {current}), these are {ev.digest}; re-pointing its "
                f"trackeval.eval_run.{result.unit} would change the evidence its gate decisions and aliases rest on. "
                "Track under a new model version, or pass --replace (the previous evaluation run is kept, aliases "
                "resting on it are withdrawn and the version is gated again)",
                file=str(ev.folder / RESULTS_JSON),
                field="results_digest",
            )
    return mv


def _withdraw(ml: Mlflow, name: str, version: str, before: Any) -> list[str]:
    """After tracking: when an ``eval_run.<unit>`` tag of registered version ``before`` (as it was) now points at
    other results (``--replace``), withdraw the aliases that rested on its old evidence; returns what moved."""
    runs_before = {k: v for k, v in before.tags.items() if k.startswith(EVAL_RUN_TAG)}
    after = find_version(ml, name, version)
    runs_after = {} if after is None else {k: v for k, v in after.tags.items() if k.startswith(EVAL_RUN_TAG)}
    moved = {k for k, v in runs_before.items() if runs_after.get(k) != v}
    if not moved:
        return []
    old = {k[len(EVAL_RUN_TAG) :]: run_digest(ml, v) for k, v in runs_before.items()}
    if all(old[k[len(EVAL_RUN_TAG) :]] == run_digest(ml, runs_after[k]) for k in moved if k in runs_after):
        return []  # re-pointed at a run with the same results: the evidence did not change
    return withdraw_replaced(ml, name, str(before.version), old)


def _track_version(
    ml: Mlflow, name: str, version: str, evaluations: list[FolderToTrack], lineage: dict[str, str]
) -> list[Tracked]:
    """Track the evaluations of one model version: draw the figures and reports of those without a FINISHED run,
    log them under a new parent run, then complete every unit (:func:`complete_units`: the registry tags last) and
    finish the parents of units found incomplete."""
    runs = {ev.key: run for ev in evaluations if (run := settle(ml, ev.key, ev.digest)) is not None}
    parents = {r.data.tags.get("mlflow.parentRunId", "") for r in runs.values()} - {""}
    incomplete = [p for p in sorted(parents) if ml.call("get_run", ml.client.get_run, p).info.status != "FINISHED"]
    todo = [ev for ev in evaluations if ev.key not in runs]
    with contextlib.ExitStack() as staging:
        staged = stage_all(staging, todo)  # first: a figure that cannot be drawn leaves every run as it was
        fail_stale(ml, name, version, keep=set(incomplete))
        if todo:
            parent_id, mine, done = _log_new(ml, name, version, todo, evaluations, runs, lineage, staged)
    if todo:
        winners = {runs[ev.key].info.run_id for ev in todo}
        if not winners & mine:  # another process logged all of them at the same time: this parent is a duplicate
            demote(ml, parent_id, runs[todo[0].key].data.tags.get("mlflow.parentRunId", ""))
    else:
        source = min(parents, default=runs[evaluations[0].key].info.run_id)  # used only if it must be created
        model_id = logged_model(ml, name, version, source)
        mine = set()
        done = complete_units(ml, name, version, runs, evaluations, model_id, new=bool(incomplete))
    for parent_id in incomplete:  # last: a FINISHED parent marks its units complete
        ml.call("set_terminated", ml.client.set_terminated, parent_id, "FINISHED")
        done.append(f"parent run {parent_id} finished")
    return _outcomes(evaluations, f"{name}/{version}", runs, mine, done)


def _log_new(
    ml: Mlflow,
    name: str,
    version: str,
    todo: list[FolderToTrack],
    evaluations: list[FolderToTrack],
    runs: dict[str, Any],
    lineage: dict[str, str],
    staged: dict[str, Path],
) -> tuple[str, set[str], list[str]]:
    """Log the evaluations ``todo`` (artifacts from ``staged``) under a new parent run of the version, settle each
    of them into ``runs`` (key -> run: this process's, or a concurrent writer's that won), then complete every
    unit of ``evaluations`` (:func:`complete_units`, ``new``). Returns the parent run id, the ids of the runs logged
    here and the steps done."""
    with ml.run(f"{name}/{version}", parent_tags(name, version, lineage)) as parent_id:
        model_id = logged_model(ml, name, version, parent_id)
        mine = log_children(ml, todo, lineage, parent_id, model_id, staged)
        for ev in todo:
            runs[ev.key] = settle(ml, ev.key, ev.digest)
        done = complete_units(ml, name, version, runs, evaluations, model_id, new=True)
    return parent_id, mine, done


def _outcomes(
    evaluations: list[FolderToTrack], label: str, runs: dict[str, Any], mine: set[str], done: list[str]
) -> list[Tracked]:
    """One :class:`Tracked` per evaluation, in order, for model ``label`` (``name/version``): logged when its run
    (``runs``: key -> run) is one of ``mine``, else found, with the steps ``done`` as its repairs."""
    return [
        Tracked(
            ev.folder,
            ev.result.unit,
            label,
            runs[ev.key].info.run_id,
            runs[ev.key].info.run_id in mine,
            ev.key,
            () if runs[ev.key].info.run_id in mine else tuple(done),
            int(ev.result.summary.get("n_missing_predictions", 0)),
        )
        for ev in evaluations
    ]


def track_results(
    folders: list[Path], cfg: TrackingConfig, model: dict[str, str] | None = None, *, replace: bool = False
) -> list[Tracked]:
    """Log each results folder (see the module docstring); returns one :class:`Tracked` per folder.

    ``model`` (``name``/``version``) fills in or overrides the model recorded in results.json. Results
    without a model name and version, or with one MLflow cannot store and find, are refused (a run must belong
    to a model version). ``replace``: allow re-pointing a version at an evaluation with other results (other
    ground truth, or any other results.json; see :func:`_check_repoint`); every alias that rested on the
    version's old evidence is then withdrawn (:func:`~trackeval.tracking.verification.withdraw_replaced`) and
    listed in :attr:`Tracked.aliases`, and the replaced run is marked (:attr:`Tracked.replaced`). A local store
    is written under its lock (module docstring).

    Raises:
        InputError: a folder does not verify, or its model name / version is refused (names the file and field).
        TrackingError: MLflow failed; the results stay on disk and running ``track`` again completes the work.
    """
    evaluations = [_read(folder, model) for folder in folders]
    by_model: dict[tuple[str, str], list[FolderToTrack]] = {}
    for ev in evaluations:
        by_model.setdefault((ev.result.model["name"], ev.result.model["version"]), []).append(ev)
    root = Path(cfg.dvc_root)
    lineage = {"git_commit": git_commit(root), "dvc": dvc_data_digest(root) or ""}
    out: list[Tracked] = []
    try:
        with store_lock(tracking_uri(cfg), cfg.lock_timeout_s):
            ml = Mlflow(cfg)
            for (name, version), items in by_model.items():
                before = _check_repoint(ml, name, version, items, replace)
                tracked = _track_version(ml, name, version, items, lineage)
                marked = mark_replaced(ml, name, version)  # the runs replaced: tagged, renamed, described
                describe_version(ml, name, find_version(ml, name, version), declared_primary())
                withdrawn = tuple(_withdraw(ml, name, version, before)) if before is not None else ()
                out += [dataclasses.replace(t, aliases=withdrawn, replaced=marked.get(t.unit, "")) for t in tracked]
    except TrackingError as exc:
        where = " ".join(str(f) for f in folders)
        again = worded(
            f"the results stay on disk: run `trackeval track {where}` again to finish",
            "call trackeval.track again with the same results to finish",
        )
        raise tracking_error(f"{exc}; {again} (it completes what is missing)") from exc
    return out
