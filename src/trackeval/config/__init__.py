"""Validated configuration: params.yaml / --config files and ``--set key=value`` overrides.

Every knob that changes a number lives in a section, so that the whole configuration can be logged as params
and hashed into the results (same inputs + same config -> byte-identical results.json). :class:`EvalConfig`
holds the shared sections (bootstrap, engine, tracking, gate); the benchmark sections (``umd``, ``xray``...)
are declared by the registered benchmark units, and :func:`trackeval.api.config_model` composes the full model
(:func:`trackeval.api.load_config` is the usual entry point). A benchmark's section model lives with its unit,
a plug-in's in the plug-in and a built-in's beside its adapter (``trackeval.benchmarks.umd.config``...); the
``pipeline`` section of params.yaml is read by :mod:`trackeval.pipeline.params`, not here.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from trackeval.config.base import BootstrapConfig, EngineConfig, Section
from trackeval.config.gate import GateConfig
from trackeval.config.loader import load_yaml
from trackeval.config.tracking import TrackingConfig
from trackeval.errors import ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "BootstrapConfig",
    "EngineConfig",
    "EvalConfig",
    "GateConfig",
    "TrackingConfig",
    "parse_config",
]


class EvalConfig(Section):
    """The shared sections; the full model (:func:`trackeval.api.config_model`) adds one field per benchmark
    config section declared by the registered units (``cfg.umd``, ``cfg.xray``...)."""

    bootstrap: BootstrapConfig = BootstrapConfig()
    engine: EngineConfig = EngineConfig()
    tracking: TrackingConfig = TrackingConfig()
    gate: GateConfig = GateConfig()

    def section(self, name: str) -> Section:
        """The config section ``name`` (a benchmark section such as ``umd``)."""
        value = getattr(self, name, None)
        if not isinstance(value, Section):
            raise ConfigError(f"the configuration has no section {name!r}")
        return value

    def digest(self) -> str:
        """sha256 of the canonical JSON of this config (the ``params hash``)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


C = TypeVar("C", bound=EvalConfig)

#: The params.yaml section that holds pipeline knobs (demo sizes, training); not part of the evaluation config.
PIPELINE_SECTION = "pipeline"


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


def _read_file(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file without its ``pipeline`` section; {} for an empty file."""
    try:
        loaded = load_yaml(Path(path).read_text(encoding="utf-8"), where=f"config file {path}")
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return {k: v for k, v in (loaded or {}).items() if k != PIPELINE_SECTION}


def _apply_override(tree: dict[str, Any], item: str) -> str:
    """Set one ``--set key=value`` (a YAML value) in ``tree``; return the key."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    try:
        value = load_yaml(raw, where=f"--set {key.strip()}", prefix=key.strip(), inline=True)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {exc}") from exc
    _set_dotted(tree, key.strip(), value)
    return key.strip()


def _misspelt(value: Any, section: Any) -> bool:
    """A user's top-level entry looks like a misspelt trackeval section: a mapping holding at least one of the
    section's own keys (``umdd: {nsd_tolerance_mm: 2}``). The user's own sections whose names are merely close
    (``train: {lr: 0.01}`` beside ``tracking``) do not: their keys are not the section's."""
    fields = getattr(getattr(section, "annotation", None), "model_fields", None)
    return isinstance(value, dict) and bool(fields) and any(str(k) in fields for k in value)


def _own_sections(tree: dict[str, Any], sections: dict[str, Any], path: Path) -> dict[str, Any]:
    """The top-level keys of a config file that are trackeval sections (``sections``: the model's fields). A
    params.yaml is shared with the user's own stages (DVC repositories have one), so any other key is theirs and
    ignored; one that is a near miss of a trackeval section's name and holds some of that section's keys
    (``umdd: {nsd_tolerance_mm: 2}``) is most likely a typo and is named in a warning (:func:`_misspelt`)."""
    known = list(sections)
    for key in sorted(set(tree) - set(known)):
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
        if close and _misspelt(tree[key], sections[close[0]]):
            log.warning(
                "config file %s: top-level key %r is not a trackeval section and is ignored (did you mean %r?)",
                path,
                str(key),
                close[0],
            )
    return {k: v for k, v in tree.items() if k in known}


def parse_config(model: type[C], path: Path | None = None, overrides: list[str] | None = None) -> C:
    """Build a ``model`` (an :class:`EvalConfig` model) from an optional YAML file and ``key=value`` overrides.

    The file may be a shared ``params.yaml``: trackeval reads its own sections (the shared ones and each
    registered unit's) and ignores every other top-level key (the ``pipeline`` section, the user's own stages'
    sections; a near miss of a trackeval section's name that holds its keys is a warning with "did you mean");
    unknown keys *inside* its sections stay errors, and so does an unknown section in an override. Overrides use
    dotted keys (``umd.nsd_tolerance_mm=2``) and YAML values (``umd.labels={liver: 1}``).
    Raises :class:`ConfigError` naming the file and field on any problem, a key repeated in the file or in a
    ``--set`` value included (:func:`trackeval.config.loader.load_yaml`).
    """
    tree = _own_sections(_read_file(path), model.model_fields, path) if path is not None else {}
    source = str(path) if path else "defaults"
    for item in overrides or []:
        source += f" + --set {_apply_override(tree, item)}"
    try:
        return model.model_validate(tree)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in _input_path(tree, first["loc"]))
        raise ConfigError(f"invalid config ({source}): field {loc}: {first['msg']}") from exc


def _input_path(tree: Any, loc: tuple[int | str, ...]) -> list[int | str]:
    """The part of a pydantic error location that indexes the user's input: the names pydantic adds for the
    members of a union (``constrained-int``, ``literal['diagonal']``, ``tuple[...]``) are dropped, so the message
    names ``umd.labels.liver``, the field as the user wrote it.

    >>> _input_path({"umd": {"labels": {"liver": 2**63}}}, ("umd", "labels", "liver", "constrained-int"))
    ['umd', 'labels', 'liver']
    """
    path: list[int | str] = []
    node = tree
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(node, dict | list | tuple) or not path:
            node = None  # a key the input lacks (a missing or extra field): keep it, nothing below it to walk
        else:
            continue  # below a scalar: a union member's name
        path.append(part)
    return path
