"""``trackeval track``, ``trackeval promote`` and ``trackeval compare`` (wired into :mod:`trackeval.cli`).

Exit codes: ``track`` / ``compare`` 0 on success; ``promote`` 0 pass, 1 fail; any ``TrackevalError`` 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from trackeval.commands.options import add_config_options
from trackeval.config import EvalConfig
from trackeval.errors import OutputError


def _config_options(p: argparse.ArgumentParser) -> None:
    add_config_options(
        p,
        "YAML config (params.yaml: tracking and gate sections)",
        "gate.margins.umd=0.02 or gate.margins.xray/seg=0.02 or tracking.uri=http://host:5000",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the ``track``, ``promote`` and ``compare`` subcommands."""
    tr = sub.add_parser("track", help="log results folders to MLflow (idempotent; retried; safe to re-run)")
    tr.add_argument("results", type=Path, nargs="+", metavar="RESULTS_DIR", help="folders holding results.json")
    tr.add_argument("--model-name", default="", help="model name (overrides results.json)")
    tr.add_argument("--model-version", default="", help="model version (overrides results.json)")
    _config_options(tr)
    pr = sub.add_parser("promote", help="gate a model version against @champion (exit 0 pass, 1 fail, 2 error)")
    pr.add_argument("--model", required=True, help="registered model name")
    pr.add_argument("--candidate", required=True, help="model version as tracked, a registry version number, @alias")
    _config_options(pr)
    cmp = sub.add_parser("compare", help="paired deltas with 95%% CIs between two versions, runs or results folders")
    cmp.add_argument("a", help="run id, NAME/VERSION, NAME@ALIAS or results folder (A in A - B)")
    cmp.add_argument("b", help="the same kinds of reference (B)")
    cmp.add_argument("--markdown", type=Path, help="also write the tables as markdown")
    cmp.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    _config_options(cmp)


def _cfg(args: argparse.Namespace) -> EvalConfig:
    from trackeval.api import load_config

    return load_config(args.config, args.overrides)


def run_track(args: argparse.Namespace) -> int:
    from trackeval.tracking.client import tracking_uri
    from trackeval.tracking.track import track_results

    cfg = _cfg(args)
    model = {k: v for k, v in (("name", args.model_name), ("version", args.model_version)) if v}
    console = Console(stderr=True)
    for t in track_results(list(args.results), cfg.tracking, model or None):
        state = "logged" if t.logged else "already tracked"
        console.print(f"{t.folder}: {t.unit} {t.model} {state} as run {t.run_id}", highlight=False, soft_wrap=True)
    console.print(f"tracking URI: {tracking_uri(cfg.tracking)}", highlight=False, soft_wrap=True)
    return 0


def run_promote(args: argparse.Namespace) -> int:
    from trackeval.api import gate_policies
    from trackeval.report.comparison import print_decision
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.model_registry import promote

    cfg = _cfg(args)
    decision, run_id = promote(Mlflow(cfg.tracking), args.model, args.candidate, cfg.gate, gate_policies(cfg))
    print_decision(decision)
    Console(stderr=True).print(f"decision recorded in run {run_id}", highlight=False, soft_wrap=True)
    return 0 if decision.verdict == "pass" else 1


def run_compare(args: argparse.Namespace) -> int:
    from trackeval.api import gate_policies
    from trackeval.io.atomic import atomic_path
    from trackeval.report.comparison import comparison_markdown, print_comparisons
    from trackeval.report.html import comparison_report
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.model_registry import compare_refs

    cfg = _cfg(args)
    comparisons = compare_refs(Mlflow(cfg.tracking), args.a, args.b, cfg.gate, gate_policies(cfg))
    print_comparisons(comparisons)
    for path, text in ((args.markdown, comparison_markdown), (args.html, comparison_report)):
        if path is not None:
            try:
                with atomic_path(path) as tmp:
                    tmp.write_text(text(comparisons), encoding="utf-8")
            except OSError as exc:
                raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "track": run_track,
    "promote": run_promote,
    "compare": run_compare,
}
