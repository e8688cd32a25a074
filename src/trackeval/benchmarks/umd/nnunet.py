"""UMD's nnU-Net v2 layout: the raw dataset folder (``dataset.json``, ``labelsTs/`` or ``labelsTr/``), predictions
as ``nnUNetv2_predict`` writes them, and nnU-Net's ``summary.json``.

Layout (nnU-Net v2 ``documentation/dataset_format.md`` and ``dataset_conversion/generate_dataset_json.py``):
``DatasetXXX_Name/dataset.json`` holds ``channel_names`` (``{"0": "CT"}``), ``labels`` (``{"background": 0,
"liver": 1, "whole tumor": [1, 2, 3]}``: a list is a region, the union of its ids), ``numTraining``,
``file_ending`` and, for regions, ``regions_class_order``; label maps are ``labelsTs/<case>{file_ending}`` (the
test labels next to the raw data; ``labelsTr/`` when there is no ``labelsTs/``). ``--ground-truth`` is the dataset
folder or that labels folder. Predictions are a folder of ``<case>{file_ending}`` (the ``dataset.json``,
``plans.json`` and ``predict_from_raw_data_args.json`` nnU-Net writes beside them are ignored).

Conventions (docs/benchmarks/umd.md):

* organs: a label is one of the 13 UMD organs when :func:`~trackeval.results.key_token` of its name is the organ's
  name (``"Kidney Left"`` and ``"kidney_left"`` -> ``kidney_left``); other labels are scored as background (one
  warning names them); ``umd.labels`` in the config replaces the matching;
* subject and modality: an optional ``manifest.csv`` beside ``dataset.json`` (the generic layout's columns
  ``case_id,subject_id,modality``); without it each case is its own subject and the modality comes from
  ``channel_names`` (:func:`channel_modality`), or is ``unknown`` (no by-modality breakdown, no paired gap);
* the ``ignore`` label (``"ignore": N``, an integer one above every other id, as nnU-Net's ``LabelManager``
  requires) marks voxels of the ground truth that were not annotated: as nnU-Net's ``compute_metrics`` does, a voxel
  whose truth is ``N`` is left out of every count of every organ, label and region (TP, FP, FN, TN, ``n_ref``,
  ``n_pred``, hence Dice and IoU), whatever the prediction holds there; a prediction voxel holding ``N`` elsewhere
  is background. Surface metrics are not defined on partly annotated maps (nnU-Net computes none), so UMD scores
  Dice and IoU only with an ignore label (:func:`trackeval.benchmarks.umd.adapter.evaluate`);
* a ``file_ending`` other than NIfTI is refused.

``summary.json`` (:func:`summary_json`) follows ``nnunetv2/evaluation/evaluate_predictions.py``: per prediction file
(sorted by name) and label or region, voxel counts TP/FP/FN/TN, ``n_pred`` = TP + FP, ``n_ref`` = TP + FN, Dice =
2 TP / (2 TP + FP + FN) and IoU = TP / (TP + FP + FN), both NaN when TP + FP + FN = 0; ``mean`` per label is the
mean over cases leaving NaN out (NaN when all are); ``foreground_mean`` the plain mean of the label means (a NaN
label mean makes it NaN). With an ``ignore`` label the counts leave its voxels out (TN too) and it is not a key.
Keys are ``str()`` of the label (``"1"``) or region tuple (``"(1, 2)"``); the file is
``json.dumps(..., sort_keys=True, indent=4)`` with NaN written as ``NaN``, as nnU-Net writes it. One difference:
file paths are relative to the folders given (nnU-Net writes absolute paths; trackeval writes no machine paths).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.hashing import sha256_bytes
from trackeval.io.paths import check_case_id
from trackeval.io.structured import parse_json, read_limited
from trackeval.metrics.overlap import LabelCounts
from trackeval.results import key_token
from trackeval.stats.reduce import nan_mean

#: a label id or a region (tuple of ids)
Label = int | tuple[int, ...]

DATASET_JSON = "dataset.json"
#: the label folders of a dataset, in order of preference
LABEL_FOLDERS = ("labelsTs", "labelsTr")
#: the file endings trackeval reads (NIfTI label maps)
NIFTI_ENDINGS = (".nii.gz", ".nii")
#: files nnUNetv2_predict writes beside the predictions
PREDICT_FILES = ("plans.json", DATASET_JSON, "predict_from_raw_data_args.json")
SUMMARY_JSON = "summary.json"
#: summary.json's per-label metrics, as nnU-Net computes them
SUMMARY_METRICS = ("Dice", "IoU", "FP", "TP", "FN", "TN", "n_pred", "n_ref")
#: channel names (as key tokens) read as each modality; any other name leaves the modality unknown
CHANNEL_MODALITIES: dict[str, frozenset[str]] = {
    "ct": frozenset({"ct"}),
    "pet": frozenset({"pet", "pt", "suv"}),
    "mri": frozenset(
        {"mr", "mri", "t1", "t1w", "t1c", "t1ce", "t1gd", "t2", "t2w", "flair", "adc", "dwi", "pd", "pdw"}
    ),
}


@dataclass(frozen=True)
class NnunetDataset:
    """A dataset.json and its label folder.

    ``labels``: the foreground labels by name as dataset.json gives them (a list as a tuple), background left out;
    ``all_ids``: every id they use (the voxel values a label map may hold besides 0); ``modality``: from
    ``channel_names`` (None: unknown); ``digest``: sha256 of dataset.json's bytes; ``ignore``: the id of the
    ``ignore`` label (None: every voxel is annotated), never in ``labels`` or ``all_ids``.
    """

    root: Path
    labels_dir: Path
    labels: dict[str, Label]
    file_ending: str
    modality: str | None
    channel_names: dict[str, str]
    digest: str
    ignore: int | None = None

    @property
    def path(self) -> Path:
        """The dataset.json file."""
        return self.root / DATASET_JSON

    @property
    def all_ids(self) -> frozenset[int]:
        """Every label id of ``labels``."""
        return frozenset(i for ids in self.labels.values() for i in _ids(ids))


def _ids(label: Label) -> tuple[int, ...]:
    return (label,) if isinstance(label, int) else label


def dataset_root(path: Path) -> tuple[Path, Path] | None:
    """``(dataset folder, labels folder)`` of ``path`` (a dataset folder holding dataset.json and ``labelsTs/`` or
    ``labelsTr/``, or such a labels folder), else None."""
    if (path / DATASET_JSON).is_file():
        found = [path / name for name in LABEL_FOLDERS if (path / name).is_dir()]
        return (path, found[0]) if found else None
    if path.name in LABEL_FOLDERS and (path.parent / DATASET_JSON).is_file():
        return path.parent, path
    return None


def looks_like(path: Path) -> bool:
    """The layout test: ``path`` is an nnU-Net dataset or labels folder (:func:`dataset_root`)."""
    return dataset_root(path) is not None


def written_by_nnunet(pred_dir: Path) -> bool:
    """True when ``pred_dir`` holds the files nnUNetv2_predict writes beside its predictions."""
    return any((pred_dir / name).is_file() for name in PREDICT_FILES)


def read_dataset(path: Path) -> NnunetDataset:
    """The dataset of ``path`` (:func:`dataset_root`), its dataset.json validated.

    Raises:
        InputError: naming dataset.json and the field: no dataset.json or labels folder, not a JSON object,
            ``labels`` missing or malformed (no ``background: 0``, a value that is not an id or a list of ids),
            ``file_ending`` missing or not ``.nii.gz`` / ``.nii``, ``channel_names`` not an
            object of names, an ``ignore`` label that is not one integer above every other id.
    """
    found = dataset_root(path)
    if found is None:
        raise InputError(
            f"not an nnU-Net dataset: no {DATASET_JSON} with a {' or '.join(LABEL_FOLDERS)} folder",
            file=str(path),
            field="format",
        )
    root, labels_dir = found
    raw = read_limited(root / DATASET_JSON)
    data = parse_json(decode_text(raw, file=root / DATASET_JSON), file=root / DATASET_JSON)
    file = str(root / DATASET_JSON)
    if not isinstance(data, dict):
        raise InputError("dataset.json is not a JSON object", file=file)
    ending = data.get("file_ending")
    if ending not in NIFTI_ENDINGS:
        raise InputError(
            f"file_ending {ending!r}: trackeval reads NIfTI label maps ({', '.join(NIFTI_ENDINGS)})",
            file=file,
            field="file_ending",
        )
    channels = _channel_names(data.get("channel_names", {}), file)
    labels, ignore = _labels(data.get("labels"), file)
    modality = channel_modality(channels)
    return NnunetDataset(root, labels_dir, labels, ending, modality, channels, sha256_bytes(raw), ignore)


def _channel_names(value: Any, file: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InputError("channel_names must map channel indices to names", file=file, field="channel_names")
    return {str(k): v for k, v in value.items()}


def _label_value(name: str, value: Any, file: str) -> Label:
    """One ``labels`` value as an id or a region tuple (a list of one id stays a region, as in nnU-Net)."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
        raise InputError(
            f"label {name!r}: {value!r} is not a label id (an integer >= 0) or a non-empty list of ids",
            file=file,
            field=f"labels.{name}",
        )
    return tuple(items) if isinstance(value, list) else value


