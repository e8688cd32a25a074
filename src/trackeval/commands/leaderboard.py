"""``trackeval leaderboard``: model versions x the primary metric of every benchmark unit, from MLflow."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from trackeval.commands.options import add_config_options
from trackeval.errors import InputError, OutputError
from trackeval.io.atomic import atomic_path
from trackeval.io.escape import escape_terminal
from trackeval.io.redact import redact_uri


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``trackeval leaderboard``."""
    p = sub.add_parser(
        "leaderboard", help="model versions x primary metric of every benchmark unit (95%% CIs, champion marked)"
    )
    p.add_argument("--model", help="registered model name (default: every model in the experiment)")
    p.add_argument(
        "--benchmark",
        action="append",
        default=[],
        metavar="UNIT",
        help="only this unit, e.g. umd or xray/cls (repeatable)",
    )
    p.add_argument("--markdown", type=Path, help="also write the table as Markdown (- for standard output)")
    p.add_argument("--html", type=Path, help="also write a self-contained HTML page")
    add_config_options(p, "YAML config (params.yaml: tracking and gate sections)", "tracking.uri=http://host:5000")


def _write(path: Path, text: str) -> None:
    if str(path) == "-":
        sys.stdout.write(text)
        return
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run_leaderboard(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trackeval.api import gate_policies, load_config
    from trackeval.report.leaderboard_table import leaderboard_html, leaderboard_markdown, print_leaderboard
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.leaderboard_rows import leaderboard

    cfg = load_config(args.config, args.overrides)
    policies = gate_policies(cfg)
    unknown = [u for u in args.benchmark if u not in policies]
    if unknown:
        raise InputError(f"unknown benchmark unit(s) {unknown}; registered: {sorted(policies)}", field="--benchmark")
    ml = Mlflow(cfg.tracking)
    board = leaderboard(ml, policies, args.model, args.benchmark)
    if not board.rows:
        what = f"model {args.model!r}" if args.model else "any model"
        where = redact_uri(ml.uri)
        raise InputError(f"no tracked version of {what} in experiment {cfg.tracking.experiment!r} at {where}")
    to_stdout = args.markdown is not None and str(args.markdown) == "-"
    print_leaderboard(board, Console(stderr=True, width=160) if to_stdout else None)
    if args.markdown is not None:
        _write(args.markdown, leaderboard_markdown(board))
    if args.html is not None:
        _write(args.html, leaderboard_html(board))
    ui = escape_terminal(redact_uri(ml.ui_url()))
    Console(stderr=True).print(f"MLflow UI: {ui}", highlight=False, soft_wrap=True)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"leaderboard": run_leaderboard}
