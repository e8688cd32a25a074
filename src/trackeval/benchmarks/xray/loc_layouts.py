"""Native ground-truth and prediction layouts of ``xray/loc``, converted to the COCO structures the task scores.

* ``yolo`` (Ultralytics YOLOv5/v8/11, Roboflow exports, e.g. the bone-fracture sets): ``--ground-truth`` is a
  ``data.yaml`` (``names`` a list or ``{index: name}``; ``train`` / ``val`` / ``test`` image folders, relative to
  ``path`` or to the yaml's folder, a leading ``../`` dropped when the folder is not found, as Ultralytics
  does for Roboflow exports) whose split ``xray.loc.split`` is read, or a split folder (``images/`` +
  ``labels/``, names from the ``data.yaml`` in it or its parent). The labels folder is the images folder with
  its last ``images`` component replaced by ``labels``; ``labels/<stem>.txt`` holds one object per line,
  ``cls xc yc w h`` normalised to [0, 1] (a polygon line ``cls x1 y1 x2 y2 ...`` is its bounding box); an image
  without a label file has no object. Pixel sizes come from ``sizes.csv`` beside ``images/`` (``image,width,
  height``; ``image`` the file name or stem; its rows are then the image set) or else each image's header
  (Pillow reads the size without decoding pixels). Image ids are the file stems, category ids the class
  indices. Predictions: the ``labels/`` folder of ``yolo val --save-txt --save-conf`` (``cls xc yc w h conf``
  per line, normalised; a file per image with detections) or a COCO results list with those ids.
* ``ms-cxr`` (MS-CXR ``MS_CXR_Local_Alignment_v1.1.0.csv``: ``dicom_id, category_name, label_text, path, x, y,
  w, h, image_width, image_height, split``; boxes in pixels): one truth box per row, the rows of the
  ``xray.loc.split`` split (every row when the file has no ``split`` column, v1.0.0, or the split is ``all``).
  A phrase is one ``(dicom_id, label_text)`` pair; its region is the union of its rows' boxes. Predictions: a
  CSV with ``dicom_id, label_text, x, y, w, h`` (several rows = several boxes of one phrase) and optionally
  ``score`` (then each row is also a detection of the phrase's category, for mAP).
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackeval.errors import InputError
from trackeval.io.files import decode_text, open_regular, read_bytes, read_open
from trackeval.io.images import image_size
from trackeval.io.structured import read_text_limited, read_yaml
from trackeval.io.tables import read_csv_rows
from trackeval.results import sha256_text

#: image suffixes Ultralytics reads (its IMG_FORMATS)
IMAGE_SUFFIXES = frozenset({".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".pfm", ".heic"})
#: the MS-CXR columns a truth file must have; a prediction file needs the same less ``category_name``
MS_CXR_COLUMNS = ("dicom_id", "category_name", "label_text", "x", "y", "w", "h")
MS_CXR_PRED_COLUMNS = ("dicom_id", "label_text", "x", "y", "w", "h")
_HEAD_BYTES = 1 << 16
_YAML_SPLIT = {"train": "train", "val": "val", "test": "test"}


@dataclass
class Phrase:
    """One MS-CXR phrase: its image, its position among the image's phrases, text, category and truth boxes."""

    image_id: str
    index: int
    text: str
    category_id: int
    boxes: list[list[float]] = field(default_factory=list)


@dataclass
class LocTruth:
    """Ground truth in the task's COCO structures: sorted image ids, ``{category id: name}`` (tokens are made by
    the task), annotations (``id, image_id, category_id, bbox`` in pixels), the MS-CXR phrases (empty for
    YOLO), the images' pixel sizes ``{image id: (width, height)}`` (YOLO: from the image headers; MS-CXR: its
    ``image_width``/``image_height`` columns) and the digest of what was read."""

    images: list[Any]
    names: dict[Any, str]
    anns: list[dict[str, Any]]
    digest: str
    phrases: list[Phrase] = field(default_factory=list)
    sizes: dict[str, tuple[float, float]] = field(default_factory=dict)


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _header_line(path: Path) -> list[str]:
    """The first line of ``path`` (at most 64 KiB read) as stripped comma-separated names."""
    with open_regular(path) as f:
        head = read_open(f, path, size=_HEAD_BYTES)
    first = decode_text(head.split(b"\n", 1)[0], file=path)
    return [c.strip().strip('"') for c in first.split(",")]


