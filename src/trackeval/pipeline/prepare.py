"""``trackeval pipeline prepare``: the per-benchmark demo sets built from ``data/`` (see the README data card).

* ``umd/``: :func:`trackeval.demo.umd_demo.build_umd_demo` on the stored CT + labels (real CT, simulated PET,
  seeded subject warps), reduced ``pipeline.umd.factor`` times; ``gt/`` (test) and ``train/`` manifests.
* ``xray/seg/``: one chest radiograph per UMD test subject: a DRR (the mean attenuation along the
  anterior-posterior axis of its real CT) and the projected lung (1) and heart (2, drawn over the lung) masks as
  the truth; ``label_names.csv``.
* ``xray/cls/labels.csv``: the first ``pipeline.xray.cls_images`` rows of the real NIH label table.

3D-MIR and IMIS need no preparation: their stages read ``data/mir3d`` and ``data/imis`` directly.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.demo.umd_demo import build_umd_demo
from trackeval.pipeline.params import PipelineParams

#: X-ray seg classes: pixel value -> name (heart is drawn over the lung, as it appears on a frontal film).
XRAY_CLASSES: dict[int, str] = {1: "lung", 2: "heart"}
_LUNG, _HEART = UMD_ORGANS.index("lung") + 1, UMD_ORGANS.index("heart") + 1


def radiograph(ct_hu: np.ndarray) -> np.ndarray:
    """8-bit DRR of a LAS CT volume: mean of (HU + 1000) along y (anterior-posterior), superior at the top."""
    atten = np.clip(ct_hu.astype(np.float64) + 1000.0, 0.0, None).mean(axis=1)
    img = atten / max(float(atten.max()), 1.0) * 255.0
    return np.round(img.T[::-1]).astype(np.uint8)


def project_labels(labels: np.ndarray) -> np.ndarray:
    """2D X-ray label map of a 3D UMD label map: lung = 1 where any lung voxel projects, heart = 2 over it."""
    lung = (labels == _LUNG).any(axis=1)
    heart = (labels == _HEART).any(axis=1)
    out = np.where(heart, 2, np.where(lung, 1, 0)).astype(np.uint8)
    return np.ascontiguousarray(out.T[::-1])


def _write_seg_truth(umd: Path, out: Path) -> None:
    (out / "gt").mkdir(parents=True, exist_ok=True)
    (out / "images").mkdir(parents=True, exist_ok=True)
    with open(umd / "gt" / "manifest.csv", newline="", encoding="utf-8") as f:
        cases = [row for row in csv.DictReader(f) if row["modality"] == "ct"]
    for row in cases:
        ct = np.asarray(nib.load(umd / "gt" / row["image"]).dataobj)
        labels = np.asarray(nib.load(umd / "gt" / f"{row['case_id']}.nii.gz").dataobj)
        Image.fromarray(radiograph(ct)).save(out / "images" / f"{row['subject_id']}.png")
        Image.fromarray(project_labels(labels)).save(out / "gt" / f"{row['subject_id']}.png")
    lines = "id,name\n" + "".join(f"{i},{name}\n" for i, name in XRAY_CLASSES.items())
    (out / "label_names.csv").write_text(lines, encoding="utf-8")


def _write_cls_labels(nih: Path, out: Path, n_images: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(nih, encoding="utf-8") as f:
        lines = f.readlines()[: n_images + 1]
    out.write_text("".join(lines), encoding="utf-8")


def prepare(data: Path, out: Path, params: PipelineParams) -> None:
    """Build ``out/umd`` and ``out/xray`` from ``data`` (cleared first, so stale files never survive)."""
    if out.exists():
        shutil.rmtree(out)
    u = params.umd
    ct_img = nib.load(data / "umd" / "ct.nii.gz")
    ct = np.asarray(ct_img.dataobj, dtype=np.float32)
    labels = np.asarray(nib.load(data / "umd" / "labels.nii.gz").dataobj, dtype=np.uint8)
    build_umd_demo(out / "umd", (ct, labels, ct_img.affine), u.n_train, u.n_test, u.seed, u.factor)
    _write_seg_truth(out / "umd", out / "xray" / "seg")
    _write_cls_labels(data / "xray" / "nih_labels.csv", out / "xray" / "cls" / "labels.csv", params.xray.cls_images)
