"""``seg``: 2D anatomy segmentation (lungs, heart, clavicles, ribs, PAX-Ray classes, pneumothorax).

Inputs: ``--ground-truth DIR`` and ``--predictions DIR`` with one 2D integer label map per image,
``<image_id>.png`` (8/16-bit grey or palette, read with Pillow) or ``<image_id>.nii[.gz]`` (2D, or 3D with one
slice); a prediction may use either format. Class names: ``--label-names`` CSV ``id,name`` (e.g. ``255,lung``
for 0/255 masks) or the ``xray.seg.labels`` config mapping. Pixel values not in the map (other than 0) are an
error.

Per image and class: Dice and IoU from one confusion pass (:mod:`trackeval.metrics.overlap`; both empty ->
NaN, excluded; one side empty -> 0). ``xray/seg/dsc`` and ``xray/seg/miou`` are means over classes of the
per-class means over images, with ``/by_class/<c>``, CIs from an image-level bootstrap. A missing prediction
is scored as all background (``xray.seg.missing_prediction: worst``) or left NaN (``exclude``), counted and named
in one warning line, or an error (``error``); no prediction matching any image is an error naming the folder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.summaries import clusters_of, mean_summaries
from trackeval.benchmarks.xray_config import XRaySegConfig
from trackeval.benchmarks.xray_tasks.common import TaskInputs, unique_tokens
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, Scored, case_digests, score_cases
from trackeval.errors import InputError
from trackeval.io.images import load_image
from trackeval.io.nifti import read_bytes_digest, read_label_map
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.overlap import (
    confusion_matrix,
    counts_from_matrix,
    dice_from_counts,
    iou_from_counts,
    unlisted_values,
)
from trackeval.results import CaseRecord, MetricSummary, metric_key

log = logging.getLogger(__name__)

PREFIX = "xray/seg"
SUFFIXES = (".png", ".nii.gz", ".nii")
_PNG_MODES = {"1", "L", "P", "I", "I;16", "I;16B", "I;16L"}


@dataclass(frozen=True)
class _Job:
    case_id: str
    truth: Path
    pred: Path | None
    labels: dict[str, int]
    missing_policy: str


def _case_id(path: Path) -> str | None:
    for suffix in SUFFIXES:
        if path.name.lower().endswith(suffix):
            return path.name[: -len(suffix)]
    return None


def read_label_image(path: Path, *, case_id: str) -> tuple[np.ndarray, str]:
    """A 2D integer label map from PNG or NIfTI and the file's sha256; :class:`InputError` when it is not one."""
    if path.name.lower().endswith(".png"):
        raw, digest = read_bytes_digest(path, case_id=case_id)
        with load_image(raw, file=str(path), case_id=case_id) as img:
            if img.mode not in _PNG_MODES:
                raise InputError(
                    f"PNG mode {img.mode} is not a label map (expected greyscale or palette)",
                    file=str(path),
                    case_id=case_id,
                    field="mode",
                )
            try:
                array = np.asarray(img)
            except (OSError, SyntaxError, ValueError) as exc:  # a truncated stream fails only when decoded
                raise InputError(f"not a readable PNG file: {exc}", file=str(path), case_id=case_id) from exc
        array = array.astype(np.uint8) if array.dtype == bool else array
        if array.dtype.kind == "i" and array.size and array.min() < 0:
            raise InputError(f"negative label value {int(array.min())}", file=str(path), case_id=case_id)
        return array, digest
    vol = read_label_map(path, case_id=case_id)
    array = vol.array
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim != 2:
        raise InputError(
            f"expected a 2D label map, got shape {vol.array.shape}", file=str(path), case_id=case_id, field="dim"
        )
    return array, vol.digest


def score_case(job: _Job) -> Scored:
    """Read, validate and score one image (runs in a worker)."""
    truth, truth_digest = read_label_image(job.truth, case_id=job.case_id)
    if job.pred is None:
        pred = np.zeros_like(truth) if job.missing_policy == "worst" else None
        pred_digest = "missing"
    else:
        pred, pred_digest = read_label_image(job.pred, case_id=job.case_id)
        if pred.shape != truth.shape:
            raise InputError(
                f"shape mismatch: truth {truth.shape} ({job.truth}) vs prediction {pred.shape}",
                file=str(job.pred),
                case_id=job.case_id,
                field="dim",
            )
    metrics: dict[str, dict[str, float]] = {name: {} for name in job.labels}
    if pred is not None:
        # values outside the label names are refused before the confusion matrix, which is K x K in the
        # distinct values found (20 000 stray values in a small PNG would cost 3 GB); this pass is bounded
        # by the pixel count
        allowed = set(job.labels.values())
        for array, role, path in ((truth, "truth", job.truth), (pred, "prediction", job.pred)):
            unknown = unlisted_values(array, allowed) if path is not None else []
            if unknown:
                raise InputError(
                    f"{role} holds pixel value(s) {unknown} that are not in the label names",
                    file=str(path),
                    case_id=job.case_id,
                    field="pixel values",
                )
        values, matrix = confusion_matrix(pred, truth)
        counts = counts_from_matrix(values, matrix, list(job.labels.values()))
        metrics = {
            name: {
                "dsc": dice_from_counts(counts[i]),
                "iou": iou_from_counts(counts[i]),
                "n_ref": float(counts[i].n_ref),
                "n_pred": float(counts[i].n_pred),
            }
            for name, i in job.labels.items()
        }
    missing = job.pred is None
    record = CaseRecord(
        case_id=job.case_id,
        subject_id=job.case_id,
        metrics=metrics,
        status="missing_prediction" if missing else "ok",
        message=f"no prediction file; scored by policy '{job.missing_policy}'" if missing else "",
    )
    return Scored(record, truth_digest, pred_digest)


