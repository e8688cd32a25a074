"""Multi-anatomy X-ray protocol configuration: one subsection per task (cls, seg, ret, loc, report)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from trackeval.config.base import KEY_TOKEN, FiniteFloat, NonNegativeInt, PositiveInt, Section, distinct

#: the most ECE bins (``xray.cls.ece_bins``): more bins than that only splits a test set into empty bins
MAX_ECE_BINS = 10_000


class XRayClsConfig(Section):
    """Multi-label classification.

    ``uncertain``: what a blank or ``-1`` label means: ``ignore`` (left out of every metric of that finding,
    default), ``zeros`` (negative, CheXpert U-Zeros) or ``ones`` (positive, U-Ones).
    ``ece_bins``: equal-width probability bins of the expected calibration error (1 to :data:`MAX_ECE_BINS`).
    ``min_positives``: a finding with fewer positives, or fewer negatives, than this in the test labels keeps its
    ``by_finding`` aggregates but is left out of the macro headlines (and of the gate), with a warning naming it;
    0 keeps every finding (1 leaves out only findings without a positive or a negative).
    The operating point is fixed at 95% sensitivity (the keys say ``sens95``).

    Native layouts (:mod:`trackeval.benchmarks.xray.cls_layouts`): ``blank``: what a blank label means,
    ``negative`` or ``uncertain`` (then ``uncertain`` applies); unset: the layout's own convention (CheXpert and
    MIMIC-CXR: negative, "not mentioned"; the generic layout: uncertain, as always). ``findings``: evaluate only
    these findings (truth column names; each must be in the truth and the predictions); empty: the findings of
    both. ``pool``: how per-image scores become the score of the study the labels are given for, ``max`` or
    ``mean``; unset: the dataset's published convention (CheXpert, MIMIC-CXR: max; MURA: mean).
    ``decision_threshold``: a score at or above it is called positive for Cohen's kappa (MURA).
    """

    uncertain: Literal["ignore", "zeros", "ones"] = "ignore"
    ece_bins: Annotated[PositiveInt, Field(le=MAX_ECE_BINS)] = 15
    min_positives: NonNegativeInt = 10
    blank: Literal["negative", "uncertain"] | None = None
    findings: tuple[str, ...] = ()
    pool: Literal["max", "mean"] | None = None
    decision_threshold: FiniteFloat = Field(0.5, ge=0.0, le=1.0)

    @field_validator("findings")
    @classmethod
    def _check_findings(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(distinct(v, "the findings")) if v else v


class XRaySegConfig(Section):
    """2D segmentation. ``labels``: ``{class name: label id}``; empty = read ``--label-names``.

    ``missing_prediction``: ``worst`` scores a missing file as all background, ``exclude`` leaves it NaN;
    counted and named in one warning line either way; ``error``: any missing file is an error naming the image
    and the file expected. No prediction matching any image is an error whatever the policy.

    ``empty_both``: a class absent from an image's truth and prediction is ``nan`` (not applicable: left out of
    the means and of ``n_valid``; default, as before) or ``perfect`` (Dice and IoU 1, counted: the SIIM-ACR
    Kaggle rule, where "the Dice coefficient is defined to be 1 when both X and Y are empty" and the score is the
    mean over every image). A missing prediction scored ``worst`` is all background, so ``perfect`` also gives 1
    to the classes its truth lacks.
    """

    labels: dict[str, PositiveInt] = Field(default_factory=dict)
    missing_prediction: Literal["worst", "exclude", "error"] = "worst"
    empty_both: Literal["nan", "perfect"] = "nan"

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: dict[str, int]) -> dict[str, int]:
        ids = list(v.values())
        if len(set(ids)) != len(ids):
            raise ValueError("two classes share a label id")
        for name, i in v.items():
            if not KEY_TOKEN.fullmatch(name):
                raise ValueError(f"class name {name!r} must be lowercase letters, digits and '_'")
            if i <= 0:
                raise ValueError(f"class {name!r}: id {i} must be > 0 (0 is background)")
        return v


class XRayRetConfig(Section):
    """Image retrieval with same-label relevance: the cut-offs ``k`` of ``xray/ret/p_at_<k>`` (non-empty,
    without repeats; kept sorted)."""

    ks: tuple[PositiveInt, ...] = (1, 5, 10)

    @field_validator("ks")
    @classmethod
    def _check_ks(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(distinct(v, "the cut-offs ks")))


class XRayLocConfig(Section):
    """Detection (COCO AP at IoU 0.5, area range all) and phrase grounding.

    ``max_dets``: detections kept per image and category (COCO's maxDets, 100).
    ``split``: the split a native ground truth is read from: a YOLO ``data.yaml``'s ``train`` / ``val`` /
    ``test`` image folder, the MS-CXR rows of that ``split`` value (``all``: every row; a YOLO split folder
    given as ``--ground-truth`` is read whatever this says).
    """

    max_dets: PositiveInt = 100
    split: Literal["train", "val", "test", "all"] = "test"


class XRayReportConfig(Section):
    """Report generation: CIDEr-D Gaussian length penalty ``cider_sigma`` (6) and ROUGE-L ``rouge_beta`` (1.2).

    ``sections``: the report sections that make the reference of an OpenI XML or ``indiana_reports.csv`` ground
    truth, joined in this order (default ``findings``, R2Gen's IU X-ray reference); ``split``: the
    ``annotation.json`` split an R2Gen ground truth is read from (``test``).
    """

    cider_sigma: FiniteFloat = Field(6.0, gt=0.0)
    rouge_beta: FiniteFloat = Field(1.2, gt=0.0)
    sections: tuple[Literal["findings", "impression"], ...] = ("findings",)
    split: Literal["train", "val", "test"] = "test"

    @field_validator("sections")
    @classmethod
    def _check_sections(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(distinct(v, "the report sections"))


class XRayConfig(Section):
    """The five X-ray tasks; ``trackeval evaluate xray --task <name>`` reads its own subsection."""

    cls: XRayClsConfig = XRayClsConfig()
    seg: XRaySegConfig = XRaySegConfig()
    ret: XRayRetConfig = XRayRetConfig()
    loc: XRayLocConfig = XRayLocConfig()
    report: XRayReportConfig = XRayReportConfig()
