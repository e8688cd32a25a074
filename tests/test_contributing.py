"""CONTRIBUTING.md's "add a benchmark" walkthrough runs as written: its unit module builds, evaluates a small
labels file with the real engine config, and its audit hook finds a shared case id."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from trackeval.api import load_config

WALKTHROUGH = Path(__file__).resolve().parents[1] / "CONTRIBUTING.md"


def _unit_module(folder: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The walkthrough's ``src/toybench/__init__.py`` block, written to ``folder`` and imported as a module."""
    text = WALKTHROUGH.read_text(encoding="utf-8")
    block = text.split("`src/toybench/__init__.py`:", 1)[1]
    code = re.search(r"```python\n(.*?)```", block, re.S)
    assert code is not None, "the walkthrough's unit module is not a python block"
    path = folder / "toybench_walkthrough.py"
    path.write_text(code[1], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("toybench_walkthrough", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # pydantic resolves the annotations there
    spec.loader.exec_module(module)
    return module


def test_the_walkthrough_unit_declares_evaluates_and_audits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toy = _unit_module(tmp_path, monkeypatch)
    spec = toy.SPEC
    assert spec.metric_info("accuracy").label == "accuracy" and spec.audit is toy.audit
    (tmp_path / "labels.csv").write_text("case_id,site,label\nc1,Site A,cat\nc2,Site A,dog\nc3,b,cat\n")
    (tmp_path / "predictions.csv").write_text("case_id,label\nc1,cat\nc2,cat\nc3,cat\n")
    (tmp_path / "train.csv").write_text("case_id\nc3\nc9\n")
    inputs = spec.inputs(ground_truth=tmp_path / "labels.csv", predictions=tmp_path / "predictions.csv")
    cfg = load_config(None, ["bootstrap.n_resamples=50"]).model_copy(update={"toy": spec.config_model()})
    result = spec.evaluate(inputs, cfg, {})
    assert result.aggregates["toy/accuracy"].value == pytest.approx(2 / 3)
    assert result.aggregates["toy/accuracy/by_site/site_a"].value == pytest.approx(0.5)
    report = spec.audit(inputs, cfg, tmp_path / "train.csv")
    assert report.failed and [(f.check, f.count) for f in report.findings] == [("case_overlap", 1)]
