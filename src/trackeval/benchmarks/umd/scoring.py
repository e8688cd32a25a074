"""Scoring one UMD case in a worker: the organ metrics of a label-map pair (:func:`score_case`, cached), and the
voxel counts of nnU-Net's summary.json (:func:`count_case`). With nnU-Net's ``ignore`` label, the voxels whose
truth holds it are left out of every count of both (:func:`~trackeval.metrics.overlap.drop_reference`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trackeval.benchmarks.segmentation import score_segmentation
from trackeval.benchmarks.umd import nnunet
from trackeval.benchmarks.umd.cases import UMDCase
from trackeval.benchmarks.umd.config import UMDConfig
from trackeval.engine.cache import CaseCache
from trackeval.engine.driver import Scored
from trackeval.engine.executors import case_threads
from trackeval.errors import InputError
from trackeval.io.nifti import LabelVolume, check_same_grid, read_bytes_digest, read_label_map
from trackeval.metrics.overlap import confusion_matrix, counts_from_matrix, drop_reference, unlisted_values
from trackeval.results import CaseRecord


@dataclass(frozen=True)
class CaseJob:
    case: UMDCase
    config: UMDConfig
    cache: CaseCache
    #: voxel values the label maps may hold besides umd.labels' ids (the nnU-Net labels that name no organ)
    allowed: frozenset[int] = frozenset()
    #: nnU-Net's ignore label: truth voxels holding it are left out of every count (None: none)
    ignore: int | None = None


def _check_label_ids(vol: LabelVolume, allowed: set[int], case_id: str, role: str) -> None:
    """Refuse voxel values outside the label map before anything sized by the values is built (the confusion
    matrix is ``K x K`` in the distinct values: 20 000 stray ids would cost 3 GB); bounded by the voxel count."""
    unknown = unlisted_values(vol.array, allowed)
    if unknown:
        raise InputError(
            f"{role} holds label id(s) {unknown} that are not in the label map (umd.labels)",
            file=vol.path,
            case_id=case_id,
            field="voxel values",
        )


def score_case(job: CaseJob) -> Scored:
    """Read, validate and score one case (runs in a worker; only the small record travels back).

    The input files are read once; their digests key the case cache, so an unchanged case with an
    unchanged config is not recomputed.
    """
    case, cfg = job.case, job.config
    truth_raw, truth_digest = read_bytes_digest(case.truth_path, case_id=case.case_id)
    pred_raw, pred_digest = (
        (None, "missing") if case.pred_path is None else read_bytes_digest(case.pred_path, case_id=case.case_id)
    )
    meta = {"case_id": case.case_id, "subject_id": case.subject_id, "groups": case.groups}
    key = job.cache.key(
        meta if job.ignore is None else {**meta, "ignore_label": job.ignore},  # keys without one: unchanged
        {"truth": truth_digest, "prediction": pred_digest},
        cfg.model_dump_json(exclude={"train_manifest"}),
    )
    cached = job.cache.get(key)  # verified: a record for exactly this computation, or a miss
    if cached.record is not None:
        return Scored(cached.record, truth_digest, pred_digest)
    truth = read_label_map(case.truth_path, case_id=case.case_id, raw=truth_raw, digest=truth_digest)
    pred = None
    if case.pred_path is not None:
        pred = read_label_map(case.pred_path, case_id=case.case_id, raw=pred_raw, digest=pred_digest)
        check_same_grid(truth, pred, case_id=case.case_id, tolerance=cfg.geometry_tolerance)
    record = CaseRecord(
        case_id=case.case_id,
        subject_id=case.subject_id,
        groups=case.groups,
        metrics=_organ_metrics(case.case_id, truth, pred, cfg, job.allowed, job.ignore),
        status="missing_prediction" if pred is None else "ok",
        message="" if pred is not None else f"no prediction file; scored by policy '{cfg.missing_prediction}'",
    )
    return Scored(record, truth_digest, pred_digest, job.cache.put(key, record, cached))


def allowed_ids(cfg: UMDConfig, also: frozenset[int]) -> set[int]:
    """The voxel values a label map may hold: umd.labels' ids and ``also`` (0 is always allowed)."""
    return {i for ids in cfg.labels.values() for i in ((ids,) if isinstance(ids, int) else ids)} | also


