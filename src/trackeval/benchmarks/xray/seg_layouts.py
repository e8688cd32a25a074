"""The native layouts of ``xray/seg``: overlapping classes, one binary mask per class and image.

Each layout is read into a :class:`Source`: the class names as the layout spells them and, per image, a
:class:`CaseRef` that a worker loads into a ``(classes, height, width)`` boolean stack (with the digest of what it
read). Decoding lives in :mod:`trackeval.io` (:mod:`~trackeval.io.masks`, :mod:`~trackeval.io.rle`,
:mod:`~trackeval.io.polygons`); this module knows where each dataset keeps what.

* ``binary-folders``: ``<root>/<class>/<image>.png`` (or ``.gif``), one folder per class, the folder name is the
  class name; every class folder holds a file for every image (an empty mask is an all-zero file).
* ``jsrt-scr``: the SCR masks of JSRT as distributed, ``[fold]/masks/<structure>/<image>.gif`` with the
  structures ``heart``, ``left clavicle``, ``left lung``, ``right clavicle``, ``right lung`` (1024 x 1024; the
  clavicles overlap the lungs). The ``masks`` folder or the fold folder holding it may be given.
* ``paxray``: PAX-Ray / PAX-Ray++ ``paxray.json`` (``label_dict`` ``{"0": name, ...}`` and the splits
  ``train`` / ``val`` / ``test``, lists of ``{"image", "target"}`` paths relative to the JSON's folder), each target
  a ``.npy`` C x H x W binary stack in ``label_dict`` order; the ``test`` split is evaluated. Predictions: a
  folder of ``<image>.npy`` stacks in the same channel order (what the PAX-Ray ``inference.py`` writes).
* ``vindr-ribcxr``: VinDr-RibCXR ``Vindr_RibCXR_<split>_mask.json`` as ``pandas.read_json`` reads it: columns
  ``img`` and ``R1`` .. ``R10``, ``L1`` .. ``L10`` (``{"<row>": value}`` per column, or a list of records), each
  rib a list of ``{"x", "y"}`` points or ``"None"``; rasterised at the image's size (read from the header of the
  ``img`` file, found from the JSON's folder or one of its parents) by the pixel-centre rule of
  :mod:`trackeval.io.polygons`. Predictions in the same layout are rasterised at the truth's size.
* ``siim-rle``: SIIM-ACR ``train-rle.csv`` (header ``ImageId, EncodedPixels``) or a submission
  (``ImageId,EncodedPixels``): relative column-major RLE of 1024 x 1024 masks (:mod:`trackeval.io.rle`), the rows
  of one image united, ``-1`` the empty mask; one class, ``pneumothorax``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import open_regular, read_bytes, read_open
from trackeval.io.images import image_size
from trackeval.io.layouts import Layout
from trackeval.io.limits import check_vertices, check_voxels
from trackeval.io.masks import read_mask_image, read_mask_stack
from trackeval.io.paths import check_case_id, resolve_inside
from trackeval.io.polygons import fill_polygon
from trackeval.io.rle import decode_relative_rle
from trackeval.io.structured import read_json
from trackeval.io.tables import read_csv_rows
from trackeval.results import sha256_text

#: the SCR structures, as its folders are named
SCR_STRUCTURES = ("heart", "left clavicle", "left lung", "right clavicle", "right lung")
#: the VinDr-RibCXR rib columns, in the order of its loader
VINDR_RIBS = tuple(f"R{i}" for i in range(1, 11)) + tuple(f"L{i}" for i in range(1, 11))
#: the SIIM-ACR class and mask size (its images are 1024 x 1024; the RLE does not carry the size)
SIIM_CLASS = "pneumothorax"
SIIM_SHAPE = (1024, 1024)
SIIM_COLUMNS = ("ImageId", "EncodedPixels")
#: the PAX-Ray split evaluated
PAXRAY_SPLIT = "test"
PAXRAY_JSON = "paxray.json"
_FOLDER_SUFFIXES = (".png", ".gif")
_HEADER_BYTES = 4096


class CaseRef(Protocol):
    """Where one image's masks are (``where``: the file to name in messages); :meth:`load` runs in a worker."""

    @property
    def where(self) -> str: ...

    def load(self, case_id: str, shape: tuple[int, int] | None) -> tuple[np.ndarray, str]:
        """The ``(classes, height, width)`` boolean stack and a digest of what was read; ``shape``: the truth's
        ``(height, width)`` for a prediction (None when loading the truth)."""
        ...


