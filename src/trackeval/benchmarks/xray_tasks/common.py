"""Shared pieces of the X-ray tasks: task inputs/outputs, file readers with located errors, key tokens, CIs."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackeval.errors import InputError
from trackeval.results import CaseRecord, MetricSummary

_NON_TOKEN = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class TaskInputs:
    """The paths of ``trackeval evaluate xray``; what each one holds depends on the task."""

    ground_truth: Path
    predictions: Path
    validation: Path | None = None
    label_names: Path | None = None


@dataclass
class TaskOutput:
    """What a task hands to the adapter.

    ``params``: protocol facts decided at run time (e.g. where the operating point was chosen), logged next
    to the config in results.json.
    """

    records: list[CaseRecord]
    aggregates: dict[str, MetricSummary]
    item_kind: str
    ground_truth_digest: str
    predictions_digest: str
    summary: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


def sha256_files(*paths: Path) -> str:
    """sha256 over the bytes of the files, in order (the data lineage digest)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(read_bytes(p))
    return h.hexdigest()


def digest_lines(lines: list[str]) -> str:
    """sha256 of newline-joined ``case:digest`` lines (a per-case digest list in case order)."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def read_bytes(path: Path) -> bytes:
    """File bytes; :class:`InputError` naming the file when it is missing or unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=str(path)) from exc


def read_text(path: Path) -> str:
    """UTF-8 text (BOM tolerated) of a non-empty file, else :class:`InputError`."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from exc
    if not text.strip():
        raise InputError("file is empty", file=str(path))
    return text


def read_json(path: Path) -> Any:
    """Parse a JSON file; malformed JSON is an :class:`InputError` with its line and column."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", file=str(path)) from exc


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; each line must be a JSON object."""
    out = []
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON on line {line_no}: {exc.msg}", file=str(path)) from exc
        if not isinstance(obj, dict):
            raise InputError(f"line {line_no} is not a JSON object", file=str(path))
        out.append((line_no, obj))
    return out


def key_token(name: str, *, file: str, field: str) -> str:
    """A metric-key token for a finding/class/category name: lower-case, runs of other characters -> ``_``."""
    token = _NON_TOKEN.sub("_", name.strip().lower()).strip("_")
    if not token:
        raise InputError(f"name {name!r} has no letter or digit to build a metric key from", file=file, field=field)
    return token


def unique_tokens(names: list[str], *, file: str, field: str) -> list[str]:
    """:func:`key_token` of each name; two names mapping to one token is an :class:`InputError`."""
    tokens = [key_token(n, file=file, field=field) for n in names]
    seen: dict[str, str] = {}
    for name, token in zip(names, tokens, strict=True):
        if token in seen:
            raise InputError(
                f"names {seen[token]!r} and {name!r} map to the same metric key token {token!r}", file=file, field=field
            )
        seen[token] = name
    return tokens
