"""Multi-anatomy X-ray benchmark (XR-0 style): five tasks behind ``trackeval evaluate xray --task <task>``.

=======  =============================================  =========================================
task     ``--ground-truth`` / ``--predictions``          keys (``xray/<task>/...``)
=======  =============================================  =========================================
cls      labels.csv / scores.csv (+ ``--validation``,   auroc (+ by_finding), spec/sens/ppv_at_sens95, ece(_reference),
         ``--readers``; native CheXpert, MIMIC-CXR,     kappa (MURA), readers_below_curve (``--readers``)
         NIH, MURA label files)
seg      label-map folders (+ ``--label-names``);       dsc, miou (+ by_class)
         native class folders, JSRT/SCR, PAX-Ray++,
         VinDr-RibCXR JSON, SIIM-ACR RLE CSV
ret      labels.csv / rankings.csv                      p_at_<k>
loc      COCO ground truth / COCO results; native       map_50 (+ by_category), miou
         YOLO folders, MS-CXR CSV
report   references.jsonl / predictions.jsonl; native   bleu_1..bleu_4, rouge_l, cider
         OpenI XML, indiana_reports.csv, R2Gen json
=======  =============================================  =========================================

Each task lives in its module of :mod:`trackeval.benchmarks.xray`; this module declares one benchmark unit per task
(``xray/cls``, ``xray/seg``, ...: each tracked, compared and gated on its own primary metric), dispatches and
wraps the task's output into a :class:`~trackeval.results.BenchmarkResult`. The task and the protocol facts
decided at run time (e.g. where the operating point was chosen) are recorded under ``config.xray_run``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.xray import cls, cls_readers, loc, report, ret, seg
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.benchmarks.xray.config import XRayConfig
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, finish
from trackeval.errors import InputError
from trackeval.results import BenchmarkResult, PlotSpec
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric

NAME = "xray"

TASKS: dict[str, Callable[[TaskInputs, EvalConfig], Evaluation]] = {
    "cls": cls.evaluate,
    "seg": seg.evaluate,
    "ret": ret.evaluate,
    "loc": loc.evaluate,
    "report": report.evaluate,
}


def evaluate(task: str, inputs: TaskInputs, cfg: EvalConfig, model: dict[str, str] | None = None) -> BenchmarkResult:
    """Run one X-ray task end to end and return the results object (no files written)."""
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; expected one of {sorted(TASKS)}", field="task")
    if inputs.validation is not None and task != "cls":
        raise InputError("--validation is only used by --task cls", file=str(inputs.validation), field="validation")
    if inputs.label_names is not None and task != "seg":
        raise InputError("--label-names is only used by --task seg", file=str(inputs.label_names), field="label_names")
    if inputs.readers and task != "cls":
        raise InputError("--readers is only used by --task cls", file=str(inputs.readers[0]), field="readers")
    out = TASKS[task](inputs, cfg)
    config = cfg.model_dump(mode="json", include={"bootstrap", "xray"})
    config["xray"] = {task: config["xray"][task]}
    config["xray_run"] = {"task": task, **out.params}
    return finish(NAME, out, config=config, model=model, task=task)


class XRayInputs(BaseModel):
    """Inputs of one X-ray task; ``validation`` is only read by ``cls`` and ``label_names`` only by ``seg``
    (given to another task they are an error naming the option)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(
        description="cls/ret: labels.csv (or CheXpert/MIMIC-CXR/NIH/MURA files); seg: folder of label maps (or class "
        "folders, JSRT/SCR, paxray.json, VinDr JSON, SIIM RLE CSV); loc: COCO json (or YOLO data.yaml/split folder, "
        "MS-CXR CSV); report: references.jsonl (or OpenI XML folder, indiana_reports.csv, R2Gen annotation.json)"
    )
    predictions: Path = Field(
        description="cls: scores.csv; ret: rankings.csv; seg: folder (label maps, class folders, .npy stacks) or "
        "VinDr JSON / RLE CSV; loc: COCO results json, YOLO txt folder or MS-CXR-style CSV; report: predictions.jsonl"
    )
    validation: Path | None = Field(
        None, description="cls: folder with labels.csv + scores.csv to choose thresholds on"
    )
    label_names: Path | None = Field(None, description="seg: CSV id,name of the classes")
    format: str | None = Field(
        None, description="the ground truth's layout (default: told from the files; docs/benchmarks/xray.md)"
    )
    readers: list[Path] = Field(
        default_factory=list, description="cls: a human reader's decisions (CSV in the truth's layout, or a folder)"
    )


