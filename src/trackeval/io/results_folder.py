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
* reading: results.json is the commit record of the set. It holds the digest of the case records' columns
  (schema 2.x; :class:`~trackeval.case_table.CaseTable`), and metrics.json is a pure function of it:
  :func:`read_results` checks cases.parquet's columns against that digest and metrics.json against the
  aggregates (:mod:`trackeval.io.evidence`), and recomputes the aggregates that the case records determine
  (:mod:`trackeval.stats.verify`), all vectorised. A set mixed by a killed writer, a hand-edited headline or a
  stale file is refused with an :class:`~trackeval.errors.InputError` naming the file and key. A schema 1.x set
  (the records inline in results.json) is read too: its cases.parquet is compared with the records column by
  column.

**Verified once.** A process that reads the same set again (``promote`` reads the candidate's and the
champion's results, ``track`` then logs them) gets the result verified the first time: the cache is keyed by
the sha256 of results.json's and cases.parquet's bytes (read again each time, cheap next to parsing), so an edited
file is verified anew; metrics.json, small, is checked against the result on every read. Each read returns its
own copy of the verified result (arrays copied: milliseconds), so editing one never changes what a later read
gets. ``track`` reads the
folder and then the artifacts it uploaded: the second read is a digest comparison.

Every file of a results folder is read with :func:`~trackeval.io.files.read_regular_file`: a symbolic link (to
anything) is refused, never followed.
"""

from __future__ import annotations

import hashlib
import io
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from trackeval.case_table import CaseTable, ColumnError
from trackeval.errors import InputError, OutputError
from trackeval.io.atomic import write_file_set
from trackeval.io.evidence import read_parquet, verify_cases, verify_metrics
from trackeval.io.files import decode_text, read_regular_file
from trackeval.io.structured import parse_json
from trackeval.registry import metric_info
from trackeval.results import BenchmarkResult, json_text
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
    """The ``cases.parquet`` table: one row per case x item (organ, region, ...), ids, status, message, group
    columns and every per-item metric (:meth:`~trackeval.case_table.CaseTable.to_arrow`), built from the
    columns without a Python object per row."""
    return result.cases.to_arrow(result.item_kind)


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
    metrics = json_text(metrics_file(result))
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


#: results verified in this process, by the digests of their files' bytes and the reduction lookup used
_VERIFIED: OrderedDict[tuple, BenchmarkResult] = OrderedDict()
#: how many verified results the process keeps (a promote holds two per unit)
_VERIFIED_MAX = 16


def read_results_files(path: Path, *, declared: MetricLookup | None = metric_info) -> ResultsFiles:
    """Read and verify a results folder (all three files), or a lone results.json (``path`` ends in ``.json``: an
    artifact downloaded from MLflow; a schema 2.x one needs its cases.parquet beside it), see the module
    docstring.

    ``declared`` looks up the metrics' declared reductions (default: the registered units',
    :func:`trackeval.registry.metric_info`): a headline must follow its unit's rule. For a unit not registered
    here (a plug-in not installed), or with ``declared=None``, a headline may follow either mean rule
    (:func:`trackeval.stats.verify.verify_aggregates`).

    Raises:
        InputError: naming the file (and the field or key): a missing member, a symbolic link or other
            non-regular file, an invalid results.json, a metrics.json / cases.parquet that does not match it, or
            an aggregate that contradicts the case records.
    """
    lone = path.suffix == ".json"
    results_path = path if lone else path / RESULTS_JSON
    raw = read_regular_file(results_path)
    header = _header(raw, results_path)
    columnar = _columnar(header)
    files = {RESULTS_JSON: raw}
    if columnar or not lone:
        files[CASES_PARQUET] = read_regular_file(results_path.parent / CASES_PARQUET)
    if not lone:
        files[METRICS_JSON] = read_regular_file(path / METRICS_JSON)
    # the result (validated, aggregates recomputed) is cached by its results.json and cases.parquet bytes; the
    # cheap metrics.json check runs on every read (a lone results.json downloaded from MLflow has none)
    key = (declared, *(hashlib.sha256(files[name]).digest() for name in (RESULTS_JSON, CASES_PARQUET) if name in files))
    result = _VERIFIED.get(key)
    if result is None:
        result = _verify(header, files, results_path, declared, columnar=columnar)
        _VERIFIED[key] = result
        while len(_VERIFIED) > _VERIFIED_MAX:
            _VERIFIED.popitem(last=False)
    _VERIFIED.move_to_end(key)
    if METRICS_JSON in files:
        verify_metrics(files[METRICS_JSON], metrics_file(result), file=path / METRICS_JSON)
    # a copy: what a caller does to its result (a notebook editing an aggregate) never reaches the cache, so a
    # later read in the process (a promote) still gets exactly the verified numbers
    return ResultsFiles(result.model_copy(deep=True), files)


def read_results(path: Path, *, declared: MetricLookup | None = metric_info) -> BenchmarkResult:
    """The verified result of a results folder or a lone results.json (:func:`read_results_files`)."""
    return read_results_files(path, declared=declared).result


def _verify(
    header: dict,
    files: dict[str, bytes],
    results_path: Path,
    declared: MetricLookup | None,
    *,
    columnar: bool,
) -> BenchmarkResult:
    """Validate and verify results.json and cases.parquet (every check of the module docstring but
    metrics.json's); the result."""
    parquet = results_path.parent / CASES_PARQUET
    if columnar:
        result = _validate(lambda: _columnar_result(header, files[CASES_PARQUET], parquet), results_path)
    else:  # the records inline: the parsed results.json is the whole result
        result = _validate(lambda: BenchmarkResult.model_validate(header), results_path)
    verify_aggregates(result, file=results_path, declared=declared)
    if not columnar and CASES_PARQUET in files:  # a 1.x set: the parquet is compared with the inline records
        expected = cases_table(result).drop_columns(["message"])
        expected = expected.filter(expected[result.item_kind].is_valid())
        verify_cases(files[CASES_PARQUET], expected, keys=("case_id", result.item_kind), file=parquet)
    return result


def has_case_table(results_json: Path) -> bool:
    """Whether a results.json keeps its case records in the cases.parquet beside it (schema 2.x and later; 1.x
    held them inline). Raises :class:`InputError` naming the file when it is not a JSON object."""
    return _columnar(_header(read_regular_file(results_json), results_json))


def _columnar(header: dict) -> bool:
    return str(header.get("schema_version", "")).split(".")[0] != "1"


def _header(raw: bytes, path: Path) -> dict:
    """results.json parsed (an :class:`InputError` naming ``path`` unless it is a JSON object)."""
    header = parse_json(decode_text(raw, file=path), file=path)
    if not isinstance(header, dict):
        raise InputError("not a trackeval results file: expected a JSON object", file=str(path))
    return header


def _columnar_result(header: dict, raw: bytes, parquet: Path) -> BenchmarkResult:
    """A schema 2.x result: results.json's fields with the case table read from cases.parquet, whose columns must
    give the digest (and counts) results.json records."""
    descriptor = header.get("cases")
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("groups"), list):
        raise InputError("results.json must describe its case table (cases.groups, cases.sha256...)", field="cases")
    groups = [str(g) for g in descriptor["groups"]]
    try:
        table = CaseTable.from_arrow(read_parquet(raw, file=parquet), str(header.get("item_kind", "item")), groups)
    except ColumnError as exc:
        raise InputError(
            f"not the case table results.json describes: {exc}", file=str(parquet), field=exc.column
        ) from exc
    result = BenchmarkResult.model_validate({**header, "cases": table})
    _check_descriptor(result.cases.descriptor(result.item_kind), descriptor, parquet)
    return result


