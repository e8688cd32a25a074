"""``trackeval pipeline train`` and ``trackeval pipeline predict``: one model version's networks and outputs.

A version (``pipeline.versions.<v>``) is a UMD 3D U-Net (:mod:`trackeval.demo.segmodel`; its predictions feed
UMD on CT and PET and, projected to 2D, the X-ray ``seg`` task), an interactive model for IMIS (the classical
region grower or the click U-Net of :mod:`trackeval.demo.baselines`, run through the reference runner
into an offline log), and two documented baselines where no trainable model fits the demo data: 3D-MIR
rankings (:mod:`trackeval.demo.mir3d_baselines`; no CT volumes ship) and X-ray classification scores
(:func:`simulated_scores`; the NIH table has labels but no images in any registry package).

Both stages run under :func:`pin_cpu_numerics` (``trackeval pipeline train|predict`` call it first): the networks'
bytes are then the same on every x86-64 CPU with AVX2. Importing this module imports no torch (the demo modules
are imported when a stage runs), so that the pin comes before torch; it lives here, a dependency of both stages
in ``dvc.yaml``, so that changing it re-runs them.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import nibabel as nib
import numpy as np
from PIL import Image

from trackeval.benchmarks.imis.runner import write_log
from trackeval.demo.mir3d_baselines import write_baseline

if TYPE_CHECKING:  # params (its SegModelSpec), segmodel, baselines and prepare import torch
    from trackeval.config import EvalConfig
    from trackeval.pipeline.params import VersionSpec

IMIS_WEIGHTS = "imis_unet.pt"
IMIS_SPEC = "imis.json"
#: the stages that run torch: ``trackeval pipeline <stage>`` calls :func:`pin_cpu_numerics` before them
TORCH_STAGES = ("train", "predict")
#: The environment that makes torch's numerics the same on every x86-64 CPU with AVX2 (docs/pipeline.md,
#: "Reproducible on any x86-64 CPU"); torch and MKL read it when first used, so it is set before torch is imported.
CPU_PIN = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen's vectorised kernels: the AVX2 build, also on AVX-512 CPUs
    "MKL_CBWR": "AVX2",  # MKL's Conditional Numerical Reproducibility: one code branch, fixed cache sizes
    "MKL_DYNAMIC": "FALSE",  # MKL and OpenMP never change the thread count at run time
    "OMP_DYNAMIC": "FALSE",
    "OMP_NUM_THREADS": "1",  # one thread: every reduction is split the same way on every machine
    "MKL_NUM_THREADS": "1",
}


def pin_cpu_numerics() -> str:
    """Make this process's torch results bit-for-bit the same on every x86-64 CPU with AVX2; returns the ATen
    capability in use (``"AVX2"``; another one, with a warning on stderr, means the results will differ).

    Sets :data:`CPU_PIN` in ``os.environ`` (overriding the caller's values), then in torch: one intra-op thread,
    oneDNN off (its convolutions size their blocks, and so the order of their sums, from the CPU's cache sizes,
    which no setting fixes; without it a convolution is ATen's vol2col + MKL gemm, under ``MKL_CBWR``) and
    deterministic algorithms (an op without a deterministic CPU kernel raises). Call it before torch is first
    imported in the process; calling it again is harmless. Not covered: CPUs without AVX2 (before Intel Haswell /
    AMD Excavator), other architectures, other torch / MKL / MONAI versions.
    """
    os.environ.update(CPU_PIN)
    import torch

    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False
    torch.use_deterministic_algorithms(True)
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        print(
            f"warning: torch runs its {capability} kernels, not AVX2 (a CPU without AVX2, or torch used before "
            "the pin): the trained models will differ from the committed dvc.lock",
            file=sys.stderr,
        )
    return capability


def train(version: VersionSpec, prepared: Path, data: Path, out: Path) -> None:
    """Train the version's networks into ``out``: ``umd/`` (weights + spec) and, for the click U-Net,
    ``imis_unet.pt``; ``imis.json`` records the interactive model either way."""
    from trackeval.demo import segmodel
    from trackeval.demo.baselines import train_click_unet

    pairs = segmodel.load_training_set(prepared / "umd" / "train" / "manifest.csv")
    net = segmodel.train(version.segmenter, pairs)
    segmodel.save(net, version.segmenter, out / "umd")
    info: dict[str, object] = version.imis.model_dump(mode="json")
    if version.imis.model == "click_unet":
        stats = train_click_unet(
            data / "imis", out / IMIS_WEIGHTS, iterations=version.imis.iterations, seed=version.imis.seed
        )
        print(f"click U-Net: {version.imis.iterations} iterations, final loss {stats['final_loss']:.3f}")
    (out / IMIS_SPEC).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def simulated_scores(labels: np.ndarray, signal: float, seed: int) -> np.ndarray:
    """Probabilities of a simulated classifier: ``sigmoid(signal * (2y - 1) + N(0, 1) - 2)`` per image and
    finding. Its AUROC is about ``Phi(signal * sqrt(2))`` (0.5 at signal 0); the -2 offset keeps scores low,
    as for rare findings."""
    rng = np.random.default_rng(seed)
    logits = signal * (2.0 * labels - 1.0) + rng.standard_normal(labels.shape) - 2.0
    return 1.0 / (1.0 + np.exp(-logits))


def _write_scores(labels_csv: Path, out: Path, signal: float, seed: int) -> None:
    with open(labels_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    labels = np.array([[int(v) for v in r[1:]] for r in body], dtype=np.float64)
    scores = simulated_scores(labels, signal, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([r[0], *(f"{s:.6f}" for s in srow)] for r, srow in zip(body, scores, strict=True))


def _predict_umd(models: Path, prepared: Path, out: Path) -> None:
    """UMD predictions for every test case, and the projected X-ray seg predictions of the CT cases."""
    from trackeval.demo import segmodel
    from trackeval.pipeline.prepare import project_labels

    net, spec = segmodel.load(models / "umd")
    gt = prepared / "umd" / "gt"
    (out / "umd").mkdir(parents=True, exist_ok=True)
    (out / "xray_seg").mkdir(parents=True, exist_ok=True)
    with open(gt / "manifest.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            img = nib.load(gt / row["image"])
            image = segmodel.normalise(np.asarray(img.get_fdata(dtype=np.float32)), row["modality"])
            labels = segmodel.predict(net, image, spec)
            pred = nib.Nifti1Image(labels, img.affine)
            pred.header.set_data_dtype(np.uint8)
            pred.header.set_xyzt_units("mm")
            nib.save(pred, out / "umd" / f"{row['case_id']}.nii.gz")
            if row["modality"] == "ct":
                Image.fromarray(project_labels(labels)).save(out / "xray_seg" / f"{row['subject_id']}.png")


def predict(version: VersionSpec, cfg: EvalConfig, data: Path, prepared: Path, models: Path, out: Path) -> None:
    """Write the version's outputs for every benchmark under ``out`` (``umd/``, ``xray_seg/``,
    ``xray_cls/scores.csv``, ``mir3d/rankings.csv``, ``imis/log.jsonl`` + masks)."""
    _predict_umd(models, prepared, out)
    _write_scores(
        prepared / "xray" / "cls" / "labels.csv",
        out / "xray_cls" / "scores.csv",
        version.xray_cls_signal,
        version.xray_cls_seed,
    )
    m = version.mir3d
    write_baseline(m.baseline, out / "mir3d" / "rankings.csv", gt_dir=data / "mir3d", seed=m.seed)
    if version.imis.model == "click_unet":
        spec, kwargs = "trackeval.demo.baselines:click_unet", {"weights": str(models / IMIS_WEIGHTS)}
    else:
        spec, kwargs = "trackeval.demo.baselines:region_grower", {}
    write_log(data / "imis", spec, out / "imis", cfg.imis, kwargs)
