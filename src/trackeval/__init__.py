"""trackeval: evaluate medical-imaging model versions, track them in MLflow and gate their promotion.

``trackeval.evaluate(name, inputs, config=None, model=None)`` scores one benchmark unit (see
:func:`trackeval.api.evaluate`); ``trackeval.load_config`` builds the configuration. Both are imported on
first use, so ``import trackeval`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trackeval._version import __version__

__all__ = ["__version__", "evaluate", "load_config"]

if TYPE_CHECKING:
    from trackeval.api import evaluate, load_config


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "load_config"):
        from trackeval import api

        return getattr(api, name)
    raise AttributeError(f"module 'trackeval' has no attribute {name!r}")
