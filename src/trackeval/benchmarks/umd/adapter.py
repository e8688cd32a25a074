"""UMD: 13-organ segmentation on paired PET vs CT/MRI scans of the same subjects.

Inputs: ``GT_DIR/manifest.csv`` (``case_id,subject_id,modality`` + optional ``site``, ``scanner`` and free
group columns; modality in {ct, mri, pet}), ``GT_DIR/<case_id>.nii.gz`` and ``PRED_DIR/<case_id>.nii.gz``
integer label maps on the same grid (``<case_id>.nii`` is read as well; both files for one case is an error):
the ``generic`` layout. The ``nnunet`` layout reads an nnU-Net v2 raw dataset (``dataset.json`` with
``labelsTs/`` or ``labelsTr/``; predictions as ``nnUNetv2_predict`` writes them): see
:mod:`trackeval.benchmarks.umd_nnunet`. The layout is told from the ground truth's files (``--format`` forces it)
and recorded as ``config.format``; ``--nnunet-summary`` also writes nnU-Net's ``summary.json`` beside results.json.
A case without a prediction is counted and named in one warning line (``umd.missing_prediction``: ``worst``,
``exclude`` or ``error``); no prediction matching any case is an error naming the folder. Per case x organ:
dsc (primary), nsd@tolerance, hd95 (+ iou, hd, assd in the per-case records); ``umd.metrics`` selects a subset
(``[dsc, iou]``: no surface distances), the keys of the others are then absent from the records and the
aggregates.

Aggregates (metric m in dsc, nsd, hd95): ``umd/m`` = mean over organs of the per-organ means (nnU-Net
``foreground_mean``), ``umd/m/by_organ/<organ>``, ``umd/m/by_modality/<mod>`` and
``umd/m/by_modality/<mod>/by_organ/<organ>``; subject-level (``bootstrap.cluster``) bootstrap CIs on the
headline, per-organ and per-modality keys. Paired modality gap ``umd/dsc_gap/<a>_vs_<b>`` (+
``/by_organ/<organ>``): per subject and organ ``dsc(a) - dsc(b)`` (a subject's cases of one modality are averaged
first), bootstrapped over subjects.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trackeval.audit.leakage import AuditFinding, audit_against_training
from trackeval.benchmarks import umd_nnunet
from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.segmentation import SEG_METRICS, score_segmentation, worker_preload
from trackeval.benchmarks.summaries import clusters_of, mean_summaries
from trackeval.benchmarks.umd_config import UMD_ORGANS, UMDConfig
from trackeval.config import EvalConfig
from trackeval.engine.cache import CaseCache
from trackeval.engine.driver import Evaluation, Scored, case_digests, finish, score_cases
from trackeval.engine.executors import case_threads, map_cases
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.layouts import Layout, choose, layout_digest
from trackeval.io.nifti import LabelVolume, check_same_grid, read_bytes_digest, read_label_map
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.overlap import confusion, confusion_matrix, unlisted_values
from trackeval.results import (
    BenchmarkResult,
    CaseRecord,
    MetricSummary,
    PlotSpec,
    check_group_columns,
    item_matrix,
    metric_key,
    sha256_text,
)
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric
from trackeval.stats.reduce import nan_mean

log = logging.getLogger(__name__)

NAME = "umd"
MODALITIES = ("ct", "mri", "pet")
AGG_METRICS = ("dsc", "nsd", "hd95")
SUFFIX = ".nii.gz"
#: the label-map file names read for a case: ``<case_id>`` + one of these (both present is an error)
SUFFIXES = (SUFFIX, ".nii")

#: the nnU-Net v2 raw dataset layout (:mod:`trackeval.benchmarks.umd_nnunet`)
NNUNET = Layout(
    "nnunet",
    "an nnU-Net v2 dataset folder: dataset.json with labelsTs/ or labelsTr/, or that labels folder",
    umd_nnunet.looks_like,
)
#: UMD's own layout: manifest.csv + <case_id>.nii.gz
GENERIC = Layout(
    "generic", "a folder with manifest.csv and <case_id>.nii.gz", lambda p: (p / "manifest.csv").is_file(), generic=True
)
#: the layouts a ground-truth folder is told from, first match wins (a manifest.csv beside dataset.json is nnU-Net's)
LAYOUTS = (NNUNET, GENERIC)


@dataclass(frozen=True)
class UMDCase:
    """One manifest row with its resolved files (``pred_path`` None when the prediction is missing)."""

    case_id: str
    subject_id: str
    modality: str
    groups: dict[str, str]
    truth_path: Path
    pred_path: Path | None
    image_path: Path | None = None


@dataclass(frozen=True)
class _Job:
    case: UMDCase
    config: UMDConfig
    cache: CaseCache
    #: voxel values the label maps may hold besides umd.labels' ids (the nnU-Net labels that name no organ)
    allowed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class UMDData:
    """What the ground-truth and predictions folders hold, read in the ground truth's layout.

    ``index``: the truth-index lines of the ground-truth digest (``manifest:<sha256>``...); ``suffixes``: the
    label-map file endings read; ``labels``: the organ label map the files declare (nnU-Net's dataset.json; None:
    ``umd.labels``); ``dataset_labels``: every foreground label of dataset.json (None in the generic layout);
    ``notes``: the layout's warning lines; ``labels_file``: the file ``labels`` come from.
    """

    cases: list[UMDCase]
    extra: list[str]
    index: tuple[str, ...]
    layout: Layout
    predictions_format: str
    suffixes: tuple[str, ...] = SUFFIXES
    labels: dict[str, int | tuple[int, ...]] | None = None
    dataset_labels: dict[str, int | tuple[int, ...]] | None = None
    notes: tuple[str, ...] = ()
    labels_file: str = ""

    @property
    def formats(self) -> dict[str, str]:
        """``config.format`` of results.json."""
        return {"ground_truth": self.layout.name, "predictions": self.predictions_format}


@dataclass(frozen=True)
class _Row:
    """One manifest row, validated."""

    case_id: str
    subject_id: str
    modality: str
    groups: dict[str, str]
    image: str


def _case_file(folder: Path, case_id: str, role: str, suffixes: tuple[str, ...] = SUFFIXES) -> Path | None:
    """``folder/<case_id><suffix>`` for the one of ``suffixes`` that exists (None: none).

    Raises :class:`InputError` when two exist (naming both: which one is the prediction is not a guess to
    make), or when the name exists but is not a regular file (a folder or FIFO is never "no file").
    """
    found = [resolve_inside(folder, case_id + s, case_id=case_id) for s in suffixes]
    found = [p for p in found if p.exists()]
    if len(found) > 1:
        raise InputError(
            f"two label maps for one case: {found[0].name} and {found[1].name} (keep one)",
            file=str(found[0]),
            case_id=case_id,
        )
    if found and not found[0].is_file():
        raise InputError(f"the {role} is not a regular file", file=str(found[0]), case_id=case_id)
    return found[0] if found else None


def _manifest_rows(manifest: Path) -> list[_Row]:
    """The validated rows of a manifest (``case_id, subject_id, modality`` + optional ``image`` and groups).

    Raises :class:`InputError` for a missing/empty manifest, a missing column, an unknown modality, an empty
    subject, duplicate or unsafe case ids, or a group column that collides with an output column.
    """
    rows = read_csv_rows(manifest, required=("case_id", "subject_id", "modality"))
    out: list[_Row] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        case_id = check_case_id(row["case_id"], file=str(manifest))
        if case_id in seen:
            raise InputError(f"duplicate case id on line {line}", file=str(manifest), case_id=case_id, field="case_id")
        seen.add(case_id)
        if not row["subject_id"]:
            raise InputError("empty subject_id", file=str(manifest), case_id=case_id, field="subject_id")
        modality = row["modality"].lower()
        if modality not in MODALITIES:
            raise InputError(
                f"unknown modality {row['modality']!r}; expected one of {list(MODALITIES)}",
                file=str(manifest),
                case_id=case_id,
                field="modality",
            )
        groups = {k: v for k, v in row.items() if k not in ("case_id", "subject_id", "modality", "image") and v}
        check_group_columns(groups, item_kind="organ", metrics=SEG_METRICS, file=str(manifest), case_id=case_id)
        out.append(_Row(case_id, row["subject_id"], modality, groups, row.get("image") or ""))
    return out


def _case(row: _Row, root: Path, truth: Path, pred: Path | None) -> UMDCase:
    image = resolve_inside(root, row.image, case_id=row.case_id) if row.image else None
    return UMDCase(
        row.case_id, row.subject_id, row.modality, {"modality": row.modality, **row.groups}, truth, pred, image
    )


def _extra_predictions(pred_dir: Path, case_ids: set[str], suffixes: tuple[str, ...]) -> list[str]:
    """Label-map file names of ``pred_dir`` that match no case."""
    return sorted(p.name for p in pred_dir.iterdir() if _label_map_id(p.name, suffixes) not in (None, *case_ids))


def _read_generic(gt_dir: Path, pred_dir: Path) -> UMDData:
    """The generic layout: ``manifest.csv`` + ``<case_id>.nii.gz`` (module docstring)."""
    manifest = gt_dir / "manifest.csv"
    cases = []
    for row in _manifest_rows(manifest):
        truth = _case_file(gt_dir, row.case_id, "ground-truth label map")
        if truth is None:
            raise InputError(
                "ground-truth label map not found", file=str(gt_dir / (row.case_id + SUFFIX)), case_id=row.case_id
            )
        pred = _case_file(pred_dir, row.case_id, "prediction")  # a folder or FIFO is not "no prediction": an error
        cases.append(_case(row, gt_dir, truth, pred))
    extra = _extra_predictions(pred_dir, {c.case_id for c in cases}, SUFFIXES)
    return UMDData(cases, extra, (f"manifest:{sha256_files(manifest)}",), GENERIC, _predictions_format(pred_dir))


def _predictions_format(pred_dir: Path) -> str:
    return "nnunet" if umd_nnunet.written_by_nnunet(pred_dir) else "generic"


def _nnunet_rows(ds: umd_nnunet.NnunetDataset, case_ids: list[str]) -> tuple[list[_Row], list[str], list[str]]:
    """The rows of the nnU-Net cases (from ``manifest.csv`` beside dataset.json, else each case its own subject
    with the modality of ``channel_names``), the truth-index lines it adds and its warning lines.

    Raises:
        InputError: a manifest row without a label map, or a label map without a manifest row.
    """
    manifest = ds.root / "manifest.csv"
    if not manifest.is_file():
        modality = ds.modality or "unknown"
        notes = []
        if ds.modality is None:
            notes.append(
                f"modality unknown: dataset.json channel_names {sorted(ds.channel_names.values())} name no single "
                f"modality of {list(MODALITIES)} and there is no manifest.csv beside it: no by-modality breakdown "
                "and no paired PET vs CT/MRI gap (add manifest.csv: case_id,subject_id,modality)"
            )
        return [_Row(c, c, modality, {}, "") for c in case_ids], [], notes
    rows = {r.case_id: r for r in _manifest_rows(manifest)}
    for case_id in case_ids:
        if case_id not in rows:
            raise InputError(
                "no manifest.csv row for this label map", file=str(manifest), case_id=case_id, field="case_id"
            )
    unmatched = sorted(rows.keys() - set(case_ids))
    if unmatched:
        file = str(ds.labels_dir / (unmatched[0] + ds.file_ending))
        raise InputError("ground-truth label map not found", file=file, case_id=unmatched[0])
    return [rows[c] for c in case_ids], [f"manifest:{sha256_files(manifest)}"], []


def _read_nnunet(gt_dir: Path, pred_dir: Path) -> UMDData:
    """The nnU-Net v2 raw layout (:mod:`trackeval.benchmarks.umd_nnunet`)."""
    ds = umd_nnunet.read_dataset(gt_dir)
    files = dict(umd_nnunet.label_files(ds))
    rows, index, notes = _nnunet_rows(ds, list(files))
    suffixes = (ds.file_ending,)
    cases = [_case(r, ds.root, files[r.case_id], _case_file(pred_dir, r.case_id, "prediction", suffixes)) for r in rows]
    labels, unmatched = umd_nnunet.organ_labels(ds, UMD_ORGANS)
    if unmatched:
        notes.append(
            f"{len(unmatched)} dataset.json label(s) name no UMD organ and are scored as background "
            f"(umd.labels maps them): {', '.join(unmatched[:10])}"
        )
    if ds.labels_dir.name != umd_nnunet.LABEL_FOLDERS[0]:
        notes.append(f"scoring {ds.labels_dir.name}/ (no {umd_nnunet.LABEL_FOLDERS[0]}/ folder)")
    extra = _extra_predictions(pred_dir, set(files), suffixes)
    return UMDData(
        cases,
        extra,
        (f"dataset:{ds.digest}", *index),
        NNUNET,
        _predictions_format(pred_dir),
        suffixes,
        labels,
        ds.labels,
        tuple(notes),
        str(ds.path),
    )


def read_inputs(gt_dir: Path, pred_dir: Path, forced: str | None = None) -> UMDData:
    """Validate the folders and read the cases in the ground truth's layout (``forced``: ``--format``).

    A missing prediction is not an error here (the case gets status ``missing_prediction``; :func:`evaluate`
    applies the policy); a prediction without a case is a warning.

    Raises:
        InputError: a folder not found, a ground truth of no layout (naming the layouts tried), or what the
            layout's reader refuses (see :func:`_manifest_rows`, :func:`_case_file`,
            :func:`trackeval.benchmarks.umd_nnunet.read_dataset`).
    """
    if not gt_dir.is_dir():
        raise InputError("ground-truth folder not found", file=str(gt_dir))
    if not pred_dir.is_dir():
        raise InputError("predictions folder not found", file=str(pred_dir))
    layout = choose(gt_dir, LAYOUTS, forced)
    return _read_nnunet(gt_dir, pred_dir) if layout is NNUNET else _read_generic(gt_dir, pred_dir)


def load_cases(gt_dir: Path, pred_dir: Path, forced: str | None = None) -> tuple[list[UMDCase], list[str], str]:
    """Cases, extra prediction file names and the ground truth's index digest (:func:`read_inputs`)."""
    data = read_inputs(gt_dir, pred_dir, forced)
    return data.cases, data.extra, sha256_text(*data.index)


