"""Readers of ``xray/cls`` on arrays (:func:`trackeval.benchmarks.xray.cls_readers.reader_aggregates`): counts
by hand, CIs around their points, the NaN rules, the declarations; and what shows them (the ROC figure's reader
points, the console and comparison tables)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from trackeval import plotdata  # noqa: E402
from trackeval.benchmarks.xray.cls_readers import READER_METRICS, Reader, reader_aggregates  # noqa: E402
from trackeval.case_table import CaseTable
from trackeval.config.base import BootstrapConfig  # noqa: E402
from trackeval.errors import InputError  # noqa: E402
from trackeval.report.comparison import reader_comparison, reader_comparison_markdown  # noqa: E402
from trackeval.report.console import reader_table  # noqa: E402
from trackeval.report.curves import draw_curves  # noqa: E402
from trackeval.results import BenchmarkResult, CaseRecord, PlotSpec  # noqa: E402

NAN = math.nan
BOOT = BootstrapConfig(n_resamples=200)
# finding "a": negatives 0.9, 0.1, 0.2; positives 0.8, 0.7, 0.3. Finding "b": every label 0 (no positive).
LABELS = np.array([[0, 0], [1, 0], [1, 0], [0, 0], [0, 0], [1, 0], [NAN, 0]], dtype=float)
SCORES = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.1, 0.4], [0.2, 0.5], [0.3, 0.6], [0.5, 0.7]])


def _reader(name: str, column_a: list[float]) -> Reader:
    d = np.column_stack([column_a, [0, 0, 0, 0, 0, 0, 0]]).astype(float)
    return Reader(name, Path(f"radiologists/{name}.csv"), d)


# the model's curve of "a": (0,0) (1/3,0) (1/3,1/3) (1/3,2/3) (1/3,1) (2/3,1) (1,1)
READERS = [
    _reader("rad1", [0, 1, 1, 0, 0, 0, 1]),  # FPR 0, sens 2/3: above the curve (the model has 0 at FPR 0)
    _reader("rad2", [1, 0, 1, 0, 1, 1, 0]),  # FPR 2/3, sens 2/3: the model reaches 1 at FPR 2/3: below
    _reader("rad3", [1, 1, 0, 1, 1, 1, 0]),  # FPR 1, sens 2/3: below (the model has 1 at FPR 1)
]


def _run(readers=READERS, **kw):
    return reader_aggregates(LABELS, SCORES, ["a", "b"], readers, BOOT, None, **kw)


def test_counts_by_hand_and_the_nan_rules():
    out, notes = _run()
    a = out["xray/cls/readers_below_curve/by_finding/a"]
    assert (a.value, a.n, a.n_valid, a.ci95_low) == (2.0, 3, 3, None)
    b = out["xray/cls/readers_below_curve/by_finding/b"]
    assert b.value is None and b.n_valid == 0  # no positive for "b": nobody can be compared
    assert out["xray/cls/readers_below_curve"].value == 2.0  # the mean over the findings with a count
    assert len(notes) == 3 and all("finding 'b'" in n and "no positive" in n for n in notes)
    assert "rad1" in notes[0] and "radiologists/rad1.csv" in notes[0]


def test_rates_and_the_model_at_the_readers_specificity():
    out, _ = _run()
    sens = out["xray/cls/reader_sens/by_reader/rad2/by_finding/a"]
    spec = out["xray/cls/reader_spec/by_reader/rad2/by_finding/a"]
    assert sens.value == pytest.approx(2 / 3) and spec.value == pytest.approx(1 / 3)
    assert (sens.n, sens.n_valid) == (7, 3)  # the unlabelled image is not counted
    model = out["xray/cls/sens_at_reader_spec/by_reader/rad2/by_finding/a"]
    gap = out["xray/cls/sens_gap_at_reader_spec/by_reader/rad2/by_finding/a"]
    assert model.value == pytest.approx(1.0) and gap.value == pytest.approx(1 / 3)
    above = out["xray/cls/sens_gap_at_reader_spec/by_reader/rad1/by_finding/a"]
    assert above.value == pytest.approx(-2 / 3)  # the model has sensitivity 0 at specificity 1
    for key, s in out.items():
        if s.value is not None and s.ci95_low is not None:
            assert s.ci95_low <= s.value <= s.ci95_high, key
    assert out["xray/cls/sens_at_reader_spec/by_reader/rad2/by_finding/b"].value is None


def test_headline_findings_and_bad_readers():
    out, _ = _run(headline=np.array([False, True]))
    assert out["xray/cls/readers_below_curve"].value is None  # the one headline finding has no count
    assert out["xray/cls/reader_sens/by_reader/rad2"].value is None
    assert out["xray/cls/readers_below_curve/by_finding/a"].value == 2.0
    with pytest.raises(InputError, match="readers 'rad1' .* and 'RAD1' have the same key 'rad1'"):
        _run([READERS[0], Reader("RAD1", Path("RAD1.csv"), READERS[0].decisions)])
    with pytest.raises(InputError, match="no letter or digit"):
        _run([Reader("--", Path("--.csv"), READERS[0].decisions)])
    spaced, _ = _run([Reader("Rad 1", Path("Rad 1.csv"), READERS[0].decisions)])
    assert "xray/cls/reader_sens/by_reader/rad_1/by_finding/a" in spaced
    assert _run([]) == ({}, [])


def test_a_reader_with_no_decisions_and_one_with_some():
    none = Reader("rad4", Path("rad4.csv"), np.full(LABELS.shape, NAN))
    part = READERS[1].decisions.copy()
    part[0, 0] = NAN
    out, notes = _run([none, Reader("rad5", Path("rad5.csv"), part)])
    assert out["xray/cls/readers_below_curve/by_finding/a"].n_valid == 1
    assert out["xray/cls/reader_sens/by_reader/rad4/by_finding/a"].value is None
    assert any("rad4" in n and "no decision on any scored image" in n for n in notes)
    assert any("rad5" in n and "no decision for 1 of 13" in n for n in notes)
    spec = out["xray/cls/reader_spec/by_reader/rad5/by_finding/a"]
    assert spec.value == pytest.approx(0.5) and spec.n_valid == 2  # compared on the negatives it decided


def test_every_key_is_declared_once_and_not_gated():
    out, _ = _run()
    names = [m.name for m in READER_METRICS]
    assert len(set(names)) == len(names)
    for key in out:
        head = key.removeprefix("xray/cls/").split("/by_", 1)[0]
        matches = [m for m in READER_METRICS if m.pattern.match(head)]
        assert len(matches) == 1, key
        assert (matches[0].paired, matches[0].level) == ("none", "corpus")


def _result(out, version="v1") -> BenchmarkResult:
    cases = [
        CaseRecord(case_id=f"i{i}", subject_id=f"i{i}", metrics={"a": {"label": LABELS[i, 0], "score": SCORES[i, 0]}})
        for i in range(7)
    ]
    return BenchmarkResult.model_construct(
        benchmark="xray", task="cls", model={"name": "m", "version": version}, config={},
        cases=CaseTable.from_records(cases),  # model_construct does not validate: the table, as results hold it
        aggregates=out, item_kind="finding", summary={}, warnings=[], plots=[],
    )  # fmt: skip


def test_the_roc_figure_data_holds_the_reader_points_and_the_legend_names_them():
    out, _ = _run()
    result = _result(out)
    rows = plotdata.reader_point_rows(result)
    assert [(r["reader"], r["finding"]) for r in rows] == [("rad1", "a"), ("rad2", "a"), ("rad3", "a")]  # b: no sens
    np.testing.assert_allclose([(r["fpr"], r["tpr"]) for r in rows], [(0, 2 / 3), (2 / 3, 2 / 3), (1, 2 / 3)])
    spec = out["xray/cls/reader_spec/by_reader/rad2/by_finding/a"]
    assert rows[1]["fpr_low"] == pytest.approx(1 - spec.ci95_high)
    fig, ax = plt.subplots()
    handles = draw_curves(ax, PlotSpec(metric="auroc", dimension="finding", kind="roc"), [("m/v1", result)],
                          lambda n: ["#123456"] * n)  # fmt: skip
    labels = [h.get_label() for h in handles]
    assert [lab for lab in labels if lab.startswith("reader ")] == ["reader rad1", "reader rad2", "reader rad3"]
    drawn = sorted(tuple(p) for c in ax.collections[-3:] for p in c.get_offsets().tolist())  # after the op. points
    np.testing.assert_allclose(drawn, [(0, 2 / 3), (2 / 3, 2 / 3), (1, 2 / 3)])
    plt.close(fig)


def test_tables_list_the_readers():
    out, _ = _run()
    header, rows = reader_table(_result(out))
    assert header[:2] == ["reader", "finding"] and len(header) == 6
    assert rows[0][:3] == ["rad1", "a", rows[0][2]] and rows[0][2].startswith("0.667 [")
    assert [r[:2] for r in rows] == [[f"rad{i}", f] for i in (1, 2, 3) for f in ("a", "b")]
    header, rows = reader_comparison(_result(out, "v2"), _result(out, "v1"))
    assert len(header) == 2 + 2 * 4 and rows[2][2:4] == ["0.6667", "0.6667"]
    markdown = reader_comparison_markdown([(_result(out, "v2"), _result(out, "v1"))])
    assert "## xray/cls: human readers, A = m/v2, B = m/v1 (not gated)" in markdown and "| rad2 | a |" in markdown
    empty = _result({})
    assert reader_table(empty) == ([], []) and reader_comparison_markdown([(empty, empty)]) == ""