@dataclass(frozen=True)
class FolderCase:
    """One image file per class."""

    files: tuple[Path, ...]

    @property
    def where(self) -> str:
        return str(self.files[0])

    def load(self, case_id: str, shape: tuple[int, int] | None) -> tuple[np.ndarray, str]:
        masks, digests = [], []
        for path in self.files:
            mask, digest = read_mask_image(path, case_id=case_id)
            if masks and mask.shape != masks[0].shape:
                raise InputError(
                    f"mask size {mask.shape} differs from {masks[0].shape} ({self.files[0]})",
                    file=str(path),
                    case_id=case_id,
                    field="dim",
                )
            masks.append(mask)
            digests.append(digest)
        return np.stack(masks), sha256_text(*digests)


@dataclass(frozen=True)
class StackCase:
    """One ``.npy`` C x H x W stack."""

    file: Path

    @property
    def where(self) -> str:
        return str(self.file)

    def load(self, case_id: str, shape: tuple[int, int] | None) -> tuple[np.ndarray, str]:
        return read_mask_stack(self.file, case_id=case_id)


@dataclass(frozen=True)
class RleCase:
    """The SIIM-ACR rows of one image (united)."""

    rows: tuple[str, ...]
    file: str

    @property
    def where(self) -> str:
        return self.file

    def load(self, case_id: str, shape: tuple[int, int] | None) -> tuple[np.ndarray, str]:
        mask = np.zeros(SIIM_SHAPE, dtype=bool)
        for row in self.rows:
            mask |= decode_relative_rle(row, SIIM_SHAPE, file=self.file, case_id=case_id)
        return mask[None], sha256_text(*self.rows)


@dataclass(frozen=True)
class PolygonCase:
    """One polygon (or None) per class; ``image``: the file whose header gives the size (truth only)."""

    polygons: tuple[tuple[tuple[float, float], ...] | None, ...]
    file: str
    image: Path | None

    @property
    def where(self) -> str:
        return self.file

    def load(self, case_id: str, shape: tuple[int, int] | None) -> tuple[np.ndarray, str]:
        if self.image is not None:
            raw = read_bytes(self.image, case_id=case_id)
            # the size a header declares is checked for the whole stack before anything is allocated
            width, height = image_size(raw, file=str(self.image), case_id=case_id, planes=len(self.polygons))
        elif shape is not None:
            height, width = shape
            check_voxels((len(self.polygons), height, width), file=self.file, case_id=case_id, field="size")
        else:
            raise InputError("no image size for the polygons", file=self.file, case_id=case_id, field="img")
        stack = np.zeros((len(self.polygons), height, width), dtype=bool)
        for k, poly in enumerate(self.polygons):
            if poly is not None:
                stack[k] = fill_polygon(np.array(poly, dtype=np.float64), height, width)
        return stack, sha256_text(json.dumps(self.polygons), f"{height}x{width}")


@dataclass(frozen=True)
class Source:
    """One side (truth or predictions) read in one layout.

    ``names``: the class names as the layout spells them (``()``: unnamed channels, the truth's order);
    ``cases``: ``{case id: CaseRef}`` in file order; ``pattern``: how a case is found, ``{}`` standing for its id
    (for the missing-prediction messages); ``path``: what was given.
    """

    layout: str
    path: Path
    names: tuple[str, ...]
    cases: dict[str, CaseRef]
    pattern: str

    def expected(self, case_id: str) -> str:
        """Where the case ``case_id`` is looked for (its id in :attr:`pattern`)."""
        before, _, after = self.pattern.rpartition("{}")
        return f"{before}{case_id}{after}"


