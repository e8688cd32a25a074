"""CSV manifests: UTF-8 (BOM tolerated), a header row, one case per row, validated up front.

Files are read through the bounded loader (:mod:`trackeval.io.structured`): their bytes and cells are bounded
(``TRACKEVAL_MAX_FILE_BYTES``, ``TRACKEVAL_MAX_ELEMENTS``).

One mechanism reads every table: :func:`stream_csv_rows` checks the header and yields the data rows one at a
time (each checked as it is reached), so a reader keeps only what it needs of each row.
:func:`read_csv_rows` keeps every row as a dict (small manifests); :func:`read_csv_columns` keeps chosen text
columns as lists and chosen value columns as one float array, parsed row by row (label and score tables of
100,000s of rows: nothing kept per cell).
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.limits import MAX_ELEMENTS_ENV, max_elements
from trackeval.io.structured import read_limited

#: ``(line, fields)`` of data rows: the physical line a row starts on (1-based), its fields
Rows = Iterator[tuple[int, list[str]]]
#: a row's value cells -> their floats, None for a cell the parser refuses
RowParser = Callable[[list[str]], Sequence[float | None]]
#: one physical line and its ending: ``\n``, ``\r\n``, ``\r``, or none at the end of the text
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def _lines(text: str) -> Iterator[str]:
    """The physical lines of ``text`` with their endings, one at a time, split as ``io.StringIO(text,
    newline="")`` splits them (``io.StringIO`` would first copy the whole text at 4 bytes per character)."""
    return (m.group() for m in _LINE.finditer(text))


def iter_csv(text: str, path: Path, delimiter: str = ",") -> Rows:
    """``(line, fields)`` of every non-blank row of CSV text, one at a time (the first row included: a header is
    the caller's business); malformed CSV names its line, more than ``TRACKEVAL_MAX_ELEMENTS`` cells is refused
    when the row that passes the limit is reached."""
    reader = csv.reader(_lines(text), delimiter=delimiter, strict=True)
    cells, limit = 0, max_elements()
    try:
        line = 1
        for r in reader:
            cells += len(r)
            if cells > limit:
                raise InputError(f"more than {limit} cells ({MAX_ELEMENTS_ENV})", file=str(path), field="size")
            if "".join(r).strip():  # a row of blank cells is skipped
                yield line, r
            line = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(
            f"malformed CSV on line {reader.line_num}: {exc}", file=str(path), field=f"line {reader.line_num}"
        ) from exc


def parse_csv(text: str, path: Path, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """Every row of :func:`iter_csv` at once."""
    return list(iter_csv(text, path, delimiter))


def _delimiter(text: str) -> str:
    """``;`` when the first line holds more semicolons than commas (TotalSegmentator's meta.csv), else ``,``."""
    header = text.split("\n", 1)[0]
    return ";" if header.count(";") > header.count(",") else ","


def _checked_header(rows: Rows, path: Path, required: tuple[str, ...]) -> list[str]:
    """The stripped header (the first row, when it is on line 1: a blank first line is an empty header), checked
    for emptiness, the ``required`` columns and repeated names."""
    first = next(rows, None)
    header = [h.strip() for h in first[1]] if first is not None and first[0] == 1 else []
    if not any(header):
        raise InputError("empty file: no header row", file=str(path))
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"missing required column(s) {missing}; found {header}", file=str(path), field=missing[0])
    if len(set(header)) != len(header):
        raise InputError(f"duplicate column names in header {header}", file=str(path))
    return header


def _checked_rows(rows: Rows, width: int, path: Path) -> Rows:
    """The rows with stripped fields; a row of another width than the header's names its line when reached."""
    for line, row in rows:
        if len(row) != width:
            raise InputError(
                f"line {line} has {len(row)} fields, the header has {width}", file=str(path), field=f"line {line}"
            )
        yield line, list(map(str.strip, row))


def stream_csv_rows(path: Path, required: tuple[str, ...], *, delimiter: str | None = ",") -> tuple[list[str], Rows]:
    """The stripped header of a CSV file and its data rows ``(line, stripped fields)``, one at a time.
    ``delimiter``: the field separator; None tells ``;`` from ``,`` by the header line (more semicolons than
    commas: ``;``).

    The csv module parses the real text, split into lines as ``newline=""`` splits them, so a quoted field may
    hold a line break (``\n``, ``\r\n``, U+2028...) and only an unquoted ``\n``, ``\r\n`` or ``\r`` ends a row.
    Line numbers are physical lines of the file (the line a row starts on), counted from 1 for the header. The
    file's text is held while the rows are read (its bytes are bounded); the rows are made one at a time.

    Raises :class:`InputError` naming the file (and line/column) for a missing or unreadable file, a non-UTF-8
    encoding, a missing required column or repeated column name, or a file without data rows (raised here, so
    before any error of a later row); a malformed or ragged row, or one past the cell limit, is raised when the
    iteration reaches it.
    """
    text = decode_text(read_limited(path), file=path)
    rows = iter_csv(text, path, delimiter or _delimiter(text))
    header = _checked_header(rows, path, required)
    first = next(rows, None)
    if first is None:
        raise InputError("no data rows (the manifest is empty)", file=str(path))
    return header, _checked_rows(chain([first], rows), len(header), path)


def read_csv_rows(path: Path, required: tuple[str, ...], *, delimiter: str | None = ",") -> list[dict[str, str]]:
    """Read a CSV file into ``{column: stripped value}`` rows (:func:`stream_csv_rows`: its parsing, line
    numbers and errors; every row is checked before this returns)."""
    header, rows = stream_csv_rows(path, required, delimiter=delimiter)
    return [dict(zip(header, fields, strict=True)) for _, fields in rows]


@dataclass(frozen=True)
class Columns:
    """What :func:`read_csv_columns` keeps of a table's data rows, in file order.

    ``lines``: each row's physical line (the header is line 1); ``text``: the kept text columns by name;
    ``values``: ``(n_rows, n_value_columns)`` floats, NaN where the row parser refused the cell; ``refused``: per
    value column (its index) that has one, its first refused cell as ``(row index, stripped text)``.
    """

    lines: Sequence[int]
    text: dict[str, list[str]]
    values: np.ndarray
    refused: dict[int, tuple[int, str]]


def _note_refused(
    xs: Sequence[float | None], cells: list[str], row: int, refused: dict[int, tuple[int, str]]
) -> list[float]:
    """``xs`` with NaN for each refused (None) cell, each column's first refused cell noted in ``refused``."""
    for c, x in enumerate(xs):
        if x is None:
            refused.setdefault(c, (row, cells[c]))
    return [math.nan if x is None else x for x in xs]


def read_csv_columns(
    header: list[str],
    rows: Rows,
    text: Sequence[str],
    values: Sequence[str],
    parse: RowParser,
    *,
    shared: Sequence[str] = (),
) -> Columns:
    """The ``text`` columns (lists of strings) and the ``values`` columns (floats by ``parse``, row by row) of the
    rows of :func:`stream_csv_rows`; nothing else of a row is kept. ``shared``: text columns with few distinct
    values (patient ids, sex, view): repeated values share one string object.

    A refused value cell does not stop the read (the caller raises the error it words, in its own order,
    from :attr:`Columns.refused`); a malformed or ragged row does (:func:`stream_csv_rows`).
    """
    at = [header.index(c) for c in text]
    cols = [header.index(c) for c in values]
    kept: list[list[str]] = [[] for _ in text]
    pools: list[dict[str, str] | None] = [{} if c in shared else None for c in text]
    lines, flat, refused = array("q"), array("d"), {}
    for r, (line, fields) in enumerate(rows):
        lines.append(line)
        for out, i, pool in zip(kept, at, pools, strict=True):
            out.append(fields[i] if pool is None else pool.setdefault(fields[i], fields[i]))
        cells = [fields[i] for i in cols]
        xs = parse(cells)
        flat.extend(_note_refused(xs, cells, r, refused) if None in xs else xs)
    block = np.frombuffer(flat, dtype=np.float64).reshape(len(lines), len(cols))
    return Columns(lines, dict(zip(text, kept, strict=True)), block, refused)
