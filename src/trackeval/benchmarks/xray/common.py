"""Shared pieces of the X-ray tasks: the task inputs and unique metric-key tokens of names.

Files are read with :mod:`trackeval.io.files` and digested with :mod:`trackeval.io.hashing`; a task hands its
output to the adapter as a :class:`trackeval.engine.driver.Evaluation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trackeval.errors import InputError
from trackeval.results import key_token


@dataclass(frozen=True)
class TaskInputs:
    """The paths of ``trackeval evaluate xray``; what each one holds depends on the task. ``format``: the
    ground truth's layout forced by ``--format`` (None: told from the files); ``readers``: ``--readers`` paths."""

    ground_truth: Path
    predictions: Path
    validation: Path | None = None
    label_names: Path | None = None
    format: str | None = None
    readers: tuple[Path, ...] = ()


def unique_tokens(names: list[str], *, file: str, field: str) -> list[str]:
    """:func:`trackeval.results.key_token` of each name (one without a letter or digit is an :class:`InputError`);
    two names mapping to one token is an :class:`InputError`."""
    tokens = [key_token(n, file=file, field=field) for n in names]
    seen: dict[str, str] = {}
    for name, token in zip(names, tokens, strict=True):
        if token in seen:
            raise InputError(
                f"names {seen[token]!r} and {name!r} map to the same metric key token {token!r}", file=file, field=field
            )
        seen[token] = name
    return tokens
