"""Benchmark AUROC + DeLong 95% CI against sklearn's ``roc_auc_score`` alone, on 10^6 scores.

Run: ``.venv/bin/python benchmarks/bench_classification.py``

Labels: 10^6 draws at the NIH ChestX-ray14 effusion prevalence (11.9%); scores: a seeded binormal model
rounded to 3 decimals, so ties are frequent (as with real, quantised model outputs). Measured in one run,
median of repeats each: (a) ``trackeval.metrics.classification.delong`` (AUROC, DeLong variance, placements)
plus its CI (logit scale); (b) ``sklearn.metrics.roc_auc_score``. Target: ratio (b)/(a) >= 1 with identical AUROC.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from sklearn.metrics import roc_auc_score

from trackeval.metrics.classification import delong

N = 1_000_000
PREVALENCE = 0.119
REPEATS = 5


def median_seconds(fn) -> float:
    fn()  # warm-up
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    y = (rng.uniform(size=N) < PREVALENCE).astype(np.int8)
    s = np.round(1 / (1 + np.exp(-(rng.normal(size=N) + 1.2 * y))), 3)
    d = delong(y, s)
    ref = roc_auc_score(y, s)
    low, high = d.ci()
    t_ours = median_seconds(lambda: delong(y, s).ci())
    t_sklearn = median_seconds(lambda: roc_auc_score(y, s))
    print(f"n={N}, positives={int(y.sum())}, distinct scores={np.unique(s).size}")
    print(f"AUROC trackeval {d.auc:.12f}  sklearn {ref:.12f}  |diff| {abs(d.auc - ref):.1e}")
    print(f"DeLong 95% CI [{low:.6f}, {high:.6f}]")
    print(f"trackeval AUROC + DeLong CI: {t_ours * 1e3:8.1f} ms")
    print(f"sklearn roc_auc_score alone: {t_sklearn * 1e3:8.1f} ms")
    print(f"ratio sklearn / trackeval:   {t_sklearn / t_ours:8.2f}x (target >= 1)")


if __name__ == "__main__":
    main()
