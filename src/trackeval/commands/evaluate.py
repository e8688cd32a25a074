"""``trackeval evaluate <benchmark>`` (options generated from each unit's inputs model) and ``trackeval demo``.

A single-unit benchmark gets one subcommand with its inputs as options; a multi-task benchmark (X-ray) gets one
subcommand with ``--task`` and the union of its tasks' inputs. Field ``ground_truth`` becomes
``--ground-truth``; ``Path`` fields take a path, ``list`` fields repeat, ``bool`` fields are flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trackeval.commands.options import add_config_options, add_input_options, escape_help, given_inputs
from trackeval.errors import ConfigError
from trackeval.io.escape import escape_terminal
from trackeval.io.redact import redact
from trackeval.registry import by_benchmark, hook, unit, with_hook
from trackeval.spec import BenchmarkSpec

if TYPE_CHECKING:
    from trackeval.config import EvalConfig

#: Options every ``evaluate`` subcommand has; a unit's input field may not reuse them.
COMMON_OPTIONS = frozenset(
    {"out", "config", "set", "executor", "workers", "scheduler", "no_cache", "model_name", "model_version", "track"}
)


def add_common(p: argparse.ArgumentParser) -> None:
    """``--out``, config, engine shortcuts, model name/version and ``--track``."""
    p.add_argument("--out", type=Path, required=True, help="output folder: results.json, metrics.json, cases.parquet")
    add_config_options(p, "YAML config (params.yaml layout: one section per benchmark)", "umd.nsd_tolerance_mm=2")
    p.add_argument("--executor", choices=["local", "processes", "dask"], help="shortcut for --set engine.executor=")
    p.add_argument("--workers", type=int, help="shortcut for --set engine.workers=N")
    p.add_argument("--scheduler", help="Dask scheduler address (tcp://host:8786); implies --executor dask")
    p.add_argument("--no-cache", action="store_true", help="recompute every case (ignore the per-case cache)")
    p.add_argument("--model-name", default="", help="model name recorded in results.json")
    p.add_argument("--model-version", default="", help="model version recorded in results.json")
    p.add_argument("--track", action="store_true", help="also log the results to MLflow (see `trackeval track`)")


def add_benchmark_parser(sub: argparse._SubParsersAction, benchmark: str, specs: Sequence[BenchmarkSpec]) -> None:
    """One ``evaluate`` subcommand for ``benchmark``'s units (``--task`` when it has several)."""
    tasks = [s for s in specs if s.task]
    if tasks and len(tasks) != len(specs):
        names = ", ".join(s.name for s in specs)
        raise ConfigError(f"benchmark {benchmark!r} mixes a plain unit and task units ({names})")
    help_text = escape_help(specs[0].help if not tasks else f"{benchmark}: --task " + "|".join(s.task for s in tasks))
    p = sub.add_parser(benchmark, help=help_text, description=help_text)
    if tasks:
        lines = escape_help("; ".join(f"{s.task}: {s.help}" for s in tasks))
        p.add_argument("--task", required=True, choices=[s.task for s in tasks], help=f"which task to score ({lines})")
    add_input_options(p, specs, COMMON_OPTIONS | {"task"})
    add_common(p)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``trackeval evaluate <benchmark>`` for every registered benchmark, and ``trackeval demo``."""
    ev = sub.add_parser("evaluate", help="score model outputs on a benchmark")
    bench = ev.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for benchmark, specs in by_benchmark().items():
        add_benchmark_parser(bench, benchmark, specs)
    examples = [spec.name for spec in with_hook("example")]
    listed = ", ".join(examples) or "none registered"
    demo = sub.add_parser("demo", help=f"evaluate the bundled example of a benchmark unit ({listed})")
    default = examples[0] if examples else "-"
    demo.add_argument("--unit", choices=examples, help=f"the unit whose example to evaluate (default: {default})")
    add_common(demo)


def _overrides(args: argparse.Namespace) -> list[str]:
    overrides = list(args.overrides)
    if args.executor:
        overrides.append(f"engine.executor={args.executor}")
    if args.workers is not None:
        overrides.append(f"engine.workers={args.workers}")
    if args.scheduler:
        overrides += ["engine.executor=dask", f"engine.scheduler={args.scheduler}"]
    if args.no_cache:
        overrides.append("engine.cache=false")
    return overrides


def _run(unit_name: str, inputs: dict[str, Any], args: argparse.Namespace) -> int:
    from rich.console import Console

    from trackeval.api import evaluate, load_config, unit_outputs
    from trackeval.io.results_folder import write_extra_outputs, write_outputs
    from trackeval.report.console import print_summary

    cfg = load_config(args.config, _overrides(args))
    model = {k: v for k, v in (("name", args.model_name), ("version", args.model_version)) if v}
    if args.track:  # a name MLflow cannot store is refused before the evaluation, not after it
        from trackeval.tracking.client import check_model_ref

        for part, value in model.items():
            check_model_ref(value, part)  # type: ignore[arg-type]
    result = evaluate(unit_name, inputs, cfg, model)
    extra = unit_outputs(unit_name, inputs, cfg, result)  # before writing: a bad input leaves no results
    paths = write_outputs(result, args.out)
    paths.update(write_extra_outputs(extra, args.out))
    print_summary(result, unit(unit_name).summary_metrics)
    wrote = escape_terminal(", ".join(str(p) for p in paths.values()))
    Console(stderr=True).print(f"wrote {wrote}", highlight=False, soft_wrap=True)
    if args.track:
        _track(args.out, cfg)
    return 0


def _track(out: Path, cfg: EvalConfig) -> None:
    """``--track``: log the results folder to MLflow, then print the evaluation run's id and, on a tracking
    server, the run's page in the MLflow UI (no credentials shown)."""
    from rich.console import Console

    from trackeval.tracking.client import Mlflow
    from trackeval.tracking.track import track_results

    tracked = track_results([out], cfg.tracking)
    console, ml = Console(stderr=True), Mlflow(cfg.tracking)
    for t in tracked:
        state = "tracked" if t.logged else "already tracked"
        lines = [f"{state}: {t.unit} {t.model} as MLflow run {t.run_id}"]
        url = ml.run_url(t.run_id)
        if url is not None:
            lines.append(f"MLflow run: {url}")
        for line in lines:
            console.print(escape_terminal(redact(line)), highlight=False, soft_wrap=True)


def run_evaluate(args: argparse.Namespace) -> int:
    """``trackeval evaluate <benchmark> [--task T] ...``."""
    name = f"{args.benchmark}/{args.task}" if getattr(args, "task", None) else args.benchmark
    return _run(name, given_inputs(args), args)


def run_demo(args: argparse.Namespace) -> int:
    """``trackeval demo [--unit U]``: evaluate the example a unit bundles (its spec's ``example``; default the
    first such unit by name: ``umd`` among the built-in units)."""
    examples = with_hook("example")
    if not examples:
        raise ConfigError("no registered benchmark unit bundles an example")
    spec = unit(args.unit) if args.unit else examples[0]
    return _run(spec.name, hook(spec, "example")(), args)
