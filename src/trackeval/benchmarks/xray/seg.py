"""``seg``: 2D anatomy segmentation (lungs, heart, clavicles, ribs, PAX-Ray classes, pneumothorax).

Inputs: ``--ground-truth DIR`` and ``--predictions DIR`` with one 2D integer label map per image,
``<image_id>.png`` (8/16-bit grey or palette, read with Pillow) or ``<image_id>.nii[.gz]`` (2D, or 3D with one
slice); a prediction may use either format. Class names: ``--label-names`` CSV ``id,name`` (e.g. ``255,lung``
for 0/255 masks) or the ``xray.seg.labels`` config mapping. Pixel values not in the map (other than 0) are an
error.

Per image and class: Dice and IoU from one confusion pass (:mod:`trackeval.metrics.overlap`; both empty ->
NaN, excluded, or 1 under ``xray.seg.empty_both: perfect``, SIIM-ACR's Kaggle rule; one side empty -> 0).
``xray/seg/dsc`` and ``xray/seg/miou`` are means over classes of the per-class means over images, with
``/by_class/<c>``, CIs from an image-level bootstrap. A missing prediction
is scored as all background (``xray.seg.missing_prediction: worst``) or left NaN (``exclude``), counted and named
in one warning line, or an error (``error``); no prediction matching any image is an error naming the folder.

Native layouts (:mod:`~trackeval.benchmarks.xray.seg_layouts`: ``binary-folders``, ``jsrt-scr``,
``paxray``, ``vindr-ribcxr``, ``siim-rle``) hold overlapping classes, one binary mask per class: each class is
scored on its own two masks (a pixel in two classes counts for both; no argmax), through the same Dice/IoU
counts, record and aggregates as the label maps, which are the special case of one binary mask per label id
(scored in one confusion pass over the map: the same counts). The ground truth's layout is told from the files
(``--format`` forces it), the predictions' from their own files; both are recorded in results.json, and a native
layout's name and class names enter the ground-truth digest. The class names come from the layout (folder
names, ``label_dict``, the SCR structures, ``R1`` .. ``L10``, ``pneumothorax``) as key tokens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.segmentation import PERFECT, scored_perfect
from trackeval.benchmarks.summaries import clusters_of, mean_summaries
from trackeval.benchmarks.xray.common import TaskInputs, unique_tokens
from trackeval.benchmarks.xray.config import XRaySegConfig
from trackeval.benchmarks.xray.seg_layouts import (
    PAXRAY_SPLIT,
    PREDICTION_LAYOUTS,
    TRUTH_LAYOUTS,
    CaseRef,
    Source,
)
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, Scored, case_digests, score_cases
from trackeval.errors import InputError
from trackeval.io.images import load_image
from trackeval.io.layouts import Layout, choose, layout_digest
from trackeval.io.nifti import read_bytes_digest, read_label_map
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.overlap import (
    LabelCounts,
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
#: the label-map folders this task always read (``--label-names`` gives their classes)
GENERIC = Layout(
    "generic", "folder of <image>.png / .nii[.gz] integer label maps", lambda p: not p.is_file(), generic=True
)


@dataclass(frozen=True)
class _Job:
    case_id: str
    truth: Path
    pred: Path | None
    labels: dict[str, int]
    missing_policy: str
    empty_both: str = "nan"


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


def _class_metrics(counts: dict[str, LabelCounts], empty_both: str = "nan") -> dict[str, dict[str, float]]:
    """The per-class record metrics (Dice, IoU, pixel counts) of one image's per-class counts; a class absent
    from both masks is NaN, or Dice = IoU = 1 under ``empty_both="perfect"``."""
    return {
        name: {
            "dsc": PERFECT["dsc"] if scored_perfect(c, empty_both) else dice_from_counts(c),
            "iou": PERFECT["iou"] if scored_perfect(c, empty_both) else iou_from_counts(c),
            "n_ref": float(c.n_ref),
            "n_pred": float(c.n_pred),
        }
        for name, c in counts.items()
    }


def _record(
    case_id: str,
    classes: list[str],
    counts: dict[str, LabelCounts] | None,
    policy: str,
    missing: bool,
    empty_both: str = "nan",
) -> CaseRecord:
    """One image's :class:`CaseRecord`: metrics from ``counts`` (None: no prediction scored, NaN per class)
    under the empty policy ``empty_both``."""
    return CaseRecord(
        case_id=case_id,
        subject_id=case_id,
        metrics=_class_metrics(counts, empty_both) if counts is not None else {name: {} for name in classes},
        status="missing_prediction" if missing else "ok",
        message=f"no prediction file; scored by policy '{policy}'" if missing else "",
    )


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
    counts = None
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
        # a label map is one binary mask per id: the counts of id i are those of (truth == i, pred == i)
        values, matrix = confusion_matrix(pred, truth)
        by_id = counts_from_matrix(values, matrix, list(job.labels.values()))
        counts = {name: by_id[i] for name, i in job.labels.items()}
    record = _record(job.case_id, list(job.labels), counts, job.missing_policy, job.pred is None, job.empty_both)
    return Scored(record, truth_digest, pred_digest)


@dataclass(frozen=True)
class _StackJob:
    """One image of a native layout: ``channels``: the prediction channel of each truth class (in ``classes``
    order); ``n_pred_channels``: how many channels the prediction must have; ``pred_file``: for messages;
    ``empty_both``: ``xray.seg.empty_both``."""

    case_id: str
    truth: CaseRef
    pred: CaseRef | None
    classes: tuple[str, ...]
    channels: tuple[int, ...]
    n_pred_channels: int
    pred_file: str
    missing_policy: str
    empty_both: str = "nan"


def binary_counts(truth: np.ndarray, pred: np.ndarray, classes: tuple[str, ...]) -> dict[str, LabelCounts]:
    """Per class, the counts of its own two binary masks (``truth[k]``, ``pred[k]``: ``(classes, H, W)`` bool
    stacks), one confusion pass each: classes may overlap, a pixel in two classes counts for both."""
    out: dict[str, LabelCounts] = {}
    for k, name in enumerate(classes):
        values, matrix = confusion_matrix(pred[k], truth[k])
        out[name] = counts_from_matrix(values, matrix, [1])[1]
    return out


def _load_prediction(job: _StackJob, ref: CaseRef, shape: tuple[int, int]) -> tuple[np.ndarray, str]:
    """The prediction stack ``ref`` of ``job`` reordered to the truth's classes, checked against the truth's size."""
    pred, digest = ref.load(job.case_id, shape)
    where = {"file": job.pred_file, "case_id": job.case_id, "field": "dim"}
    if pred.shape[0] != job.n_pred_channels:
        raise InputError(f"prediction has {pred.shape[0]} class channel(s), expected {job.n_pred_channels}", **where)
    if pred.shape[1:] != shape:
        raise InputError(f"shape mismatch: truth {shape} vs prediction {pred.shape[1:]}", **where)
    return pred[list(job.channels)], digest


def score_stack_case(job: _StackJob) -> Scored:
    """Read and score one image of a native layout, each class on its own binary masks (runs in a worker)."""
    truth, truth_digest = job.truth.load(job.case_id, None)
    if truth.shape[0] != len(job.classes):
        raise InputError(
            f"ground truth has {truth.shape[0]} class channel(s), its class names {len(job.classes)}",
            case_id=job.case_id,
            field="dim",
        )
    shape = (int(truth.shape[1]), int(truth.shape[2]))
    if job.pred is not None:
        pred, pred_digest = _load_prediction(job, job.pred, shape)
    else:
        pred, pred_digest = (np.zeros_like(truth) if job.missing_policy == "worst" else None), "missing"
    counts = binary_counts(truth, pred, job.classes) if pred is not None else None
    record = _record(job.case_id, list(job.classes), counts, job.missing_policy, job.pred is None, job.empty_both)
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
    case_ids: list[str],
    missing: list[str],
    extra: list[str],
    *,
    predictions: Path,
    expected_name: Callable[[str], str],
    others: list[str],
    accepted: str,
    c: XRaySegConfig,
) -> list[str]:
    """The warning lines (each logged) for images without a prediction (under ``xray.seg.missing_prediction``)
    and for predictions without ground truth (``extra``, the first 10 named).

    Raises:
        InputError: no prediction matches any image, or one is missing under the ``error`` policy.
    """
    notes = check_missing(
        case_ids,
        missing,
        predictions=predictions,
        expected_name=expected_name,
        others=others,
        accepted=accepted,
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


def _evaluation(
    scored: list[Scored], classes: list[str], cfg: EvalConfig, notes: list[str], n_extra: int, digests: tuple[str, str]
) -> Evaluation:
    """The :class:`Evaluation` of scored images (``digests``: ground truth, predictions); the caller adds its
    ``params`` and ``formats``."""
    records = [s.record for s in scored]
    return Evaluation(
        records=records,
        aggregates=_aggregates(records, classes, cfg),
        item_kind="class",
        ground_truth_digest=digests[0],
        predictions_digest=digests[1],
        summary={
            "n_images": len(records),
            "n_missing_predictions": sum(r.status == "missing_prediction" for r in records),
            "n_extra_predictions": n_extra,
        },
        warnings=notes,
    )


def _evaluate_label_maps(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """The generic layout: integer label-map folders with ``--label-names`` / ``xray.seg.labels``."""
    c = cfg.xray.seg
    labels = _class_names(inputs, c)
    truth = _files(inputs.ground_truth, "ground-truth")
    if not truth:
        raise InputError(
            f"no label maps ({', '.join(SUFFIXES)}) in the ground-truth folder", file=str(inputs.ground_truth)
        )
    preds = _files(inputs.predictions, "predictions")
    extra = sorted(set(preds) - set(truth))
    matched = {preds[cid].name for cid in truth if cid in preds}
    notes = _prediction_notes(
        list(truth),
        [cid for cid in truth if cid not in preds],
        extra,
        predictions=inputs.predictions,
        expected_name=lambda cid: truth[cid].name,
        others=sorted(p.name for p in inputs.predictions.iterdir() if p.name not in matched),
        accepted=f" (any of {', '.join(SUFFIXES)})",
        c=c,
    )
    jobs = [_Job(cid, truth[cid], preds.get(cid), labels, c.missing_prediction, c.empty_both) for cid in truth]
    scored = score_cases(score_case, jobs, cfg.engine, "X-ray seg images")
    out = _evaluation(scored, list(labels), cfg, notes, len(extra), case_digests(scored))
    out.params = {"labels": labels}
    out.formats = {"ground_truth": GENERIC.name, "predictions": GENERIC.name}
    return out


def _channels(truth: Source, tokens: list[str], pred: Source) -> tuple[tuple[int, ...], int, list[str]]:
    """The prediction channel of each truth class, the prediction's channel count and a note on prediction
    classes the truth does not have (logged). Unnamed channels (``.npy`` stacks) are the truth's, in order.

    Raises:
        InputError: the predictions lack a truth class (naming the first few).
    """
    if not pred.names:
        return tuple(range(len(tokens))), len(tokens), []
    pred_tokens = unique_tokens(list(pred.names), file=str(pred.path), field="class")
    absent = [t for t in tokens if t not in pred_tokens]
    if absent:
        raise InputError(
            f"the predictions have no class {', '.join(absent[:5])} of the ground truth (found "
            f"{', '.join(pred_tokens[:5])})",
            file=str(pred.path),
            field="class",
        )
    ignored = [t for t in pred_tokens if t not in tokens]
    notes = [f"{len(ignored)} prediction class(es) not in the ground truth ignored: {', '.join(ignored[:10])}"]
    notes = notes if ignored else []
    for note in notes:
        log.warning(note)
    return tuple(pred_tokens.index(t) for t in tokens), len(pred_tokens), notes


def _evaluate_native(inputs: TaskInputs, cfg: EvalConfig, layout: Layout, read: Callable[[Path], Source]) -> Evaluation:
    """A native layout: one binary mask per class and image, each class scored on its own."""
    c = cfg.xray.seg
    if inputs.label_names is not None:
        raise InputError(
            f"--label-names is only read with label maps; the {layout.name} layout names its classes",
            file=str(inputs.label_names),
            field="label_names",
        )
    truth = read(inputs.ground_truth)
    if not truth.cases:
        raise InputError(f"no image in the ground truth ({layout.name})", file=str(inputs.ground_truth))
    tokens = unique_tokens(list(truth.names), file=str(inputs.ground_truth), field="class")
    pred_readers = {x.name: r for x, r in PREDICTION_LAYOUTS}
    pred_layout = choose(inputs.predictions, [x for x, _ in PREDICTION_LAYOUTS], what="predictions")
    pred = pred_readers[pred_layout.name](inputs.predictions)
    channels, n_channels, class_notes = _channels(truth, tokens, pred)
    ids = list(truth.cases)
    extra = sorted(set(pred.cases) - set(truth.cases))
    notes = _prediction_notes(
        ids,
        [cid for cid in ids if cid not in pred.cases],
        extra,
        predictions=inputs.predictions,
        expected_name=pred.expected,
        others=[pred.expected(cid) for cid in extra],
        accepted="",
        c=c,
    )
    jobs = [
        _StackJob(
            cid,
            ref,
            pred.cases.get(cid),
            tuple(tokens),
            channels,
            n_channels,
            pred.cases[cid].where if cid in pred.cases else str(inputs.predictions),
            c.missing_prediction,
            c.empty_both,
        )
        for cid, ref in truth.cases.items()
    ]
    scored = score_cases(score_stack_case, jobs, cfg.engine, "X-ray seg images")
    truth_digest, pred_digest = case_digests(scored, f"classes:{json.dumps(list(truth.names))}")
    out = _evaluation(
        scored, tokens, cfg, class_notes + notes, len(extra), (layout_digest(layout, truth_digest), pred_digest)
    )
    out.params = {"classes": dict(zip(tokens, truth.names, strict=True))}
    if layout.name == "paxray":
        out.params["split"] = PAXRAY_SPLIT
    out.formats = {"ground_truth": layout.name, "predictions": pred_layout.name}
    return out


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the segmentation task (see the module docstring): the ground truth's layout told from its files
    (or forced by ``--format``), then the label-map path or the native one."""
    readers = {x.name: r for x, r in TRUTH_LAYOUTS}
    layout = choose(inputs.ground_truth, [*(x for x, _ in TRUTH_LAYOUTS), GENERIC], inputs.format)
    if layout.generic:
        return _evaluate_label_maps(inputs, cfg)
    return _evaluate_native(inputs, cfg, layout, readers[layout.name])
