"""Run the docstring examples of the public API as doctests.

Every public function of the metric modules must carry a runnable ``>>>`` example; the examples of
``trackeval.api`` (``load_config``, ``evaluate`` on the bundled UMD example) and of the results-folder writer
run here too.
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

METRIC_MODULES = [
    "trackeval.metrics.overlap",
    "trackeval.metrics.surface",
    "trackeval.metrics.classification",
    "trackeval.metrics.ranking",
    "trackeval.metrics.detection",
    "trackeval.metrics.text",
    "trackeval.metrics.interactive",
    "trackeval.metrics.box_union",
    "trackeval.metrics.readers",
    "trackeval.metrics.checks",
]
DOCTEST_MODULES = [
    *METRIC_MODULES,
    "trackeval.api",
    "trackeval.benchmarks.xray.report_layouts",
    "trackeval.tracking.views",
    "trackeval.tracking.descriptions",
    "trackeval.report.checks",
    "trackeval.io.results_folder",
    "trackeval.io.escape",
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS, verbose=False, report=True)
    assert result.attempted > 0, f"{name} has no doctest examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"


def _public_functions(module: object) -> list[str]:
    return sorted(
        fname
        for fname, func in inspect.getmembers(module, inspect.isfunction)
        if func.__module__ == module.__name__ and not fname.startswith("_")
    )


@pytest.mark.parametrize("name", METRIC_MODULES)
def test_public_metric_functions_have_examples(name: str) -> None:
    module = importlib.import_module(name)
    functions = _public_functions(module)
    assert functions, f"{name} has no public functions"
    missing = [f for f in functions if ">>>" not in (inspect.getdoc(getattr(module, f)) or "")]
    assert not missing, f"public functions of {name} without a '>>>' example: {missing}"


def test_package_exports_have_examples() -> None:
    """The functions re-exported by ``trackeval.metrics`` (its ``__all__``) are documented with examples."""
    package = importlib.import_module("trackeval.metrics")
    missing = [
        n
        for n in package.__all__
        if inspect.isfunction(getattr(package, n)) and ">>>" not in (inspect.getdoc(getattr(package, n)) or "")
    ]
    assert not missing, f"trackeval.metrics exports without a '>>>' example: {missing}"
