"""Benchmark registry: each adapter module registers a :class:`BenchmarkSpec`; the CLI is built from it.

Adding a benchmark = one module that calls :func:`register` at import time + its name in ``_MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from trackeval.config import EvalConfig
from trackeval.results import BenchmarkResult

#: Adapter modules under ``trackeval.benchmarks`` that register themselves when imported.
_MODULES: tuple[str, ...] = ("umd", "mir3d", "imis", "xray")


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark as the CLI and the pipeline see it.

    Attributes:
        name: CLI name and metric-key prefix (``trackeval evaluate <name>``).
        help: one-line description for ``--help``.
        add_arguments: adds the benchmark's input options to its ``evaluate`` subparser.
        run: ``(parsed args, config, model info) -> BenchmarkResult``; raises ``TrackevalError`` on bad input.
        summary_metrics: metric names shown in the terminal table (``<name>/<metric>``).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, EvalConfig, dict[str, str]], BenchmarkResult]
    summary_metrics: tuple[str, ...]


_REGISTRY: dict[str, BenchmarkSpec] = {}


def register(spec: BenchmarkSpec) -> BenchmarkSpec:
    """Add ``spec`` to the registry (a second registration under the same name is a programming error)."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"benchmark {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def benchmarks() -> dict[str, BenchmarkSpec]:
    """All registered benchmarks, importing the adapter modules on first use."""
    for module in _MODULES:
        importlib.import_module(f"trackeval.benchmarks.{module}")
    return dict(_REGISTRY)
