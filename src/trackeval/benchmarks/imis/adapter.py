"""IMIS-Bench: interactive segmentation driven through the click protocol (live) or verified from logs (offline).

Live: ``--model MODULE:FACTORY`` (or an MLflow model URI) is driven through ``imis.max_clicks`` turns per image
x target x initial prompt type. Offline: ``--predictions LOG.jsonl`` (see :mod:`trackeval.interactive.logs`) is
verified turn by turn against the protocol, then scored the same way. An image without any log line gets
status ``missing_prediction`` and the worst values (Dice 0 at every turn, NoC not reached), and is named in one
warning line.

Per image x target (records, ``cases.parquet``): ``dice_<prompt>_<turn>``, ``noc_<t>``, ``dice_auc`` (and
``iou_point_<turn>`` with ``imis.noc_metric=iou``).
Aggregates, image level (the original: targets averaged within an image, then over images) as ``imis/...``
and mask level (mean over all masks) as ``imis/mask_level/...``:

* ``dice/by_prompt/<point|box|text>``: Dice after turn 1 of each initial prompt type;
* ``dice/by_click/<n>``, ``noc_<85|90>``, ``dice_auc``: from the point sequences (click n = turn n); NoC counts
  clicks to reach ``imis.noc_metric`` (Dice, or IoU) >= t, not reached = ``max_clicks + 1`` or ``max_clicks``
  (``imis.noc_not_reached``); the keys do not change with these switches, which are logged as params;
* breakdowns ``/by_target/<t>`` (image level only: one mask per target and image, so both levels agree),
  ``/by_modality/<m>``, ``/by_region/<r>``.

``imis.protocol: imis_bench`` (IMIS-Bench ``test.py``: everything on the ``imis.eval_size`` square grid, label
``-1`` click when the previous mask is exact) is live only: an offline log with it is an InputError.

CIs: image-level (``bootstrap.cluster``) expanded percentile bootstrap; at mask level the ratio (sum of Dice /
number of masks) is recomputed on each resample of images, with the same resamples as the image level.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from trackeval.benchmarks.imis_config import IMISConfig
from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.summaries import clusters_of
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, Scored, case_digests, finish, score_cases
from trackeval.errors import InputError
from trackeval.interactive.logs import InteractionLog, masks_digest, read_log, verify_case
from trackeval.interactive.loop import Turn, interact_case, load_model, parse_model_args
from trackeval.interactive.protocol import noc_key, supported_prompts
from trackeval.io.hashing import sha256_text
from trackeval.io.imis import IMISCase, load_dataset, read_case
from trackeval.io.imis_volumes import protocol
from trackeval.io.layouts import Layout
from trackeval.metrics.interactive import binary_dice, binary_iou, dice_auc, eps_dice, eps_iou, number_of_clicks
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, PlotSpec, metric_key
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric
from trackeval.stats.bootstrap import bootstrap_means, group_seed, n_clusters, percentiles, weight_blocks
from trackeval.stats.reduce import nan_mean, nan_sums, ratio

log = logging.getLogger(__name__)

NAME = "imis"
#: folded into each case's ground-truth digest under ``imis.protocol: imis_bench``: the truth is resampled by PIL's
#: rule and Dice is taken on the label grid (issue 36), so results of earlier versions (torch "nearest", Dice on the
#: 1024 grid) do not pair with these in the gate
IMIS_BENCH_TRUTH = "imis_bench:pil-nearest:label-grid-dice"


@dataclass(frozen=True)
class _LiveJob:
    case: IMISCase
    config: IMISConfig
    model: str
    model_kwargs: tuple[tuple[str, str], ...]
    prompt_types: tuple[str, ...]


@dataclass(frozen=True)
class _LogJob:
    case: IMISCase
    config: IMISConfig
    log: InteractionLog  # holding this case's lines only
    prompt_types: tuple[str, ...]


def _record(case: IMISCase, metrics: dict[str, dict[str, float]], missing: bool = False) -> CaseRecord:
    return CaseRecord(
        case_id=case.case_id,
        subject_id=case.subject_id or case.case_id,
        groups={"modality": case.modality, "region": case.region},
        metrics=metrics,
        status="missing_prediction" if missing else "ok",
        message="no interaction logged for this image; scored as the worst (Dice 0)" if missing else "",
    )


def sequence_metrics(truth: np.ndarray, masks: Mapping[str, list[np.ndarray]], cfg: IMISConfig) -> dict[str, float]:
    """Per-target metrics from the turn masks of each prompt type.

    Keys: ``dice_<prompt>_<turn>`` for every prompt type and turn; from the ``point`` sequence (the click
    curve) ``noc_<t>`` per threshold (on ``cfg.noc_metric``; with ``iou`` also ``iou_point_<turn>``) and
    ``dice_auc``; NaN when no point sequence was run. With ``imis.protocol: imis_bench`` Dice and IoU are
    IMIS-Bench's, with ``1e-8`` added to the denominators (:func:`eps_dice`, :func:`eps_iou`); otherwise exact,
    with ``cfg.dice_empty_rule``.
    """
    if cfg.protocol == "imis_bench":
        dice, iou = eps_dice, eps_iou
    else:
        rule = cfg.dice_empty_rule
        dice, iou = (lambda m, g: binary_dice(m, g, rule)), (lambda m, g: binary_iou(m, g, rule))
    out: dict[str, float] = {}
    for prompt_type, seq in masks.items():
        curve = np.array([dice(m, truth) for m in seq])
        out.update({f"dice_{prompt_type}_{t}": float(d) for t, d in enumerate(curve, start=1)})
        if prompt_type == "point":
            noc_curve = curve
            if cfg.noc_metric == "iou":
                noc_curve = np.array([iou(m, truth) for m in seq])
                out.update({f"iou_point_{t}": float(v) for t, v in enumerate(noc_curve, start=1)})
            for thr in cfg.noc_thresholds:
                out[noc_key(thr)] = number_of_clicks(noc_curve, thr, cfg.noc_not_reached)
            out["dice_auc"] = dice_auc(curve)
    if "point" not in masks:
        out.update({noc_key(thr): float("nan") for thr in cfg.noc_thresholds}, dice_auc=float("nan"))
    return out


def score_live(job: _LiveJob) -> Scored:
    """Run every sequence of one image through the model and score it (runs in a worker)."""
    loaded = read_case(job.case, job.config)
    model = load_model(job.model, job.model_kwargs)
    # imis_bench: the model works on the eval_size grid, its answers are scored on the label grid (as test.py)
    truths = loaded.masks if loaded.label_masks is None else loaded.label_masks
    label_shape = None if loaded.label_masks is None else _grid_shape(loaded.label_masks)
    seqs = interact_case(model, job.case.case_id, loaded.image, loaded.masks, job.prompt_types, job.config, label_shape)
    masks = {t: {p: [_scored_mask(turn) for turn in turns] for p, turns in by_p.items()} for t, by_p in seqs.items()}
    metrics = {t: sequence_metrics(truths[t], masks[t], job.config) for t in masks}
    digest = loaded.digest if loaded.label_masks is None else sha256_text(loaded.digest, IMIS_BENCH_TRUTH)
    return Scored(_record(job.case, metrics), digest, masks_digest(masks))


def _scored_mask(turn: Turn) -> np.ndarray:
    """The mask a turn is scored on: its answer on the label grid (``imis_bench``), else the answer as is."""
    return turn.mask if turn.label_mask is None else turn.label_mask


def _grid_shape(masks: Mapping[str, np.ndarray]) -> tuple[int, int] | None:
    """The 2D shape the label-grid masks share (None when there is no target)."""
    shapes = {m.shape for m in masks.values()}
    return next(iter(shapes)) if shapes else None


def score_logged(job: _LogJob) -> Scored:
    """Verify one image's logged sequences against the protocol and score them (runs in a worker)."""
    loaded = read_case(job.case, job.config)
    cfg = job.config
    if job.case.case_id not in job.log.by_case:
        metrics = {
            t: sequence_metrics(m, {p: [np.zeros_like(m)] * cfg.max_clicks for p in job.prompt_types}, cfg)
            for t, m in sorted(loaded.masks.items())
        }
        return Scored(_record(job.case, metrics, missing=True), loaded.digest, "missing")
    masks, digest = verify_case(job.log, job.case.case_id, loaded.masks, cfg, job.prompt_types)
    metrics = {t: sequence_metrics(loaded.masks[t], masks[t], cfg) for t in masks}
    return Scored(_record(job.case, metrics), loaded.digest, digest)


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