def _stem(name: str) -> str:
    """The image id of a path as the datasets' loaders take it: the file name without its last suffix."""
    return PurePosixPath(name.replace("\\", "/")).stem


def _add_case(cases: dict[str, Any], case_id: str, ref: Any, *, file: str) -> None:
    check_case_id(case_id, file=file)
    if case_id in cases:
        raise InputError("two entries for one image", file=file, case_id=case_id)
    cases[case_id] = ref


# ---------------------------------------------------------------- class folders (binary-folders, jsrt-scr)


def _visible_dirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _mask_files(folder: Path, suffixes: tuple[str, ...]) -> dict[str, Path]:
    """``{image id: file}`` of the mask files directly in ``folder``."""
    out: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in suffixes:
            _add_case(out, p.name[: -len(p.suffix)], resolve_inside(folder, p.name, case_id=p.stem), file=str(p))
    return out


def _scr_root(path: Path) -> Path:
    return path / "masks" if (path / "masks").is_dir() else path


def read_class_folders(path: Path, layout: str = "binary-folders") -> Source:
    """A :class:`Source` from one folder per class (``jsrt-scr``: under ``masks/`` when given its parent).

    Raises:
        InputError: no class folder with masks, or a class folder without the file of an image another class
            folder has (naming the file expected).
    """
    root = _scr_root(path) if layout == "jsrt-scr" else path
    folders = [d for d in _visible_dirs(root) if _mask_files(d, _FOLDER_SUFFIXES)]
    if not folders:
        raise InputError("no class folder with mask files (.png, .gif)", file=str(root), field="format")
    files = {d.name: _mask_files(d, _FOLDER_SUFFIXES) for d in folders}
    ids = list(dict.fromkeys(cid for per_class in files.values() for cid in per_class))
    suffix = next(iter(files[folders[0].name].values())).suffix
    cases: dict[str, CaseRef] = {}
    for cid in ids:
        for name, per_class in files.items():
            if cid not in per_class:
                raise InputError(
                    f"class folder {name!r} has no mask for this image (every class folder needs one)",
                    file=str(root / name / f"{cid}{suffix}"),
                    case_id=cid,
                )
        cases[cid] = FolderCase(tuple(files[name][cid] for name in files))
    return Source(layout, path, tuple(files), cases, f"{folders[0].name}/{{}}{suffix}")


def _looks_like_class_folders(path: Path, structures: tuple[str, ...] | None) -> bool:
    if not path.is_dir() or any(p.is_file() and p.suffix.lower() in (".png", ".nii", ".gz") for p in path.iterdir()):
        return False
    root = _scr_root(path) if structures else path
    folders = [d for d in _visible_dirs(root) if _mask_files(d, (".gif",) if structures else _FOLDER_SUFFIXES)]
    return bool(folders) and (structures is None or all(d.name in structures for d in folders))


# ---------------------------------------------------------------- PAX-Ray


def _paxray_json(path: Path) -> Path:
    return path / PAXRAY_JSON if path.is_dir() else path


def _paxray_names(data: Any, file: str) -> tuple[str, ...]:
    """``label_dict`` values in index order (keys ``"0"`` .. ``"C-1"``)."""
    labels = data.get("label_dict") if isinstance(data, dict) else None
    if not isinstance(labels, dict) or not labels:
        raise InputError("no label_dict object of class names", file=file, field="label_dict")
    keys = [str(i) for i in range(len(labels))]
    if sorted(labels) != sorted(keys):
        raise InputError(f"label_dict keys must be 0..{len(labels) - 1}", file=file, field="label_dict")
    return tuple(str(labels[k]) for k in keys)


