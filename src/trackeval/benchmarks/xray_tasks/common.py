"""Shared pieces of the X-ray tasks: task inputs/outputs and metric-key tokens.

Files are read with :mod:`trackeval.io.files` and digested with :mod:`trackeval.io.hashing`.
"""

from __future__ import annotations

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
