"""Command-line options shared by the ``trackeval`` subcommands: config and ``--set``, and the options generated
from a benchmark unit's inputs model (``evaluate``, ``audit``)."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trackeval.errors import ConfigError

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from trackeval.spec import BenchmarkSpec


def add_config_options(p: argparse.ArgumentParser, config_help: str, set_example: str) -> None:
    """``--config FILE`` and repeatable ``--set KEY=VALUE`` (see :func:`trackeval.config.load_config`)."""
    p.add_argument("--config", type=Path, help=config_help)
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a config value, e.g. --set {set_example} (repeatable)",
    )


#: argparse ``dest`` prefix of the options generated from a unit's inputs (keeps them apart from the others).
DEST = "input__"


def _kind(annotation: Any) -> str:
    """``path``, ``list``, ``flag`` or ``text``: how a field's annotation is spelled on the command line."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _kind(inner[0]) if len(inner) == 1 else "text"
    if annotation is bool:
        return "flag"
    if origin in (list, tuple, set, frozenset):
        return "list"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return "text"


def escape_help(text: str) -> str:
    """argparse formats help with ``%``: a literal percent sign must be doubled."""
    return text.replace("%", "%%")


def _add_field(p: argparse.ArgumentParser, name: str, info: FieldInfo, required: bool) -> None:
    option = "--" + name.replace("_", "-")
    help_text = escape_help(info.description or name)
    kind = _kind(info.annotation)
    if kind == "flag":
        p.add_argument(option, dest=DEST + name, action="store_true", help=help_text)
    elif kind == "list":
        p.add_argument(option, dest=DEST + name, action="append", metavar="VALUE", help=f"{help_text} (repeatable)")
    else:
        p.add_argument(
            option,
            dest=DEST + name,
            type=Path if kind == "path" else str,
            required=required,
            metavar="PATH" if kind == "path" else "VALUE",
            help=help_text,
        )


def add_input_options(p: argparse.ArgumentParser, specs: Sequence[BenchmarkSpec], reserved: frozenset[str]) -> None:
    """One option per field of the units' inputs models (their union; required when every unit requires it):
    ``ground_truth`` -> ``--ground-truth``; ``Path`` fields take a path, ``list`` fields repeat, ``bool`` fields
    are flags. A field named like one of the command's own options (``reserved``) is a ConfigError."""
    fields: dict[str, FieldInfo] = {}
    required: dict[str, bool] = {}
    for spec in specs:
        for name, info in spec.inputs.model_fields.items():
            if name in reserved:
                raise ConfigError(f"benchmark unit {spec.name}: input field {name!r} clashes with a common option")
            fields.setdefault(name, info)
            required[name] = required.get(name, True) and info.is_required()
    for name, info in fields.items():
        _add_field(p, name, info, required[name])


def given_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The given input options by field name (options left out keep the model's defaults)."""
    return {k[len(DEST) :]: v for k, v in vars(args).items() if k.startswith(DEST) and v is not None and v is not False}
