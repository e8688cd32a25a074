"""The one mechanism behind the former module paths kept as aliases (a leaf: standard library only).

A module that moved leaves a file at its old path whose ``__getattr__`` is :func:`forwarder`: a name looked up
there is imported from the new home on first use (nothing heavy is imported before) and returned, the same
object, with a DeprecationWarning naming the new path; an unknown name is the new module's AttributeError.
:func:`run_moved` does the same for ``python -m <old path>``.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from typing import Any


def moved_message(old: str, new: str, hint: str = "") -> str:
    """``"<old> is deprecated: use <new>"``, with ``hint`` (e.g. ``" (or trackeval.promote)"``) after it."""
    return f"{old} is deprecated: use {new}{hint}"


def forwarder(old: str, new: str, hint: str = "") -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for the former module ``old`` that forwards every name to module ``new``."""

    def __getattr__(name: str) -> Any:
        value = getattr(importlib.import_module(new), name)
        warnings.warn(moved_message(old, new, hint), DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


def run_moved(old: str, new: str) -> None:
    """``python -m old``: warn, then run ``new``'s ``main()`` and exit with what it returns."""
    warnings.warn(moved_message(old, new), DeprecationWarning, stacklevel=2)  # attributed to __main__: shown
    sys.exit(importlib.import_module(new).main())