def _task_evaluator(task: str) -> Callable[[XRayInputs, EvalConfig, dict[str, str]], BenchmarkResult]:
    def run(inputs: XRayInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
        paths = TaskInputs(
            inputs.ground_truth,
            inputs.predictions,
            inputs.validation,
            inputs.label_names,
            inputs.format,
            tuple(inputs.readers),
        )
        return evaluate(task, paths, cfg, model)

    return run


def _unit(task: str, help: str, primary: PrimaryMetric, metrics: tuple[MetricInfo, ...], dims: tuple[str, ...],
          plots: tuple[PlotSpec, ...], summary: tuple[str, ...]) -> BenchmarkSpec:  # fmt: skip
    return BenchmarkSpec(
        name=f"{NAME}/{task}",
        help=help,
        inputs=XRayInputs,
        config_section=NAME,
        config_model=XRayConfig,
        evaluate=_task_evaluator(task),
        primary=primary,
        metrics=metrics,
        group_dimensions=dims,
        plots=plots,
        summary_metrics=summary,
    )


#: One unit per task (``xray/cls`` ...), each tracked, compared and gated on its own primary metric.
SPECS: tuple[BenchmarkSpec, ...] = (
    _unit(
        "cls",
        "multi-label classification: AUROC (DeLong CI), operating point at 95% sensitivity, ECE",
        PrimaryMetric(
            "auroc",
            margin=0.01,
            group_margin=0.05,
            floor=0.6,
            # blank and pool: null when unset, as in results written before they existed
            protocol=("xray.cls.uncertain", "xray.cls.blank", "xray.cls.pool"),
        ),
        (
            # AUROC: macro mean over findings of each finding's AUROC over images, paired by DeLong's test
            MetricInfo("auroc", label="AUROC", level="corpus", paired="delong", reduction="corpus"),
            MetricInfo("ap", label="average precision", level="corpus", paired="none", reduction="corpus"),
            MetricInfo(
                "ece",
                label="ECE",
                higher_is_better=False,
                level="corpus",
                paired="none",
                reduction="corpus",
                bins="xray.cls.ece_bins",
            ),
            MetricInfo(
                "ece_reference",
                label="expected ECE of a calibrated model",
                higher_is_better=False,
                level="corpus",
                paired="none",
                reduction="corpus",
            ),
            MetricInfo("sens_at_sens95", label="sensitivity at the 95%-sensitivity threshold"),
            MetricInfo("spec_at_sens95", label="specificity at 95% sensitivity"),
            MetricInfo("ppv_at_sens95", label="PPV at 95% sensitivity"),
            MetricInfo(
                "threshold_at_sens95", label="threshold at 95% sensitivity", paired="none", operating_point=True
            ),
            # MURA layout only: Cohen's kappa of score >= xray.cls.decision_threshold against the study labels
            MetricInfo("kappa", label="Cohen's kappa", level="corpus", paired="none", reduction="corpus"),
            *cls_readers.READER_METRICS,
        ),  # fmt: skip
        # case groups of the native layouts (cls_layouts): CheXpert sex / view / projection, NIH sex /
        # projection, MURA body part
        ("finding", "sex", "view", "projection", "body_part"),
        (
            PlotSpec(metric="auroc", dimension="finding", kind="roc", title="ROC"),
            PlotSpec(metric="ap", dimension="finding", kind="pr", title="Precision-recall"),
            PlotSpec(metric="ece", dimension="finding", kind="reliability", title="Reliability diagram"),
            PlotSpec(metric="auroc", dimension="finding", title="AUROC by finding"),
        ),
        ("auroc", "spec_at_sens95", "ece", "ece_reference", "readers_below_curve"),
    ),
    _unit(
        "seg",
        "2D segmentation: Dice and mIoU per class",
        PrimaryMetric(
            "dsc",
            margin=0.01,
            group_margin=0.05,
            floor=0.5,
            protocol=("xray.seg.labels", "xray.seg.missing_prediction", "xray.seg.empty_both=nan"),
        ),
        (MetricInfo("dsc", label="Dice"), MetricInfo("miou", label="mIoU")),
        ("class",),
        (PlotSpec(metric="dsc", dimension="class"),),
        ("dsc", "miou"),
    ),
    _unit(
        "ret",
        "image retrieval: P@k by label",
        PrimaryMetric("p_at_1", margin=0.01, group_margin=0.05, floor=0.1),
        (MetricInfo("p_at_{k}", label="P@{k}"),),
        (),
        (),
        ("p_at_1", "p_at_5", "p_at_10"),
    ),
    _unit(
        "loc",
        "box localisation: mAP@50 (COCO 101-point) per category, grounding mIoU",
        # mAP is not a mean over images: the gate resamples images and recomputes it for both versions
        PrimaryMetric("map_50", margin=0.01, group_margin=0.05, floor=0.3),
        (
            MetricInfo("map_50", label="mAP@50", level="corpus", reduction="corpus", corpus=loc.map_50_corpus),
            MetricInfo("miou", label="grounding mIoU"),
        ),
        (),
        (PlotSpec(metric="map_50", dimension="category"),),
        ("map_50", "miou"),
    ),
    _unit(
        "report",
        "report generation: BLEU-1..4, ROUGE-L, CIDEr-D",
        PrimaryMetric("rouge_l", margin=0.01, group_margin=0.05, floor=0.1, protocol=("xray.report.rouge_beta",)),
        (
            MetricInfo("bleu_{n}", label="BLEU-{n}", level="corpus", paired="none", reduction="corpus"),
            MetricInfo("rouge_l", label="ROUGE-L"),
            MetricInfo("cider", label="CIDEr-D"),
        ),
        (),
        (),
        ("bleu_4", "rouge_l", "cider"),
    ),
)
