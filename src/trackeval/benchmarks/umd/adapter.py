"""The UMD unit's adapter: its inputs, :func:`evaluate` end to end, the ``--nnunet-summary`` output and the spec
(see :mod:`trackeval.benchmarks.umd`)."""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.segmentation import worker_preload
from trackeval.benchmarks.umd import nnunet
from trackeval.benchmarks.umd.aggregates import AGG_METRICS, aggregate
from trackeval.benchmarks.umd.cases import UMDData, audit_cases, read_inputs
from trackeval.benchmarks.umd.config import NAME, UMDConfig
from trackeval.benchmarks.umd.scoring import CaseJob, CountJob, allowed_ids, count_case, score_case
from trackeval.config import EvalConfig
from trackeval.engine.cache import CaseCache
from trackeval.engine.driver import Evaluation, case_digests, finish, score_cases
from trackeval.engine.executors import map_cases
from trackeval.errors import InputError
from trackeval.io.layouts import layout_digest
from trackeval.results import BenchmarkResult, PlotSpec
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric

log = logging.getLogger(__name__)


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


#: the metrics UMD computes with nnU-Net's ignore label: the overlap ones (nnU-Net's own evaluation computes no
#: surface distance, and a surface that stops at unannotated voxels is not the organ's)
IGNORE_METRICS = ("dsc", "iou")


def _with_ignore(cfg: EvalConfig, data: UMDData) -> tuple[EvalConfig, list[str]]:
    """``cfg`` (as the user set it, before :func:`_with_labels`) for dataset.json's ``ignore`` label (none:
    unchanged): ``umd.metrics`` narrowed to Dice and IoU when it was not set (one warning line says so), and the
    warning lines.

    Raises:
        InputError: ``umd.metrics`` set with a surface metric, or an organ of a set ``umd.labels`` using the ignore
            id (dataset.json's own labels never do: :func:`~trackeval.benchmarks.umd.nnunet.read_dataset`).
    """
    ignore, umd = data.ignore_label, cfg.umd
    if ignore is None:
        return cfg, []
    mapped = umd.labels.items() if "labels" in umd.model_fields_set else ()
    organ = next((n for n, ids in mapped if ignore in ((ids,) if isinstance(ids, int) else ids)), None)
    if organ is not None:
        raise InputError(
            f"umd.labels maps {organ!r} to {ignore}, dataset.json's ignore label", file=data.labels_file, field="labels"
        )
    surface = [m for m in umd.metrics if m not in IGNORE_METRICS]
    if not surface:
        return cfg, []
    if "metrics" in umd.model_fields_set:
        raise InputError(
            f"dataset.json declares the ignore label {ignore}: umd.metrics {', '.join(surface)} are not defined on "
            f"partly annotated label maps; set umd.metrics=[{', '.join(IGNORE_METRICS)}]",
            file=data.labels_file,
            field="umd.metrics",
        )
    note = (
        f"dataset.json declares the ignore label {ignore}: its voxels are left out of every count (as nnU-Net's "
        f"evaluation does) and only {', '.join(IGNORE_METRICS)} are scored (no surface metric on partly "
        "annotated label maps)"
    )
    umd = umd.model_copy(update={"metrics": IGNORE_METRICS})
    return cfg.model_copy(update={"umd": umd}), [note]


def evaluate(
    gt_dir: Path, pred_dir: Path, cfg: EvalConfig, model: dict[str, str] | None = None, *, forced: str | None = None
) -> BenchmarkResult:
    """Run the UMD benchmark end to end and return the results object (no files written); ``forced``: the ground
    truth's layout (``--format``; default: told from the files)."""
    data = read_inputs(gt_dir, pred_dir, forced)
    cfg, ignore_notes = _with_ignore(cfg, data)
    cfg = _with_labels(cfg, data)
    notes = [*data.notes, *ignore_notes, *_missing_notes(data, pred_dir, cfg.umd)]
    audits = audit_cases(data.cases, cfg.umd)
    notes += [a.note for a in audits if a.count]
    for note in notes:
        log.warning(note)
    cache = CaseCache(Path(cfg.engine.cache_dir) if cfg.engine.cache else None, NAME)
    also = _other_ids(data)
    jobs = [CaseJob(c, cfg.umd, cache, also, data.ignore_label) for c in data.cases]
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
    """The ids of dataset.json's labels (those that name no organ are background) and its ignore label; none in
    the generic layout."""
    labels = data.dataset_labels or {}
    ignore = () if data.ignore_label is None else (data.ignore_label,)
    return frozenset(i for ids in labels.values() for i in ((ids,) if isinstance(ids, int) else ids)) | set(ignore)


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


def nnunet_outputs(inputs: UMDInputs, cfg: EvalConfig, result: BenchmarkResult) -> dict[str, bytes]:
    """``{"summary.json": bytes}`` when ``inputs.nnunet_summary`` (else nothing): nnU-Net v2's summary of the
    predicted cases, over dataset.json's labels (nnU-Net layout) or ``umd.labels`` (generic layout); see
    :mod:`trackeval.benchmarks.umd.nnunet`. The files are read again (their voxel counts are not in ``result``).

    Raises:
        InputError: as :func:`evaluate` does.
    """
    del result  # the counts come from the files
    if not inputs.nnunet_summary:
        return {}
    data = read_inputs(inputs.ground_truth, inputs.predictions, inputs.format)
    labels = nnunet.targets(data.dataset_labels if data.dataset_labels is not None else cfg.umd.labels)
    allowed = frozenset(allowed_ids(_with_labels(cfg, data).umd, _other_ids(data)))
    predicted = sorted((c for c in data.cases if c.pred_path is not None), key=lambda c: c.pred_path.name)
    where = (inputs.ground_truth, inputs.predictions)
    jobs = [
        CountJob(c, tuple(labels), allowed, cfg.umd.geometry_tolerance, *where, data.ignore_label) for c in predicted
    ]
    counted = map_cases(count_case, jobs, cfg.engine, "nnU-Net summary")
    return {nnunet.SUMMARY_JSON: nnunet.summary_json(counted, labels)}


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
    audit="trackeval.benchmarks.umd.audit:audit",  # imports this module: named, loaded when the audit runs
    example="trackeval.demo.umd_example:example_inputs",  # the bundled example of `trackeval demo`
    outputs=nnunet_outputs,  # --nnunet-summary: summary.json
)