def _label_map_id(name: str, suffixes: tuple[str, ...] = SUFFIXES) -> str | None:
    """The case id of a label-map file name (one of ``suffixes``), None for any other name."""
    return next((name[: -len(s)] for s in suffixes if name.endswith(s)), None)


def audit_cases(cases: list[UMDCase], cfg: UMDConfig) -> list[AuditFinding]:
    """Split audits against ``cfg.train_manifest`` (none configured: no audit)."""
    if cfg.train_manifest is None:
        return []
    images = {c.case_id: c.image_path for c in cases if c.image_path is not None}
    return audit_against_training(Path(cfg.train_manifest), [c.subject_id for c in cases], images)


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


def score_case(job: _Job) -> Scored:
    """Read, validate and score one case (runs in a worker; only the small record travels back).

    The input files are read once; their digests key the case cache, so an unchanged case with an
    unchanged config is not recomputed.
    """
    case, cfg = job.case, job.config
    truth_raw, truth_digest = read_bytes_digest(case.truth_path, case_id=case.case_id)
    pred_raw, pred_digest = (
        (None, "missing") if case.pred_path is None else read_bytes_digest(case.pred_path, case_id=case.case_id)
    )
    key = job.cache.key(
        {"case_id": case.case_id, "subject_id": case.subject_id, "groups": case.groups},
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
        metrics=_organ_metrics(case.case_id, truth, pred, cfg, job.allowed),
        status="missing_prediction" if pred is None else "ok",
        message="" if pred is not None else f"no prediction file; scored by policy '{cfg.missing_prediction}'",
    )
    return Scored(record, truth_digest, pred_digest, job.cache.put(key, record, cached))