def is_ms_cxr(path: Path, columns: tuple[str, ...] = MS_CXR_COLUMNS) -> bool:
    """A file whose CSV header holds ``columns``."""
    return path.is_file() and set(columns) <= set(_header_line(path))


def is_yolo(path: Path) -> bool:
    """A ``.yaml`` / ``.yml`` file, or a folder holding ``labels/`` or ``images/``."""
    if path.is_file():
        return path.suffix.lower() in {".yaml", ".yml"}
    return path.is_dir() and ((path / "labels").is_dir() or (path / "images").is_dir())


def is_yolo_predictions(path: Path) -> bool:
    """A folder (of ``<stem>.txt`` files)."""
    return path.is_dir()


# ---------------------------------------------------------------- YOLO


def _read_yaml(path: Path) -> dict[str, Any]:
    doc = read_yaml(path)
    if not isinstance(doc, dict):
        raise InputError("data.yaml must be a mapping", file=str(path))
    return doc


def _names(doc: dict[str, Any], file: Path) -> dict[int, str]:
    """``names`` of a data.yaml: a list (index = position) or ``{index: name}``."""
    names = doc.get("names")
    if isinstance(names, list) and names:
        return {i: str(n) for i, n in enumerate(names)}
    if isinstance(names, dict) and names and all(isinstance(k, int) and not isinstance(k, bool) for k in names):
        return {k: str(v) for k, v in sorted(names.items())}
    raise InputError("data.yaml needs 'names': a list or {index: name}", file=str(file), field="names")


def _split_images(doc: dict[str, Any], file: Path, split: str) -> Path:
    """The image folder of ``split`` in a data.yaml, resolved as Ultralytics does."""
    if split not in _YAML_SPLIT:
        raise InputError(f"xray.loc.split={split!r} needs a split folder as --ground-truth", file=str(file))
    entry = doc.get(_YAML_SPLIT[split])
    if not isinstance(entry, str) or not entry:
        raise InputError(f"data.yaml has no {split!r} image folder (a path string)", file=str(file), field=split)
    base = file.parent / str(doc.get("path") or "")
    folder = base / entry
    if not folder.is_dir() and entry.startswith("../"):
        folder = base / entry[3:]
    if not folder.is_dir():
        raise InputError(f"the {split!r} image folder {entry!r} is not a folder", file=str(file), field=split)
    return folder


def _labels_folder(images: Path) -> Path:
    """``images`` with its last ``images`` component replaced by ``labels`` (Ultralytics' img2label_paths)."""
    parts = list(images.parts)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            return Path(*parts)
    raise InputError("the image folder has no 'images' component to find 'labels' by", file=str(images))


def _yolo_split(path: Path, split: str) -> tuple[Path, Path, dict[int, str], list[str]]:
    """``(images folder, labels folder, names, digest lines)`` of a data.yaml or a split folder."""
    if path.is_dir():
        yaml_file = next(
            (p / n for p in (path, path.parent) for n in ("data.yaml", "data.yml") if (p / n).is_file()), None
        )
        if yaml_file is None:
            raise InputError("no data.yaml (with the class names) in the split folder or its parent", file=str(path))
        images = path / "images"
    else:
        yaml_file = path
    raw = read_bytes(yaml_file)
    doc = _read_yaml(yaml_file)
    if path.is_file():
        images = _split_images(doc, yaml_file, split)
    return images, _labels_folder(images), _names(doc, yaml_file), [f"data.yaml:{_sha(raw)}", f"split:{split}"]


def _image_size(path: Path) -> tuple[tuple[float, float], str]:
    """``((width, height), sha256)`` of an image: Pillow parses the header only (no pixel is decoded)."""
    raw = read_bytes(path)
    width, height = image_size(raw, file=str(path))
    return (float(width), float(height)), _sha(raw)