def read_paxray(path: Path) -> Source:
    """A :class:`Source` from ``paxray.json`` (or the folder holding it): the ``test`` split's entries with a
    target.

    Raises:
        InputError: malformed JSON, no ``label_dict``, no ``test`` list, an entry without ``image``.
    """
    file = _paxray_json(path)
    data = read_json(file)
    names = _paxray_names(data, str(file))
    split = data.get(PAXRAY_SPLIT)
    if not isinstance(split, list):
        raise InputError(f"no {PAXRAY_SPLIT!r} list of {{image, target}} entries", file=str(file), field=PAXRAY_SPLIT)
    cases: dict[str, CaseRef] = {}
    for n, entry in enumerate(split):
        if not isinstance(entry, dict) or not isinstance(entry.get("image"), str):
            raise InputError(f"{PAXRAY_SPLIT} entry {n} has no image path", file=str(file), field="image")
        target = entry.get("target")
        if target is None:  # an unlabelled image: the PAX-Ray loader leaves it out of the supervised set too
            continue
        cid = _stem(entry["image"])
        _add_case(cases, cid, StackCase(resolve_inside(file.parent, str(target), case_id=cid)), file=str(file))
    return Source("paxray", path, names, cases, "{}.npy")


def read_npy_folder(path: Path) -> Source:
    """Predictions as ``<image>.npy`` stacks in the truth's channel order."""
    cases: dict[str, CaseRef] = {}
    for p in sorted(path.iterdir()):
        if p.is_file() and p.name.lower().endswith(".npy"):
            _add_case(cases, p.name[:-4], StackCase(resolve_inside(path, p.name, case_id=p.name[:-4])), file=str(p))
    return Source("paxray", path, (), cases, "{}.npy")


def _has_label_dict(path: Path) -> bool:
    file = _paxray_json(path)
    if not file.is_file() or file.suffix.lower() != ".json":
        return False
    data = read_json(file)
    return isinstance(data, dict) and "label_dict" in data


# ---------------------------------------------------------------- VinDr-RibCXR


def _records(data: Any, file: str) -> list[dict[str, Any]]:
    """The rows of a ``pandas.read_json`` table: a list of records, or ``{column: {row: value}}`` /
    ``{column: [values]}`` (rows in the order of the ``img`` column)."""
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    if not isinstance(data, dict) or "img" not in data:
        raise InputError("not a table with an img column", file=file, field="img")
    columns = {k: dict(enumerate(v)) if isinstance(v, list) else v for k, v in data.items()}
    if not all(isinstance(v, dict) for v in columns.values()):
        raise InputError("columns must be {row: value} objects or lists", file=file, field="img")
    return [{k: col.get(row, col.get(str(row))) for k, col in columns.items()} for row in columns["img"]]


def _polygon(
    value: Any, *, file: str, case_id: str, field: str, total: list[int]
) -> tuple[tuple[float, float], ...] | None:
    """A rib's points as ``((x, y), ...)``; ``"None"`` or null: no polygon. ``total``: the vertices of the file
    so far (one-element list), both bounded (:func:`~trackeval.io.limits.check_vertices`) before the points are
    read."""
    if value is None or value == "None":
        return None
    if not isinstance(value, list):
        raise InputError(
            f"expected a list of {{x, y}} points or 'None', got {value!r:.40}", file=file, case_id=case_id, field=field
        )
    total[0] += len(value)
    check_vertices(len(value), total[0], file=file, case_id=case_id, field=field)
    points = []
    for pt in value:
        x, y = (pt.get("x"), pt.get("y")) if isinstance(pt, dict) else (None, None)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (x, y)):
            raise InputError(f"point {pt!r:.40} is not {{x, y}} numbers", file=file, case_id=case_id, field=field)
        points.append((float(x), float(y)))
    return tuple(points)


def _find_image(file: Path, img: str, case_id: str) -> Path:
    """The ``img`` file, relative to the JSON's folder or one of its parents (nearest first; the release's
    ``Data/`` folder matches the paths' ``data/`` prefix whatever its case).

    Raises:
        InputError: none of them holds it (naming the JSON and the path)."""
    parts = PurePosixPath(img.replace("\\", "/")).parts
    for base in (file.parent, *file.parent.parents):
        for first in dict.fromkeys((parts[0], parts[0].lower(), parts[0].capitalize())):
            candidate = base.joinpath(first, *parts[1:])
            if candidate.is_file():
                return resolve_inside(base, str(PurePosixPath(first, *parts[1:])), case_id=case_id)
    raise InputError(
        f"image {img!r} not found next to the JSON or above it", file=str(file), case_id=case_id, field="img"
    )


