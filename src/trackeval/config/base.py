"""Shared configuration building blocks: frozen, strict sections and the engine/bootstrap sections."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

KEY_TOKEN = re.compile(r"^[a-z0-9_]+$")

PositiveInt = Annotated[int, Field(gt=0)]


class Section(BaseModel):
    """A config section: unknown keys are errors (typos never pass silently); values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BootstrapConfig(Section):
    """Case-level (patient-level) percentile bootstrap for every aggregate mean."""

    n_resamples: PositiveInt = 1000
    seed: int = 0
    confidence: float = Field(0.95, gt=0.0, lt=1.0)


class EngineConfig(Section):
    """Where per-case scoring runs. ``processes`` uses one worker per core unless ``workers`` is set."""

    executor: Literal["local", "processes"] = "processes"
    workers: PositiveInt | None = None
