"""IMIS inputs: the IMIS-Bench layout (dataset.json, RGB PNG, sparse CSR .npz labels) or NIfTI pairs + manifest.

IMIS-Bench layout (``GT_DIR/dataset.json``)::

    {"name": "BTCV", "modality": {"0": "ct"}, "labels": {"0": "background", "1": "spleen", ...},
     "region": "abdomen",                                        # optional (trackeval extension)
     "test": [{"image": "image/ABD_001_100.png",
               "label": "label/x___ABD_001_100.(13, 512, 512, 1).npz",
               "region": "abdomen", "modality": "ct"}, ...],      # per-item region/modality optional
     "training": [...]}

The label file is a ``scipy.sparse`` CSR matrix of shape ``(C, H*W)`` with 0/1 values; its dense shape
``(C, H, W, 1)`` is the second-to-last dot-separated part of the file name; channel ``i`` is the target
``labels[str(i + 1)]`` (background removed). The image must have the label's ``H x W``; grey or RGBA PNGs are
converted to RGB. The case id is the image file name without ``.png``.

NIfTI mode (``GT_DIR/manifest.csv``, columns ``case_id,image,label,modality,region``): 2D or 3D image and
integer label map pairs on one grid (paths relative to ``GT_DIR``); targets are ``imis.labels`` (name -> id;
other ids ignored) or, when empty, every id present, named ``label_<id>``.

3D releases (``totalseg-mri``: TotalSegmentator MRI subject folders; ``isles22``: ISLES'22 BIDS) are sliced into
2D cases by :mod:`trackeval.benchmarks.imis.volumes` under ``imis.volumes``. The layout is told from the files
(:data:`LAYOUTS`, in this order; ``--format`` forces one): ``generic`` (dataset.json) and ``nifti-manifest``
(manifest.csv) are trackeval's own layouts, whose digests do not change.

Only non-empty targets are evaluated (as the original). Every error names the file (and case and field).

With ``imis.protocol: imis_bench`` :func:`read_case` returns the image and every target mask resized to
``imis.eval_size x imis.eval_size`` as IMIS-Bench's loader does (no aspect preservation, PIL's nearest-neighbour
for both: pixel-centre sampling, :mod:`trackeval.benchmarks.imis.grid`), keeps the targets non-empty after resizing, and
keeps those targets on the label grid too (``LoadedCase.label_masks``: IMIS-Bench takes Dice there).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.grid import resize_nearest
from trackeval.benchmarks.imis.volumes import (
    ISLES,
    SUBJECT_READERS,
    TOTALSEG,
    VolumeSlice,
    chosen_slices,
    looks_like_isles,
    looks_like_totalseg,
    protocol_digest,
    read_slice,
    subject_areas,
)
from trackeval.errors import ConfigError, InputError
from trackeval.io.files import decode_text
from trackeval.io.hashing import sha256_bytes, sha256_files, sha256_text
from trackeval.io.images import check_npz_members, load_image
from trackeval.io.layouts import Layout, choose, layout_digest
from trackeval.io.limits import check_voxels
from trackeval.io.nifti import check_same_grid, read_bytes_digest, read_image, read_label_map
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.structured import parse_json, read_limited
from trackeval.io.tables import read_csv_rows
from trackeval.results import key_token

DATASET_JSON = "dataset.json"
MANIFEST = "manifest.csv"
_SHAPE_IN_NAME = re.compile(r"\.\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*1\s*\)\.npz\Z")  # \Z: not before a "\n"


@dataclass(frozen=True)
class IMISCase:
    """One image to evaluate. ``targets``: target name -> channel index + 1 (IMIS) or label id (NIfTI)."""

    case_id: str
    image_path: Path
    label_path: Path
    modality: str
    region: str
    targets: dict[str, int]
    layout: str  # "imis", "nifti", or a 3D layout's name ("totalseg-mri", "isles22")
    volume: VolumeSlice | None = None  # 3D layouts: the subject and slice this 2D case is cut from
    subject_id: str | None = None  # the bootstrap cluster (3D layouts: the subject); None = the case itself


@dataclass(frozen=True)
class LoadedCase:
    """An image with its non-empty target masks (bool) and the sha256 of both files.

    ``image`` and ``masks`` are on the label grid, or with ``imis.protocol: imis_bench`` on the ``eval_size``
    grid; then ``label_masks`` holds the same targets on the label grid (where IMIS-Bench takes Dice), else None.
    """

    image: np.ndarray
    masks: dict[str, np.ndarray]
    digest: str
    label_masks: dict[str, np.ndarray] | None = None


#: the IMIS ground-truth layouts, tried in this order
LAYOUTS = (
    Layout("generic", f"IMIS-Bench folder with {DATASET_JSON}", lambda p: (p / DATASET_JSON).is_file(), True),
    Layout("nifti-manifest", f"NIfTI pairs listed in {MANIFEST}", lambda p: (p / MANIFEST).is_file(), True),
    Layout(TOTALSEG, "TotalSegmentator MRI: meta.csv, <subject>/mri.nii.gz, segmentations/", looks_like_totalseg),
    Layout(ISLES, "ISLES'22 BIDS: sub-*/ses-*/dwi/, derivatives/sub-*/ses-*/*_msk.nii.gz", looks_like_isles),
)


@dataclass(frozen=True)
class Dataset:
    """The cases of a ground-truth folder, the layout they were read in and the index digest (a 3D layout's
    through :func:`~trackeval.io.layouts.layout_digest`)."""

    cases: list[IMISCase]
    digest: str
    layout: Layout


def load_dataset(root: Path, cfg: IMISConfig, forced: str | None = None) -> Dataset:
    """Validate ``root`` in its layout (told from the files, or ``forced``: ``--format``): cases + digest."""
    if not root.is_dir():
        raise InputError("ground-truth folder not found", file=str(root))
    layout = choose(root, LAYOUTS, forced)
    if layout.name == "generic":
        cases, digest = _imis_cases(root, cfg)
    elif layout.name == "nifti-manifest":
        cases, digest = _nifti_cases(root, cfg)
    else:
        cases, digest = _volume_cases(root, layout.name, cfg)
    return Dataset(cases, layout_digest(layout, digest), layout)


def load_cases(root: Path, cfg: IMISConfig) -> tuple[list[IMISCase], str]:
    """The cases of ``root`` (layout told from the files) and the index sha256 (see :func:`load_dataset`)."""
    data = load_dataset(root, cfg)
    return data.cases, data.digest


def _volume_cases(root: Path, layout: str, cfg: IMISConfig) -> tuple[list[IMISCase], str]:
    """The 2D cases of a 3D layout's subjects under ``imis.volumes`` and the digest of the protocol, the
    subject list's file and every mask read."""
    vcfg = cfg.volumes
    subjects, meta_digest = SUBJECT_READERS[layout](root, vcfg)
    lines = [f"protocol:{protocol_digest(layout, vcfg)}", f"meta:{meta_digest}"]
    cases: list[IMISCase] = []
    for subject in subjects:
        areas, digests = subject_areas(subject, vcfg.axis)
        lines += [f"{subject.subject_id}:{d}" for d in digests]
        picks = chosen_slices(areas, vcfg)
        for index, names in picks.items():
            ref = VolumeSlice(subject, index, tuple(picks))
            case_id = f"{subject.subject_id}_{vcfg.axis}_{index:04d}"
            targets = {n: k + 1 for k, n in enumerate(names)}
            label = subject.masks[0][1]
            cases.append(
                IMISCase(
                    case_id,
                    subject.image,
                    label,
                    subject.modality,
                    subject.region,
                    targets,
                    layout,
                    ref,
                    subject.subject_id,
                )  # fmt: skip
            )
    if not cases:
        raise InputError(
            f"no slice holds a target under imis.volumes ({len(subjects)} subject(s) read)", file=str(root)
        )
    return cases, sha256_text(*lines)


