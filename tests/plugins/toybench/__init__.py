"""toybench: a complete third-party benchmark unit for trackeval, declared through the entry point
``[project.entry-points."trackeval.benchmarks"] toy = "toybench:SPEC"`` (see CONTRIBUTING.md).

Task: classify each case; a case scores ``accuracy`` 1 when the predicted label equals the truth.
Inputs: ``truth.csv`` (``case_id,site,label``) and ``predictions.csv`` (``case_id,label``).
Keys: ``toy/accuracy`` (mean over cases, case-level bootstrap CI) and ``toy/accuracy/by_site/<site>``.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.summaries import clusters_of, column_summary
from trackeval.config import EvalConfig
from trackeval.config.base import Section
from trackeval.errors import InputError
from trackeval.results import BenchmarkResult, CaseRecord, PlotSpec, build_result
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric


class ToyConfig(Section):
    """The ``toy`` section of params.yaml: ``min_cases`` cases at least."""

    min_cases: int = Field(1, gt=0)


class ToyInputs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(description="truth.csv: case_id,site,label")
    predictions: Path = Field(description="predictions.csv: case_id,label")


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from exc


def evaluate(inputs: ToyInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    truth, pred = _rows(inputs.ground_truth), {r["case_id"]: r["label"] for r in _rows(inputs.predictions)}
    if len(truth) < cfg.toy.min_cases:
        raise InputError(f"{len(truth)} case(s), toy.min_cases is {cfg.toy.min_cases}", file=str(inputs.ground_truth))
    records = [
        CaseRecord(
            case_id=r["case_id"],
            subject_id=r["case_id"],
            groups={"site": r["site"]},
            metrics={"label": {"accuracy": float(pred.get(r["case_id"]) == r["label"])}},
        )
        for r in truth
    ]
    acc = np.array([c.metrics["label"]["accuracy"] for c in records])
    sites = np.array([c.groups["site"] for c in records])
    clusters = clusters_of(records, cfg.bootstrap)
    aggregates = {"toy/accuracy": column_summary(acc, cfg.bootstrap, "toy", clusters)}
    for site in sorted(set(sites)):
        at = sites == site
        aggregates[f"toy/accuracy/by_site/{site}"] = column_summary(
            acc[at], cfg.bootstrap, site, None if clusters is None else clusters[at]
        )
    digest = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (inputs.ground_truth, inputs.predictions)}
    return build_result(
        "toy",
        model=model,
        config=cfg.model_dump(mode="json", include={"bootstrap", "toy"}),
        ground_truth_digest=digest[inputs.ground_truth],
        predictions_digest=digest[inputs.predictions],
        summary={"n_cases": len(records)},
        warnings=[],
        cases=records,
        aggregates=aggregates,
        item_kind="label",
    )


SPEC = BenchmarkSpec(
    name="toy",
    help="toy: fraction of correctly labelled cases",
    inputs=ToyInputs,
    config_section="toy",
    config_model=ToyConfig,
    evaluate=evaluate,
    primary=PrimaryMetric("accuracy", margin=0.05, group_margin=0.2, floor=0.5),
    metrics=(MetricInfo("accuracy", label="accuracy"),),
    group_dimensions=("site",),
    plots=(PlotSpec(metric="accuracy", dimension="site"),),
    summary_metrics=("accuracy",),
)