def _allowed_ids(cfg: UMDConfig, also: frozenset[int]) -> set[int]:
    """The voxel values a label map may hold: umd.labels' ids and ``also`` (0 is always allowed)."""
    return {i for ids in cfg.labels.values() for i in ((ids,) if isinstance(ids, int) else ids)} | also


def _organ_metrics(
    case_id: str, truth: LabelVolume, pred: LabelVolume | None, cfg: UMDConfig, also: frozenset[int] = frozenset()
) -> dict[str, dict[str, float]]:
    """Per-organ metrics; a missing prediction is scored as all background (``worst``) or left empty. ``also``:
    voxel values allowed besides umd.labels' ids (scored as background)."""
    if pred is None and cfg.missing_prediction == "exclude":
        return {name: {} for name in cfg.labels}
    pred_array = np.zeros_like(truth.array) if pred is None else pred.array
    allowed = _allowed_ids(cfg, also)
    _check_label_ids(truth, allowed, case_id, "ground truth")
    if pred is not None:
        _check_label_ids(pred, allowed, case_id, "prediction")
    cm = confusion_matrix(pred_array, truth.array)  # K x K with K <= len(allowed) + 1: bounded by umd.labels
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


def _paired_gap(records: list[CaseRecord], organs: list[str], a: str, b: str) -> np.ndarray:
    """(subjects with both modalities x organs) matrix of dsc(a) - dsc(b); NaN where either is NaN. One row per
    subject, so the gap's bootstrap resamples subjects whatever ``bootstrap.cluster``."""
    dsc = item_matrix(records, organs, "dsc")
    per: dict[str, dict[str, list[np.ndarray]]] = {}
    for r, row in zip(records, dsc, strict=True):
        per.setdefault(r.subject_id, {}).setdefault(r.groups["modality"], []).append(row)
    rows = []
    for subject in sorted(per):
        mods = per[subject]
        if a in mods and b in mods:  # an all-NaN organ column: a mean over nothing, NaN
            rows.append(nan_mean(mods[a], axis=0) - nan_mean(mods[b], axis=0))
    return np.array(rows).reshape(len(rows), len(organs))


