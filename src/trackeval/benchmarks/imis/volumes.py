"""IMIS on 3D releases: TotalSegmentator MRI and ISLES'22 read as distributed, sliced into 2D IMIS targets.

Layouts (told from the files; ``--format`` forces one):

* ``totalseg-mri`` (TotalSegmentator MRI, Zenodo 11367005 / 14710732)::

      <root>/meta.csv                                  # image_id and split columns (';' or ',' separated)
      <root>/<subject>/mri.nii.gz
      <root>/<subject>/segmentations/<structure>.nii.gz  # one binary mask per structure, on the MRI grid

  the subjects are the meta.csv rows whose ``split`` is ``imis.volumes.meta_split`` (``all``: every subject
  folder holding ``mri.nii.gz``); targets are every ``segmentations/*.nii.gz`` stem, or
  ``imis.volumes.structures``.
* ``isles22`` (ISLES'22, BIDS, Zenodo 7960856)::

      <root>/sub-strokecaseNNNN/ses-0001/dwi/sub-strokecaseNNNN_ses-0001_dwi.nii.gz   (and ..._adc.nii.gz)
      <root>/sub-strokecaseNNNN/ses-0001/anat/sub-strokecaseNNNN_ses-0001_FLAIR.nii.gz
      <root>/derivatives/sub-strokecaseNNNN/ses-0001/sub-strokecaseNNNN_ses-0001_msk.nii.gz

  (the challenge README's schematic, with the images directly in ``ses-0001/`` under ``rawdata/`` and a
  lower-case ``flair``, is read too); the target is ``lesion`` (mask > 0) on ``imis.volumes.channel``.

Slicing protocol (:class:`~trackeval.benchmarks.imis.config.IMISVolumesConfig`): every volume is reoriented to
RAS voxel order (nibabel's ``as_closest_canonical``: flips and axis swaps from the affine, no resampling) and cut
across ``axis``; the slices that become images are chosen per structure (``largest`` area, or ``every``
``stride``-th slice with ``min_pixels``); the image is the channel volume windowed at its
``window`` percentiles to ``[0, 255]``, grey replicated to RGB; the slice's rows and columns are the remaining RAS
axes (``orientation: ras``) or run as in the released IMIS-Bench PNGs (``imis_release``, axial: rows toward
anterior, columns toward the patient's left). One image case is ``<subject>_<axis>_<index>`` (index: 4 digits,
in RAS order), its bootstrap cluster the subject.

Lazily: :func:`index_subjects` reads the masks (one at a time, keeping only per-slice pixel counts) to decide the
cases; :func:`read_slice` reads one subject's image and masks when its first case is scored and keeps the chosen
slices of that subject only (one subject cached per process).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from nibabel.orientations import apply_orientation, axcodes2ornt, io_orientation, ornt_transform

from trackeval.benchmarks.imis.config import SLICE_AXES, IMISVolumesConfig
from trackeval.errors import InputError
from trackeval.io.files import open_regular, read_bytes
from trackeval.io.hashing import sha256_bytes, sha256_files, sha256_text
from trackeval.io.nifti import LabelVolume, check_same_grid, read_image, read_label_map
from trackeval.io.paths import check_case_id
from trackeval.io.tables import read_csv_rows
from trackeval.results import key_token

TOTALSEG = "totalseg-mri"
ISLES = "isles22"
META_CSV = "meta.csv"
NII = ".nii.gz"


@dataclass(frozen=True)
class Subject:
    """One 3D subject: its id, image volume (the channel the model sees), target masks (name -> file), the
    (modality, region) tokens and the files whose digests identify it."""

    subject_id: str
    image: Path
    masks: tuple[tuple[str, Path], ...]
    modality: str
    region: str


@dataclass(frozen=True)
class VolumeSlice:
    """Where one 2D case comes from: its subject, slice index (RAS order, across ``axis``) and every slice index
    of the subject that is a case (read together, once)."""

    subject: Subject
    index: int
    subject_slices: tuple[int, ...]


# --- layout detection --------------------------------------------------------------------------------------


def looks_like_totalseg(root: Path) -> bool:
    """A meta.csv whose first line names ``image_id``, or a subject folder with ``mri.nii.gz`` and
    ``segmentations/``."""
    meta = root / META_CSV
    if meta.is_file():
        with open_regular(meta) as f:  # the header line only (a cheap test, never the whole file)
            if b"image_id" in f.readline(1 << 16):
                return True
    return any((d / "mri.nii.gz").is_file() and (d / "segmentations").is_dir() for d in _dirs(root))


def looks_like_isles(root: Path) -> bool:
    """A ``derivatives/`` folder beside ``sub-*`` subject folders (at the root or under ``rawdata/``)."""
    return (root / "derivatives").is_dir() and any(d.name.startswith("sub-") for d in _dirs(_isles_raw(root)))


def _dirs(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []


def _isles_raw(root: Path) -> Path:
    return root / "rawdata" if (root / "rawdata").is_dir() else root


# --- subjects ----------------------------------------------------------------------------------------------


def _meta_rows(path: Path) -> tuple[list[dict[str, str]], str]:
    """meta.csv's rows (the separator, ``;`` or ``,``, told from the header) and the file's sha256."""
    return read_csv_rows(path, required=("image_id", "split"), delimiter=None), sha256_files(path)


def totalseg_subjects(root: Path, cfg: IMISVolumesConfig) -> tuple[list[Subject], str]:
    """The subjects of a TotalSegmentator MRI folder under ``cfg.meta_split`` and the digest of meta.csv."""
    meta = root / META_CSV
    if cfg.meta_split == "all":
        ids = [d.name for d in _dirs(root) if (d / "mri.nii.gz").is_file()]
        digest = sha256_files(meta) if meta.is_file() else "no-meta"
    elif not meta.is_file():
        raise InputError(
            f"meta.csv not found: imis.volumes.meta_split={cfg.meta_split!r} needs it "
            "(imis.volumes.meta_split=all evaluates every subject folder)",
            file=str(meta),
        )
    else:
        rows, digest = _meta_rows(meta)
        ids = [r["image_id"] for r in rows if r["split"] == cfg.meta_split]
    if not ids:
        what = (
            "subject folder with mri.nii.gz" if cfg.meta_split == "all" else f"meta.csv row of split {cfg.meta_split!r}"
        )
        raise InputError(f"no {what} (imis.volumes.meta_split)", file=str(meta if meta.is_file() else root))
    out = []
    for sid in ids:
        check_case_id(sid, file=str(meta), field="image_id")
        folder = root / sid
        image = folder / "mri.nii.gz"
        if not image.is_file():
            raise InputError("subject listed in meta.csv has no mri.nii.gz", file=str(image), case_id=sid)
        seg = folder / "segmentations"
        found = {p.name[: -len(NII)]: p for p in sorted(seg.glob(f"*{NII}"))} if seg.is_dir() else {}
        masks = _pick_structures(found, cfg, seg, sid)
        out.append(Subject(sid, image, masks, "mr", "body"))
    return out, digest


def _pick_structures(
    found: dict[str, Path], cfg: IMISVolumesConfig, where: Path, sid: str
) -> tuple[tuple[str, Path], ...]:
    """``(target token, file)`` of every found mask, or of ``cfg.structures`` (each must be there)."""
    tokens = {key_token(stem, fallback=stem): p for stem, p in found.items()}
    if not cfg.structures:
        return tuple(sorted(tokens.items()))
    missing = [s for s in cfg.structures if s not in tokens]
    if missing:
        raise InputError(
            f"no mask for structure(s) {missing} (imis.volumes.structures)",
            file=str(where),
            case_id=sid,
            field="structures",
        )
    return tuple((s, tokens[s]) for s in cfg.structures)


_ISLES_IMAGE = {"dwi": ("dwi", "dwi"), "adc": ("dwi", "adc"), "flair": ("anat", "FLAIR")}


def _isles_image(ses: Path, stem: str, channel: str) -> Path:
    """The ``channel`` file of one session: ``<modality folder>/<stem>_<suffix>`` (the release) or directly in
    the session folder with the suffix lower-cased (the README's schematic)."""
    folder, suffix = _ISLES_IMAGE[channel]
    candidates = [ses / folder / f"{stem}_{suffix}{NII}", ses / f"{stem}_{suffix.lower()}{NII}"]
    for p in candidates:
        if p.is_file():
            return p
    raise InputError(f"no {channel} image (imis.volumes.channel)", file=str(candidates[0]), case_id=stem)


def isles_subjects(root: Path, cfg: IMISVolumesConfig) -> tuple[list[Subject], str]:
    """Every ``sub-*/ses-*`` session with a lesion mask in ``derivatives/`` and the digest of
    dataset_description.json (when present)."""
    desc = root / "dataset_description.json"
    digest = sha256_bytes(read_bytes(desc)) if desc.is_file() else "no-description"
    if cfg.structures and cfg.structures != ("lesion",):
        raise InputError("ISLES'22 has one structure, 'lesion'", file=str(root), field="imis.volumes.structures")
    out = []
    for sub in (d for d in _dirs(_isles_raw(root)) if d.name.startswith("sub-")):
        for ses in (d for d in _dirs(sub) if d.name.startswith("ses-")):
            stem = check_case_id(f"{sub.name}_{ses.name}", file=str(ses), field="subject")
            mask = root / "derivatives" / sub.name / ses.name / f"{stem}_msk{NII}"
            if not mask.is_file():
                raise InputError("lesion mask not found", file=str(mask), case_id=stem)
            out.append(Subject(stem, _isles_image(ses, stem, cfg.channel), (("lesion", mask),), "mr", "brain"))
    if not out:
        raise InputError("no sub-*/ses-* session folder (ISLES'22 BIDS layout)", file=str(_isles_raw(root)))
    return out, digest


# --- slicing -----------------------------------------------------------------------------------------------


def to_ras(volume: LabelVolume) -> np.ndarray:
    """The array in RAS voxel order (what ``nibabel.as_closest_canonical`` gives: flips/transposes only)."""
    transform = ornt_transform(io_orientation(volume.affine), axcodes2ornt("RAS"))
    return apply_orientation(volume.array, transform)


def _slice_areas(mask: np.ndarray, axis: int) -> np.ndarray:
    """Foreground pixels of each slice across ``axis`` (int64, one per slice)."""
    others = tuple(a for a in range(3) if a != axis)
    return (mask > 0).sum(axis=others, dtype=np.int64)


def chosen_slices(areas: dict[str, np.ndarray], cfg: IMISVolumesConfig) -> dict[int, tuple[str, ...]]:
    """Slice index -> its target structures (sorted) under ``cfg.slices`` / ``min_pixels`` / ``stride``.

    ``largest``: per structure with any slice of >= ``min_pixels``, its argmax slice (the lowest index on a tie);
    ``every``: indices ``0, stride, 2 stride, ...`` with the structures having >= ``min_pixels`` there. A structure
    that is empty everywhere is no target.
    """
    out: dict[int, list[str]] = {}
    for name, a in sorted(areas.items()):
        if cfg.slices == "largest":
            picks = [int(np.argmax(a))] if a.max(initial=0) >= cfg.min_pixels else []
        else:
            picks = [i for i in range(0, len(a), cfg.stride) if a[i] >= cfg.min_pixels]
        for i in picks:
            out.setdefault(i, []).append(name)
    return {i: tuple(out[i]) for i in sorted(out)}


def subject_areas(subject: Subject, axis: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Per-structure slice areas of one subject (masks read one at a time) and the ``name:digest`` lines of its
    mask files."""
    areas, lines = {}, []
    for name, path in subject.masks:
        vol = read_label_map(path, case_id=subject.subject_id)
        if vol.array.ndim != 3:
            raise InputError("mask is not a 3D volume", file=str(path), case_id=subject.subject_id, field="dim")
        areas[name] = _slice_areas(to_ras(vol), SLICE_AXES[axis])
        lines.append(f"{name}:{vol.digest}")
    return areas, lines


def window_uint8(volume: np.ndarray, percentiles: tuple[float, float]) -> np.ndarray:
    """``volume`` clipped to its ``percentiles`` (numpy linear) and mapped to ``[0, 255]`` as uint8 (rounded
    half to even); all 0 when the two percentiles are equal."""
    lo, hi = np.percentile(volume, percentiles)
    if not hi > lo:
        return np.zeros(volume.shape, np.uint8)
    scaled = (np.clip(volume, lo, hi) - lo) / (hi - lo) * 255.0
    return np.rint(scaled).astype(np.uint8)


def _take(array: np.ndarray, axis: int, index: int, orientation: str = "ras") -> np.ndarray:
    """Slice ``index`` across ``axis`` of a RAS volume, its rows and columns as ``orientation`` says: ``ras``
    (the remaining RAS axes in order) or ``imis_release`` (axial only: rows toward anterior, columns toward the
    patient's left; the RAS slice transposed, columns reversed)."""
    plane = np.take(array, index, axis=axis)
    if orientation == "imis_release":
        plane = np.ascontiguousarray(plane.T[:, ::-1])
    return plane


def _stamp(subject: Subject) -> tuple[tuple[int, int], ...]:
    """``(mtime_ns, size)`` of the subject's files: part of the cache key, so a rewritten file is read again."""
    stats = [p.stat() for p in (subject.image, *(m for _, m in subject.masks))]
    return tuple((st.st_mtime_ns, st.st_size) for st in stats)


@lru_cache(maxsize=1)
def _subject_slices(
    subject: Subject,
    stamp: tuple[tuple[int, int], ...],
    slices: tuple[int, ...],
    axis: str,
    window: tuple[float, float],
    tolerance: float,
    orientation: str = "ras",
) -> tuple[dict[int, tuple[np.ndarray, dict[str, np.ndarray]]], str]:
    """The 2D image (RGB uint8) and masks (bool) of each of ``slices`` of one subject, and the digest of its
    files; the volumes are dropped once sliced (cached: the last subject only, keyed by the files' ``stamp``)."""
    sid, ax = subject.subject_id, SLICE_AXES[axis]
    image = read_image(subject.image, case_id=sid)
    if image.array.ndim != 3:
        raise InputError("image is not a 3D volume", file=str(subject.image), case_id=sid, field="dim")
    grey = window_uint8(to_ras(image), window)
    out = {i: (np.repeat(_take(grey, ax, i, orientation)[..., None], 3, axis=2), {}) for i in slices}
    lines = [f"image:{image.digest}"]
    for name, path in subject.masks:
        vol = read_label_map(path, case_id=sid)
        check_same_grid(vol, image, case_id=sid, tolerance=tolerance)
        ras = to_ras(vol)
        for i in slices:
            out[i][1][name] = _take(ras, ax, i, orientation) > 0
        lines.append(f"{name}:{vol.digest}")
    return out, sha256_text(*lines)


def read_slice(
    ref: VolumeSlice, cfg: IMISVolumesConfig, tolerance: float
) -> tuple[np.ndarray, dict[str, np.ndarray], str]:
    """One case's RGB image, masks (every structure of the subject, on that slice) and digest (the subject's
    files, the axis and the slice index)."""
    try:
        stamp = _stamp(ref.subject)
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", file=str(ref.subject.image), case_id=ref.subject.subject_id) from exc
    slices, digest = _subject_slices(
        ref.subject, stamp, ref.subject_slices, cfg.axis, tuple(cfg.window), tolerance, cfg.orientation
    )
    image, masks = slices[ref.index]
    where = f"{cfg.axis}:{ref.index}" + ("" if cfg.orientation == "ras" else f":{cfg.orientation}")
    return image, dict(masks), sha256_text(digest, where)


def protocol(layout: str, cfg: IMISVolumesConfig) -> dict[str, object]:
    """The resolved slicing protocol recorded in results.json (``config.imis.volumes``): the keys that apply to
    ``layout`` (``channel`` for ISLES'22, ``meta_split`` for TotalSegmentator MRI; ``orientation`` only when it is
    not ``ras``, so results and digests made before the switch existed stay the same)."""
    out = cfg.model_dump(mode="json")
    out.pop("meta_split" if layout == ISLES else "channel")
    if cfg.orientation == "ras":
        out.pop("orientation")
    if cfg.slices == "largest":
        out.pop("stride")
    return out


SUBJECT_READERS: dict[str, Callable[[Path, IMISVolumesConfig], tuple[list[Subject], str]]] = {
    TOTALSEG: totalseg_subjects,
    ISLES: isles_subjects,
}


def protocol_digest(layout: str, cfg: IMISVolumesConfig) -> str:
    """sha256 of the resolved protocol (canonical JSON), part of the index digest."""
    return sha256_text(json.dumps(protocol(layout, cfg), sort_keys=True))
