"""``trackeval audit <unit>``: a unit's leakage audit of its test set against a training manifest.

One subcommand per registered unit whose spec declares an ``audit`` hook (:data:`trackeval.spec.AuditHook`;
``umd`` among the built-in units), with the unit's inputs as options (as ``trackeval evaluate``) and
``--train-manifest``. Prints one line per check (``n_subject_overlap: 0``) and the hook's notes (coverage);
exit 1 when a check found an offending item.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from trackeval.commands.options import add_input_options, escape_help, given_inputs
from trackeval.io.escape import escape_terminal
from trackeval.registry import hook, unit, with_hook

#: the audit's own options; a unit's input field may not reuse them
AUDIT_OPTIONS = frozenset({"train_manifest"})


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``trackeval audit <unit>`` for every registered unit that declares an audit."""
    audit = sub.add_parser("audit", help="leakage and coverage audits of a test set (exit 1 when one fails)")
    units = audit.add_subparsers(dest="audit_benchmark", required=True)
    for spec in with_hook("audit"):
        help_text = escape_help(f"{spec.name}: the test set's leakage audit against a training manifest")
        p = units.add_parser(spec.name, help=help_text, description=help_text)
        add_input_options(p, [spec], AUDIT_OPTIONS)
        p.add_argument(
            "--train-manifest",
            type=Path,
            required=True,
            metavar="PATH",
            help="training CSV: subject_id[,case_id,image]",
        )


def run_audit(args: argparse.Namespace) -> int:
    """Run the unit's audit with the default configuration; 1 when a check failed, else 0."""
    from rich.console import Console

    from trackeval.api import load_config, validate_inputs

    spec = unit(args.audit_benchmark)
    inputs = validate_inputs(spec, given_inputs(args))
    report = hook(spec, "audit")(inputs, load_config(), args.train_manifest)
    console = Console()
    for f in report.findings:
        console.print(f"[{'red' if f.count else 'green'}]{f.check}: {f.count}[/] {escape_terminal(f.note)}")
    for line in report.notes:
        console.print(escape_terminal(line))
    return 1 if report.failed else 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"audit": run_audit}
