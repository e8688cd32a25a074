"""``trackeval track``, ``trackeval promote``, ``trackeval compare`` and ``trackeval verify`` (wired into
:mod:`trackeval.cli`).

Exit codes: ``track`` / ``compare`` 0 on success; ``promote`` 0 pass, 1 fail (also with ``--dry-run``); ``verify``
0 when every alias rests on evidence that passed, 1 with one line per problem; any
``TrackevalError`` 2, among them ``compare`` asked for something it cannot pair (a missing version, no common
unit, results of other data or protocol, no paired case: the units that did pair are still printed).

``compare --markdown -`` and ``promote --summary -`` write the Markdown to standard output; the terminal tables
then go to standard error, so the output can be appended as is to a file such as ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from trackeval.commands.options import add_config_options
from trackeval.config import EvalConfig
from trackeval.errors import InputError, OutputError
from trackeval.io.atomic import atomic_path
from trackeval.io.escape import escape_markdown, escape_terminal, visible_controls
from trackeval.io.redact import redact_uri

if TYPE_CHECKING:
    from trackeval.gate.compare import BenchmarkComparison
    from trackeval.gate.decide import Decision
    from trackeval.tracking.client import Mlflow

#: the file name meaning standard output (``--markdown -``, ``--summary -``)
STDOUT = "-"


def _config_options(p: argparse.ArgumentParser) -> None:
    add_config_options(
        p,
        "YAML config (params.yaml: tracking and gate sections)",
        "gate.margins.umd=0.02 or gate.margins.xray/seg=0.02 or tracking.uri=http://host:5000",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the ``track``, ``promote``, ``compare`` and ``verify`` subcommands."""
    tr = sub.add_parser("track", help="log results folders to MLflow (idempotent; retried; safe to re-run)")
    tr.add_argument("results", type=Path, nargs="+", metavar="RESULTS_DIR", help="folders holding results.json")
    tr.add_argument("--model-name", default="", help="model name (overrides results.json)")
    tr.add_argument("--model-version", default="", help="model version (overrides results.json)")
    tr.add_argument(
        "--replace",
        action="store_true",
        help="allow pointing a model version at other results than the ones it has (other ground truth or "
        "another results.json digest): the previous evaluation run is kept, every alias that rested on the old "
        "evidence is withdrawn and the version becomes @challenger, to be gated again",
    )
    _config_options(tr)
    pr = sub.add_parser("promote", help="gate a model version against @champion (exit 0 pass, 1 fail, 2 error)")
    pr.add_argument("--model", help="registered model name (required unless --explain)")
    pr.add_argument(
        "--candidate", help="model version as tracked, a registry version number, @alias (required unless --explain)"
    )
    pr.add_argument(
        "--explain",
        metavar="DECISION_RUN",
        help="re-derive a recorded decision from the evaluation runs it names on both sides and its recorded gate "
        "config; prints it and exits 0 when the numbers are reproduced exactly, 1 when they are not",
    )
    pr.add_argument(
        "--dry-run",
        action="store_true",
        help="compute the decision against @champion (against @previous when the candidate is the champion) "
        "without recording a decision run, tagging the candidate or moving aliases (exit 0 pass, 1 fail)",
    )
    pr.add_argument(
        "--summary",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help='also append the decision as Markdown to FILE, even when the gate fails (e.g. "$GITHUB_STEP_SUMMARY"; '
        "- = standard output; repeatable)",
    )
    _config_options(pr)
    cmp = sub.add_parser("compare", help="paired deltas with 95%% CIs between two versions, runs or results folders")
    cmp.add_argument("a", help="run id, NAME/VERSION, NAME@ALIAS or results folder (A in A - B)")
    cmp.add_argument("b", help="the same kinds of reference (B)")
    cmp.add_argument(
        "--markdown",
        type=Path,
        help="also write the tables as markdown (- = standard output; the terminal tables then go to standard error)",
    )
    cmp.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    _config_options(cmp)
    _add_verify(sub)


