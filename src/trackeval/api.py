"""The library entry points: evaluate a benchmark unit, build the configuration, resolve the gate's policies.

The CLI (``trackeval evaluate``) and the DVC pipeline both call :func:`evaluate`; nothing else runs a benchmark.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from trackeval.config import EvalConfig, parse_config
from trackeval.errors import ConfigError, InputError
from trackeval.gate.policy import UnitPolicy, resolve_policies
from trackeval.registry import unit, units
from trackeval.results import BenchmarkResult
from trackeval.spec import BenchmarkSpec

__all__ = [
    "check_argument",
    "config_model",
    "evaluate",
    "gate_policies",
    "load_config",
    "unit_outputs",
    "validate_inputs",
]

#: what a path argument may be
PATH_TYPES = (str, os.PathLike)
PATH = "a path (str or pathlib.Path)"
CONFIG = "the configuration trackeval.load_config(...) returns, or None (the defaults)"


def check_argument(
    function: str, parameter: str, value: Any, types: type | tuple[type, ...], accepts: str, *, none: bool = False
) -> None:
    """The Python API's boundary check: a :class:`TypeError` naming ``trackeval.<function>``'s ``parameter``
    and what it ``accepts`` unless ``value`` is one of ``types`` (or ``None``, with ``none``). A bool is never
    taken for an int.

    >>> check_argument("promote", "model", None, str, "a registered model name (str)")
    Traceback (most recent call last):
    TypeError: trackeval.promote(): model must be a registered model name (str), not None
    """
    wanted = types if isinstance(types, tuple) else (types,)
    if (value is None and none) or (isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted)):
        return
    shown = "None" if value is None else f"{type(value).__name__} {_short(value)}"
    raise TypeError(f"trackeval.{function}(): {parameter} must be {accepts}, not {shown}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_config(function: str, config: Any) -> None:
    """``config`` is an :class:`EvalConfig` (what :func:`load_config` returns) or ``None``."""
    check_argument(function, "config", config, EvalConfig, CONFIG, none=True)


def _check_overrides(overrides: Any) -> None:
    if overrides is None:
        return
    accepts = "a list of 'key=value' strings, or None"
    if isinstance(overrides, str | bytes) or not isinstance(overrides, Sequence):
        hint = " (one override is a list of one: [...])" if isinstance(overrides, str) else ""
        raise TypeError(
            f"trackeval.load_config(): overrides must be {accepts}{hint}, "
            f"not {type(overrides).__name__} {_short(overrides)}"
        )
    for i, item in enumerate(overrides):
        check_argument("load_config", f"overrides[{i}]", item, str, "a 'key=value' string")


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

    Raises:
        TypeError: ``path`` is not a path or None, ``overrides`` not a list of strings (a single string included).
        ConfigError: a bad value or key in the file or an override.
    """
    check_argument("load_config", "path", path, PATH_TYPES, f"{PATH} to a params file, or None", none=True)
    _check_overrides(overrides)
    return parse_config(config_model(), Path(path) if path is not None else None, list(overrides or []))


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
        TypeError: an argument of the wrong type, naming it and what it accepts.
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
    check_argument("evaluate", "name", name, str, "a benchmark unit's name (str) such as 'umd' or 'xray/cls'")
    spec = unit(name)
    fields = ", ".join(f"{f!r}: ..." for f in spec.inputs.model_fields)
    check_argument(
        "evaluate", "inputs", inputs, (BaseModel, Mapping), f"{spec.name}'s inputs as a mapping ({{{fields}}})"
    )
    check_config("evaluate", config)
    check_argument("evaluate", "model", model, Mapping, "a mapping {'name': ..., 'version': ...}, or None", none=True)
    for key, value in (model or {}).items():
        check_argument("evaluate", f"model[{key!r}]", value, str, "a str")
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
