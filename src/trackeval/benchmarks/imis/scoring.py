"""IMIS scoring of one image (runs in a worker): every sequence driven live through the model
(:func:`score_live`) or verified from an interaction log (:func:`score_logged`), then scored.

Per image x target (records, ``cases.parquet``): ``dice_<prompt>_<turn>``, ``noc_<t>``, ``dice_auc`` (and
``iou_point_<turn>`` with ``imis.noc_metric=iou``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from trackeval.benchmarks.imis.cases import IMISCase, read_case
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.logs import InteractionLog, masks_digest, verify_case
from trackeval.benchmarks.imis.protocol import noc_key
from trackeval.benchmarks.imis.session import Turn, interact_case, load_model
from trackeval.engine.driver import Scored
from trackeval.io.hashing import sha256_text
from trackeval.metrics.interactive import binary_dice, binary_iou, dice_auc, eps_dice, eps_iou, number_of_clicks
from trackeval.results import CaseRecord

#: folded into each case's ground-truth digest under ``imis.protocol: imis_bench``: the truth is resampled by PIL's
#: rule and Dice is taken on the label grid (issue 36), so results of earlier versions (torch "nearest", Dice on the
#: 1024 grid) do not pair with these in the gate
IMIS_BENCH_TRUTH = "imis_bench:pil-nearest:label-grid-dice"


@dataclass(frozen=True)
class LiveJob:
    """One image to drive live through ``model`` (``MODULE:FACTORY`` or an MLflow URI, built in the worker)."""

    case: IMISCase
    config: IMISConfig
    model: str
    model_kwargs: tuple[tuple[str, str], ...]
    prompt_types: tuple[str, ...]


@dataclass(frozen=True)
class LogJob:
    """One image whose logged sequences are verified against the protocol."""

    case: IMISCase
    config: IMISConfig
    log: InteractionLog  # holding this case's lines only
    prompt_types: tuple[str, ...]


def _record(case: IMISCase, metrics: dict[str, dict[str, float]], missing: bool = False) -> CaseRecord:
    return CaseRecord(
        case_id=case.case_id,
        subject_id=case.subject_id or case.case_id,
        groups={"modality": case.modality, "region": case.region},
        metrics=metrics,
        status="missing_prediction" if missing else "ok",
        message="no interaction logged for this image; scored as the worst (Dice 0)" if missing else "",
    )


def sequence_metrics(truth: np.ndarray, masks: Mapping[str, list[np.ndarray]], cfg: IMISConfig) -> dict[str, float]:
    """Per-target metrics from the turn masks of each prompt type.

    Keys: ``dice_<prompt>_<turn>`` for every prompt type and turn; from the ``point`` sequence (the click
    curve) ``noc_<t>`` per threshold (on ``cfg.noc_metric``; with ``iou`` also ``iou_point_<turn>``) and
    ``dice_auc``; NaN when no point sequence was run. With ``imis.protocol: imis_bench`` Dice and IoU are
    IMIS-Bench's, with ``1e-8`` added to the denominators (:func:`eps_dice`, :func:`eps_iou`); otherwise exact,
    with ``cfg.dice_empty_rule``.
    """
    if cfg.protocol == "imis_bench":
        dice, iou = eps_dice, eps_iou
    else:
        rule = cfg.dice_empty_rule
        dice, iou = (lambda m, g: binary_dice(m, g, rule)), (lambda m, g: binary_iou(m, g, rule))
    out: dict[str, float] = {}
    for prompt_type, seq in masks.items():
        curve = np.array([dice(m, truth) for m in seq])
        out.update({f"dice_{prompt_type}_{t}": float(d) for t, d in enumerate(curve, start=1)})
        if prompt_type == "point":
            noc_curve = curve
            if cfg.noc_metric == "iou":
                noc_curve = np.array([iou(m, truth) for m in seq])
                out.update({f"iou_point_{t}": float(v) for t, v in enumerate(noc_curve, start=1)})
            for thr in cfg.noc_thresholds:
                out[noc_key(thr)] = number_of_clicks(noc_curve, thr, cfg.noc_not_reached)
            out["dice_auc"] = dice_auc(curve)
    if "point" not in masks:
        out.update({noc_key(thr): float("nan") for thr in cfg.noc_thresholds}, dice_auc=float("nan"))
    return out


def score_live(job: LiveJob) -> Scored:
    """Run every sequence of one image through the model and score it (runs in a worker)."""
    loaded = read_case(job.case, job.config)
    model = load_model(job.model, job.model_kwargs)
    # imis_bench: the model works on the eval_size grid, its answers are scored on the label grid (as test.py)
    truths = loaded.masks if loaded.label_masks is None else loaded.label_masks
    label_shape = None if loaded.label_masks is None else _grid_shape(loaded.label_masks)
    seqs = interact_case(model, job.case.case_id, loaded.image, loaded.masks, job.prompt_types, job.config, label_shape)
    masks = {t: {p: [_scored_mask(turn) for turn in turns] for p, turns in by_p.items()} for t, by_p in seqs.items()}
    metrics = {t: sequence_metrics(truths[t], masks[t], job.config) for t in masks}
    digest = loaded.digest if loaded.label_masks is None else sha256_text(loaded.digest, IMIS_BENCH_TRUTH)
    return Scored(_record(job.case, metrics), digest, masks_digest(masks))


def _scored_mask(turn: Turn) -> np.ndarray:
    """The mask a turn is scored on: its answer on the label grid (``imis_bench``), else the answer as is."""
    return turn.mask if turn.label_mask is None else turn.label_mask


def _grid_shape(masks: Mapping[str, np.ndarray]) -> tuple[int, int] | None:
    """The 2D shape the label-grid masks share (None when there is no target)."""
    shapes = {m.shape for m in masks.values()}
    return next(iter(shapes)) if shapes else None


def score_logged(job: LogJob) -> Scored:
    """Verify one image's logged sequences against the protocol and score them (runs in a worker)."""
    loaded = read_case(job.case, job.config)
    cfg = job.config
    if job.case.case_id not in job.log.by_case:
        metrics = {
            t: sequence_metrics(m, {p: [np.zeros_like(m)] * cfg.max_clicks for p in job.prompt_types}, cfg)
            for t, m in sorted(loaded.masks.items())
        }
        return Scored(_record(job.case, metrics, missing=True), loaded.digest, "missing")
    masks, digest = verify_case(job.log, job.case.case_id, loaded.masks, cfg, job.prompt_types)
    metrics = {t: sequence_metrics(loaded.masks[t], masks[t], cfg) for t in masks}
    return Scored(_record(job.case, metrics), loaded.digest, digest)