def aggregate(records: list[CaseRecord], cfg: EvalConfig) -> dict[str, MetricSummary]:
    """Every UMD aggregate key (see the module docstring)."""
    organs = list(cfg.umd.labels)
    modalities = [m for m in MODALITIES if any(r.groups["modality"] == m for r in records)]
    out: dict[str, MetricSummary] = {}
    clusters = clusters_of(records, cfg.bootstrap)
    for metric in (m for m in AGG_METRICS if m in cfg.umd.metrics):
        values = item_matrix(records, organs, metric)
        out.update(mean_summaries(metric_key(NAME, metric), values, organs, "organ", cfg.bootstrap, "all", clusters))
        for mod in modalities:
            rows = [i for i, r in enumerate(records) if r.groups["modality"] == mod]
            out.update(
                mean_summaries(
                    metric_key(NAME, metric, "by_modality", mod),
                    values[rows],
                    organs,
                    "organ",
                    cfg.bootstrap,
                    f"modality={mod}",
                    None if clusters is None else clusters[rows],
                )
            )
    for a, b in cfg.umd.modality_pairs:
        gap = _paired_gap(records, organs, a, b)
        if len(gap):
            key = metric_key(NAME, "dsc_gap", f"{a}_vs_{b}")
            out.update(mean_summaries(key, gap, organs, "organ", cfg.bootstrap, f"gap={a}_vs_{b}", None))
    return out


