"""``trackeval keygen``, ``trackeval verify-attestation`` and ``trackeval history`` (wired into
:mod:`trackeval.cli`): the gate's keys, one signed decision checked with no MLflow at all, and a model's audit
trail.

Exit codes: ``keygen`` 0, 2 when a key file exists; ``verify-attestation`` 0 when the envelope verifies under a
trusted key (and every ``--results`` file is one of its subjects), 1 when it does not, 2 when the file is not
readable; ``history`` 0, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from trackeval.commands.options import add_config_options
from trackeval.io.atomic import atomic_path
from trackeval.io.escape import escape_terminal
from trackeval.io.files import read_bytes
from trackeval.io.hashing import sha256_bytes


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the ``keygen``, ``verify-attestation`` and ``history`` subcommands."""
    kg = sub.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing gate decisions: DIR/gate.key (private, mode 0600; the CI "
        "secret) and DIR/gate.pub (public; commit it and list it in gate.trusted_keys); never overwrites",
    )
    kg.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for gate.key and gate.pub")
    va = sub.add_parser(
        "verify-attestation",
        help="verify one exported attestation.dsse.json with a trusted public key, without MLflow (exit 0 "
        "verified, 1 not, 2 unreadable)",
    )
    va.add_argument("attestation", type=Path, metavar="FILE", help="attestation.dsse.json of a decision run")
    va.add_argument(
        "--trusted-key", action="append", required=True, metavar="PUB", help="trusted public key file (repeatable)"
    )
    va.add_argument(
        "--results",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a results.json whose sha256 must be one of the attestation's subjects (repeatable)",
    )
    hi = sub.add_parser(
        "history",
        help="every gate decision and alias move of a model in time order, with signatures checked against "
        "gate.trusted_keys",
    )
    hi.add_argument("--model", required=True, help="registered model name")
    hi.add_argument("--json", type=Path, metavar="FILE", help="also write the history as JSON (docs/gate.md)")
    hi.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML page")
    hi.add_argument(
        "--trusted-key", action="append", default=[], metavar="PUB", help="trusted public key file (repeatable)"
    )
    add_config_options(hi, "YAML config (params.yaml: tracking and gate sections)", "tracking.uri=http://host:5000")


def run_keygen(args: argparse.Namespace) -> int:
    from trackeval.attest.keys import KEY_ENV, generate

    private, public, keyid = generate(args.out)
    print(f"wrote {private} (private key: keep it secret, e.g. as the CI secret {KEY_ENV})")
    print(f"wrote {public} (public key: commit it and list it under gate.trusted_keys)")
    print(f"key id {keyid}")
    return 0


def run_verify_attestation(args: argparse.Namespace) -> int:
    from trackeval.attest import dsse
    from trackeval.attest.keys import load_trusted
    from trackeval.attest.statement import read_predicate

    trusted = load_trusted([str(p) for p in args.trusted_key])
    raw = read_bytes(args.attestation, max_bytes=dsse.MAX_ENVELOPE_BYTES)
    name = escape_terminal(str(args.attestation))
    try:
        envelope = dsse.parse(raw)
        keyid, body = dsse.verify(envelope, trusted)
        predicate = read_predicate(dsse.statement_of(envelope, body))
    except dsse.AttestationError as exc:
        print(f"{name}: NOT verified: {escape_terminal(str(exc))}")
        return 1
    subjects = set(predicate.candidate_evidence.values())
    missing = [p for p in args.results if sha256_bytes(read_bytes(p)) not in subjects]
    p = predicate
    against = f"against {p.champion} (registry version {p.champion_registry_version})" if p.champion else "floors"
    print(
        escape_terminal(
            f"{args.attestation}: verified, signed by key {dsse.short(keyid)}: {p.model} {p.candidate} (registry "
            f"version {p.registry_version}) {against}: {p.verdict.upper()}, decided {p.time} by trackeval "
            f"{p.trackeval_version} in run {p.decision_run}"
        )
    )
    for check in p.checks:
        mark = "ok  " if check.passed else "FAIL"
        print(escape_terminal(f"  {mark} {check.unit}: {check.name}: {check.detail}"))
    for path in missing:
        print(f"{escape_terminal(str(path))}: its sha256 is not one of the attestation's subjects")
    return 1 if missing else 0


def run_history(args: argparse.Namespace) -> int:
    from trackeval.api import load_config
    from trackeval.attest.keys import load_trusted
    from trackeval.report.history import history_html, print_history
    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.history import model_history

    cfg = load_config(args.config, args.overrides)
    trusted = load_trusted([*cfg.gate.trusted_keys, *args.trusted_key])
    history = model_history(Mlflow(cfg.tracking), args.model, trusted)
    print_history(history, Console(width=160))
    for path, text in (
        (args.json, lambda: history.model_dump_json(indent=1)),
        (args.html, lambda: history_html(history)),
    ):
        if path is not None:
            with atomic_path(path) as tmp:
                tmp.write_text(text() + "\n", encoding="utf-8")
            print(f"wrote {escape_terminal(str(path))}", file=sys.stderr)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "keygen": run_keygen,
    "verify-attestation": run_verify_attestation,
    "history": run_history,
}