def _imis_cases(root: Path, cfg: IMISConfig) -> tuple[list[IMISCase], str]:
    """The cases of the ``cfg.split`` list of ``root/dataset.json`` (IMIS layout) and the file's sha256."""
    path = root / DATASET_JSON
    raw = read_limited(path)
    meta = _dataset_meta(raw, path)
    targets = _label_targets(meta, path)
    modality = meta.get("modality", {})
    modality = modality.get("0", "unknown") if isinstance(modality, dict) else modality
    defaults = (key_token(modality, fallback="unknown"), key_token(meta.get("region", "unknown"), fallback="unknown"))
    items = meta.get(cfg.split)
    if not isinstance(items, list) or not items:
        raise InputError(f"missing or empty {cfg.split!r} list (imis.split)", file=str(path), field=cfg.split)
    cases: list[IMISCase] = []
    seen: set[str] = set()
    for n, item in enumerate(items):
        cases.append(_item_case(root, path, f"{cfg.split}[{n}]", item, targets, defaults, seen))
    return cases, sha256_bytes(raw)


def _dataset_meta(raw: bytes, path: Path) -> dict:
    """The JSON object of dataset.json's bytes (UTF-8, a BOM tolerated); :class:`InputError` otherwise."""
    meta = parse_json(decode_text(raw, file=path), file=path)
    if not isinstance(meta, dict):
        raise InputError("top level must be an object", file=str(path))
    return meta