def _missing_notes(data: UMDData, pred_dir: Path, cfg: UMDConfig) -> list[str]:
    """Warning lines for cases without a prediction (under ``cfg.missing_prediction``) and for predictions
    without a case (``data.extra``, the first 10 named).

    Raises:
        InputError: no prediction at all, or a missing one under the ``error`` policy (see
            :func:`~trackeval.benchmarks.missing.check_missing`).
    """
    cases, extra = data.cases, data.extra
    matched = {c.pred_path.name for c in cases if c.pred_path is not None}
    notes = check_missing(
        [c.case_id for c in cases],
        [c.case_id for c in cases if c.pred_path is None],
        predictions=pred_dir,
        expected_name=lambda case_id: case_id + data.suffixes[0],
        others=sorted(p.name for p in pred_dir.iterdir() if p.name not in matched),
        accepted=" (or .nii)" if len(data.suffixes) > 1 else "",
        policy=cfg.missing_prediction,
        policy_field="umd.missing_prediction",
    )
    if extra:
        without = "a manifest row" if data.layout.generic else "a ground-truth label map"
        notes.append(f"{len(extra)} prediction(s) without {without} ignored: {', '.join(extra[:10])}")
    return notes


def _with_labels(cfg: EvalConfig, data: UMDData) -> EvalConfig:
    """``cfg`` with the organ label map the files declare (nnU-Net's dataset.json) unless umd.labels is set."""
    if data.labels is None or "labels" in cfg.umd.model_fields_set:
        return cfg
    try:
        umd = UMDConfig.model_validate({**cfg.umd.model_dump(), "labels": data.labels})
    except ValidationError as exc:
        message = exc.errors()[0]["msg"]
        raise InputError(f"the organ labels: {message}", file=data.labels_file, field="labels") from exc
    return cfg.model_copy(update={"umd": umd})