def _add_verify(sub: argparse._SubParsersAction) -> None:
    """Add the ``verify`` subcommand."""
    ve = sub.add_parser(
        "verify",
        help="check that @champion and @previous rest on recorded passing decisions, signed by a trusted key, whose "
        "evidence still holds (exit 0 all hold, 1 one line per problem, 2 bad input)",
    )
    ve.add_argument("--model", required=True, help="registered model name")
    ve.add_argument(
        "--trusted-key",
        action="append",
        default=[],
        metavar="PUB",
        help="a trusted public key file (gate.pub; repeatable; added to gate.trusted_keys): the decisions behind "
        "@champion and @previous must be signed by one of them; with none, signatures are not checked (unsigned)",
    )
    _config_options(ve)


def _cfg(args: argparse.Namespace) -> EvalConfig:
    from trackeval.api import load_config

    return load_config(args.config, args.overrides)


def run_track(args: argparse.Namespace) -> int:
    from trackeval.report.console import missing_line
    from trackeval.tracking.client import Mlflow, tracking_uri
    from trackeval.tracking.track import track_results

    cfg = _cfg(args)
    model = {k: v for k, v in (("name", args.model_name), ("version", args.model_version)) if v}
    console = Console(stderr=True)
    shown: set[str] = set()
    for t in track_results(list(args.results), cfg.tracking, model or None, replace=args.replace):
        state = "logged" if t.logged else "already tracked"
        repaired = f"; completed now: {', '.join(t.repaired)}" if t.repaired else ""
        line = f"{t.folder}: {t.unit} {t.model} {state} as run {t.run_id}{repaired}"
        console.print(escape_terminal(line), highlight=False, soft_wrap=True)
        if t.replaced:  # --replace: the old run stays, tagged trackeval.replaced_by and renamed "... (replaced)"
            line = f"{t.folder}: {t.unit} {t.model} replaced run {t.replaced} by {t.run_id}"
            console.print(escape_terminal(line), highlight=False, soft_wrap=True)
        if t.n_missing_predictions:
            warn = "warning: " + missing_line(t.unit, t.model, t.n_missing_predictions)
            console.print(escape_terminal(warn), highlight=False, soft_wrap=True)
        for moved in t.aliases:
            if moved not in shown:  # one line per alias, not per folder of the version
                shown.add(moved)
                console.print(escape_terminal(f"{t.model}: {moved}"), highlight=False, soft_wrap=True)
    uri, ui = redact_uri(tracking_uri(cfg.tracking)), redact_uri(Mlflow(cfg.tracking).ui_url())  # no secret shown
    console.print(f"tracking URI: {escape_terminal(uri)}", highlight=False, soft_wrap=True)
    console.print(f"MLflow UI: {escape_terminal(ui)}", highlight=False, soft_wrap=True)
    return 0


def _is_stdout(path: Path | None) -> bool:
    return path is not None and str(path) == STDOUT


