"""Real chest X-ray material from the ``torchxrayvision==1.5.7`` wheel (Apache-2.0), read without importing it.

``make setup`` installs the wheel with ``--no-deps``: only its data files are used (see the data card in
``docs/pipeline.md``). Nothing here downloads anything.

* :func:`lung_masks`: binary lung masks (0/255 PNG/JPEG) of the V7 Labs annotation of the COVID-19 chest X-ray
  collection (517 masks, no images).
* :func:`nih_findings`: the NIH ChestX-ray14 label table (``Data_Entry_2017_v2020.csv.gz``) as a 0/1 matrix.
* :func:`iu_xray_reports`: the Indiana University chest X-ray reports (``NLMCXR_reports.tgz``, CC BY-NC-ND 4.0),
  findings + impression text per report.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

#: The 14 NIH ChestX-ray14 findings (``Finding Labels`` values besides ``No Finding``).
NIH_FINDINGS: tuple[str, ...] = (
    "Atelectasis",
    "Cardiomegaly",
    "Consolidation",
    "Edema",
    "Effusion",
    "Emphysema",
    "Fibrosis",
    "Hernia",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pleural_Thickening",
    "Pneumonia",
    "Pneumothorax",
)


def data_dir() -> Path:
    """``site-packages/torchxrayvision/data``; raises ``FileNotFoundError`` with the install hint if absent."""
    spec = importlib.util.find_spec("torchxrayvision")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("needs `pip install --no-deps torchxrayvision==1.5.7` (make setup does it)")
    return Path(spec.submodule_search_locations[0]) / "data"


def lung_masks(limit: int | None = None) -> dict[str, np.ndarray]:
    """``{name: bool mask}`` of the first ``limit`` lung masks in archive order (file stem as name)."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(data_dir() / "semantic_masks_v7labs_lungs.zip") as z:
        for name in z.namelist():
            if name.endswith("/"):
                continue
            with Image.open(io.BytesIO(z.read(name))) as img:
                out[Path(name).stem] = np.asarray(img.convert("L")) > 127
            if limit is not None and len(out) >= limit:
                break
    return out


def nih_findings(limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """Image ids and the ``(n_images, 14)`` 0/1 matrix of :data:`NIH_FINDINGS` from the NIH label table."""
    ids, rows = [], []
    with gzip.open(data_dir() / "Data_Entry_2017_v2020.csv.gz", "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            labels = set(row["Finding Labels"].split("|"))
            ids.append(row["Image Index"])
            rows.append([f in labels for f in NIH_FINDINGS])
            if limit is not None and len(ids) >= limit:
                break
    return ids, np.array(rows, dtype=np.int8).reshape(len(ids), len(NIH_FINDINGS))


def iu_xray_reports() -> dict[str, str]:
    """``{report id: "findings impression"}`` of the IU X-ray reports that have findings text, sorted by id."""
    out: dict[str, str] = {}
    with tarfile.open(data_dir() / "NLMCXR_reports.tgz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.endswith(".xml"):
                continue
            root = ET.parse(tar.extractfile(member)).getroot()  # noqa: S314 (packaged, trusted file)
            parts = {a.get("Label"): (a.text or "").strip() for a in root.iter("AbstractText")}
            if parts.get("FINDINGS"):
                out[Path(member.name).stem] = " ".join(p for p in (parts["FINDINGS"], parts.get("IMPRESSION")) if p)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else kv[0]))
