"""Baseline rankings for the bundled 3D-MIR labels: a seeded random ranking and an oracle.

The bundled ground truth (``mir3d_data/``, CC BY 4.0, see its README and LICENSE) holds the real 3D-MIR label
tables and splits but no CT volumes, so there is no image model to run; these two rankings bracket every model:

* ``random``: per query, ``depth`` distinct index volumes drawn uniformly without replacement (seeded). Its
  expected P@k for a query is the fraction of the region's index that shares the query's label (hypergeometric
  mean), whatever ``k``.
* ``oracle``: per query, the index sorted by (same lesion group, same lesion flag, name), so every same-group
  volume comes first, then same-flag ones. Since group -1 <=> flag 0, a same-group volume also has the same flag:
  P@k and AP are 1.0 for both relevances whenever the index holds at least ``k`` relevant volumes.

Both write ``rankings.csv`` with the columns ``region,query,rank,retrieved`` that ``trackeval evaluate mir3d``
reads.
"""

from __future__ import annotations

import csv
from importlib.resources import files
from pathlib import Path
from typing import Literal

import numpy as np

from trackeval.benchmarks.mir3d.readers import RANKING_FIELDS, RegionTruth, load_ground_truth

Baseline = Literal["random", "oracle"]


def data_dir() -> Path:
    """The bundled 3D-MIR ground-truth folder (``3DMIR_labels/`` + ``Data_Splits/``)."""
    return Path(str(files("trackeval.demo") / "mir3d_data"))


def random_rankings(truth: dict[str, RegionTruth], seed: int, depth: int = 10) -> list[tuple[str, str, int, str]]:
    """``(region, query, rank, retrieved)`` rows: ``depth`` index volumes per query, uniformly without
    replacement, from ``numpy.random.default_rng(seed)`` (regions in name order, queries in split order)."""
    rng = np.random.default_rng(seed)
    rows = []
    for region, t in sorted(truth.items()):
        for query in t.queries:
            picks = rng.choice(len(t.index), size=min(depth, len(t.index)), replace=False)
            rows += [(region, query, rank, t.index[i]) for rank, i in enumerate(picks, start=1)]
    return rows


def oracle_rankings(truth: dict[str, RegionTruth], depth: int = 10) -> list[tuple[str, str, int, str]]:
    """``(region, query, rank, retrieved)`` rows of the ideal ranking (same group, then same flag, then name)."""
    rows = []
    for region, t in sorted(truth.items()):
        flag, group = t.labels["flag"], t.labels["group"]
        for query in t.queries:
            ranked = sorted(t.index, key=lambda v, q=query: (group[v] != group[q], flag[v] != flag[q], v))
            rows += [(region, query, rank, v) for rank, v in enumerate(ranked[:depth], start=1)]
    return rows


def write_rankings(rows: list[tuple[str, str, int, str]], path: Path) -> Path:
    """Write ``rows`` as ``rankings.csv`` (header ``region,query,rank,retrieved``); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(RANKING_FIELDS)
        writer.writerows(rows)
    return path


def write_baseline(kind: Baseline, path: Path, gt_dir: Path | None = None, seed: int = 0, depth: int = 10) -> Path:
    """Write the ``kind`` baseline's rankings for ``gt_dir`` (default: the bundled data) to ``path``."""
    truth = load_ground_truth(gt_dir or data_dir())
    rows = random_rankings(truth, seed, depth) if kind == "random" else oracle_rankings(truth, depth)
    return write_rankings(rows, path)
