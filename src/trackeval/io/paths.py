"""Safe case ids and paths: a case id becomes a file name, so it must not escape the data root."""

from __future__ import annotations

import re
from pathlib import Path

from trackeval.errors import InputError

#: matched with ``fullmatch`` (and anchored with ``\Z``): ``$`` would also match before a trailing newline
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")


def check_case_id(case_id: str, *, file: str, field: str = "case_id") -> str:
    """Return ``case_id`` if it is safe as a file name, else raise :class:`InputError`.

    Safe: 1-200 characters of letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit, and no
    ``..`` (so no path separators, no parent references, no hidden files). The whole id must match: a trailing
    newline (``img2\\n``, which a ``$``-anchored pattern lets through) is refused like any other character.
    """
    if not _SAFE_ID.fullmatch(case_id) or ".." in case_id:
        raise InputError(
            f"unsafe or empty case id {case_id!r}: use letters, digits, '.', '_', '-' (no path separators or '..')",
            file=file,
            case_id=case_id or None,
            field=field,
        )
    return case_id


def resolve_inside(root: Path, name: str, *, case_id: str) -> Path:
    """``root / name``, refusing a path (e.g. through a symlink) that resolves outside ``root``, and one that
    cannot be resolved (a symbolic link loop: Python raises ``RuntimeError`` or ``OSError`` for it)."""
    path = root / name
    try:
        real_root = root.resolve()
        real = path.resolve()
    except (RuntimeError, OSError) as exc:
        raise InputError(
            f"cannot resolve the path (a symbolic link loop?): {exc}", file=str(path), case_id=case_id
        ) from exc
    if real != real_root and real_root not in real.parents:
        raise InputError(f"{path} resolves outside the data root {root}", file=str(path), case_id=case_id)
    return path
