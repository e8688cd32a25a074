"""Coverage of the 95% CI of one AUROC (DeLong variance, logit scale) in a seeded binormal simulation.

Run: ``.venv/bin/python benchmarks/bench_auroc_coverage.py [--reps 2000] [--seed 0]`` (a few seconds on one core)

Model: negatives ``N(0, 1)``, positives ``N(mu, 1)`` with ``mu = sqrt(2) * Phi^-1(AUC)``, so the true AUROC is
exactly ``AUC``; ``m`` positives and ``4 m`` negatives per replication. Each replication scores a fresh sample
with ``trackeval.metrics.classification.auroc_interval(y, delong(y, s))``, the interval that ``xray/cls`` reports
for ``auroc/by_finding/<f>`` (logit scale, t quantile; every image its own patient here), and counts whether it holds
the true AUROC. The former interval, DeLong's Wald interval clipped to [0, 1]
(:func:`~trackeval.metrics.classification.wald_interval`), is measured on the same samples for comparison.
Target: coverage >= 93% in every setting. ``MC s.e.`` is the Monte Carlo standard error of the measured
coverage, ``sqrt(c (1 - c) / reps)``; the same seed gives the same table.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.stats import norm

from trackeval.metrics.classification import auroc_interval, delong, wald_interval

CONFIDENCE = 0.95
TARGET = 0.93
NEGATIVES_PER_POSITIVE = 4
SETTINGS = ((0.7, 20), (0.9, 20), (0.7, 100), (0.9, 100))  # (true AUROC, positives)


def coverage(auc: float, m: int, reps: int, seed: int) -> tuple[float, float]:
    """Fractions of ``reps`` replications whose logit-scale and Wald intervals hold ``auc``."""
    rng = np.random.default_rng((seed, round(auc * 1000), m))
    n = NEGATIVES_PER_POSITIVE * m
    y = np.r_[np.ones(m, np.int8), np.zeros(n, np.int8)]
    mu = math.sqrt(2.0) * float(norm.ppf(auc))
    hits_logit = hits_wald = 0
    for _ in range(reps):
        d = delong(y, rng.normal(size=m + n) + mu * y)
        low, high = auroc_interval(y, d, None, CONFIDENCE)
        hits_logit += low <= auc <= high
        low, high = wald_interval(d.auc, d.variance, CONFIDENCE)
        hits_wald += low <= auc <= high
    return hits_logit / reps, hits_wald / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="replications per setting (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"95% CI of one AUROC, binormal scores, {NEGATIVES_PER_POSITIVE} negatives per positive, "
          f"{args.reps} replications per setting, seed {args.seed}")  # fmt: skip
    print()
    print("| setting | measured coverage (logit, reported) | MC s.e. | Wald (former) | target | met |")
    print("| --- | --- | --- | --- | --- | --- |")
    for auc, m in SETTINGS:
        logit_cov, wald_cov = coverage(auc, m, args.reps, args.seed)
        se = math.sqrt(logit_cov * (1.0 - logit_cov) / args.reps)
        setting = f"AUROC {auc}, {m} positives / {NEGATIVES_PER_POSITIVE * m} negatives"
        met = "yes" if logit_cov >= TARGET else "no"
        print(f"| {setting} | {logit_cov:.1%} | {se:.1%} | {wald_cov:.1%} | >= {TARGET:.0%} | {met} |")
    print()
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
