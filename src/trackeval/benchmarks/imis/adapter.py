"""IMIS-Bench: interactive segmentation driven through the click protocol (live) or verified from logs (offline).

Live: ``--model MODULE:FACTORY`` (or an MLflow model URI) is driven through ``imis.max_clicks`` turns per image
x target x initial prompt type. Offline: ``--predictions LOG.jsonl`` (see :mod:`trackeval.benchmarks.imis.logs`) is
verified turn by turn against the protocol, then scored the same way. An image without any log line gets
status ``missing_prediction`` and the worst values (Dice 0 at every turn, NoC not reached), and is named in one
warning line.

``imis.protocol: imis_bench`` (IMIS-Bench ``test.py``: everything on the ``imis.eval_size`` square grid, label
``-1`` click when the previous mask is exact) is live only: an offline log with it is an InputError.

One image is scored by :mod:`trackeval.benchmarks.imis.scoring` (the record keys), the records are aggregated by
:mod:`trackeval.benchmarks.imis.aggregates` (the metric keys and their CIs).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trackeval.benchmarks.imis.aggregates import aggregate
from trackeval.benchmarks.imis.cases import IMISCase, load_dataset
from trackeval.benchmarks.imis.config import NAME, IMISConfig
from trackeval.benchmarks.imis.logs import InteractionLog, read_log
from trackeval.benchmarks.imis.protocol import noc_key, supported_prompts
from trackeval.benchmarks.imis.scoring import LiveJob, LogJob, score_live, score_logged
from trackeval.benchmarks.imis.session import load_model, parse_model_args
from trackeval.benchmarks.imis.volumes import protocol
from trackeval.benchmarks.missing import check_missing
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, Scored, case_digests, finish, score_cases
from trackeval.errors import InputError
from trackeval.io.layouts import Layout
from trackeval.results import BenchmarkResult, CaseRecord, PlotSpec
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Plan:
    """One mode's share of a run: the jobs and their scoring function, the prompt types scored, the warning
    lines and the model facts logged in results.json (``model``)."""

    score: Callable[[Any], Scored]
    jobs: list[Any]
    prompt_types: tuple[str, ...]
    notes: list[str]
    info: dict[str, str]


def _live_plan(cases: list[IMISCase], icfg: IMISConfig, model: str, kwargs: tuple[tuple[str, str], ...]) -> _Plan:
    """Live mode: the prompt types the model supports, one :class:`LiveJob` per image."""
    supported = supported_prompts(load_model(model, kwargs))
    prompt_types = tuple(p for p in icfg.prompt_types if p in supported)
    skipped = [p for p in icfg.prompt_types if p not in supported]
    notes = [f"model does not support prompt type(s) {skipped}: not run"] if skipped else []
    jobs = [LiveJob(c, icfg, model, kwargs, prompt_types) for c in cases]
    return _Plan(score_live, jobs, prompt_types, notes, {"interactive_model": model})


def _offline_plan(cases: list[IMISCase], icfg: IMISConfig, log_path: Path) -> _Plan:
    """Offline mode: the log read and checked against the ground truth's images, one :class:`LogJob` per image
    (holding that image's lines only)."""
    if icfg.protocol == "imis_bench":
        raise InputError(
            "imis.protocol=imis_bench is live only (--model): interaction logs are verified on the label grid "
            "without -1 clicks; use imis.protocol=native for --predictions",
            file=str(log_path),
            field="imis.protocol",
        )
    ilog = read_log(log_path)
    prompt_types = tuple(p for p in icfg.prompt_types if p in ilog.prompt_types)
    absent = [p for p in icfg.prompt_types if p not in ilog.prompt_types]
    notes = [f"prompt type(s) {absent} not in the log: not scored"] if absent else []
    notes += _log_coverage(cases, ilog, icfg, log_path)
    if icfg.seed != ilog.seed:
        notes.append(f"the log was made with seed {ilog.seed} (imis.seed is {icfg.seed}); verified with {ilog.seed}")
    jobs = [LogJob(c, icfg, _case_log(ilog, c.case_id), prompt_types) for c in cases]
    return _Plan(score_logged, jobs, prompt_types, notes, {"interaction_log": ilog.digest})


def _log_coverage(cases: list[IMISCase], ilog: InteractionLog, icfg: IMISConfig, log_path: Path) -> list[str]:
    """The warning about images without a line in the log ``log_path`` (:func:`check_missing`); an image of the
    log that is not in the ground truth's split is an :class:`InputError`."""
    ids = [c.case_id for c in cases]
    unknown = sorted(set(ilog.by_case) - set(ids))
    if unknown:
        raise InputError(
            f"the log has {len(unknown)} image(s) not in the ground truth's {icfg.split!r} list, e.g. {unknown[0]!r}",
            file=str(log_path),
            case_id=unknown[0],
            field="case_id",
        )
    return check_missing(
        ids,
        [i for i in ids if i not in ilog.by_case],
        predictions=log_path,
        expected_name=str,
        expected_kind="case ids",
        other_kind="case id",
    )


def _case_log(ilog: InteractionLog, case_id: str) -> InteractionLog:
    """``ilog`` holding the lines of ``case_id`` only (what one worker needs)."""
    lines = {k: v for k, v in ilog.by_case.items() if k == case_id}
    return InteractionLog(ilog.path, lines, ilog.prompt_types, ilog.seed, ilog.digest)


def _not_reached(metrics: dict[str, float], key: str, threshold: float, cfg: IMISConfig) -> bool:
    """Whether one target's point sequence never reached ``threshold`` (NoC ``key``).

    With ``noc_not_reached=max`` a NoC of ``max_clicks`` is ambiguous, so the last turn's score decides.
    """
    noc = metrics.get(key)
    if noc is None or math.isnan(noc):
        return False
    if cfg.noc_not_reached == "max_plus_one":
        return noc > cfg.max_clicks
    last = metrics.get(f"{cfg.noc_metric}_point_{cfg.max_clicks}")
    return noc >= cfg.max_clicks and (last is None or math.isnan(last) or last < threshold)


def _summary(records: list[CaseRecord], icfg: IMISConfig, prompt_types: tuple[str, ...]) -> dict[str, int]:
    """The counts of ``summary``: images, targets, missing logs and, per NoC threshold, targets not reaching it."""
    masks = [m for r in records for m in r.metrics.values()]
    summary = {
        "n_cases": len(records),
        "n_targets": len(masks),
        "n_missing_predictions": sum(r.status == "missing_prediction" for r in records),
    }
    if "point" in prompt_types:
        for t in icfg.noc_thresholds:
            key = noc_key(t)
            summary[f"n_{key}_not_reached"] = sum(_not_reached(m, key, t, icfg) for m in masks)
    return summary


def evaluate(
    gt_dir: Path,
    cfg: EvalConfig,
    *,
    model: str | None = None,
    model_kwargs: dict[str, str] | None = None,
    log_path: Path | None = None,
    model_info: dict[str, str] | None = None,
    format: str | None = None,
) -> BenchmarkResult:
    """Run IMIS live (``model``) or offline (``log_path``) and return the results object (no files written).

    ``format``: the ground truth's layout (``--format``; default: told from the files).
    """
    if (model is None) == (log_path is None):
        raise InputError("give exactly one of --model (live) or --predictions LOG.jsonl (offline)")
    dataset = load_dataset(gt_dir, cfg.imis, format)
    cases, index_digest = dataset.cases, dataset.digest
    if model is not None:
        plan = _live_plan(cases, cfg.imis, model, tuple(sorted((model_kwargs or {}).items())))
    else:
        assert log_path is not None
        plan = _offline_plan(cases, cfg.imis, log_path)
    if not plan.prompt_types:
        raise InputError("no prompt type left to evaluate (imis.prompt_types vs the model or log)")
    for note in plan.notes:
        log.warning(note)
    scored = score_cases(plan.score, plan.jobs, cfg.engine, "IMIS images")
    records = [s.record for s in scored]
    truth_digest, pred_digest = case_digests(scored, f"index:{index_digest}")
    evaluation = Evaluation(
        records=records,
        aggregates=aggregate(records, cfg, plan.prompt_types),
        item_kind="target",
        ground_truth_digest=truth_digest,
        predictions_digest=pred_digest,
        summary=_summary(records, cfg.imis, plan.prompt_types),
        warnings=plan.notes,
        formats=_formats(dataset.layout.name, log_path),
    )
    return finish(NAME, evaluation, config=_config(cfg, dataset.layout), model={**(model_info or {}), **plan.info})


def _formats(layout: str, log_path: Path | None) -> dict[str, str]:
    """``config.format``: the ground truth's layout, and ``generic`` for an interaction log (offline)."""
    return {"ground_truth": layout, **({"predictions": "generic"} if log_path is not None else {})}


def _config(cfg: EvalConfig, layout: Layout) -> dict[str, Any]:
    """The logged config: the bootstrap and imis sections; ``imis.volumes`` (the slicing protocol) only for a 3D
    layout, resolved to the keys that apply to it (the 2D layouts' results keep the config they always had)."""
    config = cfg.model_dump(mode="json", include={"bootstrap", "imis"})
    config["imis"].pop("volumes")
    if not layout.generic:
        config["imis"]["volumes"] = protocol(layout.name, cfg.imis.volumes)
    return config


class IMISInputs(BaseModel):
    """Inputs of ``trackeval evaluate imis``: the dataset and exactly one of ``model`` (live) or
    ``predictions`` (offline log)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(
        description="IMIS dataset folder (dataset.json), NIfTI manifest folder, TotalSegmentator MRI or ISLES'22"
    )
    model: str | None = Field(None, description="live mode: MODULE:FACTORY or an MLflow model URI (models:/name/1)")
    predictions: Path | None = Field(None, description="offline mode: interaction log LOG.jsonl to verify and score")
    model_arg: list[str] = Field(default_factory=list, description="factory keyword argument NAME=VALUE")
    format: str | None = Field(
        None, description="the ground truth's layout (default: told from the files; docs/benchmarks/)"
    )

    @model_validator(mode="after")
    def _one_mode(self) -> IMISInputs:
        if (self.model is None) == (self.predictions is None):
            raise ValueError("give exactly one of --model (live) or --predictions LOG.jsonl (offline)")
        return self


def _evaluate(inputs: IMISInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    return evaluate(
        inputs.ground_truth,
        cfg,
        model=inputs.model,
        model_kwargs=parse_model_args(inputs.model_arg),
        log_path=inputs.predictions,
        model_info=model,
        format=inputs.format,
    )


SPEC = BenchmarkSpec(
    name=NAME,
    help="IMIS: interactive segmentation (click protocol, live model or verified logs), Dice/NoC",
    inputs=IMISInputs,
    config_section="imis",
    config_model=IMISConfig,
    evaluate=_evaluate,
    # every protocol switch changes the click sequences; only the NoC thresholds do not touch Dice
    primary=PrimaryMetric(
        "dice_auc",
        margin=0.01,
        group_margin=0.05,
        floor=0.5,
        protocol=tuple(
            f"imis.{f}"
            for f in (
                "protocol",
                "eval_size",
                "split",
                "prompt_types",
                "click_mode",
                "first_click_fraction",
                "box_jitter_px",
                "accumulate_prompts",
                "max_turns",
                "dice_empty_rule",
                "seed",
                "labels",
                "geometry_tolerance",
                "volumes",
            )
        ),  # fmt: skip
    ),
    # image level (the headline): the mean over images of each image's mean over its targets; mask level: the
    # mean over targets
    metrics=(
        MetricInfo("dice", label="Dice", reduction="case_mean"),
        MetricInfo("dice_auc", label="Dice AUC over clicks", reduction="case_mean"),
        MetricInfo("noc_{t}", label="NoC@{t}", unit="clicks", higher_is_better=False, reduction="case_mean"),
        MetricInfo("mask_level/dice", label="Dice (mask level)"),
        MetricInfo("mask_level/dice_auc", label="Dice AUC over clicks (mask level)"),
        MetricInfo("mask_level/noc_{t}", label="NoC@{t} (mask level)", unit="clicks", higher_is_better=False),
    ),
    group_dimensions=("modality", "region"),
    dimension_labels=(("click", "clicks"), ("prompt", "initial prompt type")),
    plots=(
        PlotSpec(metric="dice", dimension="click", kind="line", title="Dice vs clicks"),
        PlotSpec(
            metric="dice",
            dimension="click",
            kind="line",
            series="prompt",
            case_metric="dice_{prompt}_{click}",
            title="Dice vs clicks per initial prompt type",
        ),
        PlotSpec(metric="dice", dimension="prompt", title="Dice after the first prompt by prompt type"),
    ),
    summary_metrics=(
        "dice/by_prompt/point",
        "dice/by_prompt/box",
        "dice/by_click/9",
        "noc_85",
        "noc_90",
        "dice_auc",
    ),
)
