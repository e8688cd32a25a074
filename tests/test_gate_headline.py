"""The gate decides on the headlines each version's own results report (real UMD evaluations of NIfTI files).

Scenarios of the gate audit: a candidate that paints an organ the truth lacks, a candidate with more missing
predictions under ``umd.missing_prediction: exclude``, compare columns that equal each version's headline, the
subject as the resampling unit, and the sample-size note.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import cube, save_nifti, write_manifest
from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import umd
from trackeval.config import EvalConfig
from trackeval.gate.decide import decide
from trackeval.report.comparison import decision_markdown
from trackeval.report.html import decision_report
from trackeval.results import BenchmarkResult

SHAPE = (12, 12, 6)
#: liver in every truth; the brain in none (the ground truth of these 20 cases has no brain)
LABELS = "umd.labels={liver: 1, brain: 7}"


def _config(*extra: str) -> EvalConfig:
    return load_config(
        None, ["engine.executor=local", "bootstrap.n_resamples=300", "gate.n_resamples=1000", LABELS, *extra]
    )


def _liver(subject: int) -> np.ndarray:
    return cube(SHAPE, (2, 2, 1), (6 + subject % 3, 8, 5), 1)


def _write(root: Path, n_subjects: int, version: str, missing: int = 0) -> tuple[Path, Path]:
    """Ground truth (``n_subjects`` x ct, pet) and one version's predictions: ``v1`` = the liver one voxel short,
    ``v2`` = v1 plus a brain box painted in every case, ``v3`` = v1 with three voxels fewer in odd subjects; the
    first ``missing`` cases get no prediction file."""
    gt, pred = root / "gt", root / f"pred_{version}"
    pred.mkdir(parents=True)
    rows, k = [], 0
    for s in range(n_subjects):
        for modality in ("ct", "pet"):
            case = f"s{s:02d}_{modality}"
            if not (gt / f"{case}.nii.gz").exists():
                gt.mkdir(exist_ok=True)
                save_nifti(gt / f"{case}.nii.gz", _liver(s))
            rows.append({"case_id": case, "subject_id": f"s{s:02d}", "modality": modality})
            p = _liver(s)
            p[2, 2, 1] = 0  # one voxel short: Dice just under 1
            if version == "v2":
                cube(SHAPE, (8, 8, 1), (11, 11, 4), 7, out=p)
            if version == "v3" and s % 2:
                p[2:5, 3, 1] = 0  # three more voxels short in every other subject
            if k >= missing:
                save_nifti(pred / f"{case}.nii.gz", p)
            k += 1
    write_manifest(gt / "manifest.csv", rows)
    return gt, pred


def _evaluate(root: Path, n_subjects: int, version: str, cfg: EvalConfig, missing: int = 0) -> BenchmarkResult:
    gt, pred = _write(root, n_subjects, version, missing)
    return umd.evaluate(gt, pred, cfg, {"name": "seg", "version": version})


def _decide(cand: BenchmarkResult, base: BenchmarkResult, cfg: EvalConfig):
    return decide("seg", "v2", {"umd": cand}, "v1", {"umd": base}, cfg.gate, gate_policies(cfg))


def test_a_hallucinating_candidate_is_refused_on_its_own_headline(tmp_path):
    cfg = _config()
    v1 = _evaluate(tmp_path, 10, "v1", cfg)
    v2 = _evaluate(tmp_path, 10, "v2", cfg)
    h1, h2 = v1.aggregates["umd/dsc"].value, v2.aggregates["umd/dsc"].value
    # v2's brain is Dice 0 in every case (v1: not applicable), so v2's headline is the liver mean halved
    assert h2 == pytest.approx(h1 / 2)
    d = _decide(v2, v1, cfg)
    assert d.verdict == "fail"
    head = d.comparisons[0].rows[0]
    assert head.candidate == h2 and head.baseline == h1  # the compare columns are the headlines users see
    assert head.delta == pytest.approx(h2 - h1)
    assert head.ci95_high < -0.4
    brain = next(r for r in d.comparisons[0].rows if r.key == "umd/dsc/by_organ/brain")
    # the champion has no brain value at all: it counts as perfect agreement (Dice 1) for the group delta
    assert brain.candidate == 0.0 and brain.baseline is None and brain.delta == pytest.approx(-1.0)
    failed = {c.name for c in d.checks if not c.passed}
    assert failed == {"non_inferiority", "worst_group"}
    # the same candidate against itself passes: the rule is about the change, not the brain
    assert _decide(v2, v2, cfg).verdict == "pass"


def test_more_missing_predictions_under_exclude_are_refused(tmp_path):
    cfg = _config("umd.missing_prediction=exclude")
    v1 = _evaluate(tmp_path, 10, "v1", cfg)
    v2 = _evaluate(tmp_path, 10, "v1b", cfg, missing=4)  # the same model with 4 of 20 predictions missing
    # excluded cases leave v2's headline as good as v1's: the pass would rest on fewer cases
    assert v2.aggregates["umd/dsc"].value == pytest.approx(v1.aggregates["umd/dsc"].value, abs=0.01)
    d = _decide(v2, v1, cfg)
    assert d.verdict == "fail"
    check = next(c for c in d.checks if c.name == "missing_predictions")
    assert not check.passed and check.detail == "missing predictions: candidate 4 vs champion 0"
    # the other way round (the champion misses more) the count does not block
    back = _decide(v1, v2, cfg)
    assert next(c for c in back.checks if c.name == "missing_predictions").passed


def test_results_record_the_resampling_unit_and_pairing_requires_it(tmp_path):
    by_subject = _config()
    by_case = _config("bootstrap.cluster=case")
    a = _evaluate(tmp_path / "a", 6, "v1", by_subject)
    b = _evaluate(tmp_path / "b", 6, "v1", by_case)
    assert a.config["bootstrap"]["cluster"] == "subject_id" and b.config["bootstrap"]["cluster"] == "case"
    assert a.config["bootstrap"]["interval"] == "expanded_percentile"
    d = _decide(a, b, by_subject)
    assert d.verdict == "fail"
    assert any(c.name == "pairing" and "bootstrap resampling differs" in c.detail for c in d.checks)


def test_a_small_sample_says_it_cannot_resolve_the_margin(tmp_path):
    cfg = _config("gate.margins={umd: 0.001}")
    v1 = _evaluate(tmp_path, 3, "v1", cfg)
    v3 = _evaluate(tmp_path, 3, "v3", cfg)
    d = _decide(v3, v1, cfg)
    note, guard = d.notes  # at 3 subjects the worst-group guard cannot refuse a group either
    assert note.startswith("umd: 3 subjects cannot resolve margin 0.001 at the observed spread; about ")
    assert guard.startswith("worst-group guard: at 3 clusters the smallest p-value 1000 resamples can give is")
    head = d.comparisons[0].rows[0]
    half = (head.ci95_high - head.ci95_low) / 2
    assert int(note.rsplit("about ", 1)[1].split()[0]) == int(np.ceil(3 * (half / 0.001) ** 2)) + 1
    # every rendering of the decision carries it
    assert f"Note: {note}" in decision_markdown(d) and f"<p>Note: {note}</p>" in decision_report(d)
