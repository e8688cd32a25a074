"""``n_missing_predictions`` of tracked evaluations, read back from their runs (what ``promote`` and
``leaderboard`` show; ``track`` and ``compare`` read it from the results themselves).

An evaluation run logs its result's summary counts as metrics (``<benchmark>/n_missing_predictions``, see
:meth:`~trackeval.results.BenchmarkResult.flat_metrics`); a unit that does not count missing predictions has
no such metric and reads as 0.
"""

from __future__ import annotations

from typing import Any

from trackeval.tracking.client import Mlflow
from trackeval.tracking.tags import EVAL_RUN_TAG, TAG

#: the summary count shown (``summary["n_missing_predictions"]``)
COUNT = "n_missing_predictions"


def run_missing(run: Any) -> int:
    """``n_missing_predictions`` of an evaluation run (an MLflow ``Run``), 0 when it has none."""
    benchmark = run.data.tags.get(TAG + "benchmark", "")
    return int(run.data.metrics.get(f"{benchmark}/{COUNT}", 0))


def version_missing(ml: Mlflow, mv: Any) -> dict[str, int]:
    """``{unit: n_missing_predictions}`` (non-zero only, by unit) of the evaluation runs a registered version's
    ``eval_run.<unit>`` tags point to."""
    out: dict[str, int] = {}
    for run_id in sorted({v for k, v in mv.tags.items() if k.startswith(EVAL_RUN_TAG)}):
        run = ml.call("get_run", ml.client.get_run, run_id)
        n = run_missing(run)
        if n:
            out[run.data.tags.get(TAG + "unit") or run.data.tags.get(TAG + "benchmark", "")] = n
    return dict(sorted(out.items()))
