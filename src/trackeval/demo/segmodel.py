"""The demo's trainable model versions: a small MONAI 3D U-Net for the 13 UMD organs, trained on CPU.

Two versions differ in capacity and training length (``SegModelSpec``); both train on the training subjects
of the UMD demo (CT and simulated PET, one network for both modalities) in a few minutes on 2 cores. Weights
are saved as a plain ``state_dict`` (``torch.save``) next to the spec as JSON, and loaded with
``torch.load(..., weights_only=True)``: no pickled code is ever loaded.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.inferers import sliding_window_inference
from monai.networks.nets import UNet
from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.umd.config import UMD_ORGANS

N_CLASSES = len(UMD_ORGANS) + 1


class SegModelSpec(BaseModel):
    """One model version's architecture and training schedule (all from params.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: tuple[int, ...] = (8, 16, 32)
    iterations: int = Field(60, gt=0)
    learning_rate: float = Field(3e-3, gt=0)
    patch: tuple[int, int, int] = (64, 64, 32)
    batch_size: int = Field(2, gt=0)
    seed: int = 0


def normalise(image: np.ndarray, modality: str) -> np.ndarray:
    """Intensity normalisation per modality: CT HU clipped to [-1000, 1000] / 1000; PET SUV / 5."""
    if modality == "ct":
        return np.clip(image, -1000.0, 1000.0).astype(np.float32) / 1000.0
    return image.astype(np.float32) / 5.0


def build_network(spec: SegModelSpec) -> UNet:
    """The U-Net of a spec: one input channel, ``N_CLASSES`` output logits, stride-2 levels."""
    return UNet(
        spatial_dims=3,
        in_channels=1,
        out_channels=N_CLASSES,
        channels=spec.channels,
        strides=(2,) * (len(spec.channels) - 1),
        num_res_units=1,
    )


def load_training_set(manifest: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """(normalised image, label map) pairs of a UMD demo manifest (``image`` column, labels beside it)."""
    pairs = []
    with open(manifest, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            image = np.asarray(nib.load(manifest.parent / row["image"]).get_fdata(dtype=np.float32))
            labels = np.asarray(nib.load(manifest.parent / f"{row['case_id']}.nii.gz").dataobj, dtype=np.int64)
            pairs.append((normalise(image, row["modality"]), labels))
    return pairs


def _random_patch(
    pairs: list[tuple[np.ndarray, np.ndarray]], patch: tuple[int, int, int], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    image, labels = pairs[int(rng.integers(len(pairs)))]
    corner = [int(rng.integers(0, s - p + 1)) for s, p in zip(image.shape, patch, strict=True)]
    box = tuple(slice(c, c + p) for c, p in zip(corner, patch, strict=True))
    return image[box], labels[box]


def train(spec: SegModelSpec, pairs: list[tuple[np.ndarray, np.ndarray]], log_every: int = 20) -> UNet:
    """Train a network with Dice + cross-entropy on random patches; deterministic for a spec and data."""
    from monai.losses import DiceCELoss

    torch.manual_seed(spec.seed)
    rng = np.random.default_rng(spec.seed)
    net = build_network(spec)
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True)
    opt = torch.optim.Adam(net.parameters(), lr=spec.learning_rate)
    net.train()
    start = time.perf_counter()
    for it in range(1, spec.iterations + 1):
        batch = [_random_patch(pairs, spec.patch, rng) for _ in range(spec.batch_size)]
        x = torch.from_numpy(np.stack([b[0] for b in batch])[:, None])
        y = torch.from_numpy(np.stack([b[1] for b in batch])[:, None])
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % log_every == 0 or it == spec.iterations:
            elapsed = time.perf_counter() - start
            eta = elapsed / it * (spec.iterations - it)
            print(f"iteration {it}/{spec.iterations} loss {loss.item():.3f} ({elapsed:.0f} s, ETA {eta:.0f} s)")
    return net.eval()


@torch.no_grad()
def predict(net: UNet, image: np.ndarray, spec: SegModelSpec) -> np.ndarray:
    """Label map (uint8) of a normalised image, by sliding-window inference over ``spec.patch`` windows."""
    x = torch.from_numpy(image[None, None].astype(np.float32))
    logits = sliding_window_inference(x, roi_size=spec.patch, sw_batch_size=4, predictor=net, overlap=0.25)
    return logits.argmax(dim=1)[0].numpy().astype(np.uint8)


def save(net: UNet, spec: SegModelSpec, folder: Path) -> None:
    """``folder/weights.pt`` (state_dict) and ``folder/spec.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), folder / "weights.pt")
    (folder / "spec.json").write_text(json.dumps(spec.model_dump(mode="json"), indent=1) + "\n", encoding="utf-8")


def load(folder: Path) -> tuple[UNet, SegModelSpec]:
    """Rebuild a saved network (``weights_only=True``: tensors only, no pickled code)."""
    spec = SegModelSpec.model_validate_json((folder / "spec.json").read_text(encoding="utf-8"))
    net = build_network(spec)
    net.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
    return net.eval(), spec
