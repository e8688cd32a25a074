"""Operating characteristics of the headline CIs and the promotion gate, measured by seeded simulation.

Run: ``.venv/bin/python benchmarks/bench_gate_calibration.py [--reps 1000] [--quick]``

Everything goes through the product's own code: per-case UMD records (subjects with a CT and a PET scan, three
organs) are aggregated by ``trackeval.benchmarks.umd.aggregate`` into a real ``BenchmarkResult`` (the same call
``trackeval evaluate umd`` makes after scoring the NIfTI files), and two versions are gated by
``trackeval.gate.decide.decide`` with the default gate config (what ``trackeval promote`` runs). Only the
per-case Dice values are simulated, so that the truth is known:

``dice[subject, scan, organ] = mu_organ + delta + u[subject, organ] + e[subject, scan, organ]`` with
``u ~ N(0, icc s^2)``, ``e ~ N(0, (1 - icc) s^2)``, ``s = 0.05``, ``mu = (0.70, 0.75, 0.80)``: ``icc`` is the
within-subject correlation of a subject's two scans. The candidate shares the champion's subject effects and
half of its scan noise (two versions on the same cases are correlated). Values are not clipped, so the true
headline is exactly ``mean(mu) + delta`` (a value outside [0, 1] is a 4-sigma event here, and the statistics do
not depend on the range).

Printed, each as measured vs target:

* coverage of the 95% CI of ``umd/dsc`` at 6, 12, 30, 100 subjects and ICC 0, 0.3, 0.7
  (target >= 93% from 12 subjects, >= 90% at 6);
* the gate's pass rate at a true delta of ``-margin`` (type I error; target <= 3% from 12 subjects, <= 5% at
  6), at delta 0 (false refusals) and a power curve (delta +0.01, n = 6, 20, 50, 200);
* DeLong coverage of the ``xray/cls/auroc`` CI at AUROC 0.7 and 0.9 with 20 and 100 positives (4 negatives
  per positive; the interval the X-ray classification adapter reports; at least 2000 replications; target
  >= 93%);
* the audit's scenarios: a candidate painting an organ the truth lacks, and one missing predictions under
  ``exclude`` (target: refused).

The Monte-Carlo standard error of a rate p over R replications is sqrt(p (1 - p) / R): about 0.7 points for a
95% coverage at R = 1000, 0.5 points for a 3% error rate.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from trackeval.api import gate_policies, load_config
from trackeval.benchmarks import umd
from trackeval.config import EvalConfig
from trackeval.gate.decide import decide
from trackeval.results import BenchmarkResult, CaseRecord, build_result

ORGANS = ("liver", "spleen", "heart")
MU = np.array([0.70, 0.75, 0.80])
SD = 0.05
MARGIN = 0.01


def _config(n_resamples: int) -> EvalConfig:
    return load_config(
        None,
        [
            "umd.labels={liver: 1, spleen: 2, heart: 3}",
            "umd.metrics=[dsc]",
            "umd.modality_pairs=[]",
            f"bootstrap.n_resamples={n_resamples}",
            f"gate.n_resamples={n_resamples}",
            f"gate.margins={{umd: {MARGIN}}}",
        ],
    )


def _records(dice: np.ndarray, missing: int = 0, organs: tuple[str, ...] = ORGANS) -> list[CaseRecord]:
    """Case records of ``dice[subject, scan, organ]`` (NaN = not applicable); the first ``missing`` cases carry
    no prediction (status ``missing_prediction``, no values: ``umd.missing_prediction: exclude``)."""
    out = []
    k = 0
    for s in range(dice.shape[0]):
        for m, modality in enumerate(("ct", "pet")):
            absent = k < missing
            out.append(
                CaseRecord(
                    case_id=f"s{s:03d}_{modality}",
                    subject_id=f"s{s:03d}",
                    groups={"modality": modality},
                    metrics={o: ({} if absent else {"dsc": float(dice[s, m, j])}) for j, o in enumerate(organs)},
                    status="missing_prediction" if absent else "ok",
                )
            )
            k += 1
    return out


def _result(records: list[CaseRecord], cfg: EvalConfig, version: str) -> BenchmarkResult:
    """The BenchmarkResult ``umd.evaluate`` builds from these records (aggregates by the adapter's own code)."""
    return build_result(
        "umd",
        model={"name": "seg", "version": version},
        config=cfg.model_dump(mode="json", include={"bootstrap", "umd"}),
        ground_truth_digest="simulated",
        predictions_digest=version,
        summary={"n_cases": len(records), "n_missing_predictions": sum(r.status != "ok" for r in records)},
        warnings=[],
        cases=records,
        aggregates=umd.aggregate(records, cfg),
        item_kind="organ",
    )


def _pair(rng: np.random.Generator, n: int, icc: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Champion and candidate Dice ``(n, 2, 3)`` on the same subjects (see the module docstring)."""
    u = rng.normal(0.0, SD * math.sqrt(icc), (n, 1, 3))
    shared = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    e_a = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    e_b = rng.normal(0.0, SD * math.sqrt((1 - icc) / 2), (n, 2, 3))
    champion = MU + u + shared + e_a
    candidate = MU + delta + u + shared + e_b
    return champion, candidate


def _gate(champion: BenchmarkResult, candidate: BenchmarkResult, cfg: EvalConfig) -> bool:
    d = decide("seg", "cand", {"umd": candidate}, "champ", {"umd": champion}, cfg.gate, gate_policies(cfg))
    return d.verdict == "pass"


def coverage(reps: int, cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rows = []
    for n in (6, 12, 30, 100):
        for icc in (0.0, 0.3, 0.7):
            rng = np.random.default_rng([seed, n, int(icc * 10)])
            hit = 0
            for _ in range(reps):
                champion, _ = _pair(rng, n, icc, 0.0)
                s = umd.aggregate(_records(champion), cfg)["umd/dsc"]
                hit += s.ci95_low <= MU.mean() <= s.ci95_high
            target = 0.90 if n < 12 else 0.93
            rows.append(
                (
                    f"umd/dsc 95% CI coverage, {n} subjects, ICC {icc}",
                    hit / reps,
                    f">= {target:.0%}",
                    hit / reps >= target,
                )
            )
    return rows


def gate_rates(reps: int, cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rows = []
    settings = [(n, icc, -MARGIN, "type I (pass at delta = -margin)") for n in (6, 12, 30, 100) for icc in (0.0, 0.7)]
    settings += [(n, 0.3, 0.0, "false refusal (refuse at delta = 0)") for n in (6, 20, 50, 200)]
    settings += [(n, 0.3, 0.01, "power (pass at delta = +0.01)") for n in (6, 20, 50, 200)]
    for n, icc, delta, what in settings:
        rng = np.random.default_rng([seed, n, int(icc * 10), int(round(delta * 1000)) + 100])
        passed = 0
        for _ in range(reps):
            a, b = _pair(rng, n, icc, delta)
            passed += _gate(_result(_records(a), cfg, "champ"), _result(_records(b), cfg, "cand"), cfg)
        rate = passed / reps
        label = f"gate {what}, {n} subjects, ICC {icc}"
        if delta < 0:
            target = 0.05 if n < 12 else 0.03
            rows.append((label, rate, f"<= {target:.0%}", rate <= target))
        elif delta == 0:
            rows.append((label, 1 - rate, "reported", True))
        else:
            rows.append((label, rate, "reported", True))
    return rows


def scenarios(cfg: EvalConfig, seed: int) -> list[tuple[str, float, str, bool]]:
    rng = np.random.default_rng(seed)
    champion, _ = _pair(rng, 10, 0.3, 0.0)
    # a fourth organ the truth lacks: not applicable (NaN) for the champion, Dice 0 where the candidate paints it
    wide = cfg.model_copy(update={"umd": cfg.umd.model_copy(update={"labels": {**cfg.umd.labels, "brain": 7}})})
    organs = (*ORGANS, "brain")
    base = np.concatenate([champion, np.full((10, 2, 1), np.nan)], axis=2)
    painted = np.concatenate([champion, np.zeros((10, 2, 1))], axis=2)
    refused_h = not _gate(
        _result(_records(base, organs=organs), wide, "v1"), _result(_records(painted, organs=organs), wide, "v2"), wide
    )
    excl = cfg.model_copy(update={"umd": cfg.umd.model_copy(update={"missing_prediction": "exclude"})})
    refused_m = not _gate(
        _result(_records(champion), excl, "v1"), _result(_records(champion, missing=4), excl, "v2"), excl
    )
    return [
        ("hallucinated organ (Dice 0 where the champion has n/a) refused", float(refused_h), "1 (refused)", refused_h),
        ("4 of 20 predictions missing under exclude refused", float(refused_m), "1 (refused)", refused_m),
    ]


def delong_coverage(reps: int, seed: int) -> list[tuple[str, float, str, bool]]:
    """Coverage of the AUROC CI that ``xray/cls`` reports (DeLong variance, logit scale), by the binormal
    simulation of ``bench_auroc_coverage.py`` (the product's ``delong(...).ci`` on every replication)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_auroc_coverage import NEGATIVES_PER_POSITIVE, SETTINGS, TARGET, coverage

    rows = []
    for auc, m in SETTINGS:
        cov, _ = coverage(auc, m, reps, seed)
        rows.append(
            (
                f"xray/cls/auroc CI coverage, AUROC {auc}, {m} positives / {NEGATIVES_PER_POSITIVE * m} negatives",
                cov,
                f">= {TARGET:.0%}",
                cov >= TARGET,
            )
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="replications per setting (default 1000)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per CI (default 1000)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="200 replications: a smoke run, not the published table")
    args = ap.parse_args()
    reps = 200 if args.quick else args.reps
    cfg = _config(args.resamples)
    t0 = time.perf_counter()
    rows = coverage(reps, cfg, args.seed) + gate_rates(reps, cfg, args.seed) + scenarios(cfg, args.seed)
    rows += delong_coverage(max(reps, 2000), args.seed)
    width = max(len(r[0]) for r in rows)
    print(f"{'setting':<{width}}  measured  target        met")
    for label, value, target, ok in rows:
        print(f"{label:<{width}}  {value:8.1%}  {target:<12}  {'yes' if ok else 'NO'}")
    print(
        f"{reps} replications per setting, {args.resamples} resamples, seed {args.seed}, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