def evaluate(
    gt_dir: Path, pred_dir: Path, cfg: EvalConfig, model: dict[str, str] | None = None, *, forced: str | None = None
) -> BenchmarkResult:
    """Run the UMD benchmark end to end and return the results object (no files written); ``forced``: the ground
    truth's layout (``--format``; default: told from the files)."""
    data = read_inputs(gt_dir, pred_dir, forced)
    cfg = _with_labels(cfg, data)
    notes = [*data.notes, *_missing_notes(data, pred_dir, cfg.umd)]
    audits = audit_cases(data.cases, cfg.umd)
    notes += [a.note for a in audits if a.count]
    for note in notes:
        log.warning(note)
    cache = CaseCache(Path(cfg.engine.cache_dir) if cfg.engine.cache else None, NAME)
    also = _other_ids(data)
    jobs = [_Job(c, cfg.umd, cache, also) for c in data.cases]
    scored = score_cases(score_case, jobs, cfg.engine, "UMD cases", worker_preload(cfg.umd.metrics))
    records = [s.record for s in scored]
    summary = {
        "n_cases": len(records),
        "n_missing_predictions": sum(r.status == "missing_prediction" for r in records),
        "n_extra_predictions": len(data.extra),
        **{f"audit/{a.check}": a.count for a in audits},
    }
    truth_digest, pred_digest = case_digests(scored, *data.index)
    evaluation = Evaluation(
        records,
        aggregate(records, cfg),
        "organ",
        layout_digest(data.layout, truth_digest),
        pred_digest,
        summary,
        notes,
        formats=data.formats,
    )
    return finish(NAME, evaluation, config=cfg.model_dump(mode="json", include={"bootstrap", "umd"}), model=model)


def _other_ids(data: UMDData) -> frozenset[int]:
    """The ids of dataset.json's labels (those that name no organ are background); none in the generic layout."""
    labels = data.dataset_labels or {}
    return frozenset(i for ids in labels.values() for i in ((ids,) if isinstance(ids, int) else ids))


class UMDInputs(BaseModel):
    """Inputs of ``trackeval evaluate umd``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(
        description="folder with manifest.csv and <case_id>.nii.gz (or .nii), or an nnU-Net v2 dataset folder "
        "(dataset.json + labelsTs/ or labelsTr/)"
    )
    predictions: Path = Field(
        description="folder with <case_id>.nii.gz (or .nii; nnU-Net: <case>{file_ending}) predictions"
    )
    format: str | None = Field(
        None, description="the ground truth's layout (default: told from the files; docs/benchmarks/)"
    )
    nnunet_summary: bool = Field(
        False,
        description="also write nnU-Net v2's summary.json (nnUNetv2_evaluate_folder's schema) next to results.json",
    )


def _evaluate(inputs: UMDInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    return evaluate(inputs.ground_truth, inputs.predictions, cfg, model, forced=inputs.format)


@dataclass(frozen=True)
class _CountJob:
    case: UMDCase
    labels: tuple[umd_nnunet.Label, ...]
    allowed: frozenset[int]
    tolerance: float
    ground_truth: Path
    predictions: Path


def _count_case(job: _CountJob) -> umd_nnunet.SummaryCase:
    """One prediction's voxel counts per nnU-Net label or region (runs in a worker)."""
    case = job.case
    assert case.pred_path is not None  # only predicted cases are counted
    truth = read_label_map(case.truth_path, case_id=case.case_id)
    pred = read_label_map(case.pred_path, case_id=case.case_id)
    check_same_grid(truth, pred, case_id=case.case_id, tolerance=job.tolerance)
    for vol, role in ((truth, "ground truth"), (pred, "prediction")):
        _check_label_ids(vol, set(job.allowed), case.case_id, role)
    return umd_nnunet.SummaryCase(
        case.truth_path.relative_to(job.ground_truth).as_posix(),
        case.pred_path.relative_to(job.predictions).as_posix(),
        confusion(pred.array, truth.array, job.labels),
        int(truth.array.size),
    )