def read_label_names(path: Path) -> dict[str, int]:
    """``{class token: id}`` from a CSV with columns ``id,name`` (ids > 0, unique; names become key tokens)."""
    rows = read_csv_rows(path, required=("id", "name"))
    ids: list[int] = []
    for line, row in enumerate(rows, start=2):
        try:
            i = int(row["id"])
        except ValueError:
            raise InputError(f"id {row['id']!r} on line {line} is not an integer", file=str(path), field="id") from None
        if i <= 0 or i in ids:
            raise InputError(
                f"id {i} on line {line} must be > 0 and unique (0 is background)", file=str(path), field="id"
            )
        ids.append(i)
    tokens = unique_tokens([r["name"] for r in rows], file=str(path), field="name")
    return dict(zip(tokens, ids, strict=True))


def _files(folder: Path, role: str) -> dict[str, Path]:
    if not folder.is_dir():
        raise InputError(f"{role} folder not found", file=str(folder))
    out: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        case_id = _case_id(p)
        if case_id is None:
            continue
        check_case_id(case_id, file=str(p))
        if case_id in out:
            raise InputError(
                f"two files for one image: {out[case_id].name} and {p.name}", file=str(folder), case_id=case_id
            )
        out[case_id] = resolve_inside(folder, p.name, case_id=case_id)
    return out


def _class_names(inputs: TaskInputs, c: XRaySegConfig) -> dict[str, int]:
    """``{class token: id}`` from ``--label-names`` when given, else from ``xray.seg.labels``.

    Raises:
        InputError: neither names a class (or the CSV is malformed, see :func:`read_label_names`).
    """
    labels = read_label_names(inputs.label_names) if inputs.label_names is not None else dict(c.labels)
    if not labels:
        raise InputError("no class names: pass --label-names (CSV id,name) or set xray.seg.labels", field="label_names")
    return labels


def _prediction_notes(
    truth: dict[str, Path], preds: dict[str, Path], extra: list[str], predictions: Path, c: XRaySegConfig
) -> list[str]:
    """The warning lines (each logged) for images without a prediction (under ``xray.seg.missing_prediction``)
    and for predictions without ground truth (``extra``, the first 10 named).

    Raises:
        InputError: no prediction matches any image, or one is missing under the ``error`` policy.
    """
    matched = {preds[cid].name for cid in truth if cid in preds}
    notes = check_missing(
        list(truth),
        [cid for cid in truth if cid not in preds],
        predictions=predictions,
        expected_name=lambda cid: truth[cid].name,
        others=sorted(p.name for p in predictions.iterdir() if p.name not in matched),
        accepted=f" (any of {', '.join(SUFFIXES)})",
        policy=c.missing_prediction,
        policy_field="xray.seg.missing_prediction",
    )
    if extra:
        notes.append(f"{len(extra)} prediction(s) without ground truth ignored: {', '.join(extra[:10])}")
    for note in notes:
        log.warning(note)
    return notes


def _aggregates(records: list[CaseRecord], classes: list[str], cfg: EvalConfig) -> dict[str, MetricSummary]:
    """``xray/seg/dsc`` and ``xray/seg/miou`` with their ``by_class`` keys: means over the classes of the
    per-class means over images (a class absent from a record: NaN), CIs from one image-level bootstrap."""
    clusters = clusters_of(records, cfg.bootstrap)
    out: dict[str, MetricSummary] = {}
    for metric, key in (("dsc", "dsc"), ("iou", "miou")):
        values = np.array(
            [[np.nan if (v := r.metrics[k].get(metric)) is None else v for k in classes] for r in records],
            dtype=np.float64,
        ).reshape(len(records), len(classes))
        out.update(mean_summaries(metric_key(PREFIX, key), values, classes, "class", cfg.bootstrap, key, clusters))
    return out


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the segmentation task (see the module docstring)."""
    c = cfg.xray.seg
    labels = _class_names(inputs, c)
    truth = _files(inputs.ground_truth, "ground-truth")
    if not truth:
        raise InputError(
            f"no label maps ({', '.join(SUFFIXES)}) in the ground-truth folder", file=str(inputs.ground_truth)
        )
    preds = _files(inputs.predictions, "predictions")
    extra = sorted(set(preds) - set(truth))
    notes = _prediction_notes(truth, preds, extra, inputs.predictions, c)
    jobs = [_Job(cid, truth[cid], preds.get(cid), labels, c.missing_prediction) for cid in truth]
    scored = score_cases(score_case, jobs, cfg.engine, "X-ray seg images")
    records = [s.record for s in scored]
    out = _aggregates(records, list(labels), cfg)
    truth_digest, pred_digest = case_digests(scored)
    return Evaluation(
        records=records,
        aggregates=out,
        item_kind="class",
        ground_truth_digest=truth_digest,
        predictions_digest=pred_digest,
        summary={
            "n_images": len(records),
            "n_missing_predictions": sum(r.status == "missing_prediction" for r in records),
            "n_extra_predictions": len(extra),
        },
        warnings=notes,
        params={"labels": labels},
    )
