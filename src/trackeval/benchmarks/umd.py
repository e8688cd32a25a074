"""UMD: 13-organ segmentation on paired PET vs CT/MRI scans of the same subjects.

Inputs: ``GT_DIR/manifest.csv`` (``case_id,subject_id,modality`` + optional ``site``, ``scanner`` and free
group columns; modality in {ct, mri, pet}), ``GT_DIR/<case_id>.nii.gz`` and ``PRED_DIR/<case_id>.nii.gz``
integer label maps on the same grid (``<case_id>.nii`` is read as well; both files for one case is an error).
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
from pydantic import BaseModel, ConfigDict, Field

from trackeval.audit.leakage import AuditFinding, audit_against_training
from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.segmentation import SEG_METRICS, score_segmentation
from trackeval.benchmarks.summaries import clusters_of, mean_summaries
from trackeval.benchmarks.umd_config import UMDConfig
from trackeval.config import EvalConfig
from trackeval.engine.cache import CaseCache
from trackeval.engine.driver import Evaluation, Scored, case_digests, finish, score_cases
from trackeval.engine.executors import case_threads
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.nifti import LabelVolume, check_same_grid, read_bytes_digest, read_label_map
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.overlap import confusion_matrix, unlisted_values
from trackeval.results import (
    BenchmarkResult,
    CaseRecord,
    MetricSummary,
    PlotSpec,
    check_group_columns,
    item_matrix,
    metric_key,
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


def _case_file(folder: Path, case_id: str, role: str) -> Path | None:
    """``folder/<case_id>.nii.gz`` or ``folder/<case_id>.nii``, whichever exists (None: neither).

    Raises :class:`InputError` when both exist (naming both: which one is the prediction is not a guess to
    make), or when the name exists but is not a regular file (a folder or FIFO is never "no file").
    """
    found = [resolve_inside(folder, case_id + s, case_id=case_id) for s in SUFFIXES]
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


def load_cases(gt_dir: Path, pred_dir: Path) -> tuple[list[UMDCase], list[str], str]:
    """Validate the manifest and the folders; return cases, extra prediction file names, manifest sha256.

    Label maps are ``<case_id>.nii.gz`` or ``<case_id>.nii`` (:func:`_case_file`). Raises :class:`InputError` for
    a missing/empty manifest, a missing column, an unknown modality, duplicate or unsafe case ids, a missing
    truth file, two files for one case or a path escaping the data root. A missing prediction is not an error
    here (the case gets status ``missing_prediction``; :func:`evaluate` applies the policy); a prediction
    without a manifest row is a warning.
    """
    manifest = gt_dir / "manifest.csv"
    if not gt_dir.is_dir():
        raise InputError("ground-truth folder not found", file=str(gt_dir))
    if not pred_dir.is_dir():
        raise InputError("predictions folder not found", file=str(pred_dir))
    rows = read_csv_rows(manifest, required=("case_id", "subject_id", "modality"))
    cases: list[UMDCase] = []
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
        image = resolve_inside(gt_dir, row["image"], case_id=case_id) if row.get("image") else None
        truth = _case_file(gt_dir, case_id, "ground-truth label map")
        if truth is None:
            raise InputError("ground-truth label map not found", file=str(gt_dir / (case_id + SUFFIX)), case_id=case_id)
        pred = _case_file(pred_dir, case_id, "prediction")  # a folder or FIFO is not "no prediction": an error
        groups = {"modality": modality, **groups}
        cases.append(UMDCase(case_id, row["subject_id"], modality, groups, truth, pred, image))
    extra = sorted(p.name for p in pred_dir.iterdir() if _label_map_id(p.name) not in (None, *seen))
    return cases, extra, sha256_files(manifest)


def _label_map_id(name: str) -> str | None:
    """The case id of a label-map file name (``.nii.gz`` / ``.nii``), None for any other name."""
    return next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), None)


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
        metrics=_organ_metrics(case.case_id, truth, pred, cfg),
        status="missing_prediction" if pred is None else "ok",
        message="" if pred is not None else f"no prediction file; scored by policy '{cfg.missing_prediction}'",
    )
    return Scored(record, truth_digest, pred_digest, job.cache.put(key, record, cached))


def _organ_metrics(
    case_id: str, truth: LabelVolume, pred: LabelVolume | None, cfg: UMDConfig
) -> dict[str, dict[str, float]]:
    """Per-organ metrics; a missing prediction is scored as all background (``worst``) or left empty."""
    if pred is None and cfg.missing_prediction == "exclude":
        return {name: {} for name in cfg.labels}
    pred_array = np.zeros_like(truth.array) if pred is None else pred.array
    allowed = {i for ids in cfg.labels.values() for i in ((ids,) if isinstance(ids, int) else ids)}
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


def _missing_notes(cases: list[UMDCase], extra: list[str], pred_dir: Path, cfg: UMDConfig) -> list[str]:
    """Warning lines for cases without a prediction (under ``cfg.missing_prediction``) and for predictions
    without a manifest row (``extra``, the first 10 named).

    Raises:
        InputError: no prediction at all, or a missing one under the ``error`` policy (see
            :func:`~trackeval.benchmarks.missing.check_missing`).
    """
    matched = {c.pred_path.name for c in cases if c.pred_path is not None}
    notes = check_missing(
        [c.case_id for c in cases],
        [c.case_id for c in cases if c.pred_path is None],
        predictions=pred_dir,
        expected_name=lambda case_id: case_id + SUFFIX,
        others=sorted(p.name for p in pred_dir.iterdir() if p.name not in matched),
        accepted=" (or .nii)",
        policy=cfg.missing_prediction,
        policy_field="umd.missing_prediction",
    )
    if extra:
        notes.append(f"{len(extra)} prediction(s) without a manifest row ignored: {', '.join(extra[:10])}")
    return notes


def evaluate(gt_dir: Path, pred_dir: Path, cfg: EvalConfig, model: dict[str, str] | None = None) -> BenchmarkResult:
    """Run the UMD benchmark end to end and return the results object (no files written)."""
    cases, extra, manifest_digest = load_cases(gt_dir, pred_dir)
    notes = _missing_notes(cases, extra, pred_dir, cfg.umd)
    audits = audit_cases(cases, cfg.umd)
    notes += [a.note for a in audits if a.count]
    for note in notes:
        log.warning(note)
    cache = CaseCache(Path(cfg.engine.cache_dir) if cfg.engine.cache else None, NAME)
    scored = score_cases(score_case, [_Job(c, cfg.umd, cache) for c in cases], cfg.engine, "UMD cases")
    records = [s.record for s in scored]
    summary = {
        "n_cases": len(records),
        "n_missing_predictions": sum(r.status == "missing_prediction" for r in records),
        "n_extra_predictions": len(extra),
        **{f"audit/{a.check}": a.count for a in audits},
    }
    truth_digest, pred_digest = case_digests(scored, f"manifest:{manifest_digest}")
    evaluation = Evaluation(records, aggregate(records, cfg), "organ", truth_digest, pred_digest, summary, notes)
    return finish(NAME, evaluation, config=cfg.model_dump(mode="json", include={"bootstrap", "umd"}), model=model)


class UMDInputs(BaseModel):
    """Inputs of ``trackeval evaluate umd``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(description="folder with manifest.csv and <case_id>.nii.gz (or .nii)")
    predictions: Path = Field(description="folder with <case_id>.nii.gz (or .nii) predictions")
    format: str | None = Field(
        None, description="the ground truth's layout (default: told from the files; docs/benchmarks/)"
    )


def _evaluate(inputs: UMDInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    return evaluate(inputs.ground_truth, inputs.predictions, cfg, model)


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
)
