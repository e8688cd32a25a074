"""The ``pipeline`` section of params.yaml: demo data sizes, seeds and the two model versions' specs.

The evaluation sections of the same file (``umd``, ``imis``, ``gate``, ...) are read by
:func:`trackeval.config.load_config`, which ignores this section; this module reads only this section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from trackeval.config.base import Section
from trackeval.config.loader import load_yaml
from trackeval.demo.segmodel import SegModelSpec
from trackeval.errors import ConfigError

PositiveInt = Annotated[int, Field(gt=0)]


class UMDDemo(Section):
    """UMD demo subjects: ``n_train`` + ``n_test`` warps of the real CT (CT + simulated PET each)."""

    n_train: PositiveInt = 2
    n_test: PositiveInt = 4
    seed: int = 0
    factor: PositiveInt = 2  # extra downsampling of the 128 x 128 x 66 source volumes


class XRayDemo(Section):
    """X-ray demo: ``cls_images`` NIH label rows (of those in ``data/``) scored by a simulated classifier."""

    cls_images: PositiveInt = 1000


class IMISModel(Section):
    """A version's interactive model: the classical region grower, or the click U-Net trained ``iterations``."""

    model: Literal["region_grower", "click_unet"] = "region_grower"
    iterations: PositiveInt = 300
    seed: int = 0


class Mir3dModel(Section):
    """A version's 3D-MIR rankings: a documented baseline (no CT volumes ship, so no image model can run)."""

    baseline: Literal["random", "oracle"] = "random"
    seed: int = 0


class VersionSpec(Section):
    """Everything that defines one model version in the demo."""

    segmenter: SegModelSpec = SegModelSpec()
    imis: IMISModel = IMISModel()
    mir3d: Mir3dModel = Mir3dModel()
    #: simulated X-ray classifier: score logit = signal * (+1 positive / -1 negative) + N(0, 1) - 2
    xray_cls_signal: Annotated[float, Field(ge=0.0)] = 1.0
    xray_cls_seed: int = 0


class EvaluationParams(Section):
    """One evaluation of the pipeline: a benchmark unit and its inputs.

    Input values are paths with placeholders filled in per version: ``{version}`` (the version's name, for a
    repository's own layout such as ``predictions/{version}/umd``) and, in the demo's layout, ``{data}`` (the raw
    data folder), ``{prepared}`` (the prepare stage's output) and ``{predictions}`` (``work/predictions/<version>``).
    """

    unit: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*(/[a-z][a-z0-9_]*)?$")]
    inputs: dict[str, str]


class PipelineParams(Section):
    """The whole ``pipeline`` section. ``evaluations``: ``{eval folder name: unit + inputs}`` (the folder
    ``work/eval/<name>/<version>``; dvc.yaml's evaluate matrix lists the same names). ``versions``: oldest first
    (the gate's order); a list of names (``[v1, v2]``, a repository's own models) or the demo's
    ``{name: spec}``."""

    model_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")] = "seg"
    umd: UMDDemo = UMDDemo()
    xray: XRayDemo = XRayDemo()
    versions: dict[str, VersionSpec] = Field(default_factory=lambda: {"v1": VersionSpec(), "v2": VersionSpec()})
    evaluations: dict[str, EvaluationParams] = Field(default_factory=dict)

    @field_validator("versions", mode="before")
    @classmethod
    def _version_list(cls, v: object) -> object:
        """``[v1, v2]`` means ``{v1: {}, v2: {}}`` (versions that only name a repository's own models)."""
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            if len(set(v)) != len(v):
                raise ValueError("a version is listed twice")
            return {x: {} for x in v}
        return v

    def version(self, name: str) -> VersionSpec:
        """The spec of version ``name``; a :class:`ConfigError` names the known versions otherwise."""
        if name not in self.versions:
            raise ConfigError(f"invalid config: field pipeline.versions: no version {name!r} ({sorted(self.versions)})")
        return self.versions[name]

    def evaluation(self, name: str) -> EvaluationParams:
        """The evaluation ``name``; a :class:`ConfigError` names the known ones otherwise."""
        if name not in self.evaluations:
            raise ConfigError(
                f"invalid config: field pipeline.evaluations: no evaluation {name!r} ({sorted(self.evaluations)})"
            )
        return self.evaluations[name]


def load_pipeline_params(path: Path) -> PipelineParams:
    """Read and validate the ``pipeline`` section of ``path`` (params.yaml); ConfigError naming the field."""
    try:
        tree = load_yaml(Path(path).read_text(encoding="utf-8"), where=f"config file {path}") or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if not isinstance(tree, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    try:
        return PipelineParams.model_validate(tree.get("pipeline") or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"invalid config ({path}): field pipeline.{loc}: {first['msg']}") from exc
