"""X-ray cls: an operating point that cannot be defined is NaN with a warning, never sensitivity 0 / specificity 1.

The 95%-sensitivity point is a point of the ROC curve: the split it is chosen on (``--validation``, else the
test set) needs a positive and a negative for the finding. ``sklearn.metrics.roc_curve`` agrees: without a
positive its TPR is NaN, without a negative its FPR is NaN. Hand-computed values for the finding that has both.
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import roc_curve

from tests.results_doc import results_doc
from trackeval.metrics.classification import threshold_at_sensitivity, undefined_roc_point

FAST = ("--executor", "local", "--set", "bootstrap.n_resamples=50")
IDS = ["a", "b", "c", "d", "e", "f"]
#: Effusion: both classes; Hernia: no positive; Mass: no negative
LABELS = {"Effusion": [1, 0, 1, 0, 1, 0], "Hernia": [0, 0, 0, 0, 0, 0], "Mass": [1, 1, 1, 1, 1, 1]}
SCORES = {
    "Effusion": [0.9, 0.2, 0.8, 0.4, 0.3, 0.1],
    "Hernia": [0.7, 0.1, 0.2, 0.3, 0.9, 0.05],
    "Mass": [0.6, 0.5, 0.4, 0.3, 0.2, 0.1],
}


def _table(path: Path, columns: dict[str, list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["image_id", *columns])
        w.writerows([[i, *(columns[c][k] for c in columns)] for k, i in enumerate(IDS)])
    return path


def _cls(cli, tmp_path: Path, labels: dict, scores: dict, *extra: str) -> dict:
    lab, sco = _table(tmp_path / "test" / "labels.csv", labels), _table(tmp_path / "test" / "scores.csv", scores)
    out = tmp_path / "out"
    argv = ["evaluate", "xray", "--task", "cls", "--ground-truth", lab, "--predictions", sco, "--out", out]
    res = cli(*argv, *FAST, *extra)
    assert res.rc == 0, res.err
    return results_doc(out)


def _value(result: dict, key: str) -> float | None:
    return result["aggregates"][key]["value"]


def test_findings_without_a_class_on_the_test_set_are_nan_with_a_warning(cli, tmp_path):
    # min_positives=1: Effusion's 3 positives and 3 negatives keep it in the headlines (the default 10 would not)
    res = _cls(cli, tmp_path, LABELS, SCORES, "--set", "xray.cls.min_positives=1")
    # Effusion, by hand: positives .9 .8 .3 -> threshold .3; negatives .2 .4 .1 -> .4 called: spec 2/3, ppv 3/4
    fpr, tpr, thr = roc_curve(LABELS["Effusion"], SCORES["Effusion"], drop_intermediate=False)
    i = int(np.argmax(tpr >= 0.95))
    assert _value(res, "xray/cls/threshold_at_sens95/by_finding/effusion") == thr[i] == 0.3
    assert _value(res, "xray/cls/sens_at_sens95/by_finding/effusion") == tpr[i] == 1.0
    assert _value(res, "xray/cls/spec_at_sens95/by_finding/effusion") == pytest.approx(1 - fpr[i]) == 2 / 3
    assert _value(res, "xray/cls/ppv_at_sens95/by_finding/effusion") == 0.75
    for finding, reason in (("hernia", "no positive"), ("mass", "no negative")):
        for metric in ("threshold", "sens", "spec", "ppv"):
            assert _value(res, f"xray/cls/{metric}_at_sens95/by_finding/{finding}") is None, (finding, metric)
        note = [w for w in res["warnings"] if f"finding {finding.capitalize()!r}: no operating point" in w]
        assert len(note) == 1 and reason in note[0] and "the test labels" in note[0]
    assert {c["metrics"]["hernia"]["called_at_sens95"] for c in res["cases"]} == {None}
    # the headlines are the means over the findings that have a point: Effusion's alone
    assert _value(res, "xray/cls/spec_at_sens95") == pytest.approx(2 / 3)
    assert _value(res, "xray/cls/sens_at_sens95") == 1.0


@pytest.mark.parametrize(
    ("validation", "reason"),
    [
        ([0, 0, 0, 0, 0, 0], "no positive"),
        ([1, 1, 1, 1, 1, 1], "no negative"),
        (["", "-1", "", "", "-1", ""], "no label"),
    ],
    ids=["no-positive", "no-negative", "all-uncertain"],
)
def test_a_validation_split_without_a_class_gives_nan_not_zero_and_one(cli, tmp_path, validation, reason):
    labels = {"Effusion": LABELS["Effusion"]}
    scores = {"Effusion": SCORES["Effusion"]}
    val = tmp_path / "val"
    _table(val / "labels.csv", {"Effusion": validation})
    _table(val / "scores.csv", {"Effusion": [0.5, 0.4, 0.3, 0.2, 0.1, 0.0]})
    res = _cls(cli, tmp_path, labels, scores, "--validation", val)
    for metric in ("threshold", "sens", "spec", "ppv"):
        assert _value(res, f"xray/cls/{metric}_at_sens95/by_finding/effusion") is None, metric
    for metric in ("sens", "spec", "ppv"):  # the only finding: no headline either
        assert _value(res, f"xray/cls/{metric}_at_sens95") is None, metric
    assert [w for w in res["warnings"] if "finding 'Effusion'" in w and reason in w and str(val / "labels.csv") in w]
    assert _value(res, "xray/cls/auroc/by_finding/effusion") == pytest.approx(8 / 9)  # the test set's AUROC stays
    assert "xray/cls/spec_at_sens95" not in json.loads((tmp_path / "out" / "metrics.json").read_text())


@pytest.mark.parametrize(
    ("y", "reason"),
    [([0, 1, 1, 0], ""), ([0, 0, 0], "no positive"), ([1, 1], "no negative"), ([], "no label")],
)
def test_undefined_point_agrees_with_sklearn_roc_curve(y, reason):
    assert undefined_roc_point(np.array(y)) == reason
    if not y:
        return
    scores = np.linspace(0.1, 0.9, len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        fpr, tpr, _ = roc_curve(y, scores, drop_intermediate=False)
    assert bool(np.isnan(tpr).any() or np.isnan(fpr).any()) == bool(reason)
    if reason == "no positive":
        assert np.isnan(threshold_at_sensitivity(np.array(y), scores))
