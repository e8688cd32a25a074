"""A results folder: results.json, metrics.json (DVC metrics) and cases.parquet, written and read as one set.

Every sink (MLflow, DVC, the report, the gate) reads results through :func:`read_results` (or
:func:`read_results_files`, which also returns the verified bytes to upload); :func:`write_outputs` is the only
writer.

**Why the set is written in place, with backups, and verified on reading.** ``--out`` folders also hold files that
are not part of the set (``figures/``, ``report.html``, ``plot.csv``, ``plots/``, ``headline.json``), and the DVC
pipeline declares each of the three files as its own output at a fixed path. Switching a fresh sibling folder in
(a directory rename or a symlink) would drop or hide those files, and a symlinked ``results.json`` is refused by the
reader; a separate commit record would not be restored by ``dvc checkout`` with the files it names, so it would
refuse valid checked-out results. Instead:

* writing (:func:`trackeval.io.atomic.write_file_set`): all three files are written and fsync'ed in a staging
  folder inside ``out``, then renamed into place (results.json last, so a first write that is killed leaves no
  results.json at all), the folder fsync'ed; a failure at any step puts back the previous files (kept as hard
  links), so the previous complete set stays, or nothing;
* reading: metrics.json and cases.parquet are pure functions of results.json, so results.json is itself the
  commit record of the set. :func:`read_results` verifies both against it (:mod:`trackeval.io.evidence`),
  and recomputes the aggregates that the case records determine (:mod:`trackeval.stats.verify`). A set mixed by
  a killed writer, a hand-edited headline or a stale file is refused with an :class:`~trackeval.errors.InputError`
  naming the file and key.

Every file of a results folder is read with :func:`~trackeval.io.files.read_regular_file`: a symbolic link (to
anything) is refused, never followed.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from trackeval.errors import InputError, OutputError
from trackeval.io.atomic import write_file_set
from trackeval.io.evidence import verify_cases, verify_metrics
from trackeval.io.files import read_regular_file
from trackeval.registry import metric_info
from trackeval.results import BenchmarkResult
from trackeval.stats.verify import MetricLookup, verify_aggregates

if TYPE_CHECKING:
    import pyarrow as pa

#: significant digits of the floats in metrics.json (a DVC metrics file, committed): the last digits of a bootstrap
#: bound can differ between machines (summation order), which would show as spurious `dvc metrics diff` changes
METRICS_DIGITS = 10

RESULTS_JSON = "results.json"
METRICS_JSON = "metrics.json"
CASES_PARQUET = "cases.parquet"
#: the set, in the order it is renamed into place (results.json last)
OUTPUT_FILES = (CASES_PARQUET, METRICS_JSON, RESULTS_JSON)


def cases_table(result: BenchmarkResult) -> pa.Table:
    """One row per case x item (organ, region, ...): ids, status, group columns and every per-item metric.

    Columns in order of first appearance: the id, status, group and item columns are strings, the metrics
    float64; a metric a row lacks, or holds as NaN (``None`` in a record), is null (pandas reads NaN).

    The rows go through pyarrow's JSON reader with this explicit schema: building arrays from Python objects
    (``pa.array``) imports pandas, which would cost every ``evaluate`` ~0.3 s. Floats round-trip exactly (JSON
    holds their shortest repr, which the reader parses correctly rounded).
    """
    import pyarrow as pa
    import pyarrow.json as pa_json

    rows, strings = result.case_rows()  # the rows of BenchmarkResult.to_frame too
    columns = dict.fromkeys(key for row in rows for key in row)
    schema = pa.schema([(c, pa.string() if c in strings else pa.float64()) for c in columns])
    if not rows:
        return schema.empty_table()
    lines = "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows).encode("utf-8")
    return pa_json.read_json(io.BytesIO(lines), parse_options=pa_json.ParseOptions(explicit_schema=schema))


def metrics_file(result: BenchmarkResult) -> dict[str, float]:
    """What metrics.json holds: :meth:`BenchmarkResult.flat_metrics` rounded to :data:`METRICS_DIGITS`
    significant digits (results.json keeps full precision).

    >>> float(f"{0.61531141226668:.{METRICS_DIGITS}g}")
    0.6153114123
    """
    return {k: float(f"{v:.{METRICS_DIGITS}g}") for k, v in result.flat_metrics().items()}


def output_bytes(result: BenchmarkResult) -> dict[str, bytes]:
    """The three files' bytes, in :data:`OUTPUT_FILES` order."""
    import pyarrow.parquet as pq

    parquet = io.BytesIO()
    pq.write_table(cases_table(result), parquet)
    metrics = json.dumps(metrics_file(result), sort_keys=True, indent=1, allow_nan=False) + "\n"
    return {
        CASES_PARQUET: parquet.getvalue(),
        METRICS_JSON: metrics.encode("utf-8"),
        RESULTS_JSON: result.to_json().encode("utf-8"),
    }