def _labels(value: Any, file: str) -> tuple[dict[str, Label], int | None]:
    """The foreground labels of dataset.json's ``labels`` and its ``ignore`` id (None: none; see
    :func:`read_dataset`)."""
    if not isinstance(value, dict) or value.get("background") != 0 or isinstance(value.get("background"), bool):
        raise InputError('labels must be an object with "background": 0', file=file, field="labels")
    labels = {str(name): _label_value(str(name), v, file) for name, v in value.items() if name != "ignore"}
    ignore = _ignore_id(value.get("ignore"), labels, file) if "ignore" in value else None
    return {name: v for name, v in labels.items() if set(_ids(v)) != {0}}, ignore


def _ignore_id(value: Any, labels: Mapping[str, Label], file: str) -> int:
    """The ``ignore`` label's id, checked as nnU-Net's ``LabelManager`` checks it: one integer (not a region), one
    above the largest id of the other labels (background included)."""
    top = max(i for v in labels.values() for i in _ids(v))
    if not isinstance(value, int) or isinstance(value, bool) or value != top + 1:
        raise InputError(
            f"ignore label {value!r}: nnU-Net requires one integer, the highest label value ({top + 1} here)",
            file=file,
            field="labels.ignore",
        )
    return value


def channel_modality(channel_names: Mapping[str, str]) -> str | None:
    """The modality every channel names (:data:`CHANNEL_MODALITIES`, by key token: ``"CT"`` -> ``ct``, ``"T2"`` and
    ``"ADC"`` -> ``mri``); None when a channel names none, or channels name different ones (PET + CT)."""
    found = set()
    for name in channel_names.values():
        token = key_token(name, fallback="")
        found.add(next((m for m, names in CHANNEL_MODALITIES.items() if token in names), None))
    return found.pop() if len(found) == 1 else None


