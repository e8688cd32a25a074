"""Input layouts: which of a unit's supported file layouts a path holds, told from the files themselves.

A unit declares its layouts (a :class:`Layout` each: a name, what it looks like in one phrase, and a cheap
``matches`` test that reads names, suffixes or a CSV header, never the whole data); :func:`choose` picks the
first that matches, or the one ``--format NAME`` forces. A path that looks like none of them is one
:class:`~trackeval.errors.InputError` line naming the file and every layout tried.

The resolved layout is part of the data's identity: :func:`layout_digest` folds a native layout's name into the
ground-truth digest (the same bytes read under two conventions, e.g. CheXpert's blank = negative against the
generic blank = uncertain, are two test sets to the gate), while a unit's own generic layout keeps the digest it
always had, so results written before layouts existed stay comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trackeval.errors import InputError
from trackeval.io.limits import LimitError
from trackeval.results import sha256_text

__all__ = ["Layout", "choose", "layout_digest", "names"]


@dataclass(frozen=True)
class Layout:
    """One file layout a unit reads.

    ``name``: the ``--format`` value and what results.json records (lowercase, ``-`` between words);
    ``looks_like``: what identifies it, for the error when nothing matches (``"CSV with a Path or Study
    column"``); ``matches``: a cheap test of a path (must not raise: an unreadable path matches nothing);
    ``generic``: True for the unit's own layout (its digest is not changed by :func:`layout_digest`).
    """

    name: str
    looks_like: str
    matches: Callable[[Path], bool]
    generic: bool = False


def names(layouts: Sequence[Layout]) -> list[str]:
    """The layouts' names, in declaration order."""
    return [x.name for x in layouts]


def _safe_match(layout: Layout, path: Path) -> bool:
    try:
        return bool(layout.matches(path))
    except LimitError:  # too large or deep to read whatever its layout: say so, not "no layout matches"
        raise
    except (OSError, ValueError, InputError):
        return False


def choose(path: Path, layouts: Sequence[Layout], forced: str | None = None, *, what: str = "ground truth") -> Layout:
    """The layout of ``path``: the one named ``forced`` (``--format``), else the first whose test matches.

    Raises:
        InputError: ``forced`` names no layout of this unit (the valid names listed); or nothing matches
            (naming ``path``, ``what`` it was given as, and each layout tried with what it looks like).
    """
    if forced is not None:
        for layout in layouts:
            if layout.name == forced:
                return layout
        raise InputError(f"unknown format {forced!r}; expected one of {names(layouts)}", field="format")
    for layout in layouts:
        if _safe_match(layout, path):
            return layout
    tried = "; ".join(f"{x.name} ({x.looks_like})" for x in layouts)
    raise InputError(f"the {what} looks like none of the layouts tried: {tried}", file=str(path), field="format")


def layout_digest(layout: Layout, digest: str) -> str:
    """``digest`` (of the files read) as the digest of the data read in ``layout``: unchanged for the generic
    layout, else sha256 over ``layout:<name>`` and ``digest``."""
    return digest if layout.generic else sha256_text(f"layout:{layout.name}", digest)