def _organ_metrics(
    case_id: str,
    truth: LabelVolume,
    pred: LabelVolume | None,
    cfg: UMDConfig,
    also: frozenset[int] = frozenset(),
    ignore: int | None = None,
) -> dict[str, dict[str, float]]:
    """Per-organ metrics; a missing prediction is scored as all background (``worst``) or left empty. ``also``:
    voxel values allowed besides umd.labels' ids (scored as background). ``ignore``: truth voxels holding it are
    left out of the counts (Dice, IoU, ``n_ref``, ``n_pred``); the caller selects no surface metric then.

    Raises:
        InputError: a voxel value outside the allowed ids.
        ValueError: a surface metric selected with ``ignore`` (the adapter narrows ``umd.metrics`` first).
    """
    if ignore is not None and set(cfg.metrics) - {"dsc", "iou"}:
        raise ValueError(f"surface metrics are not defined with an ignore label (umd.metrics {list(cfg.metrics)})")
    if pred is None and cfg.missing_prediction == "exclude":
        return {name: {} for name in cfg.labels}
    pred_array = np.zeros_like(truth.array) if pred is None else pred.array
    allowed = allowed_ids(cfg, also)
    _check_label_ids(truth, allowed, case_id, "ground truth")
    if pred is not None:
        _check_label_ids(pred, allowed, case_id, "prediction")
    cm = confusion_matrix(pred_array, truth.array)  # K x K with K <= len(allowed) + 1: bounded by umd.labels
    if ignore is not None:
        cm = drop_reference(*cm, ignore)
    return score_segmentation(
        truth.array,
        pred_array,
        truth.spacing,
        dict(cfg.labels),
        nsd_tolerance_mm=cfg.nsd_tolerance_mm,
        hd_percentile=cfg.hd_percentile,
        hd_empty_penalty=cfg.hd_empty_penalty,
        empty_both=cfg.empty_both,
        confusion=cm,
        metrics=cfg.metrics,
        threads=case_threads(),  # more than 1 for the last cases of a process-pool run
    )


@dataclass(frozen=True)
class CountJob:
    case: UMDCase
    labels: tuple[nnunet.Label, ...]
    allowed: frozenset[int]
    tolerance: float
    ground_truth: Path
    predictions: Path
    #: nnU-Net's ignore label (None: none)
    ignore: int | None = None


def count_case(job: CountJob) -> nnunet.SummaryCase:
    """One prediction's voxel counts per nnU-Net label or region (runs in a worker); with an ignore label, the
    voxels whose truth holds it are in no count and not in ``n_voxels`` (so not in TN)."""
    case = job.case
    assert case.pred_path is not None  # only predicted cases are counted
    truth = read_label_map(case.truth_path, case_id=case.case_id)
    pred = read_label_map(case.pred_path, case_id=case.case_id)
    check_same_grid(truth, pred, case_id=case.case_id, tolerance=job.tolerance)
    for vol, role in ((truth, "ground truth"), (pred, "prediction")):
        _check_label_ids(vol, set(job.allowed), case.case_id, role)
    values, matrix = confusion_matrix(pred.array, truth.array)
    if job.ignore is not None:
        values, matrix = drop_reference(values, matrix, job.ignore)
    return nnunet.SummaryCase(
        case.truth_path.relative_to(job.ground_truth).as_posix(),
        case.pred_path.relative_to(job.predictions).as_posix(),
        counts_from_matrix(values, matrix, job.labels),
        int(matrix.sum()),  # every voxel without an ignore label
    )
