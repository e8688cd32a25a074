"""Command-line options shared by the ``trackeval`` subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path


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