def organ_labels(ds: NnunetDataset, organs: Sequence[str]) -> tuple[dict[str, Label], list[str]]:
    """``({organ: id or region}, names of the labels that name no organ)``; organs in ``organs`` order.

    A label names an organ when its name's key token is the organ's name; a region of one id is its id.

    Raises:
        InputError: two labels name one organ, an organ's region holds 0, or no label names an organ.
    """
    found: dict[str, tuple[str, Label]] = {}
    unmatched = []
    for name, ids in ds.labels.items():
        token = key_token(name, fallback="")
        if token not in organs:
            unmatched.append(name)
            continue
        if token in found:
            raise InputError(
                f"labels {found[token][0]!r} and {name!r} both name the organ {token!r}",
                file=str(ds.path),
                field="labels",
            )
        if 0 in _ids(ids):
            raise InputError(
                f"organ label {name!r} holds the background id 0", file=str(ds.path), field=f"labels.{name}"
            )
        found[token] = (name, ids[0] if isinstance(ids, tuple) and len(ids) == 1 else ids)
    if not found:
        raise InputError(
            f"no label names a UMD organ (labels: {list(ds.labels)}; organs: {list(organs)}); set umd.labels",
            file=str(ds.path),
            field="labels",
        )
    return {organ: found[organ][1] for organ in organs if organ in found}, unmatched


