"""IMIS protocol configuration: prompts, click simulation, turns, Dice empty rule, NoC thresholds.

Defaults reproduce the original IMIS-Bench ``test.py`` (see ``docs/benchmarks/imis.md``):
random error-region clicks, first click among the 50 % of target pixels closest to the centroid, an exact
tight box, no prompt accumulation (only the new click and the previous mask go to the model), 9 turns.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from trackeval.config.base import KEY_TOKEN, Section

PromptType = Literal["point", "box", "text"]


class IMISConfig(Section):
    """IMIS interactive-segmentation protocol switches (every one is logged as a param).

    Attributes:
        split: which ``dataset.json`` list to evaluate (``test`` as the original; ``training`` for checks).
        prompt_types: initial prompt types to run; each runs its own ``max_turns`` sequence (follow-up turns are
            always clicks, as in the original).
        click_mode: ``random_error`` (original: a uniformly random pixel of prediction XOR truth, positive if
            missed, negative if a false alarm) or ``center_error`` (RITM style: the pixel farthest from the
            boundary of the largest connected false-negative or false-positive region).
        first_click_fraction: the first click is drawn uniformly among this fraction of target pixels closest to
            the target centroid (original 0.5; 1.0 = anywhere in the target).
        box_jitter_px: each box coordinate moves by a uniform integer in ``[-j, j]`` pixels (original test: 0).
        accumulate_prompts: ``False`` (original) sends only the new click + the previous mask; ``True`` sends
            every click so far plus the initial box/text.
        max_turns: interactions per sequence (turn 1 = the initial prompt).
        dice_empty_rule: Dice when prediction and truth are both empty: ``nan`` (not applicable, excluded) or
            ``original_eps`` (0, the original ``2|P&G| / (|P|+|G|+1e-8)``).
        noc_thresholds: Dice thresholds for NoC (clicks to reach; not reached -> ``max_turns + 1``); key
            ``imis/noc_<round(100 t)>``.
        seed: base seed of every click choice; per sequence and turn the generator is
            ``numpy.random.default_rng([seed, crc32(case_id), crc32(target), prompt index, turn])``.
        labels: NIfTI inputs only: target name -> label id; empty = every id present, named ``label_<id>``.
        geometry_tolerance: NIfTI inputs only: largest affine difference (mm) between image and label map.
    """

    split: Literal["test", "training"] = "test"
    prompt_types: tuple[PromptType, ...] = ("point", "box", "text")
    click_mode: Literal["random_error", "center_error"] = "random_error"
    first_click_fraction: float = Field(0.5, gt=0.0, le=1.0)
    box_jitter_px: int = Field(0, ge=0)
    accumulate_prompts: bool = False
    max_turns: Annotated[int, Field(ge=1, le=99)] = 9
    dice_empty_rule: Literal["nan", "original_eps"] = "nan"
    noc_thresholds: tuple[float, ...] = (0.85, 0.90)
    seed: int = 42
    labels: dict[str, int] = Field(default_factory=dict)
    geometry_tolerance: float = Field(1e-3, ge=0.0)

    @field_validator("prompt_types")
    @classmethod
    def _check_prompts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError("prompt_types must be a non-empty list without repeats")
        return v

    @field_validator("noc_thresholds")
    @classmethod
    def _check_thresholds(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        keys = [round(100 * t) for t in v]
        if any(not 0.0 < t <= 1.0 for t in v) or len(set(keys)) != len(keys):
            raise ValueError("noc_thresholds must be distinct Dice values in (0, 1] (distinct at 0.01)")
        return v

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: dict[str, int]) -> dict[str, int]:
        for name, i in v.items():
            if not KEY_TOKEN.match(name) or i <= 0:
                raise ValueError(f"label {name!r}: names are [a-z0-9_] tokens and ids are > 0")
        if len(set(v.values())) != len(v):
            raise ValueError("two target names share one label id")
        return v
