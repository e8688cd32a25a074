"""Multi-anatomy X-ray benchmark (XR-0 style): five tasks behind ``trackeval evaluate xray --task <task>``.

=======  =============================================  =========================================
task     ``--ground-truth`` / ``--predictions``          keys (``xray/<task>/...``)
=======  =============================================  =========================================
cls      labels.csv / scores.csv (+ ``--validation``)   auroc (+ by_finding), spec/sens/ppv_at_sens95, ece
seg      label-map folders (+ ``--label-names``)        dsc, miou (+ by_class)
ret      labels.csv / rankings.csv                      p_at_<k>
loc      COCO ground truth / COCO results               map_50 (+ by_category), miou
report   references.jsonl / predictions.jsonl           bleu_1..bleu_4, rouge_l, cider
=======  =============================================  =========================================

Each task lives in :mod:`trackeval.benchmarks.xray_tasks`; this module parses the options, dispatches and
wraps the task's output into a :class:`~trackeval.results.BenchmarkResult`. The task and the protocol facts
decided at run time (e.g. where the operating point was chosen) are recorded under ``config.xray_run``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from trackeval.benchmarks.registry import BenchmarkSpec, register
from trackeval.benchmarks.xray_tasks import cls, loc, report, ret, seg
from trackeval.benchmarks.xray_tasks.common import TaskInputs, TaskOutput
from trackeval.config import EvalConfig
from trackeval.errors import InputError
from trackeval.results import BenchmarkResult, build_result

NAME = "xray"

TASKS: dict[str, Callable[[TaskInputs, EvalConfig], TaskOutput]] = {
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
    out = TASKS[task](inputs, cfg)
    config = cfg.model_dump(mode="json", include={"bootstrap", "xray"})
    config["xray"] = {task: config["xray"][task]}
    config["xray_run"] = {"task": task, **out.params}
    return build_result(
        NAME,
        model=model,
        config=config,
        ground_truth_digest=out.ground_truth_digest,
        predictions_digest=out.predictions_digest,
        summary=out.summary,
        warnings=out.warnings,
        cases=out.records,
        aggregates=out.aggregates,
        item_kind=out.item_kind,
    )


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, choices=list(TASKS), help="which X-ray task to score")
    p.add_argument(
        "--ground-truth",
        type=Path,
        required=True,
        help="cls/ret: labels.csv; seg: folder of label maps; loc: COCO json; report: references.jsonl",
    )
    p.add_argument(
        "--predictions",
        type=Path,
        required=True,
        help="cls: scores.csv; ret: rankings.csv; seg: folder; loc: COCO results json; report: predictions.jsonl",
    )
    p.add_argument("--validation", type=Path, help="cls: folder with labels.csv + scores.csv to choose thresholds on")
    p.add_argument("--label-names", type=Path, help="seg: CSV id,name of the classes")


def _run(args: argparse.Namespace, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    inputs = TaskInputs(args.ground_truth, args.predictions, args.validation, args.label_names)
    return evaluate(args.task, inputs, cfg, model)


SPEC = register(
    BenchmarkSpec(
        name=NAME,
        help="multi-anatomy X-ray: --task cls|seg|ret|loc|report",
        add_arguments=_add_arguments,
        run=_run,
        summary_metrics=("cls/auroc", "seg/dsc", "ret/p_at_1", "loc/map_50", "report/bleu_4"),
    )
)
