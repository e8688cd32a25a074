"""The interactive-model protocol: typed prompts in, a mask or logits out, one call per turn.

A model is any object with a ``predict(request) -> array`` method (structural typing, no base class needed)
and, optionally, a ``supported_prompts`` attribute (default: all of ``point``, ``box``, ``text``); prompt types
it does not support are skipped with a warning. Minimal example::

    class Threshold:
        supported_prompts = ("point", "box")

        def predict(self, request: Request) -> np.ndarray:
            gray = request.image.mean(axis=-1) if request.image.ndim == 3 else request.image
            return gray > 100          # bool mask on the image grid

Coordinates are array indices at the original resolution: ``(row, col)`` for 2D, ``(z, row, col)`` or the
array's own axis order for 3D. The model returns a mask or scores at that resolution: ``bool``/integer arrays
are masks (non-zero = foreground); floating arrays are logits (foreground where ``> 0``, i.e. sigmoid > 0.5), or
probabilities (foreground where ``> 0.5``) when the model declares ``score_type = "probabilities"`` (an optional
attribute, default ``"logits"``).
With ``imis.protocol: imis_bench`` the image, the coordinates and the output live on IMIS-Bench's
``imis.eval_size`` square grid (1024 x 1024); each answer is then also brought back to the label grid, where Dice
is taken (:func:`trackeval.benchmarks.imis.grid.to_label_grid`: bilinear, then the threshold of its kind).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from trackeval.errors import InputError

PROMPT_TYPES: tuple[str, ...] = ("point", "box", "text")
#: what a model's floating-point answers are (its optional ``score_type`` attribute; ``logits`` by default)
SCORE_TYPES: tuple[str, ...] = ("logits", "probabilities")


class ModelError(InputError):
    """The interactive model misbehaved: it raised (``SystemExit`` and ``KeyboardInterrupt`` included), did not
    answer within ``imis.model_timeout_s``, or returned a wrong output (type, shape, dtype, NaN logits).
    An input error (exit 2): the model is an input of the evaluation."""


@dataclass(frozen=True)
class Click:
    """One click. ``label`` 1 = positive (add this pixel), 0 = negative (remove it), -1 = "not a point"
    (``imis.protocol: imis_bench`` only: sent when the previous mask had no error; models should ignore it)."""

    coords: tuple[int, ...]
    label: int

    def to_json(self) -> dict[str, Any]:
        return {"coords": list(self.coords), "label": self.label}


@dataclass(frozen=True)
class Box:
    """An axis-aligned box with inclusive corners ``lo`` and ``hi`` (array indices, one per axis)."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"lo": list(self.lo), "hi": list(self.hi)}


