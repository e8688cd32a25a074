"""CSV manifests: UTF-8 (BOM tolerated), a header row, one case per row, validated up front.

Files are read through the bounded loader (:mod:`trackeval.io.structured`): their bytes and cells are bounded
(``TRACKEVAL_MAX_FILE_BYTES``, ``TRACKEVAL_MAX_ELEMENTS``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.limits import MAX_ELEMENTS_ENV, max_elements
from trackeval.io.structured import read_limited


def parse_csv(text: str, path: Path, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """``(line, fields)`` of every non-blank row of CSV text (the first row included: a header is the caller's
    business); malformed CSV names its line, more than ``TRACKEVAL_MAX_ELEMENTS`` cells is refused."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[tuple[int, list[str]]] = []
    cells, limit = 0, max_elements()
    try:
        line = 1
        for r in reader:
            cells += len(r)
            if cells > limit:
                raise InputError(f"more than {limit} cells ({MAX_ELEMENTS_ENV})", file=str(path), field="size")
            if any(c.strip() for c in r):
                rows.append((line, r))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(
            f"malformed CSV on line {reader.line_num}: {exc}", file=str(path), field=f"line {reader.line_num}"
        ) from exc
    return rows


def _parse(text: str, path: Path, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The stripped header and ``(line, fields)`` of each non-blank row after it."""
    rows = parse_csv(text, path, delimiter)
    if not rows or rows[0][0] != 1:  # a blank first line is an empty header, as before
        return [], rows
    return [h.strip() for h in rows[0][1]], rows[1:]


def _delimiter(text: str) -> str:
    """``;`` when the first line holds more semicolons than commas (TotalSegmentator's meta.csv), else ``,``."""
    header = text.split("\n", 1)[0]
    return ";" if header.count(";") > header.count(",") else ","


def read_csv_rows(path: Path, required: tuple[str, ...], *, delimiter: str | None = ",") -> list[dict[str, str]]:
    """Read a CSV file into ``{column: stripped value}`` rows. ``delimiter``: the field separator; None tells
    ``;`` from ``,`` by the header line (more semicolons than commas: ``;``).

    The csv module parses the real text (``newline=""``), so a quoted field may hold a line break (``\n``,
    ``\r\n``, U+2028...) and only an unquoted ``\n``, ``\r\n`` or ``\r`` ends a row. Line numbers are physical
    lines of the file (the line a row starts on), counted from 1 for the header.

    Raises :class:`InputError` naming the file (and line/column) for a missing or unreadable file, a
    non-UTF-8 encoding, a missing required column, a ragged row, or a file without data rows.
    """
    text = decode_text(read_limited(path), file=path)
    header, rows = _parse(text, path, delimiter or _delimiter(text))
    if not header or not any(header):
        raise InputError("empty file: no header row", file=str(path))
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"missing required column(s) {missing}; found {header}", file=str(path), field=missing[0])
    if len(set(header)) != len(header):
        raise InputError(f"duplicate column names in header {header}", file=str(path))
    if not rows:
        raise InputError("no data rows (the manifest is empty)", file=str(path))
    out = []
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(
                f"line {line} has {len(row)} fields, the header has {len(header)}",
                file=str(path),
                field=f"line {line}",
            )
        out.append({h: c.strip() for h, c in zip(header, row, strict=True)})
    return out
