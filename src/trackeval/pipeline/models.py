"""``trackeval pipeline train`` and ``trackeval pipeline predict``: one model version's networks and outputs.

A version (``pipeline.versions.<v>``) is a UMD 3D U-Net (:mod:`trackeval.demo.segmodel`; its predictions feed
UMD on CT and PET and, projected to 2D, the X-ray ``seg`` task), an interactive model for IMIS (the classical
region grower or the click U-Net of :mod:`trackeval.demo.baselines`, run through the reference runner
into an offline log), and two documented baselines where no trainable model fits the demo data: 3D-MIR
rankings (:mod:`trackeval.demo.mir3d_baselines`; no CT volumes ship) and X-ray classification scores
(:func:`simulated_scores`; the NIH table has labels but no images in any registry package).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from trackeval.benchmarks.imis.runner import write_log
from trackeval.config import EvalConfig
from trackeval.demo import segmodel
from trackeval.demo.baselines import train_click_unet
from trackeval.demo.mir3d_baselines import write_baseline
from trackeval.pipeline.params import VersionSpec
from trackeval.pipeline.prepare import project_labels

IMIS_WEIGHTS = "imis_unet.pt"
IMIS_SPEC = "imis.json"


def train(version: VersionSpec, prepared: Path, data: Path, out: Path) -> None:
    """Train the version's networks into ``out``: ``umd/`` (weights + spec) and, for the click U-Net,
    ``imis_unet.pt``; ``imis.json`` records the interactive model either way."""
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
