"""Benchmark discovery: every unit is registered through the ``trackeval.benchmarks`` entry-point group.

An entry point names a :class:`~trackeval.spec.BenchmarkSpec` or a sequence of them (one per task), e.g. in a
plug-in's ``pyproject.toml``::

    [project.entry-points."trackeval.benchmarks"]
    toy = "toybench:SPEC"

The four built-in benchmarks register the same way (see trackeval's own ``pyproject.toml``), so there is no
list of benchmark names anywhere else. Loading a spec imports only its declaration (no torch, MLflow...).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any, Literal

from trackeval.errors import ConfigError
from trackeval.spec import BenchmarkSpec, MetricInfo

#: The entry-point group benchmark units are declared in.
ENTRY_POINT_GROUP = "trackeval.benchmarks"
#: How a spec names a hook without importing it: ``package.module:function``.
HOOK_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*\Z")
#: The optional hooks of a spec (:attr:`~trackeval.spec.BenchmarkSpec.audit`, ``example``, ``outputs``).
Hook = Literal["audit", "example", "outputs"]


def _check_evaluate(ep_name: str, spec: BenchmarkSpec) -> None:
    """``spec.evaluate`` must take ``(inputs, config, model)``: a one-line error naming the unit otherwise."""
    try:
        inspect.signature(spec.evaluate).bind(None, None, None)
    except TypeError as exc:
        raise ConfigError(
            f"benchmark unit {spec.name!r} (entry point {ep_name}): evaluate must take (inputs, config, model): {exc}"
        ) from exc
    except ValueError:
        return  # a builtin without a signature: cannot be checked


def _check_hooks(ep_name: str, spec: BenchmarkSpec) -> None:
    """``audit``, ``example`` and ``outputs`` are None, a callable or a ``module:function`` reference (not imported
    here)."""
    for kind in ("audit", "example", "outputs"):
        value = getattr(spec, kind)
        if value is None or callable(value) or (isinstance(value, str) and HOOK_REF.fullmatch(value)):
            continue
        raise ConfigError(
            f"benchmark unit {spec.name!r} (entry point {ep_name}): {kind} must be a callable or "
            f"'module:function', got {value!r}"
        )


def _specs_of(name: str, obj: object) -> list[BenchmarkSpec]:
    items = [obj] if isinstance(obj, BenchmarkSpec) else list(obj) if isinstance(obj, Iterable) else [obj]
    for item in items:
        if not isinstance(item, BenchmarkSpec):
            raise ConfigError(
                f"entry point {ENTRY_POINT_GROUP}:{name} must name a BenchmarkSpec or a list of them, "
                f"got {type(item).__name__}"
            )
    return items


@functools.cache
def units() -> dict[str, BenchmarkSpec]:
    """All registered units by name, sorted (loaded once per process).

    Raises :class:`~trackeval.errors.ConfigError` for a plug-in that cannot be imported, declares something
    that is not a spec, registers a unit name twice, reuses a config section with a different model, or whose
    ``evaluate`` does not take ``(inputs, config, model)``, or whose ``audit`` or ``example`` is neither a
    callable nor a ``module:function`` reference. (A spec whose primary, summary or plotted metric is
    not one of its declared :class:`~trackeval.spec.MetricInfo` cannot even be built: the plug-in's import fails.)
    """
    found: dict[str, BenchmarkSpec] = {}
    sections: dict[str, BenchmarkSpec] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, never a traceback
            raise ConfigError(f"cannot load benchmark entry point {ep.name} = {ep.value}: {exc}") from exc
        for spec in _specs_of(ep.name, obj):
            if spec.name in found and found[spec.name] is not spec:
                raise ConfigError(f"benchmark unit {spec.name!r} is registered twice (entry point {ep.name})")
            other = sections.get(spec.config_section)
            if other is not None and other.config_model is not spec.config_model:
                raise ConfigError(
                    f"benchmark units {other.name!r} and {spec.name!r} declare config section "
                    f"{spec.config_section!r} with different models"
                )
            if spec.config_section in ("bootstrap", "engine", "tracking", "gate", "pipeline"):
                raise ConfigError(
                    f"benchmark unit {spec.name!r} uses the reserved config section {spec.config_section!r}"
                )
            _check_evaluate(ep.name, spec)
            _check_hooks(ep.name, spec)
            found[spec.name] = spec
            sections.setdefault(spec.config_section, spec)
    return dict(sorted(found.items()))


def unit(name: str) -> BenchmarkSpec:
    """The unit called ``name`` (``umd``, ``xray/cls``); a clear error listing the known units otherwise."""
    registered = units()
    if name not in registered:
        raise ConfigError(f"unknown benchmark unit {name!r}; registered: {', '.join(registered) or 'none'}")
    return registered[name]


def by_benchmark() -> dict[str, list[BenchmarkSpec]]:
    """Units grouped by benchmark (``xray`` -> its task units): one ``trackeval evaluate`` subcommand each."""
    out: dict[str, list[BenchmarkSpec]] = {}
    for spec in units().values():
        out.setdefault(spec.benchmark, []).append(spec)
    return out


def metric_info(unit_name: str, path: str) -> MetricInfo | None:
    """The declared :class:`~trackeval.spec.MetricInfo` of ``path`` (relative to the unit) of a registered
    unit, or None (an unknown unit, e.g. a plug-in not installed here, or an undeclared metric)."""
    spec = units().get(unit_name)
    return None if spec is None else spec.metric_info(path)


def with_hook(kind: Hook) -> list[BenchmarkSpec]:
    """The registered units that declare the hook ``kind`` (``audit``: ``trackeval audit <unit>``; ``example``:
    ``trackeval demo``), by name."""
    return [spec for spec in units().values() if getattr(spec, kind) is not None]


def hook(spec: BenchmarkSpec, kind: Hook) -> Callable[..., Any]:
    """``spec``'s hook ``kind`` as a callable, importing a ``module:function`` reference (the import runs only
    here, when the hook is used). Raises :class:`~trackeval.errors.ConfigError` (one line naming the unit) when
    the unit declares none, or the reference cannot be imported or names something that is not callable."""
    value = getattr(spec, kind)
    if value is None:
        raise ConfigError(f"benchmark unit {spec.name!r} declares no {kind}")
    if not isinstance(value, str):
        return value
    module, _, name = value.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, never a traceback
        raise ConfigError(f"benchmark unit {spec.name!r}: cannot load its {kind} {value}: {exc}") from exc
    if not callable(found):
        raise ConfigError(f"benchmark unit {spec.name!r}: its {kind} {value} is not callable")
    return found