def metric_columns(cfg: IMISConfig, prompt_types: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """``(key tokens after the prefix, per-record metric name)`` of every aggregated metric."""
    cols = [(("dice", "by_prompt", p), f"dice_{p}_1") for p in prompt_types]
    if "point" in prompt_types:
        cols += [(("dice", "by_click", str(n)), f"dice_point_{n}") for n in range(1, cfg.max_clicks + 1)]
        cols += [((noc_key(t),), noc_key(t)) for t in cfg.noc_thresholds]
        cols.append((("dice_auc",), "dice_auc"))
    return cols


def _ratio_ci(
    sums: np.ndarray, counts: np.ndarray, cfg: EvalConfig, seed: tuple[int, int], clusters: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask-level means ``sum(sums) / sum(counts)`` per column with a percentile CI over image resamples.

    The resamples are :func:`weight_blocks` of the same seed as the image level, so both levels share them.
    """
    b = cfg.bootstrap
    n = sums.shape[0]
    blocks = [ratio(w @ sums, w @ counts) for w in weight_blocks(n, b.n_resamples, seed, clusters)]
    value = ratio(sums.sum(axis=0), counts.sum(axis=0))
    low, high = percentiles(np.concatenate(blocks, axis=0), b.confidence, n_clusters(n, clusters), b.interval, value)
    return value, low, high


def _summaries(
    prefix: str,
    suffix: tuple[str, ...],
    cols: list[tuple[tuple[str, ...], str]],
    per_image: list[np.ndarray],
    cfg: EvalConfig,
    mask_level: bool,
    clusters: np.ndarray | None,
) -> dict[str, MetricSummary]:
    """Summaries of every column over the images in ``per_image`` (each a ``(masks, k)`` array; ``clusters``: the
    images' cluster codes)."""
    seed = group_seed(cfg.bootstrap.seed, "/".join(suffix))
    k = len(cols)
    out = {}
    if mask_level:
        parts = [nan_sums(v, axis=0) for v in per_image]
        sums = np.array([total for total, _ in parts]).reshape(-1, k)
        counts = np.array([count for _, count in parts], dtype=float).reshape(-1, k)
        value, low, high = _ratio_ci(sums, counts, cfg, seed, clusters)
        n, n_valid = int(sum(len(v) for v in per_image)), counts.sum(axis=0)
    else:
        # an image whose targets are all NaN for a column: a mean over nothing, NaN, left out over images
        means = np.array([nan_mean(v, axis=0) for v in per_image]).reshape(-1, k)
        b = cfg.bootstrap
        ci = bootstrap_means(means, b.n_resamples, seed, b.confidence, clusters, b.interval)
        value, low, high, n, n_valid = ci.value, ci.low, ci.high, len(per_image), ci.n_valid
    for j, (tokens, _) in enumerate(cols):
        out[metric_key(prefix, *tokens, *suffix)] = MetricSummary(
            value=float(value[j]),
            ci95_low=float(low[j]),
            ci95_high=float(high[j]),
            n=n,
            n_valid=int(n_valid[j]),
        )
    return out


def _case_rows(r: CaseRecord, names: list[str], target: str | None = None) -> np.ndarray:
    """``(targets, columns)`` array of one case's values, targets in sorted order and columns in ``names`` order
    (NaN where a target lacks a column); ``target``: that target's row alone (none when the case lacks it)."""
    items = [m for t, m in sorted(r.metrics.items()) if target is None or t == target]
    vals = [[math.nan if m.get(c) is None else m[c] for c in names] for m in items]
    return np.array(vals, dtype=float).reshape(len(items), len(names))


def _level_summaries(
    usable: list[CaseRecord], cols: list[tuple[tuple[str, ...], str]], cfg: EvalConfig, level: bool, prefix: str
) -> dict[str, MetricSummary]:
    """Summaries at one level (``level``: mask level, else image level) over every case, then by modality and by
    region (each value in sorted order)."""
    names = [name for _, name in cols]
    rows = [_case_rows(r, names) for r in usable]
    out = _summaries(prefix, (), cols, rows, cfg, level, clusters_of(usable, cfg.bootstrap))
    for dim in ("modality", "region"):
        for value in sorted({r.groups[dim] for r in usable}):
            subset = [r for r in usable if r.groups[dim] == value]
            sub_rows = [_case_rows(r, names) for r in subset]
            out.update(
                _summaries(prefix, (f"by_{dim}", value), cols, sub_rows, cfg, level, clusters_of(subset, cfg.bootstrap))
            )
    return out


def _target_summaries(
    usable: list[CaseRecord], cols: list[tuple[tuple[str, ...], str]], cfg: EvalConfig
) -> dict[str, MetricSummary]:
    """Image-level summaries per target (sorted), each over the cases that have the target."""
    names = [name for _, name in cols]
    out: dict[str, MetricSummary] = {}
    for target in sorted({t for r in usable for t in r.metrics}):
        subset = [r for r in usable if target in r.metrics]
        sub_rows = [_case_rows(r, names, target) for r in subset]
        out.update(
            _summaries(NAME, ("by_target", target), cols, sub_rows, cfg, False, clusters_of(subset, cfg.bootstrap))
        )
    return out


def aggregate(records: list[CaseRecord], cfg: EvalConfig, prompt_types: tuple[str, ...]) -> dict[str, MetricSummary]:
    """Every IMIS aggregate key (see the module docstring)."""
    cols = metric_columns(cfg.imis, prompt_types)
    usable = [r for r in records if r.metrics]
    out: dict[str, MetricSummary] = {}
    for level, prefix in ((False, NAME), (True, metric_key(NAME, "mask_level"))):
        out.update(_level_summaries(usable, cols, cfg, level, prefix))
    out.update(_target_summaries(usable, cols, cfg))
    return out


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
    """Live mode: the prompt types the model supports, one :class:`_LiveJob` per image."""
    supported = supported_prompts(load_model(model, kwargs))
    prompt_types = tuple(p for p in icfg.prompt_types if p in supported)
    skipped = [p for p in icfg.prompt_types if p not in supported]
    notes = [f"model does not support prompt type(s) {skipped}: not run"] if skipped else []
    jobs = [_LiveJob(c, icfg, model, kwargs, prompt_types) for c in cases]
    return _Plan(score_live, jobs, prompt_types, notes, {"interactive_model": model})


def _offline_plan(cases: list[IMISCase], icfg: IMISConfig, log_path: Path) -> _Plan:
    """Offline mode: the log read and checked against the ground truth's images, one :class:`_LogJob` per image
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
    jobs = [_LogJob(c, icfg, _case_log(ilog, c.case_id), prompt_types) for c in cases]
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