def _label_targets(meta: dict, path: Path) -> dict[str, int]:
    """``{target token: channel + 1}`` from dataset.json's ``labels`` (key ``"0"``, the background, left out).

    Raises:
        InputError: ``labels`` missing, empty or not an object, a key that is not an integer, or two names
            with one token (``field="labels"``).
    """
    labels = meta.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise InputError("missing or empty 'labels' object", file=str(path), field="labels")
    targets: dict[str, int] = {}
    for key, name in labels.items():
        if not str(key).isdigit():
            raise InputError(f"label key {key!r} is not an integer", file=str(path), field="labels")
        if int(key) == 0:
            continue
        token = key_token(name, fallback=f"label_{key}")
        if token in targets:
            raise InputError(f"two labels are both named {token!r}", file=str(path), field="labels")
        targets[token] = int(key)
    return targets


def _item_case(
    root: Path,
    path: Path,
    where: str,
    item: object,
    targets: dict[str, int],
    defaults: tuple[str, str],
    seen: set[str],
) -> IMISCase:
    """The case of one split item (``where``: its place, ``test[3]``), its files resolved inside ``root``.

    ``defaults``: the dataset's (modality, region) tokens for an item that names none; ``seen``: the case ids
    so far, this one added.

    Raises:
        InputError: no ``image``/``label`` path, a bad or duplicate case id, or a listed file not found.
    """
    if not isinstance(item, dict) or not isinstance(item.get("image"), str) or not isinstance(item.get("label"), str):
        raise InputError("each item needs 'image' and 'label' paths", file=str(path), field=where)
    case_id = check_case_id(Path(item["image"]).name.removesuffix(".png"), file=str(path), field=f"{where}.image")
    if case_id in seen:
        raise InputError(f"duplicate image in {where}", file=str(path), case_id=case_id, field=where)
    seen.add(case_id)
    image = resolve_inside(root, item["image"], case_id=case_id)
    label = resolve_inside(root, item["label"], case_id=case_id)
    for p in (image, label):
        if not p.is_file():
            raise InputError("file listed in dataset.json not found", file=str(p), case_id=case_id)
    default_modality, default_region = defaults
    return IMISCase(
        case_id,
        image,
        label,
        key_token(item.get("modality", default_modality), fallback="unknown"),
        key_token(item.get("region", default_region), fallback="unknown"),
        targets,
        "imis",
    )


def _nifti_cases(root: Path, cfg: IMISConfig) -> tuple[list[IMISCase], str]:
    manifest = root / MANIFEST
    rows = read_csv_rows(manifest, required=("case_id", "image", "label", "modality", "region"))
    cases, seen = [], set()
    for line, row in enumerate(rows, start=2):
        case_id = check_case_id(row["case_id"], file=str(manifest))
        if case_id in seen:
            raise InputError(f"duplicate case id on line {line}", file=str(manifest), case_id=case_id, field="case_id")
        seen.add(case_id)
        paths = []
        for col in ("image", "label"):
            p = resolve_inside(root, row[col], case_id=case_id)
            if not row[col] or not p.is_file():
                raise InputError(f"{col} file not found", file=str(p), case_id=case_id, field=col)
            paths.append(p)
        cases.append(
            IMISCase(
                case_id,
                paths[0],
                paths[1],
                key_token(row["modality"], fallback="unknown"),
                key_token(row["region"], fallback="unknown"),
                dict(cfg.labels),
                "nifti",
            )
        )
    return cases, sha256_files(manifest)


def read_case(case: IMISCase, cfg: IMISConfig) -> LoadedCase:
    """Read and validate one case's image and target masks (runs in a worker)."""
    if case.volume is not None:
        image, all_masks, digest = read_slice(case.volume, cfg.volumes, cfg.geometry_tolerance)
        masks, spatial_ndim = {t: all_masks[t] for t in case.targets}, 2
    else:
        image, masks, digest = _read_files(case, cfg)
        spatial_ndim = 2 if case.layout == "imis" else image.ndim
    if cfg.protocol == "imis_bench":
        # the original keeps the targets non-empty after the resize, and scores them on the label grid
        big_image, big = to_eval_grid(image, masks, spatial_ndim, cfg.eval_size, case.case_id)
        kept = {t: m for t, m in big.items() if m.any()}
        return LoadedCase(big_image, kept, digest, {t: masks[t] for t in kept})
    return LoadedCase(image, {t: m for t, m in masks.items() if m.any()}, digest)