def write_outputs(result: BenchmarkResult, out_dir: Path) -> dict[str, Path]:
    """Write the three files into ``out_dir`` as one set (see the module docstring); returns their paths.

    Raises:
        OutputError: a step failed (read-only folder, disk full, ``out_dir`` is a file...); the previous set is
            then left as it was, or there is none.
    """
    contents = output_bytes(result)
    try:
        return write_file_set(out_dir, contents)
    except OSError as exc:
        raise OutputError(f"cannot write the outputs to {out_dir}: {exc.strerror or exc}") from exc


def write_extra_outputs(contents: dict[str, bytes], out_dir: Path) -> dict[str, Path]:
    """Write a unit's extra files (:func:`trackeval.api.unit_outputs`) into ``out_dir`` as one set, after the
    results set; returns their paths (``{}`` for none).

    Raises:
        OutputError: a step failed; the previous extra files are then left as they were.
    """
    if not contents:
        return {}
    try:
        return write_file_set(out_dir, contents)
    except OSError as exc:
        raise OutputError(f"cannot write the outputs to {out_dir}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class ResultsFiles:
    """A verified results set: the validated result and the exact bytes that were verified, by file name
    (upload these, not a second read of the folder)."""

    result: BenchmarkResult
    files: dict[str, bytes]


def read_results_files(path: Path, *, declared: MetricLookup | None = metric_info) -> ResultsFiles:
    """Read and verify a results folder (all three files), or a lone results.json (``path`` ends in ``.json``:
    an artifact downloaded from MLflow), see the module docstring.

    ``declared`` looks up the metrics' declared reductions (default: the registered units',
    :func:`trackeval.registry.metric_info`): a headline must follow its unit's rule. For a unit not registered
    here (a plug-in not installed), or with ``declared=None``, a headline may follow either mean rule
    (:func:`trackeval.stats.verify.verify_aggregates`).

    Raises:
        InputError: naming the file (and the field or key): a missing member, a symbolic link or other
            non-regular file, an invalid results.json, a metrics.json / cases.parquet that does not match it, or
            an aggregate that contradicts the case records.
    """
    results_path = path if path.suffix == ".json" else path / RESULTS_JSON
    raw = read_regular_file(results_path)
    result = _validate(raw, results_path)
    verify_aggregates(result, file=results_path, declared=declared)
    files = {RESULTS_JSON: raw}
    if path.suffix != ".json":
        files[METRICS_JSON] = read_regular_file(path / METRICS_JSON)
        verify_metrics(files[METRICS_JSON], metrics_file(result), file=path / METRICS_JSON)
        files[CASES_PARQUET] = read_regular_file(path / CASES_PARQUET)
        verify_cases(
            files[CASES_PARQUET],
            cases_table(result).to_pandas(),
            keys=("case_id", result.item_kind),
            file=path / CASES_PARQUET,
        )
    return ResultsFiles(result, files)


def read_results(path: Path, *, declared: MetricLookup | None = metric_info) -> BenchmarkResult:
    """The verified result of a results folder or a lone results.json (:func:`read_results_files`)."""
    return read_results_files(path, declared=declared).result


def _validate(raw: bytes, path: Path) -> BenchmarkResult:
    try:
        return BenchmarkResult.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"not a trackeval results file: {first['msg']}",
            file=str(path),
            field=".".join(str(p) for p in first["loc"]) or None,
        ) from exc
    except InputError as exc:  # a validator's own located error (e.g. a group column colliding with an output)
        if exc.file:
            raise
        raise InputError(exc.message, file=str(path), case_id=exc.case_id, field=exc.field) from exc
