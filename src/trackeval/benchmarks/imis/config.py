"""IMIS protocol configuration: prompts, click simulation, turns, Dice empty rule, NoC thresholds.

Defaults reproduce the original IMIS-Bench ``test.py`` (see ``docs/benchmarks/imis.md``):
random error-region clicks, first click among the 50 % of target pixels closest to the centroid, an exact
tight box, no prompt accumulation (only the new click and the previous mask go to the model), 9 turns, NoC on Dice
with "not reached" = max + 1. ``preset: ritm`` switches to the interactive-segmentation literature's convention
(RITM / SimpleClick: IoU, 20 clicks, not reached = 20, RITM's click rule). ``protocol: imis_bench`` also moves
the interaction to IMIS-Bench's 1024 x 1024 grid (Dice back on the label grid, as its ``test.py``) and sends its
``-1`` "not a point" click when the previous mask has no error (live, 2D only). The ``volumes`` subsection is the
slicing protocol of the 3D layouts (TotalSegmentator MRI, ISLES'22; :class:`IMISVolumesConfig`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from trackeval.config.base import KEY_TOKEN, FiniteFloat, NonNegativeInt, PositiveInt, Section, Seed, distinct

#: the unit's name: its config section and the prefix of its metric keys
NAME = "imis"

PromptType = Literal["point", "box", "text"]

#: the largest ``imis.eval_size`` (pixels per side: an 8192 x 8192 grid already holds 64 M pixels per mask)
MAX_EVAL_SIZE = 8192
#: the largest ``imis.model_timeout_s`` (one week, in seconds)
MAX_MODEL_TIMEOUT_S = 7 * 24 * 3600.0

#: what ``preset: ritm`` sets (unless the same value is given explicitly; a different explicit value is an error)
RITM_PRESET: dict[str, Any] = {"noc_metric": "iou", "max_clicks": 20, "noc_not_reached": "max", "click_mode": "ritm"}


#: ``imis.volumes.axis`` -> the RAS axis the slices are taken across (sagittal: R, coronal: A, axial: S)
SLICE_AXES: dict[str, int] = {"sagittal": 0, "coronal": 1, "axial": 2}


class IMISVolumesConfig(Section):
    """How the 3D layouts (``totalseg-mri``, ``isles22``) become the 2D targets the IMIS protocol runs on.

    Attributes:
        axis: the slicing plane: ``axial`` (default), ``coronal`` or ``sagittal``. The volume is first reoriented
            to the RAS voxel order of nibabel's ``as_closest_canonical`` (flips and axis swaps chosen from the
            affine, no resampling), then cut across its S (axial), A (coronal) or R (sagittal) axis.
        slices: ``largest`` (default: per structure, the one slice where it has the most foreground pixels,
            ties to the lowest index; structures sharing that slice are targets of one image) or ``every``
            (every ``stride``-th slice, index 0, stride, 2 stride ..., on which at least one structure has
            ``min_pixels`` pixels; its targets are those structures).
        min_pixels: fewest foreground pixels a structure needs on a slice to be a target there (>= 1).
        stride: with ``slices: every``, the step between slice indices considered (1 = every slice).
        structures: target structures (TotalSegmentator MRI: the ``segmentations/<name>.nii.gz`` stems; ISLES'22:
            ``lesion``); empty (default) = every mask of the subject. A listed structure missing from a subject
            is an input error naming the subject.
        window: the intensity window, percentiles ``[low, high]`` of the whole volume's voxels (default
            ``[0.5, 99.5]``, numpy's linear percentile); voxels are clipped to it and mapped linearly to
            ``[0, 255]`` (rounded to uint8, grey replicated to RGB); a volume whose two percentiles coincide is
            all 0.
        channel: ISLES'22 only: the image the model sees, ``dwi`` (default, b=1000, the sequence the lesion
            masks are drawn on), ``adc`` or ``flair`` (FLAIR is not on the mask's grid in the release, so it is
            refused with the grid error unless the files were co-registered).
        meta_split: TotalSegmentator MRI only: the subjects whose ``meta.csv`` ``split`` is this value
            (default ``test``); ``all`` = every subject folder (needed when there is no meta.csv).
        orientation: how a 2D slice's rows and columns run. ``ras`` (default): the two remaining RAS axes in
            order (axial: rows toward the patient's right, columns toward anterior). ``imis_release``: as the
            released IMIS-Bench / IMed-361M PNGs (measured on the BTCV sample): rows toward anterior, columns
            toward the patient's left, i.e. the ``ras`` slice transposed with its columns reversed (a 90-degree
            rotation); axial only (the release publishes no coronal or sagittal slices). Slice indices do not
            change.
    """

    axis: Literal["axial", "coronal", "sagittal"] = "axial"
    slices: Literal["largest", "every"] = "largest"
    min_pixels: PositiveInt = 1
    stride: PositiveInt = 1
    structures: tuple[str, ...] = ()
    window: tuple[FiniteFloat, FiniteFloat] = (0.5, 99.5)
    channel: Literal["dwi", "adc", "flair"] = "dwi"
    meta_split: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}\z")] = "test"
    orientation: Literal["ras", "imis_release"] = "ras"

    @field_validator("structures")
    @classmethod
    def _check_structures(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not KEY_TOKEN.fullmatch(s) for s in v):
            raise ValueError("structures are [a-z0-9_] tokens (the mask file stems)")
        return tuple(distinct(v, "structures")) if v else v

    @field_validator("window")
    @classmethod
    def _check_window(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 100.0:
            raise ValueError("window must be two percentiles 0 <= low < high <= 100")
        return v

    @model_validator(mode="after")
    def _check_orientation(self) -> IMISVolumesConfig:
        if self.orientation == "imis_release" and self.axis != "axial":
            raise ValueError(
                f"orientation 'imis_release' is defined for axis 'axial' only (axis is {self.axis!r}): "
                "the released IMIS-Bench data has axial slices only"
            )
        return self


class IMISConfig(Section):
    """IMIS interactive-segmentation protocol switches (every one is logged as a param).

    Attributes:
        protocol: ``native`` (default: clicks and Dice on the label grid, no click once the mask is exact) or
            ``imis_bench`` (IMIS-Bench ``test.py``: image and every target mask resized to
            ``eval_size x eval_size`` with PIL's nearest-neighbour resize, pixel centres, before the loop;
            clicks and model input/output on that grid; each answer brought back to the label grid bilinearly
            and thresholded, Dice and IoU taken there with ``1e-8`` in the denominators; when the previous mask
            has no error, a click with label ``-1`` at a seeded random pixel of ``[0, 256)^2`` instead of no
            click). ``imis_bench`` takes 2D images only and live models only.
        eval_size: the square grid side of ``protocol: imis_bench`` (IMIS-Bench: 1024); unused by ``native``.
        split: which ``dataset.json`` list to evaluate (``test`` as the original; ``training`` for checks).
        prompt_types: initial prompt types to run; each runs its own ``max_turns`` sequence (follow-up turns are
            always clicks, as in the original).
        preset: ``none`` (the fields as given) or ``ritm``: fills ``noc_metric=iou``, ``max_clicks=20``,
            ``noc_not_reached=max`` and ``click_mode=ritm`` (the RITM / SimpleClick convention); an explicit value
            of one of those fields that differs from the preset's is a configuration error naming the field.
        click_mode: ``random_error`` (original: a uniformly random pixel of prediction XOR truth, positive if
            missed, negative if a false alarm), ``center_error`` (largest-component centre: the pixel farthest
            from the boundary of the largest connected false-negative or false-positive region) or ``ritm``
            (RITM / SimpleClick's evaluation clicker: the deepest pixel of the whole false-negative or
            false-positive area, whichever is deeper; see :mod:`trackeval.benchmarks.imis.clicks`).
        first_click_fraction: the first click is drawn uniformly among this fraction of target pixels closest to
            the target centroid (original 0.5; 1.0 = anywhere in the target).
        box_jitter_px: each box coordinate moves by a uniform integer in ``[-j, j]`` pixels (original test: 0).
        accumulate_prompts: ``False`` (original) sends only the new click + the previous mask; ``True`` sends
            every click so far plus the initial box/text.
        max_clicks: interactions per sequence (turn 1 = the initial prompt); the literature uses 20.
        max_turns: the former name of ``max_clicks``, kept for compatibility: give either (the other follows);
            both given and different is a configuration error.
        dice_empty_rule: Dice when prediction and truth are both empty: ``nan`` (not applicable, excluded) or
            ``original_eps`` (0, the original ``2|P&G| / (|P|+|G|+1e-8)``).
        noc_metric: the score NoC thresholds apply to: ``dice`` (original) or ``iou`` (binary IoU, the
            literature's; both masks empty follows ``dice_empty_rule``).
        noc_not_reached: NoC of a sequence that never reaches the threshold: ``max_plus_one`` (original,
            ``max_clicks + 1``) or ``max`` (``max_clicks``, RITM / SimpleClick).
        noc_thresholds: thresholds (on ``noc_metric``) for NoC (clicks to reach); key ``imis/noc_<round(100 t)>``.
        seed: base seed of every click choice; per sequence and turn the generator is
            ``numpy.random.default_rng([seed, crc32(case_id), crc32(target), prompt index, turn])``.
        labels: NIfTI inputs only: target name -> label id; empty = every id present, named ``label_<id>``.
        geometry_tolerance: NIfTI inputs only: largest affine difference (mm) between image and label map.
        volumes: the slicing protocol of the 3D layouts (:class:`IMISVolumesConfig`); recorded in results.json
            only for those layouts (results of the 2D layouts keep their config).
        model_timeout_s: live models only: the longest one ``predict`` call may take, in seconds (finite,
            > 0, at most :data:`MAX_MODEL_TIMEOUT_S`); a model that does not answer in time ends the run with an
            error naming the case, target and turn (its call is abandoned, see
            :func:`trackeval.benchmarks.imis.session.call_model`). It cannot change a number, so, like the ``engine``
            section, it is left out of results.json and of the config digest.
    """

    preset: Literal["none", "ritm"] = "none"
    protocol: Literal["native", "imis_bench"] = "native"
    eval_size: Annotated[PositiveInt, Field(le=MAX_EVAL_SIZE)] = 1024
    split: Literal["test", "training"] = "test"
    prompt_types: tuple[PromptType, ...] = ("point", "box", "text")
    click_mode: Literal["random_error", "center_error", "ritm"] = "random_error"
    first_click_fraction: FiniteFloat = Field(0.5, gt=0.0, le=1.0)
    box_jitter_px: NonNegativeInt = 0
    accumulate_prompts: bool = False
    max_clicks: Annotated[int, Field(ge=1, le=99)] = 9
    max_turns: Annotated[int, Field(ge=1, le=99)] = 9
    dice_empty_rule: Literal["nan", "original_eps"] = "nan"
    noc_metric: Literal["dice", "iou"] = "dice"
    noc_not_reached: Literal["max_plus_one", "max"] = "max_plus_one"
    noc_thresholds: tuple[FiniteFloat, ...] = (0.85, 0.90)
    seed: Seed = 42
    labels: dict[str, PositiveInt] = Field(default_factory=dict)
    geometry_tolerance: FiniteFloat = Field(1e-3, ge=0.0)
    volumes: IMISVolumesConfig = Field(default_factory=IMISVolumesConfig)
    model_timeout_s: FiniteFloat = Field(300.0, gt=0.0, le=MAX_MODEL_TIMEOUT_S, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _preset_and_alias(cls, data: Any) -> Any:
        """Apply ``preset`` to the fields not given, then make ``max_clicks`` and ``max_turns`` agree."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("preset", "none") == "ritm":
            _apply_ritm_preset(data)
        _align_clicks_and_turns(data)
        return data

    @field_validator("prompt_types")
    @classmethod
    def _check_prompts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(distinct(v, "prompt_types"))

    @field_validator("noc_thresholds")
    @classmethod
    def _check_thresholds(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        keys = [round(100 * t) for t in v]
        if any(not 0.0 < t <= 1.0 for t in v) or len(set(keys)) != len(keys):
            raise ValueError("noc_thresholds must be distinct values in (0, 1] (distinct at 0.01)")
        return v

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: dict[str, int]) -> dict[str, int]:
        for name, i in v.items():
            if not KEY_TOKEN.fullmatch(name) or i <= 0:
                raise ValueError(f"label {name!r}: names are [a-z0-9_] tokens and ids are > 0")
        if len(set(v.values())) != len(v):
            raise ValueError("two target names share one label id")
        return v


def _apply_ritm_preset(data: dict[str, Any]) -> None:
    """Set each :data:`RITM_PRESET` field not given in ``data`` (raw input, edited in place); a given value that
    differs is a ``ValueError`` (``max_turns``, the former name of ``max_clicks``, counts as given)."""
    for name, value in RITM_PRESET.items():
        given = [f for f in (("max_clicks", "max_turns") if name == "max_clicks" else (name,)) if f in data]
        for f in given:
            if not _same(data[f], value):
                raise ValueError(
                    f"imis.{f}={data[f]!r} conflicts with imis.preset=ritm (which sets {f}={value!r}); "
                    f"drop imis.{f} or the preset"
                )
        if not given:
            data[name] = value


def _align_clicks_and_turns(data: dict[str, Any]) -> None:
    """Give ``max_clicks`` and its former name ``max_turns`` one value (raw input, edited in place): the one
    given, or a ``ValueError`` when both are given as different integers."""
    has_clicks, has_turns = "max_clicks" in data, "max_turns" in data
    clicks, turns = _as_int(data.get("max_clicks")), _as_int(data.get("max_turns"))
    if has_clicks and has_turns and clicks is not None and turns is not None and clicks != turns:
        raise ValueError(
            f"imis.max_clicks={data['max_clicks']!r} and imis.max_turns={data['max_turns']!r} differ "
            "(max_turns is the former name of max_clicks: give one of them)"
        )
    if has_clicks and not has_turns:
        data["max_turns"] = data["max_clicks"]
    elif has_turns and not has_clicks:
        data["max_clicks"] = data["max_turns"]


def _as_int(value: Any) -> int | None:
    """A raw integer field value as an int (``"20"`` -> 20), None when it is not one (validation reports it)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value) if float(value) == int(value) else None
    except (TypeError, ValueError, OverflowError):
        return None


def _same(given: Any, value: Any) -> bool:
    """Whether an explicitly given raw value equals a preset value (``"20"`` and ``20`` agree)."""
    if isinstance(value, int):
        return _as_int(given) == value
    return given == value