def _positive(value: str, *, file: Path, case: str, name: str) -> float:
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a positive number, got {value!r}", file=str(file), case_id=case, field=name)
    return v


def _sizes_file(path: Path) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """``{stem: (width, height)}`` of a ``sizes.csv`` (``image,width,height``)."""
    sizes: dict[str, tuple[float, float]] = {}
    for row in read_csv_rows(path, ("image", "width", "height")):
        stem = Path(row["image"]).stem
        if not stem or stem in sizes:
            raise InputError("empty or repeated image in sizes.csv", file=str(path), case_id=stem, field="image")
        w = _positive(row["width"], file=path, case=stem, name="width")
        sizes[stem] = (w, _positive(row["height"], file=path, case=stem, name="height"))
    return sizes, [f"sizes.csv:{_sha(read_bytes(path))}"]


def _yolo_sizes(images: Path) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """Pixel sizes by stem: ``sizes.csv`` beside ``images/`` if there is one, else every image's header."""
    sizes_csv = images.parent / "sizes.csv"
    if sizes_csv.is_file():
        return _sizes_file(sizes_csv)
    if not images.is_dir():
        raise InputError("no images/ folder and no sizes.csv beside it", file=str(images))
    sizes: dict[str, tuple[float, float]] = {}
    lines = []
    for p in sorted(images.iterdir()):
        if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file():
            if p.stem in sizes:
                raise InputError("two images share one file stem", file=str(p), case_id=p.stem, field="image")
            sizes[p.stem], digest = _image_size(p)
            lines.append(f"image:{p.name}:{digest}")
    if not sizes:
        raise InputError("no images in the image folder", file=str(images))
    return sizes, lines


def _fields(line: str, *, file: Path, line_no: int) -> list[float]:
    try:
        values = [float(x) for x in line.split()]
    except ValueError as exc:
        raise InputError(f"line {line_no}: not numbers", file=str(file), field=f"line {line_no}") from exc
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"line {line_no}: not finite numbers", file=str(file), field=f"line {line_no}")
    return values


def _class(value: float, names: dict[int, str], *, file: Path, line_no: int) -> int:
    if value != int(value) or int(value) not in names:
        raise InputError(
            f"line {line_no}: class {value:g} is not an index of data.yaml's names", file=str(file), field="class"
        )
    return int(value)


def _normalised(coords: list[float], *, file: Path, line_no: int) -> list[float]:
    """YOLO's convention, on truth and predictions alike: coordinates normalised to [0, 1] by the image's width
    and height (pixel coordinates would be scaled a second time)."""
    if any(v < 0 or v > 1 for v in coords):
        raise InputError(
            f"line {line_no}: coordinates must be normalised to [0, 1] (YOLO), got {max(coords, key=abs):g}: "
            "pixel coordinates?",
            file=str(file),
            field="box",
        )
    return coords


