"""Issue 21's acceptance run: ``trackeval evaluate xray --task cls --ground-truth CheXpert/groundtruth.csv
--predictions model_predictions.csv --readers radiologists/`` on files laid out as the CheXpert test-set release
(rajpurkarlab/cheXpert-test-set-labels) distributes them: ``groundtruth.csv`` (``Study`` + 14 findings, 0/1, no
final newline), ``radiologists/bc4.csv`` ... (the benchmark radiologists' 0/1 decisions, the same layout with
``Lung Lesion`` before ``Lung Opacity``), a leaderboard model's ``Study`` + 5 competition findings predictions,
and the labeler output (``1.0`` / ``0.0`` / ``-1.0`` / blank).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from trackeval.cli import main

FINDINGS = [
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
    "Support Devices",
]  # fmt: skip
READER_ORDER = [*FINDINGS[:3], "Lung Lesion", "Lung Opacity", *FINDINGS[5:]]
COMPETITION = ["Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion"]
N = 120


def _csv(path: Path, header: list[str], rows: list[list[str]], *, final_newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(",".join(r) for r in [header, *rows])
    path.write_text(text + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def _release(tmp_path: Path) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The release's files under ``tmp_path``; returns studies, labels (N x 14), scores (N x 5), reader decisions."""
    rng = np.random.default_rng(21)
    studies = [f"CheXpert-v1.0/test/patient{64741 + i}/study1" for i in range(N)]
    labels = (rng.random((N, len(FINDINGS))) < 0.35).astype(int)
    labels[:2] = [[0] * 14, [1] * 14]  # every finding has both classes
    _csv(tmp_path / "CheXpert" / "groundtruth.csv", ["Study", *FINDINGS],
         [[s, *map(str, row)] for s, row in zip(studies, labels, strict=True)], final_newline=False)  # fmt: skip
    cols = [FINDINGS.index(f) for f in COMPETITION]
    scores = np.clip(labels[:, cols] * 0.3 + rng.random((N, 5)) * 0.7, 0, 1).round(8)
    _csv(tmp_path / "model_predictions.csv", ["Study", *COMPETITION],
         [[s, *(f"{x:.8f}" for x in row)] for s, row in zip(studies, scores, strict=True)])  # fmt: skip
    readers = {}
    for name, flip in (("bc4", 0.1), ("bc6", 0.25), ("bc8", 0.45)):
        decisions = np.where(rng.random(labels.shape) < flip, 1 - labels, labels)
        readers[name] = decisions
        order = [FINDINGS.index(f) for f in READER_ORDER]
        _csv(tmp_path / "radiologists" / f"{name}.csv", ["Study", *READER_ORDER],
             [[s, *map(str, row[order])] for s, row in zip(studies, decisions, strict=True)])  # fmt: skip
    return studies, labels, scores, readers


def _evaluate(tmp_path: Path, gt: str, *extra: str) -> dict:
    out = tmp_path / "out"
    argv = ["evaluate", "xray", "--task", "cls", "--ground-truth", str(tmp_path / gt)]
    argv += ["--predictions", str(tmp_path / "model_predictions.csv"), *extra, "--out", str(out)]
    assert main([*argv, "--executor", "local", "--set", "bootstrap.n_resamples=100"]) == 0
    return json.loads((out / "results.json").read_text())


def _curve_at(fpr: np.ndarray, tpr: np.ndarray, x: float) -> float:
    """The ROC curve's highest sensitivity at false positive rate ``x``, linear between its vertices."""
    best = [t for f, t in zip(fpr, tpr, strict=True) if f == x]
    for (f0, t0), (f1, t1) in zip(zip(fpr, tpr, strict=True), zip(fpr[1:], tpr[1:], strict=True), strict=False):
        if f0 < x < f1:
            best.append(t0 + (t1 - t0) * (x - f0) / (f1 - f0))
    return max(best)


def test_chexpert_release_with_radiologists(tmp_path: Path) -> None:
    studies, labels, scores, readers = _release(tmp_path)
    result = _evaluate(tmp_path, "CheXpert/groundtruth.csv", "--readers", str(tmp_path / "radiologists"))
    agg = result["aggregates"]
    aucs = [roc_auc_score(labels[:, FINDINGS.index(f)], scores[:, j]) for j, f in enumerate(COMPETITION)]
    assert agg["xray/cls/auroc"]["value"] == pytest.approx(np.mean(aucs), abs=1e-12)
    assert result["summary"]["n_findings"] == 5 and result["summary"]["n_images"] == N
    assert result["config"]["format"] == {"ground_truth": "chexpert", "predictions": "chexpert"}
    assert result["config"]["xray_run"]["readers"] == ["bc4", "bc6", "bc8"]
    below = []
    for j, f in enumerate(COMPETITION):
        y = labels[:, FINDINGS.index(f)]
        fpr, tpr, _ = roc_curve(y, scores[:, j])
        count = 0
        for d in readers.values():
            call = d[:, FINDINGS.index(f)]
            sens, fp_rate = call[y == 1].mean(), call[y == 0].mean()
            count += sens < _curve_at(fpr, tpr, fp_rate)
        below.append(count)
        key = f"xray/cls/readers_below_curve/by_finding/{f.lower().replace(' ', '_')}"
        assert agg[key]["value"] == count, f
    assert agg["xray/cls/readers_below_curve"]["value"] == pytest.approx(np.mean(below))


def test_labeler_output_truth_scores_blanks_as_negatives(tmp_path: Path) -> None:
    studies, labels, scores, _ = _release(tmp_path)
    rng = np.random.default_rng(5)
    spelled = np.where(labels == 1, "1.0", np.where(rng.random(labels.shape) < 0.5, "", "0.0")).astype(object)
    spelled[rng.random(labels.shape) < 0.1] = "-1.0"
    _csv(tmp_path / "labeler" / "chexpert_labels.csv", ["Study", *FINDINGS],
         [[s, *row] for s, row in zip(studies, spelled, strict=True)])  # fmt: skip
    result = _evaluate(tmp_path, "labeler/chexpert_labels.csv")
    aucs = []
    for j, f in enumerate(COMPETITION):
        column = spelled[:, FINDINGS.index(f)]
        keep = column != "-1.0"  # uncertain: left out (xray.cls.uncertain=ignore)
        y = (column[keep] == "1.0").astype(int)  # blank and 0.0: negative
        aucs.append(roc_auc_score(y, scores[keep, j]))
    assert result["aggregates"]["xray/cls/auroc"]["value"] == pytest.approx(np.mean(aucs), abs=1e-12)
    assert result["summary"]["n_uncertain_labels"] == int((spelled[:, [FINDINGS.index(f) for f in COMPETITION]]
                                                           == "-1.0").sum())  # fmt: skip
