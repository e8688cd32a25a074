"""Scale benchmark: throughput per core and peak memory per worker for each executor.

Run: ``.venv/bin/python benchmarks/bench_scale.py [--cases 954] [--masks 100000]``

Workloads (synthetic, generated deterministically before timing):

* UMD-shaped: ``--cases`` NIfTI case pairs (default 954, UMD's scan count) at reduced resolution
  (96 x 96 x 80 voxels of 4 x 4 x 5 mm, a 38 x 38 x 40 cm field of view), 13 organs as ellipsoids with
  realistic volumes (liver ~1.5 l, kidneys ~150 ml, ...); the prediction shifts and erodes each organ.
  Scored by the real UMD adapter end to end (file reading, validation, Dice, NSD, HD95, bootstrap).
* IMIS-shaped: ``--masks`` 2D binary mask pairs (256 x 256) scored with the Dice kernel in batches of
  1000 masks per task (per-mask tasks would measure scheduling, not scoring); each task synthesises its
  masks from a seed, standing in for workers that read their own files.

For ``local``, ``processes`` and ``dask`` with 1 and 2 workers: wall time, throughput (cases/s), throughput per
worker, and the peak RSS per worker process. Peak memory must not depend on the number of cases: the UMD
workload is also run on a quarter of the cases and the two peaks are printed side by side. The projection to
N workers assumes throughput scales with workers as measured from 1 to 2 (an efficiency factor), an estimate.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

from trackeval.api import load_config
from trackeval.benchmarks import umd
from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.config import EngineConfig, EvalConfig
from trackeval.engine.executors import local_cluster, map_cases
from trackeval.metrics.overlap import dice

SHAPE = (96, 96, 80)
SPACING = (4.0, 4.0, 5.0)
# approximate organ volumes in ml and centre positions (fractions of the field of view)
ORGANS_ML = {
    "liver": 1500, "kidney_left": 150, "kidney_right": 150, "brain": 1200, "heart": 600, "spleen": 200,
    "aorta": 100, "lung": 2500, "colon": 400, "urinary_bladder": 300, "pancreas": 80, "esophagus": 30,
    "stomach": 500,
}  # fmt: skip


def _volume(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    truth = np.zeros(SHAPE, np.uint8)
    grid = np.indices(SHAPE, dtype=np.float32)
    for label, organ in enumerate(UMD_ORGANS, start=1):
        voxels = ORGANS_ML[organ] * 1000 / np.prod(SPACING)
        radius = (3 * voxels / (4 * np.pi)) ** (1 / 3) * rng.uniform(0.8, 1.2, 3)
        centre = rng.uniform(0.25, 0.75, 3) * np.array(SHAPE)
        inside = (((grid - centre[:, None, None, None]) / radius[:, None, None, None]) ** 2).sum(0) <= 1
        truth[inside & (truth == 0)] = label
    pred = np.zeros_like(truth)
    for label in range(1, len(UMD_ORGANS) + 1):
        mask = np.roll(truth == label, tuple(rng.integers(-1, 2, 3)), axis=(0, 1, 2))
        pred[ndimage.binary_erosion(mask, iterations=int(rng.integers(0, 2)) or 1) & (pred == 0)] = label
    return truth, pred


def build_umd(root: Path, n_cases: int) -> tuple[Path, Path]:
    gt, pred = root / "gt", root / "pred"
    gt.mkdir(parents=True)
    pred.mkdir()
    affine = np.diag([*SPACING, 1.0])
    rows = []
    templates = [_volume(np.random.default_rng(i)) for i in range(16)]  # 16 anatomies, reused with shifts
    for i in range(n_cases):
        t, p = templates[i % len(templates)]
        shift = (i // len(templates)) % 5 - 2
        case = f"c{i:04d}"
        nib.save(nib.Nifti1Image(np.roll(t, shift, axis=0), affine), gt / f"{case}.nii.gz")
        nib.save(nib.Nifti1Image(np.roll(p, shift, axis=0), affine), pred / f"{case}.nii.gz")
        rows.append({"case_id": case, "subject_id": f"s{i // 2}", "modality": ("ct", "pet")[i % 2]})
    with open(gt / "manifest.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return gt, pred


def _imis_batch(seed: int) -> float:
    """Dice of 1000 synthetic 256x256 mask pairs (disc vs shifted disc); returns their sum."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:256, :256]
    total = 0.0
    for _ in range(1000):
        cy, cx, r = rng.uniform(60, 196), rng.uniform(60, 196), rng.uniform(10, 50)
        truth = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r * r).astype(np.uint8)
        pred = ((yy - cy - rng.normal(0, 3)) ** 2 + (xx - cx) ** 2 <= (r * rng.uniform(0.8, 1.1)) ** 2).astype(np.uint8)
        total += dice(pred, truth, labels=[1])[1]
    return total


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _worker_peak(engine: EngineConfig) -> str:
    """Peak RSS of the worker processes, as the OS reports it for this process's children (MiB)."""
    if engine.executor == "local" or (engine.workers or 1) == 1 and engine.executor == "processes":
        return f"{_peak_rss_mib():.0f} (client process, includes the data build)"
    return f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} (max over worker processes)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=954)
    ap.add_argument("--masks", type=int, default=100_000)
    args = ap.parse_args()
    settings = [("local", 1), ("processes", 1), ("processes", 2), ("dask", 1), ("dask", 2)]
    print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        t_build, (gt, pred) = _timed(lambda: build_umd(Path(tmp), args.cases))
        print(f"UMD-shaped data: {args.cases} cases of {SHAPE} voxels, 13 organs; built in {t_build:.1f} s")
        quarter = max(2, args.cases // 4)
        gt_q, pred_q = build_umd(Path(tmp) / "quarter", quarter)
        umd.evaluate(gt_q, pred_q, load_config(None, ["engine.executor=local", "engine.cache=false"]))  # warm-up
        print(f"{'executor':<10}{'workers':>8}{'wall s':>9}{'cases/s':>9}{'/worker':>9}  peak RSS MiB")
        rates = {}
        for executor, workers in settings:
            cfg: EvalConfig = load_config(
                None, [f"engine.executor={executor}", f"engine.workers={workers}", "engine.cache=false"]
            )
            wall, result = _timed(lambda cfg=cfg: umd.evaluate(gt, pred, cfg))
            rate = args.cases / wall
            rates[(executor, workers)] = rate
            print(
                f"{executor:<10}{workers:>8}{wall:>9.1f}{rate:>9.2f}{rate / workers:>9.2f}  {_worker_peak(cfg.engine)}"
            )
        dsc = result.aggregates["umd/dsc"].value
        print(f"umd/dsc = {dsc:.4f} (identical across executors by construction of the tests)")
        for n, (g, p) in ((quarter, (gt_q, pred_q)), (args.cases, (gt, pred))):
            from distributed import Client

            with local_cluster(2) as cl:
                with Client(cl) as client:
                    cfg = load_config(
                        None, [f"engine.scheduler={cl.scheduler_address}", "engine.executor=dask", "engine.cache=false"]
                    )
                    umd.evaluate(g, p, cfg)
                    peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            print(f"dask 2 workers, {n:>5} cases: peak RSS per worker {sorted(round(v) for v in peaks.values())} MiB")
    eff = rates[("processes", 2)] / (2 * rates[("processes", 1)])
    print(f"parallel efficiency 1->2 workers (processes): {eff:.2f}")
    for n in (8, 32, 128):
        proj = rates[("processes", 1)] * n * eff
        print(f"projection: {n:>4} workers ~ {proj:.0f} cases/s -> 954 cases in {954 / proj:.1f} s")

    n_tasks = max(1, args.masks // 1000)
    print(f"\nIMIS-shaped: {n_tasks * 1000} 2D masks 256x256 in {n_tasks} tasks of 1000")
    for executor, workers in settings:
        engine = EngineConfig(executor=executor, workers=workers, cache=False)
        wall, sums = _timed(lambda engine=engine: map_cases(_imis_batch, list(range(n_tasks)), engine, "IMIS masks"))
        rate = n_tasks * 1000 / wall
        print(f"{executor:<10}{workers:>8}{wall:>9.1f}{rate:>9.0f} masks/s {rate / workers:>9.0f}/worker")


if __name__ == "__main__":
    main()
