"""A results folder: results.json, metrics.json (DVC metrics) and cases.parquet, written as one set.

Every sink (MLflow, DVC, the report) reads results through :func:`read_results`; :func:`write_outputs` is the
only writer.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from trackeval.errors import InputError, OutputError
from trackeval.io.atomic import atomic_path
from trackeval.results import BenchmarkResult

if TYPE_CHECKING:
    import pandas as pd

#: significant digits of the floats in metrics.json (a DVC metrics file, committed): the last digits of a bootstrap
#: bound can differ between machines (summation order), which would show as spurious `dvc metrics diff` changes
METRICS_DIGITS = 10

RESULTS_JSON = "results.json"
METRICS_JSON = "metrics.json"
CASES_PARQUET = "cases.parquet"


def cases_frame(result: BenchmarkResult) -> pd.DataFrame:
    """One row per case x item (organ, region, ...): ids, status, group columns and every per-item metric."""
    import pandas as pd

    rows = []
    group_cols = sorted({g for c in result.cases for g in c.groups})
    for case in result.cases:
        base = {"case_id": case.case_id, "subject_id": case.subject_id, "status": case.status}
        base.update({g: case.groups.get(g) for g in group_cols})
        for item, metrics in case.metrics.items():
            rows.append({**base, result.item_kind: item, **metrics})
    return pd.DataFrame(rows)


def metrics_file(result: BenchmarkResult) -> dict[str, float]:
    """What metrics.json holds: :meth:`BenchmarkResult.flat_metrics` rounded to :data:`METRICS_DIGITS`
    significant digits (results.json keeps full precision).

    >>> float(f"{0.61531141226668:.{METRICS_DIGITS}g}")
    0.6153114123
    """
    return {k: float(f"{v:.{METRICS_DIGITS}g}") for k, v in result.flat_metrics().items()}


def write_outputs(result: BenchmarkResult, out_dir: Path) -> dict[str, Path]:
    """Write the three files into ``out_dir``: all are renamed into place only once all were written,
    so a failure (disk full, read-only folder) leaves no partial set. Returns their paths."""
    paths = {name: out_dir / name for name in (RESULTS_JSON, METRICS_JSON, CASES_PARQUET)}
    metrics = json.dumps(metrics_file(result), sort_keys=True, indent=1, allow_nan=False) + "\n"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            tmp = {name: stack.enter_context(atomic_path(path)) for name, path in paths.items()}
            cases_frame(result).to_parquet(tmp[CASES_PARQUET], index=False)
            tmp[METRICS_JSON].write_text(metrics, encoding="utf-8")
            tmp[RESULTS_JSON].write_text(result.to_json(), encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write the outputs to {out_dir}: {exc.strerror or exc}") from exc
    return paths


def read_results(folder: Path) -> BenchmarkResult:
    """Load and validate ``folder/results.json`` (a results folder, or the file itself)."""
    path = folder if folder.suffix == ".json" else folder / RESULTS_JSON
    try:
        return BenchmarkResult.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read results: {exc.strerror or exc}", file=str(path)) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"not a trackeval results file: {first['msg']}",
            file=str(path),
            field=".".join(str(p) for p in first["loc"]),
        ) from exc