def nnunet_outputs(inputs: UMDInputs, cfg: EvalConfig, result: BenchmarkResult) -> dict[str, bytes]:
    """``{"summary.json": bytes}`` when ``inputs.nnunet_summary`` (else nothing): nnU-Net v2's summary of the
    predicted cases, over dataset.json's labels (nnU-Net layout) or ``umd.labels`` (generic layout); see
    :mod:`trackeval.benchmarks.umd_nnunet`. The files are read again (their voxel counts are not in ``result``).

    Raises:
        InputError: as :func:`evaluate` does.
    """
    del result  # the counts come from the files
    if not inputs.nnunet_summary:
        return {}
    data = read_inputs(inputs.ground_truth, inputs.predictions, inputs.format)
    labels = umd_nnunet.targets(data.dataset_labels if data.dataset_labels is not None else cfg.umd.labels)
    allowed = frozenset(_allowed_ids(_with_labels(cfg, data).umd, _other_ids(data)))
    predicted = sorted((c for c in data.cases if c.pred_path is not None), key=lambda c: c.pred_path.name)
    jobs = [
        _CountJob(c, tuple(labels), allowed, cfg.umd.geometry_tolerance, inputs.ground_truth, inputs.predictions)
        for c in predicted
    ]
    counted = map_cases(_count_case, jobs, cfg.engine, "nnU-Net summary")
    return {umd_nnunet.SUMMARY_JSON: umd_nnunet.summary_json(counted, labels)}


SPEC = BenchmarkSpec(
    name=NAME,
    help="UMD: 13-organ Dice/NSD/HD95, PET vs CT/MRI paired gap",
    inputs=UMDInputs,
    config_section="umd",
    config_model=UMDConfig,
    evaluate=_evaluate,
    # Dice depends on the label map and the empty/missing policies only (not on NSD tolerance, HD settings, the
    # geometry tolerance or the audit's training manifest)
    primary=PrimaryMetric(
        "dsc",
        margin=0.01,
        group_margin=0.05,
        floor=0.5,
        protocol=("umd.labels", "umd.empty_both", "umd.missing_prediction"),
    ),
    metrics=(
        MetricInfo("dsc", label="Dice"),
        MetricInfo("iou", label="IoU"),
        MetricInfo("nsd", label="NSD"),
        MetricInfo("hd95", label="HD95", unit="mm", higher_is_better=False, best=0.0),
        MetricInfo("hd", label="HD", unit="mm", higher_is_better=False, best=0.0),
        MetricInfo("assd", label="ASSD", unit="mm", higher_is_better=False, best=0.0),
        # per organ: the mean over subjects of (a - b) on the subjects that have both modalities
        MetricInfo("dsc_gap/{a}_vs_{b}", label="Dice gap {A} − {B} (paired)", paired="none"),
    ),
    group_dimensions=("organ", "modality"),
    plots=(
        PlotSpec(metric="dsc", dimension="organ", title="Dice by organ"),
        PlotSpec(metric="dsc", dimension="organ", kind="box", title="Per-case Dice by organ"),
        PlotSpec(metric="dsc_gap/ct_vs_pet", dimension="organ", title="Paired Dice gap CT − PET by organ"),
        PlotSpec(metric="dsc", dimension="modality", title="Dice by modality"),
    ),
    summary_metrics=AGG_METRICS,
    audit="trackeval.benchmarks.umd_audit:audit",  # imports this module: named, loaded when the audit runs
    example="trackeval.demo.umd_example:example_inputs",  # the bundled example of `trackeval demo`
    outputs=nnunet_outputs,  # --nnunet-summary: summary.json
)