def _check_descriptor(actual: dict, recorded: dict, parquet: Path) -> None:
    """Refuse a case table whose descriptor (counts, groups, column digests) is not the one results.json
    records, naming the first differing column (``rows`` for the row count or layout)."""
    columns, recorded_columns = actual["columns"], recorded.get("columns")
    if actual["n_rows"] != recorded.get("n_rows"):
        raise InputError(
            f"cases.parquet has {actual['n_rows']} rows, results.json records {recorded.get('n_rows')!r}",
            file=str(parquet),
            field="rows",
        )
    if isinstance(recorded_columns, dict):
        for name in [*recorded_columns, *(c for c in columns if c not in recorded_columns)]:
            if columns.get(name) != recorded_columns.get(name):
                what = "lacks" if name not in columns else "has" if name not in recorded_columns else "differs in"
                raise InputError(
                    f"cases.parquet {what} column {name} of the case table results.json records (its digest)",
                    file=str(parquet),
                    field=name,
                )
    for key in sorted(actual.keys() | recorded.keys()):
        if actual.get(key) != recorded.get(key):
            raise InputError(
                f"cases.parquet does not match results.json: the table gives {key} = {actual.get(key)!r}, "
                f"results.json records {recorded.get(key)!r}",
                file=str(parquet),
                field=f"cases.{key}",
            )


def _validate(build: Callable[[], BenchmarkResult], path: Path) -> BenchmarkResult:
    """``build()``, its validation errors as an :class:`InputError` naming ``path`` (and the field)."""
    try:
        return build()
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
