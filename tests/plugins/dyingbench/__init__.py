"""dyingbench: a test-only plug-in benchmark whose scoring function kills its own worker for one named case.

Declared like any plug-in (``[trackeval.benchmarks] dying = dyingbench:SPEC``) and installed only into a throw-away
site folder by ``tests/hostile/test_dying_workers.py``: the fault is real (the worker process that scores
``dying.kill_case`` ends itself with ``dying.how``: SIGKILL, as the out-of-memory killer does, SIGSEGV, or an
exit status), and the run goes through trackeval's own executors (process pool or Dask).

Inputs: ``truth.csv`` (``case_id,label``) and ``predictions.csv`` (``case_id,label``); key ``dying/accuracy``.
"""

from __future__ import annotations

import csv
import hashlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.summaries import column_summary
from trackeval.config import EvalConfig
from trackeval.config.base import Section
from trackeval.engine.executors import map_cases
from trackeval.results import BenchmarkResult, CaseRecord, build_result
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric


class DyingConfig(Section):
    """``kill_case``: the case whose worker dies (empty: none); ``how`` it dies."""

    kill_case: str = ""
    how: Literal["sigkill", "sigsegv", "exit"] = "sigkill"


class DyingInputs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(description="truth.csv: case_id,label")
    predictions: Path = Field(description="predictions.csv: case_id,label")


@dataclass(frozen=True)
class _Job:
    case_id: str
    truth: str
    pred: str | None
    die: str  # "" or DyingConfig.how


def score(job: _Job) -> CaseRecord:
    """Score one case in a worker; the worker that gets the case to kill dies here, for real."""
    if job.die == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif job.die == "sigsegv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif job.die == "exit":
        os._exit(3)
    return CaseRecord(
        case_id=job.case_id,
        subject_id=job.case_id,
        metrics={"label": {"accuracy": float(job.pred == job.truth)}},
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def evaluate(inputs: DyingInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    c = cfg.section("dying")
    pred = {r["case_id"]: r["label"] for r in _rows(inputs.predictions)}
    jobs = [
        _Job(r["case_id"], r["label"], pred.get(r["case_id"]), c.how if r["case_id"] == c.kill_case else "")
        for r in _rows(inputs.ground_truth)
    ]
    records = map_cases(score, jobs, cfg.engine, "dying cases")
    acc = np.array([r.metrics["label"]["accuracy"] for r in records])
    digest = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (inputs.ground_truth, inputs.predictions)}
    return build_result(
        "dying",
        model=model,
        config=cfg.model_dump(mode="json", include={"bootstrap", "dying"}),
        ground_truth_digest=digest[inputs.ground_truth],
        predictions_digest=digest[inputs.predictions],
        summary={"n_cases": len(records)},
        warnings=[],
        cases=records,
        aggregates={"dying/accuracy": column_summary(acc, cfg.bootstrap, "dying", None)},
        item_kind="label",
    )


SPEC = BenchmarkSpec(
    name="dying",
    help="dying: a test unit whose worker dies on one named case",
    inputs=DyingInputs,
    config_section="dying",
    config_model=DyingConfig,
    evaluate=evaluate,
    primary=PrimaryMetric("accuracy", margin=0.05, group_margin=0.2, floor=0.5),
    metrics=(MetricInfo("accuracy", label="accuracy"),),
    summary_metrics=("accuracy",),
)
