"""``loc``: detection (bone fractures, chest findings) and phrase grounding (MS-CXR style) on COCO-format boxes.

Inputs: ``--ground-truth`` a COCO annotation file (``images``, ``annotations`` with ``id``, ``image_id``,
``category_id``, ``bbox = [x, y, w, h]`` in pixels; ``categories`` with ``id``, ``name``; crowd regions are not
supported) and ``--predictions`` a COCO results list. Entries with ``image_id``, ``category_id``, ``bbox``,
``score`` are detections; entries with ``annotation_id`` and ``bbox`` are phrase-grounding boxes, one per
ground-truth annotation (the phrase's box). The ground truth may also be a YOLO dataset (``data.yaml`` or a
split folder) or an MS-CXR CSV (:mod:`~trackeval.benchmarks.xray.loc_layouts`), told from the files or
forced by ``--format``; they are converted to the same COCO structures and scored alike.

* ``xray/loc/map_50``: mean over categories with ground truth of COCO AP at IoU 0.5 (101-point interpolation,
  area range all, ``xray.loc.max_dets`` detections per image and category; pycocotools ``COCOeval`` semantics,
  see :mod:`trackeval.metrics.detection`), with ``/by_category/<name>``. No CI (AP is not a mean over images).
  The gate compares two versions on it by resampling images and recomputing mAP for both
  (:func:`map_50_corpus`, the unit's corpus reduction).
* ``xray/loc/miou``: mean IoU over all ground-truth annotations of their grounding box (a missing one counts 0
  and is counted in ``n_missing_grounding``), with an annotation-level bootstrap CI; only when the
  predictions hold grounding entries.

Case records: one per image (``case_id`` = ``subject_id`` = the image id), items (``category`` column of
cases.parquet):

* ``<category>``: ``n_gt`` (truth boxes) and ``n_det`` (detections, before the ``max_dets`` cut) of the image,
  for every category with a truth box or a detection in it;
* ``<category>/det_<k>``: the ``k``-th kept detection of the image and category (descending score, the
  ``max_dets`` highest), after COCO matching at IoU 0.5: ``score``, ``tp`` (1 matched, 0 a false positive) and
  ``rank`` (its position among all the category's kept detections merged by score, ties in image order): what
  mAP is recomputed from;
* ``annotation_<id>``: ``grounding_iou`` of each truth annotation (with grounding entries only);
* ``phrase_<k>`` (MS-CXR): ``grounding_iou`` of the image's ``k``-th phrase (file order), the area IoU of the
  union of its predicted boxes and the union of its truth boxes (a missing prediction: 0), the phrase's region
  being all its boxes, so that ``xray/loc/miou`` is a mean over phrases, not over boxes.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trackeval.benchmarks.summaries import clusters_of, column_summary, summary
from trackeval.benchmarks.xray.common import TaskInputs, unique_tokens
from trackeval.benchmarks.xray.loc_layouts import (
    MS_CXR_PRED_COLUMNS,
    LocTruth,
    Phrase,
    check_inside,
    is_ms_cxr,
    is_yolo,
    is_yolo_predictions,
    load_ms_cxr_predictions,
    load_ms_cxr_truth,
    load_yolo_predictions,
    load_yolo_truth,
)
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.layouts import Layout, choose, layout_digest
from trackeval.io.structured import read_json
from trackeval.metrics.box_union import union_iou
from trackeval.metrics.detection import (
    coco_average_precision,
    grounding_iou,
    match_image,
    weighted_average_precision,
    xywh_to_xyxy,
)
from trackeval.results import CaseRecord, MetricSummary, metric_key, sha256_text

log = logging.getLogger(__name__)

PREFIX = "xray/loc"
IOU_THRESHOLD = 0.5


def _number(value: Any, *, file: str, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{where}: {field} must be a finite number, got {value!r}", file=file, field=field)
    return float(value)


def _bbox(entry: dict[str, Any], *, file: str, where: str) -> list[float]:
    box = entry.get("bbox")
    if not isinstance(box, list) or len(box) != 4:
        raise InputError(f"{where}: bbox must be a list [x, y, w, h]", file=file, field="bbox")
    x, y, w, h = (_number(v, file=file, where=where, field="bbox") for v in box)
    if w < 0 or h < 0:
        raise InputError(f"{where}: bbox width and height must be >= 0, got {box}", file=file, field="bbox")
    return [x, y, w, h]


def _image_sizes(images: list[dict[str, Any]]) -> dict[Any, tuple[float, float]]:
    """``{image id: (width, height)}`` of the COCO images entries that give both as positive numbers."""
    out = {}
    for im in images:
        w, h = im.get("width"), im.get("height")
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in (w, h))
        if numbers and math.isfinite(w) and math.isfinite(h):
            out[im.get("id")] = (float(w), float(h))
    return out


def _id(entry: dict[str, Any], key: str, *, file: str, where: str) -> int | str:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InputError(f"{where}: missing or invalid {key} {value!r}", file=file, field=key)
    return value


def _list(doc: dict[str, Any], key: str, file: str) -> list[dict[str, Any]]:
    items = doc.get(key)
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise InputError(f"COCO file needs a list of objects under {key!r}", file=file, field=key)
    return items


def load_ground_truth(
    path: Path,
) -> tuple[list[int | str], dict[int | str, str], list[dict[str, Any]], dict[Any, tuple[float, float]]]:
    """Image ids (sorted, as COCOeval), ``{category id: key token}``, validated annotations (inside their image
    when it gives its ``width`` and ``height``) and those image sizes."""
    file = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("COCO ground truth must be a JSON object", file=file)
    images = [_id(im, "id", file=file, where=f"images[{i}]") for i, im in enumerate(_list(doc, "images", file))]
    if len(set(images)) != len(images):
        raise InputError("duplicate image id in images", file=file, field="images.id")
    cats = _list(doc, "categories", file)
    cat_ids = [_id(c, "id", file=file, where=f"categories[{i}]") for i, c in enumerate(cats)]
    if len(set(cat_ids)) != len(cat_ids):
        raise InputError("duplicate category id", file=file, field="categories.id")
    names = [str(c.get("name", c["id"])) for c in cats]
    categories = dict(zip(cat_ids, unique_tokens(names, file=file, field="categories.name"), strict=True))
    known_images = set(images)
    sizes = _image_sizes(_list(doc, "images", file))
    anns, ann_ids = [], set()
    for i, a in enumerate(_list(doc, "annotations", file)):
        where = f"annotations[{i}]"
        ann_id = _id(a, "id", file=file, where=where)
        if ann_id in ann_ids:
            raise InputError(f"{where}: duplicate annotation id {ann_id!r}", file=file, field="id")
        ann_ids.add(ann_id)
        if _id(a, "image_id", file=file, where=where) not in known_images:
            raise InputError(f"{where}: image_id {a['image_id']!r} is not in images", file=file, field="image_id")
        if _id(a, "category_id", file=file, where=where) not in categories:
            raise InputError(
                f"{where}: category_id {a['category_id']!r} is not in categories", file=file, field="category_id"
            )
        if a.get("iscrowd", 0):
            raise InputError(f"{where}: crowd regions (iscrowd=1) are not supported", file=file, field="iscrowd")
        anns.append(
            {
                "id": ann_id,
                "image_id": a["image_id"],
                "category_id": a["category_id"],
                "bbox": check_inside(
                    _bbox(a, file=file, where=where), sizes.get(a["image_id"]), file=file, where=where
                ),
            }
        )
    if not images:
        raise InputError("no images in the ground truth", file=file, field="images")
    return sorted(images, key=lambda x: (isinstance(x, str), x)), categories, anns, sizes


def load_predictions(
    path: Path,
    images: set[int | str],
    categories: dict[int | str, str],
    ann_ids: set[int | str],
    sizes: dict[Any, tuple[float, float]] | None = None,
) -> tuple[list[dict[str, Any]], dict[int | str, list[float]]]:
    """Validated detections and ``{annotation id: grounding bbox}`` from a COCO results list; boxes of images
    whose size ``sizes`` gives must lie inside them (:func:`check_inside`, as the truth's)."""
    file = str(path)
    doc = read_json(path)
    if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
        raise InputError("COCO detections must be a JSON list of objects", file=file)
    dets, grounding = [], {}
    for i, d in enumerate(doc):
        where = f"entry {i}"
        box = _bbox(d, file=file, where=where)
        if "annotation_id" in d:
            ann = _id(d, "annotation_id", file=file, where=where)
            if ann not in ann_ids:
                raise InputError(
                    f"{where}: annotation_id {ann!r} is not in the ground truth", file=file, field="annotation_id"
                )
            if ann in grounding:
                raise InputError(
                    f"{where}: a second grounding box for annotation {ann!r}", file=file, field="annotation_id"
                )
            grounding[ann] = box
            continue
        if _id(d, "image_id", file=file, where=where) not in images:
            raise InputError(
                f"{where}: image_id {d['image_id']!r} is not in the ground truth", file=file, field="image_id"
            )
        if _id(d, "category_id", file=file, where=where) not in categories:
            raise InputError(f"{where}: unknown category_id {d['category_id']!r}", file=file, field="category_id")
        score = _number(d.get("score"), file=file, where=where, field="score")
        check_inside(box, (sizes or {}).get(d["image_id"]), file=file, where=where)
        dets.append({"image_id": d["image_id"], "category_id": d["category_id"], "bbox": box, "score": score})
    return dets, grounding


def map_50_corpus(records: Sequence[CaseRecord], weights: np.ndarray) -> np.ndarray:
    """``xray/loc/map_50`` recomputed from the case records under image weights ``(B, n_images)``: ``(B,)``.

    The unit's corpus reduction (:class:`trackeval.spec.PrimaryMetric`): the gate resamples images and
    recomputes mAP on every resample for both versions. Per category with truth in ``records``: the weighted AP
    (:func:`~trackeval.metrics.detection.weighted_average_precision`) of its detection items
    (``<category>/det_<k>``, pooled in their recorded ``rank``) against the ``n_gt`` of its category items; the
    mean over those categories, NaN in a row where one of them has no weighted truth (a resample that misses a
    category does not average over fewer, as the gate's item means). A row of ones gives the stored ``map_50``
    up to the summation order of the mean over categories (sorted by token here).
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w[None, :] if w.ndim == 1 else w
    n_gt: dict[str, np.ndarray] = {}
    dets: dict[str, list[tuple[float, float, float, int]]] = defaultdict(list)
    for i, record in enumerate(records):
        for item, values in record.metrics.items():
            token, sep, rest = item.partition("/")
            if sep and rest.startswith("det_"):
                dets[token].append((values["rank"] or 0.0, values["score"] or 0.0, values["tp"] or 0.0, i))
            elif not sep and values.get("n_gt") is not None:
                n_gt.setdefault(token, np.zeros(len(records)))[i] = values["n_gt"]
    aps = []
    for token in sorted(n_gt):
        if n_gt[token].sum() > 0:
            d = np.array(sorted(dets[token]), dtype=np.float64).reshape(-1, 4)
            aps.append(weighted_average_precision(d[:, 1], d[:, 2] > 0, d[:, 3].astype(np.int64), n_gt[token], w))
    if not aps:
        return np.full(w.shape[0], np.nan)
    return np.stack(aps).sum(axis=0) / len(aps)


_Boxes = dict[tuple[Any, Any], list[list[float]]]
_Detections = dict[tuple[Any, Any], tuple[list[list[float]], list[float]]]


def _by_category_and_image(anns: list[dict[str, Any]], dets: list[dict[str, Any]]) -> tuple[_Boxes, _Detections]:
    """Truth boxes and ``(boxes, scores)`` of the detections by ``(category id, image id)``."""
    gt: _Boxes = defaultdict(list)
    for a in anns:
        gt[a["category_id"], a["image_id"]].append(a["bbox"])
    pred: _Detections = defaultdict(lambda: ([], []))
    for d in dets:
        boxes, scores = pred[d["category_id"], d["image_id"]]
        boxes.append(d["bbox"])
        scores.append(d["score"])
    return gt, pred


def _category_ap(
    cat: int | str, token: str, images: list[int | str], gt: _Boxes, pred: _Detections, max_dets: int, per_image: dict
) -> float:
    """COCO AP at IoU 0.5 of one category; its items (counts and matched detections) go into ``per_image``."""
    used = [im for im in images if (cat, im) in gt or (cat, im) in pred]
    matched = [  # as average_precision_at_iou: each image's kept detections, matched, in score order
        match_image(
            xywh_to_xyxy(gt.get((cat, im), [])),
            xywh_to_xyxy(pred[cat, im][0]) if (cat, im) in pred else np.zeros((0, 4)),
            np.asarray(pred[cat, im][1]) if (cat, im) in pred else np.zeros(0),
            IOU_THRESHOLD,
            max_dets,
        )
        for im in used
    ]
    pooled = np.concatenate([s for s, _ in matched]) if matched else np.zeros(0)
    n_gt = sum(len(gt.get((cat, im), [])) for im in used)
    ap = coco_average_precision(pooled, np.concatenate([t for _, t in matched]) if matched else pooled, n_gt)
    rank = np.empty(pooled.size, dtype=np.int64)
    rank[np.argsort(-pooled, kind="stable")] = np.arange(pooled.size)
    first = 0
    for im, (scores, is_tp) in zip(used, matched, strict=True):
        per_image[im][token] = {
            "n_gt": float(len(gt.get((cat, im), []))),
            "n_det": float(len(pred[cat, im][1]) if (cat, im) in pred else 0),
        }
        for k, (score, hit) in enumerate(zip(scores.tolist(), is_tp.tolist(), strict=True)):
            per_image[im][f"{token}/det_{k}"] = {"score": score, "tp": float(hit), "rank": float(rank[first + k])}
        first += scores.size
    return ap


def _iou_items(
    ious: np.ndarray, image_ids: list[Any], items: list[str], cfg: EvalConfig, per_image: dict
) -> MetricSummary:
    """``xray/loc/miou`` of the per-unit ``ious`` (image-clustered bootstrap); each unit's ``grounding_iou``
    goes into ``per_image`` under its item name."""
    clusters = clusters_of([str(im) for im in image_ids], cfg.bootstrap)
    for im, item, v in zip(image_ids, items, ious, strict=True):
        per_image[im][item] = {"grounding_iou": float(v)}
    return column_summary(ious, cfg.bootstrap, "miou", clusters)


def _grounding_miou(
    anns: list[dict[str, Any]], grounding: dict[int | str, list[float]], cfg: EvalConfig, per_image: dict
) -> tuple[MetricSummary, int]:
    """``xray/loc/miou`` (a missing grounding box counts IoU 0) and the number missing; each annotation's
    ``grounding_iou`` goes into ``per_image``."""
    truth_boxes = np.array([a["bbox"] for a in anns]).reshape(-1, 4)
    has = np.array([a["id"] in grounding for a in anns], dtype=bool)
    pred_boxes = np.array([grounding.get(a["id"], a["bbox"]) for a in anns]).reshape(-1, 4)
    ious = np.where(has, grounding_iou(xywh_to_xyxy(pred_boxes), xywh_to_xyxy(truth_boxes)), 0.0)
    items = [f"annotation_{a['id']}" for a in anns]
    return _iou_items(ious, [a["image_id"] for a in anns], items, cfg, per_image), int((~has).sum())


def _phrase_miou(
    phrases: list[Phrase], grounding: dict[int, list[list[float]]], cfg: EvalConfig, per_image: dict
) -> tuple[MetricSummary, int]:
    """MS-CXR: ``xray/loc/miou`` over phrases, each the area IoU of the union of its predicted boxes and the
    union of its truth boxes (:func:`~trackeval.metrics.box_union.union_iou`; no prediction: 0), and the
    number without a prediction; item ``phrase_<k>`` (the image's ``k``-th phrase, file order)."""
    ious = np.array(
        [union_iou(xywh_to_xyxy(grounding.get(k, [])), xywh_to_xyxy(p.boxes)) for k, p in enumerate(phrases)]
    )
    items = [f"phrase_{p.index}" for p in phrases]
    n_missing = sum(1 for k in range(len(phrases)) if k not in grounding)
    return _iou_items(ious, [p.image_id for p in phrases], items, cfg, per_image), n_missing


def _is_coco_file(path: Path) -> bool:
    """Any file but a CSV or YAML one (the COCO reader's own errors tell the rest)."""
    return path.is_file() and path.suffix.lower() not in {".csv", ".yaml", ".yml"}


GROUND_TRUTH_LAYOUTS = (
    Layout("yolo", "a data.yaml, or a split folder with images/ and labels/", is_yolo),
    Layout("ms-cxr", "CSV with dicom_id, category_name, label_text, x, y, w, h columns", is_ms_cxr),
    Layout("generic", "a COCO annotation JSON file", _is_coco_file, generic=True),
)


@dataclass
class _Inputs:
    """What the scoring reads, whatever the layouts: COCO structures, detections and grounding."""

    images: list[Any]
    categories: dict[Any, str]
    anns: list[dict[str, Any]]
    dets: list[dict[str, Any]]
    grounding: dict[Any, Any]
    truth_digest: str
    formats: dict[str, str]
    phrases: list[Phrase] | None = None


def _native_predictions(inputs: TaskInputs, layout: str, truth: LocTruth) -> tuple[list, dict, str]:
    """Detections, grounding and the predictions' layout name for a native ground truth."""
    path = inputs.predictions
    if layout == "ms-cxr":
        if not is_ms_cxr(path, MS_CXR_PRED_COLUMNS):
            raise InputError(
                f"MS-CXR predictions must be a CSV with columns {list(MS_CXR_PRED_COLUMNS)}", file=str(path)
            )
        dets, grounding = load_ms_cxr_predictions(path, truth)
        return dets, grounding, "ms-cxr"
    if is_yolo_predictions(path):
        return load_yolo_predictions(path, truth), {}, "yolo"
    dets, _ = load_predictions(path, set(truth.images), dict.fromkeys(truth.names, ""), set(), truth.sizes)
    return dets, {}, "generic"


def _load(inputs: TaskInputs, cfg: EvalConfig) -> _Inputs:
    """The ground truth in the layout :func:`~trackeval.io.layouts.choose` finds (or ``--format`` forces) and
    the predictions in the layout that goes with it."""
    layout = choose(inputs.ground_truth, GROUND_TRUTH_LAYOUTS, inputs.format)
    if layout.generic:
        images, categories, anns, sizes = load_ground_truth(inputs.ground_truth)
        ann_ids = {a["id"] for a in anns}
        dets, grounding = load_predictions(inputs.predictions, set(images), categories, ann_ids, sizes)
        formats = {"ground_truth": layout.name, "predictions": "generic"}
        return _Inputs(images, categories, anns, dets, grounding, sha256_files(inputs.ground_truth), formats)
    split = cfg.xray.loc.split
    load = load_yolo_truth if layout.name == "yolo" else load_ms_cxr_truth
    truth = load(inputs.ground_truth, split)
    file = str(inputs.ground_truth)
    categories = dict(
        zip(truth.names, unique_tokens(list(truth.names.values()), file=file, field="names"), strict=True)
    )
    dets, grounding, pred_layout = _native_predictions(inputs, layout.name, truth)
    return _Inputs(
        truth.images,
        categories,
        truth.anns,
        dets,
        grounding,
        layout_digest(layout, truth.digest),
        {"ground_truth": layout.name, "predictions": pred_layout},
        truth.phrases if layout.name == "ms-cxr" else None,
    )


def _grounding(data: _Inputs, cfg: EvalConfig, per_image: dict, out: dict[str, MetricSummary]) -> tuple[int, list[str]]:
    """``xray/loc/miou`` into ``out`` (MS-CXR phrases, or the generic per-annotation boxes; none without
    grounding entries): the number of truth units without a prediction and the warnings."""
    if data.phrases is not None:
        out[metric_key(PREFIX, "miou")], n_missing = _phrase_miou(data.phrases, data.grounding, cfg, per_image)
        notes = [f"{n_missing} phrase(s) without a predicted box scored IoU 0"] if n_missing else []
        if not data.dets:
            notes.append("no score column in the predictions: no detections, xray/loc/map_50 is 0")
        return n_missing, notes
    if data.grounding:
        out[metric_key(PREFIX, "miou")], n_missing = _grounding_miou(data.anns, data.grounding, cfg, per_image)
        return n_missing, [f"{n_missing} annotation(s) without a grounding box scored IoU 0"] if n_missing else []
    return 0, ["no grounding entries (annotation_id) in the predictions: xray/loc/miou not computed"]


def _predictions_digest(path: Path) -> str:
    """sha256 of the predictions file, or of a folder's ``*.txt`` files (name and bytes, sorted by name)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".txt")
        return sha256_text(*(f"{p.name}:{sha256_files(p)}" for p in files))
    return sha256_files(path)


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the localisation task (see the module docstring)."""
    data = _load(inputs, cfg)
    images, categories, anns, dets, grounding = data.images, data.categories, data.anns, data.dets, data.grounding
    gt, pred = _by_category_and_image(anns, dets)
    n_img = len(images)
    out: dict[str, MetricSummary] = {}
    aps = []
    per_image: dict[Any, dict[str, dict[str, float]]] = {im: {} for im in images}
    for cat, token in categories.items():
        ap = _category_ap(cat, token, images, gt, pred, cfg.xray.loc.max_dets, per_image)
        out[metric_key(PREFIX, "map_50", "by_category", token)] = summary(ap, n_img, 0 if math.isnan(ap) else n_img)
        if not math.isnan(ap):
            aps.append(ap)
    out[metric_key(PREFIX, "map_50")] = summary(float(np.mean(aps)) if aps else math.nan, n_img, n_img if aps else 0)
    n_missing, notes = _grounding(data, cfg, per_image, out)
    for note in notes:
        log.warning(note)
    records = [CaseRecord(case_id=str(im), subject_id=str(im), metrics=per_image[im]) for im in images]
    extra = {} if data.phrases is None else {"n_phrases": len(data.phrases)}
    return Evaluation(
        records=records,
        aggregates=out,
        item_kind="category",
        ground_truth_digest=data.truth_digest,
        predictions_digest=_predictions_digest(inputs.predictions),
        summary={
            "n_images": n_img,
            "n_categories": len(categories),
            "n_gt_boxes": len(anns),
            "n_detections": len(dets),
            "n_grounding_boxes": sum(len(v) for v in grounding.values())
            if data.phrases is not None
            else len(grounding),
            "n_missing_grounding": n_missing,
            **extra,
        },
        warnings=notes,
        params={"iou_threshold": IOU_THRESHOLD, "interpolation": "coco_101_point"},
        formats=data.formats,
    )
