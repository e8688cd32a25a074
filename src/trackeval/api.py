"""The library entry points: evaluate a benchmark unit, build the configuration, resolve the gate's policies.

The CLI (``trackeval evaluate``) and the DVC pipeline both call :func:`evaluate`; nothing else runs a benchmark.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from trackeval.config import EvalConfig, parse_config
from trackeval.errors import ConfigError, InputError
from trackeval.gate.policy import UnitPolicy, resolve_policies
from trackeval.registry import unit, units
from trackeval.results import BenchmarkResult
from trackeval.spec import BenchmarkSpec

__all__ = ["config_model", "evaluate", "gate_policies", "load_config", "unit_outputs", "validate_inputs"]


@functools.cache
def config_model() -> type[EvalConfig]:
    """:class:`EvalConfig` with one field per config section declared by the registered units (defaults as
    declared by each section's model)."""
    sections: dict[str, Any] = {}
    for spec in units().values():
        sections.setdefault(spec.config_section, (spec.config_model, spec.config_model()))
    return create_model("EvalConfig", __base__=EvalConfig, **sections)


def load_config(path: Path | str | None = None, overrides: list[str] | None = None) -> EvalConfig:
    """The validated configuration from an optional YAML file (params.yaml layout) and ``key=value`` overrides.

    >>> cfg = load_config(None, ["umd.nsd_tolerance_mm=2"])
    >>> cfg.umd.nsd_tolerance_mm, cfg.bootstrap.n_resamples
    (2.0, 1000)
    """
    return parse_config(config_model(), Path(path) if path is not None else None, overrides)


def validate_inputs(spec: BenchmarkSpec, inputs: BaseModel | Mapping[str, Any]) -> BaseModel:
    """``inputs`` as the unit's inputs model; a clear :class:`InputError` naming the field otherwise."""
    if isinstance(inputs, spec.inputs):
        return inputs
    if isinstance(inputs, BaseModel):
        inputs = inputs.model_dump()
    try:
        return spec.inputs.model_validate(dict(inputs))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"not an input of {spec.name} (inputs: {', '.join(spec.inputs.model_fields)})"
        raise InputError(f"{spec.name}: {message}", field=field) from exc


def evaluate(
    name: str,
    inputs: BaseModel | Mapping[str, Any],
    config: EvalConfig | None = None,
    model: Mapping[str, str] | None = None,
) -> BenchmarkResult:
    """Score one benchmark unit and return its results object (no files are written).

    Args:
        name: the unit (``umd``, ``mir3d``, ``imis``, ``xray/cls``, ... or a plug-in's).
        inputs: the unit's inputs (its pydantic model, or a mapping such as ``{"ground_truth": ...}``).
        config: the evaluation configuration (default: :func:`load_config` with no file).
        model: ``{"name": ..., "version": ...}`` recorded in the results (optional).

    Raises:
        trackeval.errors.TrackevalError: bad inputs or configuration, with the file, case and field.

    Example (the bundled real UMD example: chest CT organ labels of three subjects, CT and PET)::

        >>> import trackeval
        >>> from trackeval.demo.umd_example import example_dirs
        >>> gt, pred = example_dirs()
        >>> cfg = trackeval.load_config(None, ["engine.executor=local", "engine.cache=false"])
        >>> result = trackeval.evaluate("umd", {"ground_truth": gt, "predictions": pred}, cfg)
        >>> result.unit, result.data.n_cases
        ('umd', 6)
        >>> 0.0 < result.aggregates["umd/dsc"].value < 1.0
        True
    """
    spec = unit(name)
    checked = validate_inputs(spec, inputs)
    cfg = config if config is not None else load_config()
    if not hasattr(cfg, spec.config_section):
        raise ConfigError(f"the configuration has no {spec.config_section!r} section (build it with load_config)")
    result = spec.evaluate(checked, cfg, dict(model or {}))
    if result.benchmark != spec.benchmark:
        raise ConfigError(f"unit {spec.name} returned results of benchmark {result.benchmark!r}")
    return result.model_copy(update={"task": spec.task, "plots": list(spec.plots)})


def gate_policies(cfg: EvalConfig) -> dict[str, UnitPolicy]:
    """``{unit: policy}``: every registered unit's primary metric, margins and floor under ``cfg.gate``."""
    return resolve_policies(cfg.gate, units().values())


def unit_outputs(
    name: str, inputs: BaseModel | Mapping[str, Any], config: EvalConfig, result: BenchmarkResult
) -> dict[str, bytes]:
    """The unit's extra files for these inputs and result (:attr:`~trackeval.spec.BenchmarkSpec.outputs`, e.g.
    UMD's nnU-Net ``summary.json`` with ``--nnunet-summary``); ``{}`` when it declares none.

    Raises:
        ConfigError: a file name that is not a plain name, or is one of the results set's.
    """
    from trackeval.io.results_folder import OUTPUT_FILES
    from trackeval.registry import hook

    spec = unit(name)
    if spec.outputs is None:
        return {}
    extra = dict(hook(spec, "outputs")(validate_inputs(spec, inputs), config, result))
    for file_name in extra:
        if file_name in OUTPUT_FILES or Path(file_name).name != file_name or file_name in ("", ".", ".."):
            raise ConfigError(f"benchmark unit {spec.name!r}: extra output {file_name!r} is not a free plain file name")
    return extra
