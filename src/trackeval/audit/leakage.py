"""Leakage audits: subjects shared by the training and test manifests, and exact duplicate images.

Duplicates are found by the content hash of the voxel array (shape + values), not of the file bytes, so a
re-export of the same scan (other compression, other header fields, integer data stored as float) is still
caught. Counts land in a result's ``summary`` as ``audit/<check>`` (non-zero = failed; the promotion gate
refuses such a result) and the offending ids in its ``warnings``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import nibabel as nib
import numpy as np

from trackeval.errors import InputError
from trackeval.io.hashing import sha256_bytes
from trackeval.io.tables import read_csv_rows
from trackeval.spec import AuditFinding

__all__ = ["AuditFinding", "audit_against_training", "duplicate_images", "subject_overlap", "voxel_digest"]


def voxel_digest(path: Path) -> str:
    """sha256 of a NIfTI image's voxel values and shape (integer-valued data hashed as int64, else float64)."""
    try:
        data = np.asanyarray(nib.load(path).dataobj)
    except Exception as exc:  # nibabel raises many types on bad files
        raise InputError(f"cannot read image for the duplicate audit: {exc}", file=str(path), field="image") from exc
    as_int = np.issubdtype(data.dtype, np.integer) or (np.isfinite(data).all() and np.array_equal(data, np.round(data)))
    canon = np.ascontiguousarray(data, dtype=np.int64 if as_int else np.float64)
    return sha256_bytes(repr(canon.shape).encode(), canon.tobytes())


def subject_overlap(train_subjects: Iterable[str], test_subjects: Iterable[str]) -> AuditFinding:
    """Subjects that appear in both splits (patient-level leakage)."""
    shared = sorted(set(train_subjects) & set(test_subjects))
    note = f"subject overlap: {len(shared)} subject(s) in both training and test: {', '.join(shared[:10])}"
    return AuditFinding("n_subject_overlap", len(shared), note if shared else "")


def duplicate_images(train: Mapping[str, Path], test: Mapping[str, Path]) -> AuditFinding:
    """Test images whose voxel arrays equal a training image's (``{id: path}`` maps)."""
    train_hashes: dict[str, str] = {}
    for ident, path in train.items():
        train_hashes.setdefault(voxel_digest(path), ident)
    pairs = sorted(
        (ident, train_hashes[d]) for ident, path in test.items() if (d := voxel_digest(path)) in train_hashes
    )
    listed = ", ".join(f"{a}={b}" for a, b in pairs[:10])
    note = f"duplicate images: {len(pairs)} test image(s) identical to training images (test=train): {listed}"
    return AuditFinding("n_duplicate_images", len(pairs), note if pairs else "")


def audit_against_training(
    train_manifest: Path, test_subjects: Iterable[str], test_images: Mapping[str, Path]
) -> list[AuditFinding]:
    """Run the split audits of a test set against a training manifest.

    The training manifest is a CSV with a ``subject_id`` column and optionally ``case_id`` and ``image``
    (a NIfTI path relative to the manifest's folder). The duplicate check runs when both sides have images.
    """
    rows = read_csv_rows(train_manifest, required=("subject_id",))
    findings = [subject_overlap((r["subject_id"] for r in rows), test_subjects)]
    if test_images and rows and "image" in rows[0]:
        train_images = {r.get("case_id") or r["image"]: train_manifest.parent / r["image"] for r in rows if r["image"]}
        findings.append(duplicate_images(train_images, test_images))
    return findings