@dataclass(frozen=True)
class Prompts:
    """What the model receives at one turn.

    ``clicks`` is empty on a box/text first turn and, with ``imis.protocol: native``, on a turn whose previous
    mask had no error left (the model is still called, with no click); with ``imis.protocol: imis_bench`` that
    turn holds the original's "not a point" placeholder, a click with label ``-1``.
    """

    clicks: tuple[Click, ...] = ()
    box: Box | None = None
    text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form written to and compared in interaction logs."""
        return {
            "clicks": [c.to_json() for c in self.clicks],
            "box": None if self.box is None else self.box.to_json(),
            "text": self.text,
        }


@dataclass(frozen=True)
class Request:
    """One turn of one interaction sequence.

    Attributes:
        image: the image at original resolution (2D RGB ``(H, W, 3)`` uint8, or a 2D/3D intensity array).
        prompts: the prompts of this turn (see :class:`Prompts`).
        previous: what the model itself returned at the previous turn (mask or logits), ``None`` at turn 1.
        target: the target name (e.g. ``liver``); the text prompt already contains it.
        turn: 1-based turn number.
        spatial_shape: the shape the output must have (the label grid; ``imis.eval_size`` squared with
            ``imis.protocol: imis_bench``, where ``image`` and every coordinate are on that grid too).
    """

    image: np.ndarray
    prompts: Prompts
    previous: np.ndarray | None
    target: str
    turn: int
    spatial_shape: tuple[int, ...] = field(default=())


@runtime_checkable
class InteractiveModel(Protocol):
    """Anything with ``predict(request) -> mask or logits`` (see the module docstring)."""

    def predict(self, request: Request) -> np.ndarray: ...


def supported_prompts(model: object) -> tuple[str, ...]:
    """The prompt types a model declares (``supported_prompts``: a collection of names, or one name), all of
    them when it declares none. Raises :class:`ModelError` when the attribute fails or is not a collection."""
    try:
        declared = getattr(model, "supported_prompts", PROMPT_TYPES)
        names = {declared} if isinstance(declared, str) else set(declared)
    except Exception as exc:
        raise ModelError(
            f"the model's supported_prompts is not a collection of prompt types: {type(exc).__name__}: {exc}",
            field="supported_prompts",
        ) from exc
    return tuple(p for p in PROMPT_TYPES if p in names)


def score_type(model: object) -> str:
    """What the model's floating-point answers are: its ``score_type`` attribute, ``logits`` (default) or
    ``probabilities``. Raises :class:`ModelError` for any other value."""
    try:
        declared = getattr(model, "score_type", "logits")
    except Exception as exc:
        raise ModelError(f"the model's score_type failed: {type(exc).__name__}: {exc}", field="score_type") from exc
    if not isinstance(declared, str) or declared not in SCORE_TYPES:
        raise ModelError(
            f"the model's score_type is {declared!r}; expected one of {list(SCORE_TYPES)}", field="score_type"
        )
    return declared


def text_prompt(target: str) -> str:
    """The original text template: ``"A segmentation area of a {name}."`` with ``_``/``-`` as spaces."""
    return f"A segmentation area of a {target.lower().replace('_', ' ').replace('-', ' ')}."


def to_mask(output: object, shape: tuple[int, ...], *, where: str, scores: str = "logits") -> np.ndarray:
    """A model output as a bool mask of ``shape``: masks as is (non-zero), logits thresholded at 0,
    probabilities (``scores="probabilities"``) at 0.5.

    The mask is a new array, never a view of the output (a model may reuse its buffer at the next turn).
    Raises :class:`ModelError` (naming ``where``) for a non-array, a wrong shape or dtype, NaN scores, or
    probabilities outside ``[0, 1]``.
    """
    arr = model_array(output, shape, where=where, scores=scores)
    if arr.dtype == np.bool_:
        return arr.copy()
    if np.issubdtype(arr.dtype, np.floating):
        return arr > (0.5 if scores == "probabilities" else 0)
    return arr != 0


def model_array(output: object, shape: tuple[int, ...], *, where: str, scores: str = "logits") -> np.ndarray:
    """The model's answer as a numpy array of ``shape`` (a torch tensor converted, singleton axes squeezed),
    checked: bool, integer or floating; no NaN; probabilities (``scores="probabilities"``) within ``[0, 1]``.
    May be a view of the output. Raises :class:`ModelError` naming ``where`` otherwise."""
    if hasattr(output, "detach"):  # a torch tensor
        try:
            output = output.detach().cpu().numpy()
        except Exception as exc:
            raise ModelError(
                f"model output cannot be converted to numpy: {type(exc).__name__}: {exc} ({where})"
            ) from exc
    if not isinstance(output, np.ndarray):
        raise ModelError(f"model returned {type(output).__name__}, expected a numpy array ({where})")
    arr = np.squeeze(output) if output.shape != shape else output
    if arr.shape != shape:
        raise ModelError(f"model output has shape {output.shape}, expected {shape} ({where})")
    if np.issubdtype(arr.dtype, np.floating):
        if np.isnan(arr).any():
            raise ModelError(f"model output holds NaN {scores} ({where})")
        if scores == "probabilities" and (arr.min(initial=0.0) < 0 or arr.max(initial=0.0) > 1):
            raise ModelError(f"model output holds probabilities outside [0, 1] (score_type='probabilities'; {where})")
    elif arr.dtype != np.bool_ and not np.issubdtype(arr.dtype, np.integer):
        raise ModelError(f"model output has dtype {arr.dtype} ({where})")
    return arr


def noc_key(threshold: float) -> str:
    """``0.85 -> "noc_85"`` (the metric name of a NoC threshold)."""
    return f"noc_{math.floor(100 * threshold + 0.5)}"