def _truth_box(values: list[float], *, file: Path, line_no: int) -> list[float]:
    """Normalised ``[xc, yc, w, h]`` of a box line, or of a polygon line's bounding box."""
    coords = _normalised(values[1:], file=file, line_no=line_no)
    if len(coords) == 4:
        return coords
    if len(coords) >= 6 and len(coords) % 2 == 0:
        xs, ys = coords[0::2], coords[1::2]
        return [(min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2, max(xs) - min(xs), max(ys) - min(ys)]
    raise InputError(
        f"line {line_no}: expected 'cls xc yc w h' (or a polygon), got {len(values)} numbers",
        file=str(file),
        field="box",
    )


def _pixels(box: list[float], size: tuple[float, float]) -> list[float]:
    """Normalised ``[xc, yc, w, h]`` -> COCO ``[x, y, w, h]`` in pixels of an image ``(width, height)``."""
    xc, yc, w, h = box
    width, height = size
    return [(xc - w / 2) * width, (yc - h / 2) * height, w * width, h * height]


def _label_lines(path: Path) -> list[tuple[int, str]]:
    text = read_text_limited(path, empty_ok=True)
    return [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]


def load_yolo_truth(path: Path, split: str) -> LocTruth:
    """The YOLO ground truth of ``path`` (a data.yaml and ``split``, or a split folder) as COCO structures."""
    images, labels, names, lines = _yolo_split(path, split)
    sizes, size_lines = _yolo_sizes(images)
    anns: list[dict[str, Any]] = []
    for stem in sorted(sizes):
        file = labels / f"{stem}.txt"
        if not file.is_file():
            continue
        lines.append(f"label:{stem}:{_sha(read_bytes(file))}")
        for line_no, line in _label_lines(file):
            values = _fields(line, file=file, line_no=line_no)
            cls = _class(values[0], names, file=file, line_no=line_no)
            box = _pixels(_truth_box(values, file=file, line_no=line_no), sizes[stem])
            anns.append({"id": len(anns) + 1, "image_id": stem, "category_id": cls, "bbox": box})
    return LocTruth(sorted(sizes), names, anns, sha256_text(*lines, *size_lines), sizes=sizes)


def load_yolo_predictions(path: Path, truth: LocTruth) -> list[dict[str, Any]]:
    """Detections of a ``--save-txt --save-conf`` labels folder: ``cls xc yc w h conf`` per line."""
    dets: list[dict[str, Any]] = []
    for file in sorted(path.iterdir()):
        if file.suffix != ".txt":
            continue
        if file.stem not in truth.sizes:
            raise InputError("predictions for an image not in the ground truth", file=str(file), case_id=file.stem)
        for line_no, line in _label_lines(file):
            values = _fields(line, file=file, line_no=line_no)
            if len(values) != 6:
                raise InputError(
                    f"line {line_no}: expected 'cls xc yc w h conf' (yolo val --save-txt --save-conf), "
                    f"got {len(values)} numbers",
                    file=str(file),
                    field="conf",
                )
            cls = _class(values[0], truth.names, file=file, line_no=line_no)
            box = _pixels(_normalised(values[1:5], file=file, line_no=line_no), truth.sizes[file.stem])
            dets.append({"image_id": file.stem, "category_id": cls, "bbox": box, "score": values[5]})
    return dets


# ---------------------------------------------------------------- MS-CXR


#: how far (pixels) a box may reach past the image's edge (rounding of exported coordinates)
EDGE_TOLERANCE = 1.0


def check_inside(box: list[float], size: tuple[float, float] | None, *, file: str, where: str) -> list[float]:
    """COCO's convention, on truth and predictions alike: an ``[x, y, w, h]`` box in pixels lies inside its image
    ``size`` ``(width, height)`` (within :data:`EDGE_TOLERANCE`); None: the size is not known, not checked.

    Raises:
        InputError: naming ``file``, the entry and the image size (normalised or misplaced coordinates).
    """
    if size is None:
        return box
    x, y, w, h = box
    width, height = size
    tol = EDGE_TOLERANCE
    if x < -tol or y < -tol or x + w > width + tol or y + h > height + tol:
        raise InputError(
            f"{where}: bbox {box} reaches outside its {width:g} x {height:g} image (COCO boxes are pixels "
            "[x, y, w, h] inside the image)",
            file=file,
            field="bbox",
        )
    return box


def _ms_size(row: dict[str, str]) -> tuple[float, float] | None:
    """``(width, height)`` of an MS-CXR row's image (``image_width``, ``image_height``), None when the file has no
    such columns or they do not hold positive finite numbers (the box is then not checked against the image)."""
    try:
        size = (float(row["image_width"]), float(row["image_height"]))
    except (KeyError, ValueError):
        return None
    return size if all(math.isfinite(v) and v > 0 for v in size) else None


def _ms_box(row: dict[str, str], *, file: Path, line: int) -> list[float]:
    box = []
    for name in ("x", "y", "w", "h"):
        try:
            v = float(row[name])
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or (name in "wh" and v < 0):
            raise InputError(
                f"row {line}: {name} must be a finite number{' >= 0' if name in 'wh' else ''}, got {row[name]!r}",
                file=str(file),
                case_id=row["dicom_id"],
                field=name,
            )
        box.append(v)
    return box


def _ms_rows(path: Path, columns: tuple[str, ...], split: str | None) -> list[tuple[int, dict[str, str]]]:
    """``(data row number, row)`` of an MS-CXR CSV, those of ``split`` when given and the file has the column."""
    rows = read_csv_rows(path, columns)
    picked = [(i, r) for i, r in enumerate(rows, start=1) if split is None or r.get("split", split) == split]
    if not picked:
        raise InputError(f"no rows of split {split!r}", file=str(path), field="split")
    for i, r in picked:
        if not r["dicom_id"] or not r["label_text"]:
            raise InputError(f"row {i}: empty dicom_id or label_text", file=str(path), field="dicom_id")
    return picked


def load_ms_cxr_truth(path: Path, split: str) -> LocTruth:
    """MS-CXR rows of ``split`` (``all``: every row) as COCO structures and phrases."""
    rows = _ms_rows(path, MS_CXR_COLUMNS, None if split == "all" else split)
    cat_names = sorted({r["category_name"] for _, r in rows})
    cat_of = {n: i + 1 for i, n in enumerate(cat_names)}
    phrases: dict[tuple[str, str], Phrase] = {}
    per_image: dict[str, int] = defaultdict(int)
    anns = []
    sizes: dict[str, tuple[float, float]] = {}
    for line, r in rows:
        size = _ms_size(r)
        if size is not None:
            sizes[r["dicom_id"]] = size
        box = check_inside(_ms_box(r, file=path, line=line), size, file=str(path), where=f"row {line}")
        key = (r["dicom_id"], r["label_text"])
        if key not in phrases:
            phrases[key] = Phrase(r["dicom_id"], per_image[r["dicom_id"]], r["label_text"], cat_of[r["category_name"]])
            per_image[r["dicom_id"]] += 1
        elif phrases[key].category_id != cat_of[r["category_name"]]:
            raise InputError(
                f"row {line}: one phrase under two categories", file=str(path), case_id=key[0], field="category_name"
            )
        phrases[key].boxes.append(box)
        anns.append({"id": line, "image_id": r["dicom_id"], "category_id": cat_of[r["category_name"]], "bbox": box})
    names = {i + 1: n for i, n in enumerate(cat_names)}
    digest = sha256_text(_sha(read_bytes(path)), f"split:{split}")
    return LocTruth(sorted(per_image), names, anns, digest, phrases=list(phrases.values()), sizes=sizes)


def load_ms_cxr_predictions(path: Path, truth: LocTruth) -> tuple[list[dict[str, Any]], dict[int, list[list[float]]]]:
    """Detections (rows with a ``score``) and ``{phrase number: predicted boxes}`` of an MS-CXR-style CSV."""
    index = {(p.image_id, p.text): k for k, p in enumerate(truth.phrases)}
    has_score = "score" in _header_line(path)
    dets: list[dict[str, Any]] = []
    grounding: dict[int, list[list[float]]] = defaultdict(list)
    for line, r in _ms_rows(path, MS_CXR_PRED_COLUMNS, None):
        k = index.get((r["dicom_id"], r["label_text"]))
        if k is None:
            raise InputError(
                f"row {line}: phrase {r['label_text']!r} is not in the ground truth of this image",
                file=str(path),
                case_id=r["dicom_id"],
                field="label_text",
            )
        size = truth.sizes.get(r["dicom_id"])
        box = check_inside(_ms_box(r, file=path, line=line), size, file=str(path), where=f"row {line}")
        grounding[k].append(box)
        if has_score:
            score = _finite(r.get("score", ""), file=path, case=r["dicom_id"])
            dets.append(
                {"image_id": r["dicom_id"], "category_id": truth.phrases[k].category_id, "bbox": box, "score": score}
            )
    return dets, dict(grounding)


def _finite(value: str, *, file: Path, case: str) -> float:
    """A prediction's ``score``: any finite number."""
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise InputError(f"score must be a finite number, got {value!r}", file=str(file), case_id=case, field="score")
    return v