def _read_files(case: IMISCase, cfg: IMISConfig) -> tuple[np.ndarray, dict[str, np.ndarray], str]:
    """A 2D-layout case's image, masks and the sha256 over both files' digests (IMIS PNG + .npz, or NIfTI)."""
    if case.layout == "imis":
        image, image_digest = _read_png(case)
        masks, label_digest = _read_sparse_label(case, image.shape[:2])
    else:
        image, masks, image_digest, label_digest = _read_nifti_pair(case, cfg)
    return image, masks, sha256_text(f"{image_digest}:{label_digest}")


def to_eval_grid(
    image: np.ndarray, masks: dict[str, np.ndarray], spatial_ndim: int, size: int, case_id: str
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``imis.protocol: imis_bench``: the image and masks on the ``size x size`` grid (2D inputs only)."""
    if spatial_ndim != 2:
        raise ConfigError(
            f"imis.protocol=imis_bench takes 2D images only; case {case_id} is {spatial_ndim}D "
            "(use imis.protocol=native)"
        )
    return resize_nearest(image, size), {t: resize_nearest(m, size) for t, m in masks.items()}


def _read_png(case: IMISCase) -> tuple[np.ndarray, str]:
    raw, digest = read_bytes_digest(case.image_path, case_id=case.case_id)
    with load_image(raw, file=str(case.image_path), case_id=case.case_id) as img:
        rgb = np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
    return rgb, digest


def parse_label_shape(path: Path, case_id: str | None = None) -> tuple[int, int, int]:
    """``(C, H, W)`` from a label file name ending in ``.(C, H, W, 1).npz``; InputError otherwise."""
    m = _SHAPE_IN_NAME.search(path.name)
    if m is None:
        raise InputError(
            "label file name must end in '.(C, H, W, 1).npz' (the dense shape)", file=str(path), case_id=case_id
        )
    c, h, w = (int(g) for g in m.groups())
    return c, h, w


def _read_sparse_label(case: IMISCase, image_hw: tuple[int, int]) -> tuple[dict[str, np.ndarray], str]:
    """The one-hot masks of a CSR ``.npz``: sizes (the file name's and every member's declared shape) are checked
    before anything is decoded; the 0/1 check runs on the stored values only, the dense masks are bool."""
    import scipy.sparse  # here, not at import: every CLI start loads this module (IMIS is registered)

    path = case.label_path
    where = {"file": str(path), "case_id": case.case_id}
    c, h, w = parse_label_shape(path, case.case_id)
    check_voxels((c, h, w), field="shape", **where)
    raw, digest = read_bytes_digest(path, case_id=case.case_id)
    check_npz_members(raw, what="a scipy.sparse .npz matrix", **where)
    try:
        matrix = scipy.sparse.load_npz(io.BytesIO(raw))
    except Exception as exc:  # zipfile, pickle and KeyError variants for damaged or foreign .npz files
        raise InputError(f"not a scipy.sparse .npz matrix: {type(exc).__name__}: {exc}", **where) from exc
    if matrix.shape != (c, h * w):
        raise InputError(
            f"sparse matrix has shape {matrix.shape}, the file name says {(c, h, w, 1)} -> {(c, h * w)}",
            field="shape",
            **where,
        )
    if c > len(case.targets):
        raise InputError(f"{c} channels but only {len(case.targets)} labels in dataset.json", field="labels", **where)
    if (h, w) != image_hw:
        raise InputError(
            f"label grid {(h, w)} differs from the image size {image_hw} ({case.image_path})", field="shape", **where
        )
    matrix = scipy.sparse.csr_matrix(matrix)
    matrix.sum_duplicates()
    if not np.isin(matrix.data, (0, 1)).all():
        raise InputError("label values must be 0 or 1 (one-hot channels)", field="values", **where)
    masks = matrix.astype(bool).toarray().reshape(c, h, w)
    return {name: masks[i - 1] for name, i in case.targets.items() if i <= c}, digest


def _read_nifti_pair(case: IMISCase, cfg: IMISConfig) -> tuple[np.ndarray, dict[str, np.ndarray], str, str]:
    label = read_label_map(case.label_path, case_id=case.case_id)
    image = read_image(case.image_path, case_id=case.case_id)
    data = image.array
    if data.ndim == label.array.ndim + 1 and data.shape[-1] == 1:
        data = data[..., 0]
    check_same_grid(label, replace(image, array=data), case_id=case.case_id, tolerance=cfg.geometry_tolerance)
    targets = case.targets or {f"label_{int(v)}": int(v) for v in np.unique(label.array) if v != 0}
    masks = {name: label.array == i for name, i in targets.items()}
    return data, masks, image.digest, label.digest
