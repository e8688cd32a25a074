"""The 3D-MIR unit's adapter: scoring by region, the aggregates, :func:`evaluate` end to end and the spec (see
:mod:`trackeval.benchmarks.mir3d`)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.mir3d.config import Mir3dConfig
from trackeval.benchmarks.mir3d.readers import (
    RELEVANCE,
    RankedList,
    RegionTruth,
    find_regions,
    load_ground_truth,
    load_rankings,
)
from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.summaries import clusters_of
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation, finish
from trackeval.io.hashing import sha256_files, sha256_text
from trackeval.metrics.ranking import average_precision, label_relevance, precision_at_10_original_quirk, precision_at_k
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, PlotSpec, metric_key
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric
from trackeval.stats.bootstrap import bootstrap_means, group_seed

log = logging.getLogger(__name__)

NAME = "mir3d"


def score_region(
    truth: RegionTruth, lists: dict[tuple[str, str], RankedList], cfg: Mir3dConfig
) -> dict[str, dict[str, np.ndarray]]:
    """Per-query metrics of one region: ``{"flag"|"group": {metric: (n_queries,) array}}`` in query order.

    A query without a list has an all-non-relevant row (every metric 0); a list shorter than ``cfg.depth`` is
    padded with non-relevant positions; ranks beyond ``cfg.depth`` are not read.
    """
    depth = cfg.depth
    pos = np.full((len(truth.queries), depth), -1, dtype=np.int64)
    for i, query in enumerate(truth.queries):
        ranked = lists.get((truth.region, query))
        if ranked is not None:
            top = ranked.positions[:depth]
            pos[i, : len(top)] = top
    valid = pos >= 0
    safe = np.where(valid, pos, 0)
    out: dict[str, dict[str, np.ndarray]] = {}
    for kind in RELEVANCE:
        q_lab, idx_lab = truth.label_array(kind, truth.queries), truth.label_array(kind, truth.index)
        rel = label_relevance(q_lab, idx_lab[safe], valid)
        metrics = {f"p_at_{k}": precision_at_k(rel, k) for k in cfg.ks}
        if cfg.p10_mode == "original_quirk" and 10 in cfg.ks:
            metrics["p_at_10"] = precision_at_10_original_quirk(rel)
        n_relevant = (idx_lab[None, :] == q_lab[:, None]).sum(axis=1)
        denominator = n_relevant if cfg.ap_denominator == "total_in_index" else None
        metrics[f"ap_at_{cfg.ap_k}"] = average_precision(rel, k=cfg.ap_k, n_relevant=denominator)
        out[kind] = metrics
    return out


def _records(
    truth: RegionTruth, scores: dict[str, dict[str, np.ndarray]], lists: dict[tuple[str, str], RankedList], depth: int
) -> list[CaseRecord]:
    records = []
    for i, query in enumerate(truth.queries):
        ranked = lists.get((truth.region, query))
        if ranked is None:
            status, message = "missing_prediction", "no ranking for this query; every metric scored 0"
        elif len(ranked.positions) < depth:
            n = len(ranked.positions)
            status, message = "ok", f"{n} result(s); ranks {n + 1}..{depth} scored as non-relevant"
        else:
            status, message = "ok", ""
        metrics = {f"{kind}/{m}": float(v[i]) for kind, per in scores.items() for m, v in per.items()}
        records.append(
            CaseRecord(
                case_id=f"{truth.region}/{query}",
                subject_id=query,
                groups={
                    "region": truth.region,
                    "lesion_flag": str(truth.labels["flag"][query]),
                    "lesion_group": str(truth.labels["group"][query]),
                },
                metrics={truth.region: metrics},
                status=status,
                message=message,
            )
        )
    return records


def aggregate(records: list[CaseRecord], regions: list[str], cfg: EvalConfig) -> dict[str, MetricSummary]:
    """Macro means over regions and per-region means, with CIs from one shared bootstrap over queries."""
    names = [
        f"{kind}/{m}" for kind in RELEVANCE for m in (*(f"p_at_{k}" for k in cfg.mir3d.ks), f"ap_at_{cfg.mir3d.ap_k}")
    ]
    values = np.full((len(records), len(regions), len(names)), np.nan)
    col = {r: j for j, r in enumerate(regions)}
    for i, rec in enumerate(records):
        region = rec.groups["region"]
        values[i, col[region]] = [rec.metrics[region][name] for name in names]
    b = cfg.bootstrap
    seed = group_seed(b.seed, NAME)
    clusters = clusters_of(records, b)
    out: dict[str, MetricSummary] = {}
    for m, name in enumerate(names):
        ci = bootstrap_means(values[:, :, m], b.n_resamples, seed, b.confidence, clusters, b.interval)
        key = metric_key(NAME, *name.split("/"))
        n = len(records)
        out[key] = MetricSummary(value=ci.overall, ci95_low=ci.overall_low, ci95_high=ci.overall_high, n=n, n_valid=n)
        for j, region in enumerate(regions):
            nv = int(ci.n_valid[j])
            out[metric_key(key, "by_region", region)] = MetricSummary(
                value=float(ci.value[j]), ci95_low=float(ci.low[j]), ci95_high=float(ci.high[j]), n=nv, n_valid=nv
            )
    return out


def _audit_warnings(truth: dict[str, RegionTruth]) -> list[str]:
    return [
        f"leakage audit: {t.region}: {len(t.overlap)} volume(s) are both in the index (train split) and among the "
        f"queries (test split): {', '.join(t.overlap[:10])}"
        for t in truth.values()
        if t.overlap
    ]


def _missing_note(
    predictions: Path, truth: dict[str, RegionTruth], lists: dict[tuple[str, str], RankedList], skipped: int
) -> list[str]:
    """The warning line naming the test queries without a ranking (none: empty list).

    Raises:
        InputError: no query has a ranking (the predictions file named).
    """
    queries = [(t.region, q) for t in truth.values() for q in t.queries]
    return check_missing(
        [f"{r}/{q}" for r, q in queries],
        [f"{r}/{q}" for r, q in queries if (r, q) not in lists],
        predictions=predictions,
        expected_name=str,
        expected_kind="queries",
        other_kind="row",
        found=f"found {skipped} row(s) of regions not selected by mir3d.regions" if skipped else "",
    )


def _warnings(
    truth: dict[str, RegionTruth], missing_note: list[str], n_short: int, skipped: int, depth: int
) -> list[str]:
    """The run's warning lines (leakage audit, missing queries, short lists, ignored rows), each logged."""
    notes = _audit_warnings(truth) + missing_note
    if n_short:
        notes.append(f"{n_short} ranked list(s) with fewer than {depth} results padded as non-relevant")
    if skipped:
        notes.append(f"{skipped} ranking row(s) of regions not selected by mir3d.regions ignored")
    for note in notes:
        log.warning(note)
    return notes


