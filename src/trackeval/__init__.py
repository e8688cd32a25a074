"""trackeval: evaluate medical-imaging model versions, track them in MLflow and gate their promotion.

The loop in Python, each function what the CLI command of the same name runs (imported on first use, so
``import trackeval`` stays light):

- ``trackeval.load_config(path=None, overrides=None)``: the configuration (:func:`trackeval.api.load_config`);
- ``trackeval.evaluate(name, inputs, config=None, model=None)``: score one benchmark unit
  (:func:`trackeval.api.evaluate`);
- ``trackeval.write_results(result, folder)``, ``trackeval.track(result_or_folder, model=..., version=...)``,
  ``trackeval.compare(a, b)``, ``trackeval.promote(model, candidate, dry_run=False)``,
  ``trackeval.verify(model)``: the loop (:mod:`trackeval.api`, the one module of the Python API).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trackeval._version import __version__

__all__ = ["__version__", "compare", "evaluate", "load_config", "promote", "track", "verify", "write_results"]

if TYPE_CHECKING:
    from trackeval.api import compare, evaluate, load_config, promote, track, verify, write_results

#: the public names, each a function of :mod:`trackeval.api`
_API = frozenset(("evaluate", "load_config", "write_results", "track", "compare", "promote", "verify"))


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        return getattr(importlib.import_module("trackeval.api"), name)
    raise AttributeError(f"module 'trackeval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