def read_vindr(path: Path, *, images: bool = True) -> Source:
    """A :class:`Source` from a VinDr-RibCXR JSON; ``images``: find each image for its size (truth).

    Raises:
        InputError: not the table, a missing rib column, a malformed rib, an image not found.
    """
    file = str(path)
    rows = _records(read_json(path), file)
    missing = [c for c in ("img", *VINDR_RIBS) if rows and c not in rows[0]]
    if missing or not rows:
        raise InputError(f"missing column(s) {missing or ['img']}", file=file, field=(missing or ["img"])[0])
    cases: dict[str, CaseRef] = {}
    total = [0]
    for row in rows:
        if not isinstance(row.get("img"), str):
            raise InputError(f"img {row.get('img')!r} is not a path", file=file, field="img")
        cid = _stem(row["img"])
        polys = tuple(_polygon(row.get(r), file=file, case_id=cid, field=r, total=total) for r in VINDR_RIBS)
        image = _find_image(path, row["img"], cid) if images else None
        _add_case(cases, cid, PolygonCase(polys, file, image), file=file)
    return Source("vindr-ribcxr", path, VINDR_RIBS, cases, "img .../{}.png")


def _is_vindr(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    data = read_json(path)
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and "img" in first and "R1" in first


# ---------------------------------------------------------------- SIIM-ACR


def read_siim(path: Path) -> Source:
    """A :class:`Source` from a SIIM-ACR RLE CSV (the rows of an image kept in file order, united on load)."""
    rows = read_csv_rows(path, required=SIIM_COLUMNS)
    grouped: dict[str, list[str]] = {}
    for row in rows:
        cid = check_case_id(row["ImageId"], file=str(path), field="ImageId")
        grouped.setdefault(cid, []).append(row["EncodedPixels"])
    cases: dict[str, CaseRef] = {cid: RleCase(tuple(v), str(path)) for cid, v in grouped.items()}
    return Source("siim-rle", path, (SIIM_CLASS,), cases, "ImageId {}")


def _is_siim(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() != ".csv":
        return False
    with open_regular(path) as f:
        head = read_open(f, path, size=_HEADER_BYTES).decode("utf-8-sig", errors="replace")
    header = [h.strip() for h in head.splitlines()[0].split(",")] if head.strip() else []
    return all(c in header for c in SIIM_COLUMNS)


# ---------------------------------------------------------------- the layouts

#: the ground truth's native layouts, in the order they are tried (the generic label maps come after them)
TRUTH_LAYOUTS: tuple[tuple[Layout, Callable[[Path], Source]], ...] = (
    (Layout("paxray", f"{PAXRAY_JSON} with a label_dict (or its folder)", _has_label_dict), read_paxray),
    (Layout("siim-rle", "CSV with ImageId and EncodedPixels columns", _is_siim), read_siim),
    (Layout("vindr-ribcxr", "JSON table with img and R1..R10, L1..L10 columns", _is_vindr), read_vindr),
    (
        Layout(
            "jsrt-scr",
            "[masks/]<structure>/<image>.gif SCR folders",
            lambda p: _looks_like_class_folders(p, SCR_STRUCTURES),
        ),
        lambda p: read_class_folders(p, "jsrt-scr"),
    ),
    (
        Layout("binary-folders", "<class>/<image>.png folders", lambda p: _looks_like_class_folders(p, None)),
        read_class_folders,
    ),
)


def _has_npy(path: Path) -> bool:
    return path.is_dir() and any(p.name.lower().endswith(".npy") for p in path.iterdir())


#: the predictions' layouts (any may go with any native truth layout whose classes it names)
PREDICTION_LAYOUTS: tuple[tuple[Layout, Callable[[Path], Source]], ...] = (
    (Layout("paxray", "folder of <image>.npy C x H x W stacks", _has_npy), read_npy_folder),
    TRUTH_LAYOUTS[1],
    (TRUTH_LAYOUTS[2][0], lambda p: read_vindr(p, images=False)),
    TRUTH_LAYOUTS[3],
    TRUTH_LAYOUTS[4],
)