def append_markdown(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing; ``-``: standard output) in one write of an ``O_APPEND``
    descriptor, so concurrent appenders (steps writing ``$GITHUB_STEP_SUMMARY``) do not interleave. A blank line
    separates it from what the file already holds. Raises :class:`OutputError` naming the file."""
    text = text.rstrip("\n") + "\n"
    if _is_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = memoryview((("\n" if os.fstat(fd).st_size else "") + text).encode("utf-8"))
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run_promote(args: argparse.Namespace) -> int:
    from trackeval.report.comparison import decision_markdown, missing_markdown, print_decision
    from trackeval.tracking.gatekeeper import Gate

    gate = Gate.from_config(_cfg(args))
    ml = gate.store
    if args.explain:
        return _explain(ml, args.explain)
    missing = [f"--{n}" for n in ("model", "candidate") if not getattr(args, n)]
    if missing:
        raise InputError(f"promote needs {' and '.join(missing)} (or --explain DECISION_RUN)", field=missing[0])
    stdout_summary = any(_is_stdout(p) for p in args.summary)
    console = Console(width=140, stderr=stdout_summary)
    err = Console(stderr=True)
    before = _aliases_before(ml, args.model, args.candidate)
    promotion = gate.promote(args.model, args.candidate, dry_run=args.dry_run)
    decision, baseline, label, run_id = promotion.decision, promotion.baseline, promotion.label, promotion.run_id
    if decision is None:  # a dry run: the candidate is the champion and there is no @previous
        why = f"{args.model}@champion is {label} and there is no @previous to compare it with: nothing to gate"
        console.print(f"candidate is the champion: {escape_terminal(why)}", highlight=False, soft_wrap=True)
        md = escape_markdown
        text = f"# Gate {md(args.model)}: candidate {md(label)} is the champion\n\n{md(why)} (dry run)."
        for path in args.summary:
            append_markdown(path, text)
        return 0
    if run_id is None:
        note = "_Dry run (`trackeval promote --dry-run`): no decision recorded, no alias moved._"
        status = "dry run: no decision recorded, no alias moved"
    else:
        signed = _signature(ml, run_id)
        note = f"_Decision recorded in MLflow run `{run_id}` ({signed})._"
        status = f"decision recorded in run {run_id} ({signed})"
    missing_lines = _decision_missing(ml, args.model, decision, baseline)
    print_decision(decision, console, missing=missing_lines)
    _print_moves(ml, args, decision, baseline, before, console)
    err.print(status, highlight=False, soft_wrap=True)
    if args.summary:
        text = decision_markdown(decision, baseline=baseline).rstrip("\n") + "\n\n" + note
        if missing_lines:
            text += "\n\n" + missing_markdown(missing_lines)
        for path in args.summary:
            append_markdown(path, text)
    return 0 if decision.verdict == "pass" else 1


def _signature(ml: Mlflow, run_id: str) -> str:
    """``signed by key <id>`` or ``unsigned: set TRACKEVAL_GATE_KEY ...``, as decision run ``run_id`` is tagged."""
    from trackeval.attest.dsse import short
    from trackeval.tracking.attestations import UNSIGNED
    from trackeval.tracking.tags import SIGNATURE_TAG

    keyid = ml.call("get_run", ml.client.get_run, run_id).data.tags.get(SIGNATURE_TAG, UNSIGNED)
    if keyid == UNSIGNED:
        return "unsigned: set TRACKEVAL_GATE_KEY or gate.signing_key to sign"
    return f"signed by key {short(keyid)}"


def _aliases_before(ml: Mlflow, name: str, candidate: str) -> tuple[str, dict[str, str]]:
    """The candidate's registry version and the registered model's aliases before the gate (a model or
    version that is not registered is reported here, before anything else is read)."""
    from trackeval.tracking.model_registry import registered_aliases, resolve_version

    version = str(resolve_version(ml, name, candidate).version)
    return version, {k: str(v) for k, v in registered_aliases(ml, name).items()}


def _print_moves(
    ml: Mlflow,
    args: argparse.Namespace,
    decision: Decision,
    baseline: str,
    before: tuple[str, dict[str, str]],
    console: Console,
) -> None:
    """After the verdict: the aliases that moved (``moved @champion: v1 -> v2``), with ``--dry-run`` those a
    passing promote would move (``would move ...``; none when the candidate is the champion, which ``promote``
    refuses), or ``aliases unchanged``."""
    from trackeval.tracking.model_registry import registered_aliases
    from trackeval.tracking.promotion import alias_moves, passing_aliases

    candidate, aliases = before
    if args.dry_run:
        moves = decision.verdict == "pass" and baseline == "champion"
        after = passing_aliases(aliases, candidate) if moves else aliases
    else:
        after = {k: str(v) for k, v in registered_aliases(ml, args.model).items()}
    verb = "would move" if args.dry_run else "moved"
    lines = [f"{verb} {line}" for line in alias_moves(ml, args.model, aliases, after)] or ["aliases unchanged"]
    for line in lines:
        console.print(escape_terminal(line), highlight=False, soft_wrap=True)


def _decision_missing(ml: Mlflow, name: str, decision: Decision, baseline: str) -> list[str]:
    """A :func:`~trackeval.report.console.missing_line` per unit of the decision's candidate and baseline whose
    tracked evaluation has missing predictions (display only: the gate's decision does not read this)."""
    from trackeval.report.console import missing_line
    from trackeval.tracking.missing import version_missing
    from trackeval.tracking.model_registry import resolve_version

    out = []
    for role, label in (("candidate", decision.candidate), (baseline, decision.champion)):
        if label is not None:
            for unit, n in version_missing(ml, resolve_version(ml, name, label)).items():
                out.append(missing_line(unit, f"{role} {label}", n))
    return out


def _explain(ml: Mlflow, decision_run: str) -> int:
    """``promote --explain``: the recorded decision, re-derived; 1 when any number or check differs."""
    from trackeval.report.comparison import print_decision
    from trackeval.tracking.decision_runs import explain

    recorded, recomputed = explain(ml, decision_run)
    print_decision(recomputed, Console(width=140))
    same = recorded.model_dump(mode="json") == recomputed.model_dump(mode="json")
    err = Console(stderr=True)
    if same:
        err.print(
            f"decision run {escape_terminal(decision_run)}: reproduced exactly from the evaluation runs it records",
            highlight=False,
        )
        return 0
    err.print(
        f"decision run {escape_terminal(decision_run)}: NOT reproduced (recorded verdict {recorded.verdict}, "
        f"now {recomputed.verdict}); the evaluation runs or their results changed since the decision",
        highlight=False,
    )
    return 1


def run_compare(args: argparse.Namespace) -> int:
    from trackeval.report.comparison import (
        comparison_markdown,
        missing_markdown,
        missing_prediction_lines,
        print_comparisons,
        print_missing,
        print_reader_comparisons,
        reader_comparison_markdown,
    )
    from trackeval.report.html import comparison_report
    from trackeval.tracking.gatekeeper import Gate

    comparisons, pairs = Gate.from_config(_cfg(args)).compare(args.a, args.b)
    to_stdout = _is_stdout(args.markdown)
    console = Console(width=140, stderr=to_stdout)
    print_comparisons(comparisons, console)
    print_reader_comparisons(pairs, console)  # human readers' points (xray/cls --readers): shown, never gated
    missing = missing_prediction_lines(comparisons, pairs)
    print_missing(missing, console)

    def markdown() -> str:
        text = comparison_markdown(comparisons).rstrip("\n") + "\n"
        readers = reader_comparison_markdown(pairs)
        text += "\n" + readers if readers else ""
        return text + "\n" + missing_markdown(missing) if missing else text

    if to_stdout:
        sys.stdout.write(markdown())
        sys.stdout.flush()
    texts = {
        None if to_stdout else args.markdown: markdown,
        args.html: lambda: comparison_report(comparisons, overlays=pairs),  # both versions on the same axes
    }
    for path, text in texts.items():
        if path is not None:
            try:
                with atomic_path(path) as tmp:
                    tmp.write_text(text(), encoding="utf-8")
            except OSError as exc:
                raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    _require_paired(args.a, args.b, comparisons)
    return 0


def _require_paired(a: str, b: str, comparisons: list[BenchmarkComparison]) -> None:
    """``compare`` fails (exit 2, one line naming the unit's metric) when a unit it was asked to compare could
    not be paired: other ground truth, protocol or case set, or no case with a value on both sides. The units
    that paired are printed and written all the same."""
    unpaired = [c for c in comparisons if c.problems]
    if unpaired:
        first = unpaired[0]
        more = f" (and {len(unpaired) - 1} more unit(s))" if len(unpaired) > 1 else ""
        raise InputError(
            f"cannot pair {a} with {b} on {first.unit}: {'; '.join(first.problems)}{more}", field=first.metric
        )


def run_verify(args: argparse.Namespace) -> int:
    """``trackeval verify --model NAME``: one line per alias; problems on standard output (exit 1), the aliases
    that hold on standard error (exit 0 when all do)."""
    from trackeval.api import verify

    statuses = verify(args.model, config=_cfg(args), trusted_keys=args.trusted_key)
    err = Console(stderr=True)
    for status in statuses:
        if status.problem:
            sys.stdout.write(visible_controls(status.line()) + "\n")
        else:
            err.print(escape_terminal(status.line()), highlight=False, soft_wrap=True)
    sys.stdout.flush()
    problems = sum(1 for s in statuses if s.problem)
    if not statuses:
        err.print(
            f"{escape_terminal(args.model)} has no @champion, @previous or @challenger: nothing to verify",
            highlight=False,
        )
    elif not problems:
        signed = statuses[0].checked_signatures
        how = "signed by a trusted key" if signed else "unsigned: no trusted key configured (gate.trusted_keys)"
        err.print(
            f"{escape_terminal(args.model)}: every alias rests on evidence that passed the gate ({how})",
            highlight=False,
        )
    return 1 if problems else 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "track": run_track,
    "promote": run_promote,
    "compare": run_compare,
    "verify": run_verify,
}
