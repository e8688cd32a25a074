"""Reading X-ray cls label and score files at scale: time and peak memory of the cls readers.

Run: ``.venv/bin/python benchmarks/bench_cls_read.py [--studies 1000 10000 100000] [--data DIR]``

Writes (seeded, once per size, reused) a MIMIC-CXR-JPG ``mimic-cxr-2.0.0-chexpert.csv`` (``subject_id``,
``study_id`` and the 14 findings, 1-4 studies per patient, values ``1.0`` / ``0.0`` / ``-1.0`` / blank) and a
predictions file keyed by ``study_id`` (14 probabilities, 9 decimals). Each measurement is a fresh process: it
imports trackeval, then reads and aligns both files with ``trackeval.benchmarks.xray.cls.load_split`` (the whole
reading path of ``evaluate xray --task cls``: layouts told from the headers, ids checked, labels coded, scores
parsed and matched). Printed per size: CPU and wall seconds of the read, the process's peak RSS
(``ru_maxrss``) and that peak minus the RSS after the imports (what reading added), and the same for the floor:
``pandas.read_csv`` of both files in a fresh process. Run it before and after a change to the readers with the
same ``--data`` (``PYTHONPATH=<old checkout>/src`` selects the old code).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FINDINGS = (
    "Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Enlarged Cardiomediastinum", "Fracture",
    "Lung Lesion", "Lung Opacity", "No Finding", "Pleural Effusion", "Pleural Other", "Pneumonia", "Pneumothorax",
    "Support Devices",
)  # fmt: skip
SPELLINGS = ("1.0", "0.0", "-1.0", "")


def write_files(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    """The labels and scores files of ``n`` studies in ``folder`` (written once; reused when present)."""
    labels, scores = folder / f"mimic-{n}.csv", folder / f"scores-{n}.csv"
    if labels.is_file() and scores.is_file():
        return labels, scores
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    subjects = np.repeat(np.arange(n), rng.integers(1, 5, n))[:n] + 10_000_000
    codes = rng.integers(0, len(SPELLINGS), (n, len(FINDINGS)))
    probabilities = rng.random((n, len(FINDINGS)))
    with labels.open("w") as f:
        f.write(",".join(("subject_id", "study_id", *FINDINGS)) + "\n")
        f.writelines(
            f"{s},{50_000_000 + i},{','.join(SPELLINGS[c] for c in row)}\n"
            for i, (s, row) in enumerate(zip(subjects, codes, strict=True))
        )
    with scores.open("w") as f:
        f.write(",".join(("study_id", *FINDINGS)) + "\n")
        f.writelines(f"{50_000_000 + i},{','.join(f'{p:.9f}' for p in row)}\n" for i, row in enumerate(probabilities))
    return labels, scores


def _rss_mb() -> float:
    """This process's peak RSS so far, MB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    """This process's resident set now, MB (``/proc/self/statm``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(kind: str, labels: Path, scores: Path) -> dict[str, float]:
    """One measurement in this (fresh) process: ``trackeval`` (load_split) or ``pandas`` (read_csv of both)."""
    if kind == "trackeval":
        from trackeval.benchmarks.xray.cls import load_split

        def read() -> object:
            return load_split(labels, scores, "ignore")
    else:
        import pandas as pd

        def read() -> object:
            return pd.read_csv(labels), pd.read_csv(scores)

    base = _current_rss_mb()
    cpu, wall = time.process_time(), time.perf_counter()
    kept = read()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    del kept
    return {"cpu_s": cpu, "wall_s": wall, "peak_mb": _rss_mb(), "added_mb": _rss_mb() - base}


def measure(kind: str, labels: Path, scores: Path) -> dict[str, float]:
    """:func:`child` run in a fresh interpreter (same environment, so ``PYTHONPATH`` picks the code)."""
    cmd = [sys.executable, __file__, "--child", kind, str(labels), str(scores)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--studies", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--data", type=Path, default=Path("/tmp/trackeval-bench-cls-read"))
    parser.add_argument("--child", nargs=3, metavar=("KIND", "LABELS", "SCORES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, labels, scores = args.child
        print(json.dumps(child(kind, Path(labels), Path(scores))))
        return 0
    print("studies  reader     cpu_s  wall_s  peak_MB  added_MB  load")
    for n in args.studies:
        labels, scores = write_files(args.data, n)
        for kind in ("trackeval", "pandas"):
            m = measure(kind, labels, scores)
            load = os.getloadavg()[0]
            print(f"{n:>7}  {kind:<9} {m['cpu_s']:6.2f} {m['wall_s']:7.2f} {m['peak_mb']:8.0f} {m['added_mb']:9.0f}"
                  f"  {load:4.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
