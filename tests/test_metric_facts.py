"""One place for each fact about a metric: :class:`trackeval.spec.MetricInfo`, declared by the unit.

The declarations are checked (every named metric is declared; a corpus function only with a corpus reduction),
looked up (placeholders, breakdowns) and, above all, are the only place a metric is named: no module outside a
unit's adapter holds one of its metric keys as a string literal.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from trackeval.registry import metric_info, units
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric

SRC = Path(__file__).resolve().parents[1] / "src" / "trackeval"

#: Where a unit's metric names may be written: the adapters (and their config sections) under benchmarks/, and
#: the metric kernels, which name their own outputs (``surface_metrics`` returns ``hd95``...) for a unit to map
#: to its keys. The registry (discovery) names no metric.
ADAPTERS = ("benchmarks", "metrics")


def _literals(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal of a module, docstrings excluded."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _names_a_metric(text: str) -> str | None:
    """The unit whose metric ``text`` names (a path relative to the unit, or a full key), else None."""
    for name, spec in units().items():
        relative = text[len(name) + 1 :] if text.startswith(name + "/") else text
        if relative and spec.metric_info(relative) is not None and "{" not in relative:
            return name
    return None


def test_no_module_outside_an_adapter_names_a_metric():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in ADAPTERS and rel.name != "discovery.py":
            continue
        for line, text in _literals(path):
            if (unit := _names_a_metric(text)) is not None:
                found.append(f"{rel}:{line} names {unit}'s metric {text!r}")
    assert found == []


def test_the_scan_finds_a_metric_literal(tmp_path):
    """The scan is not vacuous: a literal naming a metric, short or full, is found; a docstring is not."""
    module = tmp_path / "m.py"
    module.write_text('"""About umd/dsc."""\nKEY = "umd/dsc"\nOTHER = ("auroc", "group/ap_at_10", "word")\n')
    hits = [(line, text, _names_a_metric(text)) for line, text in _literals(module)]
    assert [h for h in hits if h[2]] == [
        (2, "umd/dsc", "umd"),
        (3, "auroc", "xray/cls"),
        (3, "group/ap_at_10", "mir3d"),
    ]


def test_every_builtin_metric_a_unit_names_is_declared():
    for spec in units().values():
        named = [spec.primary.metric, *spec.summary_metrics, *(p.metric for p in spec.plots)]
        assert all(spec.metric_info(m) is not None for m in named), spec.name
        assert spec.primary_info.paired != "none", spec.name  # a primary metric can be gated


def test_lookup_fills_placeholders_and_drops_breakdowns():
    assert metric_info("umd", "dsc/by_organ/liver").name == "dsc"
    info = metric_info("mir3d", "group/ap_at_10/by_region/liver")
    assert (info.name, info.record_name("group/ap_at_10"), info.display("group/ap_at_10")) == (
        "group/ap_at_{k}",
        "group/ap_at_10",
        "AP@10 (lesion-group relevance)",
    )
    hd95 = metric_info("umd", "hd95")
    assert (hd95.display("hd95"), hd95.higher_is_better, hd95.best_value, hd95.record_name("hd95")) == (
        "HD95 (mm)",
        False,
        0.0,
        "hd95",
    )
    assert metric_info("umd", "dsc_gap/ct_vs_pet").display("dsc_gap/ct_vs_pet") == "Dice gap CT − PET (paired)"
    assert metric_info("xray/cls", "auroc").paired == "delong"
    assert metric_info("xray/loc", "map_50").corpus is not None
    assert metric_info("umd", "p_at_10") is None and metric_info("no_such_unit", "dsc") is None
    assert metric_info("xray/ret", "p_at_1_2") is None and metric_info("xray/ret", "p_at_") is None  # one token


def test_metric_info_rules():
    def corpus(records, weights):
        return np.ones(len(weights))

    with pytest.raises(ValueError, match="corpus function"):
        MetricInfo("map", label="mAP", reduction="corpus")  # bootstrap-paired corpus metric without its function
    with pytest.raises(ValueError, match="corpus function"):
        MetricInfo("dsc", label="Dice", corpus=corpus)  # a function where the headline is a mean
    MetricInfo("auc", label="AUC", reduction="corpus", paired="delong")  # analytic pairing needs none
    assert MetricInfo("x", label="X").best_value == 1.0
    assert MetricInfo("x", label="X", higher_is_better=False).best_value == 0.0
    assert MetricInfo("x", label="X", best=0.5).best_value == 0.5


def test_a_spec_must_declare_the_metrics_it_names():
    base = units()["umd"]
    kwargs = {f: getattr(base, f) for f in ("help", "inputs", "config_section", "config_model", "evaluate")}
    with pytest.raises(ValueError, match=r"^toy: metric 'accuracy' is not declared in metrics \(declared: none\)$"):
        BenchmarkSpec(name="toy", primary=PrimaryMetric("accuracy"), **kwargs)
    with pytest.raises(ValueError, match=r"metric 'f1' is not declared in metrics \(declared: accuracy\)$"):
        BenchmarkSpec(
            name="toy",
            primary=PrimaryMetric("accuracy"),
            metrics=(MetricInfo("accuracy", label="accuracy"),),
            summary_metrics=("f1",),
            **kwargs,
        )
