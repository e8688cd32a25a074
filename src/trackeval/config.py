"""Validated configuration: params.yaml / --config files and ``--set key=value`` overrides.

Every knob that changes a number lives here, so that the whole configuration can be logged as params and
hashed into the results (same inputs + same config -> byte-identical results.json).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trackeval.errors import ConfigError

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

KEY_TOKEN = re.compile(r"^[a-z0-9_]+$")

PositiveInt = Annotated[int, Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BootstrapConfig(_Section):
    """Case-level (patient-level) percentile bootstrap for every aggregate mean."""

    n_resamples: PositiveInt = 1000
    seed: int = 0
    confidence: float = Field(0.95, gt=0.0, lt=1.0)


class EngineConfig(_Section):
    """Where per-case scoring runs. ``processes`` uses one worker per core unless ``workers`` is set."""

    executor: Literal["local", "processes"] = "processes"
    workers: PositiveInt | None = None


class UMDConfig(_Section):
    """UMD protocol: organ label map, surface tolerance and the empty/missing policies.

    ``labels`` maps organ names to one label id or a list of ids (an nnU-Net style region: the union).
    ``hd_empty_penalty``: HD95 when exactly one of prediction/truth is empty for an organ: ``"diagonal"``
    (the diagonal of the image extent in mm, the largest distance possible in the volume) or a number of mm.
    ``missing_prediction``: ``worst`` scores a missing file as an all-background prediction (Dice 0, NSD 0,
    HD95 penalty on organs present in truth); ``exclude`` leaves its values NaN. Either way it is counted.
    ``geometry_tolerance``: largest absolute difference allowed between the prediction's and the truth's
    affine entries (mm).
    """

    labels: dict[str, int | tuple[int, ...]] = Field(
        default_factory=lambda: {name: i + 1 for i, name in enumerate(UMD_ORGANS)}
    )
    nsd_tolerance_mm: float = Field(1.0, ge=0.0)
    hd_percentile: float = Field(95.0, ge=0.0, le=100.0)
    hd_empty_penalty: Literal["diagonal"] | Annotated[float, Field(gt=0.0)] = "diagonal"
    missing_prediction: Literal["worst", "exclude"] = "worst"
    geometry_tolerance: float = Field(1e-3, ge=0.0)
    modality_pairs: tuple[tuple[str, str], ...] = (("ct", "pet"), ("mri", "pet"), ("ct", "mri"))

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: dict[str, int | tuple[int, ...]]) -> dict[str, int | tuple[int, ...]]:
        if not v:
            raise ValueError("the label map is empty")
        seen: dict[int, str] = {}
        for name, ids in v.items():
            if not KEY_TOKEN.match(name):
                raise ValueError(f"label name {name!r} must be lowercase letters, digits and '_'")
            for i in (ids,) if isinstance(ids, int) else ids:
                if i <= 0:
                    raise ValueError(f"label {name!r}: id {i} must be > 0 (0 is background)")
                if isinstance(ids, int) and i in seen:
                    raise ValueError(f"label id {i} is used by both {seen[i]!r} and {name!r}")
                seen.setdefault(i, name)
        return v


class EvalConfig(_Section):
    """Top-level configuration; one section per benchmark plus the shared engine and bootstrap."""

    bootstrap: BootstrapConfig = BootstrapConfig()
    engine: EngineConfig = EngineConfig()
    umd: UMDConfig = UMDConfig()

    def digest(self) -> str:
        """sha256 of the canonical JSON of this config (the ``params hash``)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


def load_config(path: Path | None = None, overrides: list[str] | None = None) -> EvalConfig:
    """Build an :class:`EvalConfig` from an optional YAML file and ``key=value`` overrides.

    Overrides use dotted keys (``umd.nsd_tolerance_mm=2``) and YAML values (``umd.labels={liver: 1}``).
    Raises :class:`ConfigError` naming the file and field on any problem.
    """
    tree: dict[str, Any] = {}
    source = str(path) if path else "defaults"
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        tree = loaded or {}
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {exc}") from exc
        _set_dotted(tree, key.strip(), value)
        source += f" + --set {key.strip()}"
    try:
        return EvalConfig.model_validate(tree)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"invalid config ({source}): field {loc}: {first['msg']}") from exc