def label_files(ds: NnunetDataset) -> list[tuple[str, Path]]:
    """``(case id, file)`` of every ``<case>{file_ending}`` of the labels folder, by case id.

    Raises:
        InputError: a case id that is not a safe file name, or no label map at all (naming the folder).
    """
    found = []
    for path in sorted(ds.labels_dir.iterdir()):
        if path.name.endswith(ds.file_ending) and not path.name.startswith("."):
            case_id = path.name[: -len(ds.file_ending)]
            found.append((check_case_id(case_id, file=str(path)), path))
    if not found:
        raise InputError(f"no <case>{ds.file_ending} label map", file=str(ds.labels_dir))
    return found


def targets(labels: Mapping[str, Label]) -> list[Label]:
    """The labels and regions nnU-Net's evaluation scores for a ``labels`` map (foreground only), as its
    ``LabelManager`` lists them: with a region of more than one id anywhere, every entry in map order (a region of
    one id stays a region); else the sorted distinct ids."""
    values = [v for v in labels.values() if set(_ids(v)) != {0}]
    if any(isinstance(v, tuple) and len(v) > 1 for v in values):
        return values
    return sorted({i for v in values for i in _ids(v)} - {0})


@dataclass(frozen=True)
class SummaryCase:
    """One scored prediction for summary.json: file names relative to the given folders, and its counts."""

    reference_file: str
    prediction_file: str
    counts: dict[Label, LabelCounts]
    n_voxels: int


def _case_metrics(c: LabelCounts, n_voxels: int) -> dict[str, float | int]:
    return {
        "Dice": c.dice,
        "IoU": c.iou,
        "FP": c.fp,
        "TP": c.tp,
        "FN": c.fn,
        "TN": n_voxels - c.tp - c.fp - c.fn,
        "n_pred": c.n_pred,
        "n_ref": c.n_ref,
    }


def summary(cases: Sequence[SummaryCase], labels: Sequence[Label]) -> dict[str, Any]:
    """nnU-Net's summary of ``cases`` (in the given order) over ``labels`` (see the module docstring)."""
    per_case = [
        {
            "reference_file": c.reference_file,
            "prediction_file": c.prediction_file,
            "metrics": {str(k): _case_metrics(c.counts[k], c.n_voxels) for k in labels},
        }
        for c in cases
    ]
    mean = {
        str(k): {
            m: float(nan_mean(np.array([case["metrics"][str(k)][m] for case in per_case], dtype=np.float64)))
            for m in SUMMARY_METRICS
        }
        for k in labels
    }
    foreground = {m: float(np.mean([mean[str(k)][m] for k in labels])) for m in SUMMARY_METRICS}
    return {"metric_per_case": per_case, "mean": mean, "foreground_mean": foreground}


def summary_json(cases: Sequence[SummaryCase], labels: Sequence[Label]) -> bytes:
    """:func:`summary` as nnU-Net writes it: sorted keys, 4-space indent, NaN as ``NaN``, no final newline."""
    return json.dumps(summary(cases, labels), sort_keys=True, indent=4).encode("utf-8")
