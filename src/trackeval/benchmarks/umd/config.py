"""UMD protocol configuration: organ label map, surface tolerance, empty and missing policies."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from trackeval.config.base import KEY_TOKEN, FiniteFloat, PositiveInt, Section, distinct

#: The unit's name: its config section and the first token of its metric keys.
NAME = "umd"

#: The 13 UMD organs with their default label ids (1..13 in this order).
UMD_ORGANS: tuple[str, ...] = (
    "liver",
    "kidney_left",
    "kidney_right",
    "brain",
    "heart",
    "spleen",
    "aorta",
    "lung",
    "colon",
    "urinary_bladder",
    "pancreas",
    "esophagus",
    "stomach",
)

#: The per-organ metrics UMD computes (``umd.metrics``), in their canonical order.
UMD_METRICS: tuple[str, ...] = ("dsc", "iou", "nsd", "hd95", "hd", "assd")


class UMDConfig(Section):
    """UMD protocol: organ label map, surface tolerance and the empty/missing policies.

    ``labels`` maps organ names to one label id or a list of ids (an nnU-Net style region: the union).
    ``hd_empty_penalty``: HD95 when exactly one of prediction/truth is empty for an organ: ``"diagonal"``
    (the diagonal of the image extent in mm, the largest distance possible in the volume) or a number of mm.
    ``missing_prediction``: ``worst`` scores a missing file as an all-background prediction (Dice 0, NSD 0,
    HD95 penalty on organs present in truth); ``exclude`` leaves its values NaN; either way it is counted and
    named in one warning line. ``error``: any missing file is an error naming the case and the file expected.
    No prediction matching any case is an error whatever the policy.
    ``empty_both``: an organ absent from both truth and prediction is ``nan`` (not applicable, excluded
    from means and from ``n_valid``; default, nnU-Net) or ``perfect`` (Dice/IoU/NSD 1, distances 0 mm,
    counted, MONAI ``ignore_empty=False`` style).
    ``train_manifest``: a training-split manifest (CSV with ``subject_id``, optional ``case_id`` and ``image``)
    to audit the test set against: shared subjects and exact duplicate images (``image`` columns in both
    manifests) are counted as ``audit/n_subject_overlap`` and ``audit/n_duplicate_images``.
    ``geometry_tolerance``: largest absolute difference allowed between the prediction's and the truth's
    affine entries (mm).
    ``metrics``: the per-organ metrics to compute, a non-empty subset of ``dsc, iou, nsd, hd95, hd, assd``
    that contains ``dsc`` (the primary metric; default: all six). The keys of the others are absent from the
    per-case records and the aggregates. ``[dsc, iou]`` skips the surface distances: one pass over each case
    (about 10x cheaper than nnU-Net's Dice; ``docs/performance.md``). Stored in canonical order. A dataset.json
    with nnU-Net's ``ignore`` label allows only ``[dsc, iou]`` (unset: narrowed to them, with a warning).
    """

    labels: dict[str, PositiveInt | tuple[PositiveInt, ...]] = Field(
        default_factory=lambda: {name: i + 1 for i, name in enumerate(UMD_ORGANS)}
    )
    nsd_tolerance_mm: FiniteFloat = Field(1.0, ge=0.0)
    hd_percentile: FiniteFloat = Field(95.0, ge=0.0, le=100.0)
    hd_empty_penalty: Literal["diagonal"] | Annotated[FiniteFloat, Field(gt=0.0)] = "diagonal"
    missing_prediction: Literal["worst", "exclude", "error"] = "worst"
    empty_both: Literal["nan", "perfect"] = "nan"
    train_manifest: str | None = None
    geometry_tolerance: FiniteFloat = Field(1e-3, ge=0.0)
    modality_pairs: tuple[tuple[str, str], ...] = (("ct", "pet"), ("mri", "pet"), ("ct", "mri"))
    metrics: tuple[Literal[UMD_METRICS], ...] = UMD_METRICS

    @field_validator("metrics")
    @classmethod
    def _check_metrics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        distinct(v, "umd.metrics")
        if "dsc" not in v:
            raise ValueError("umd.metrics must include 'dsc' (the primary metric, gated and compared)")
        return tuple(m for m in UMD_METRICS if m in v)

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: dict[str, int | tuple[int, ...]]) -> dict[str, int | tuple[int, ...]]:
        if not v:
            raise ValueError("the label map is empty")
        seen: dict[int, str] = {}
        for name, ids in v.items():
            if not KEY_TOKEN.fullmatch(name):
                raise ValueError(f"label name {name!r} must be lowercase letters, digits and '_'")
            for i in (ids,) if isinstance(ids, int) else ids:
                if i <= 0:
                    raise ValueError(f"label {name!r}: id {i} must be > 0 (0 is background)")
                if isinstance(ids, int) and i in seen:
                    raise ValueError(f"label id {i} is used by both {seen[i]!r} and {name!r}")
                seen.setdefault(i, name)
        return v