def _summary(truth: dict[str, RegionTruth], records: list[CaseRecord], n_short: int, skipped: int) -> dict[str, int]:
    """The counts of ``summary`` (see :mod:`trackeval.benchmarks.mir3d`), per-region query and index sizes last."""
    n_missing = sum(1 for r in records if r.status == "missing_prediction")
    summary = {
        "n_regions": len(truth),
        "n_queries": len(records),
        "n_missing_queries": n_missing,
        "n_missing_predictions": n_missing,
        "n_short_lists": n_short,
        "n_rows_ignored": skipped,
        "audit/n_query_index_overlap": sum(len(t.overlap) for t in truth.values()),
    }
    summary.update({f"n_queries/by_region/{t.region}": len(t.queries) for t in truth.values()})
    summary.update({f"n_index/by_region/{t.region}": len(t.index) for t in truth.values()})
    return summary


def evaluate(gt_dir: Path, predictions: Path, cfg: EvalConfig, model: dict[str, str] | None = None) -> BenchmarkResult:
    """Run the 3D-MIR benchmark end to end and return the results object (no files written)."""
    mcfg = cfg.mir3d
    truth = load_ground_truth(gt_dir, mcfg.regions)
    known = set(find_regions(gt_dir))
    lists, skipped = load_rankings(predictions, truth, known)
    missing_note = _missing_note(predictions, truth, lists, skipped)
    records: list[CaseRecord] = []
    for t in truth.values():
        records += _records(t, score_region(t, lists, mcfg), lists, mcfg.depth)
    n_short = sum(1 for rl in lists.values() if len(rl.positions) < mcfg.depth)
    notes = _warnings(truth, missing_note, n_short, skipped, mcfg.depth)
    gt_digest = sha256_text(*(f"{p.parent.name}/{p.name}:{sha256_files(p)}" for t in truth.values() for p in t.files))
    summary = _summary(truth, records, n_short, skipped)
    aggregates = aggregate(records, list(truth), cfg)
    evaluation = Evaluation(records, aggregates, "region", gt_digest, sha256_files(predictions), summary, notes)
    return finish(NAME, evaluation, config=cfg.model_dump(mode="json", include={"bootstrap", "mir3d"}), model=model)


class Mir3dInputs(BaseModel):
    """Inputs of ``trackeval evaluate mir3d``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(
        description="3D-MIR folder: 3DMIR_labels/<region>_labels_and_captions.csv, "
        "Data_Splits/<region>_full_*_split.csv"
    )
    predictions: Path = Field(
        description="rankings.csv (region,query,rank,retrieved[,score]; rank from 1) or .jsonl with the same fields"
    )


def _evaluate(inputs: Mir3dInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    return evaluate(inputs.ground_truth, inputs.predictions, cfg, model)


SPEC = BenchmarkSpec(
    name=NAME,
    help="3D-MIR: volume retrieval P@k and AP@10 by lesion flag and lesion group",
    inputs=Mir3dInputs,
    config_section="mir3d",
    config_model=Mir3dConfig,
    evaluate=_evaluate,
    primary=PrimaryMetric(
        "group/ap_at_10",
        margin=0.01,
        group_margin=0.05,
        floor=0.1,
        protocol=("mir3d.ap_k", "mir3d.ap_denominator", "mir3d.regions"),
    ),
    metrics=tuple(
        MetricInfo(f"{relevance}/{name}_at_{{k}}", label=f"{label}@{{k}} ({words})", record_path=True)
        for relevance, words in (("flag", "cancer-flag relevance"), ("group", "lesion-group relevance"))
        for name, label in (("p", "P"), ("ap", "AP"))
    ),
    group_dimensions=("region",),
    plots=(
        PlotSpec(metric="group/ap_at_10", dimension="region"),
        PlotSpec(metric="group/p_at_k", dimension="region", kind="curve_k", title="P@k vs k by region"),
        PlotSpec(metric="flag/ap_at_10", dimension="region"),
    ),
    summary_metrics=("flag/p_at_10", "flag/ap_at_10", "group/p_at_10", "group/ap_at_10"),
)
