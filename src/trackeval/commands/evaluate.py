"""``trackeval evaluate <benchmark>`` (options generated from each unit's inputs model) and ``trackeval demo``.

A single-unit benchmark gets one subcommand with its inputs as options; a multi-task benchmark (X-ray) gets one
subcommand with ``--task`` and the union of its tasks' inputs. Field ``ground_truth`` becomes
``--ground-truth``; ``Path`` fields take a path, ``list`` fields repeat, ``bool`` fields are flags.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from trackeval.benchmarks.discovery import by_benchmark
from trackeval.commands.options import add_config_options
from trackeval.errors import ConfigError
from trackeval.spec import BenchmarkSpec

#: Options every ``evaluate`` subcommand has; a unit's input field may not reuse them.
COMMON_OPTIONS = frozenset(
    {"out", "config", "set", "executor", "workers", "scheduler", "no_cache", "model_name", "model_version", "track"}
)
#: argparse ``dest`` prefix of generated input options (keeps them apart from the common options).
DEST = "input__"


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


def _kind(annotation: Any) -> str:
    """``path``, ``list``, ``flag`` or ``text``: how a field's annotation is spelled on the command line."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _kind(inner[0]) if len(inner) == 1 else "text"
    if annotation is bool:
        return "flag"
    if origin in (list, tuple, set, frozenset):
        return "list"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return "text"


def _escape(text: str) -> str:
    """argparse formats help with ``%``: a literal percent sign must be doubled."""
    return text.replace("%", "%%")


def _add_field(p: argparse.ArgumentParser, name: str, info: FieldInfo, required: bool) -> None:
    option = "--" + name.replace("_", "-")
    help_text = _escape(info.description or name)
    kind = _kind(info.annotation)
    if kind == "flag":
        p.add_argument(option, dest=DEST + name, action="store_true", help=help_text)
    elif kind == "list":
        p.add_argument(option, dest=DEST + name, action="append", metavar="VALUE", help=f"{help_text} (repeatable)")
    else:
        p.add_argument(
            option,
            dest=DEST + name,
            type=Path if kind == "path" else str,
            required=required,
            metavar="PATH" if kind == "path" else "VALUE",
            help=help_text,
        )


def add_benchmark_parser(sub: argparse._SubParsersAction, benchmark: str, specs: Sequence[BenchmarkSpec]) -> None:
    """One ``evaluate`` subcommand for ``benchmark``'s units (``--task`` when it has several)."""
    tasks = [s for s in specs if s.task]
    if tasks and len(tasks) != len(specs):
        names = ", ".join(s.name for s in specs)
        raise ConfigError(f"benchmark {benchmark!r} mixes a plain unit and task units ({names})")
    help_text = _escape(specs[0].help if not tasks else f"{benchmark}: --task " + "|".join(s.task for s in tasks))
    p = sub.add_parser(benchmark, help=help_text, description=help_text)
    if tasks:
        lines = _escape("; ".join(f"{s.task}: {s.help}" for s in tasks))
        p.add_argument("--task", required=True, choices=[s.task for s in tasks], help=f"which task to score ({lines})")
    fields: dict[str, FieldInfo] = {}
    required: dict[str, bool] = {}
    for spec in specs:
        for name, info in spec.inputs.model_fields.items():
            if name in COMMON_OPTIONS or name == "task":
                raise ConfigError(f"benchmark unit {spec.name}: input field {name!r} clashes with a common option")
            fields.setdefault(name, info)
            required[name] = required.get(name, True) and info.is_required()
    for name, info in fields.items():
        _add_field(p, name, info, required[name])
    add_common(p)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``trackeval evaluate <benchmark>`` for every registered benchmark, and ``trackeval demo``."""
    ev = sub.add_parser("evaluate", help="score model outputs on a benchmark")
    bench = ev.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for benchmark, specs in by_benchmark().items():
        add_benchmark_parser(bench, benchmark, specs)
    demo = sub.add_parser("demo", help="evaluate the bundled real UMD example (chest CT organ labels)")
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


def _inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The given input options by field name (options left out keep the model's defaults)."""
    return {k[len(DEST) :]: v for k, v in vars(args).items() if k.startswith(DEST) and v is not None and v is not False}


def _run(unit_name: str, inputs: dict[str, Any], args: argparse.Namespace) -> int:
    from rich.console import Console

    from trackeval.api import evaluate, load_config
    from trackeval.benchmarks.discovery import unit
    from trackeval.io.escape import escape_terminal
    from trackeval.io.results_folder import write_outputs
    from trackeval.report.console import print_summary

    cfg = load_config(args.config, _overrides(args))
    model = {k: v for k, v in (("name", args.model_name), ("version", args.model_version)) if v}
    if args.track:  # a name MLflow cannot store is refused before the evaluation, not after it
        from trackeval.tracking.client import check_model_ref

        for part, value in model.items():
            check_model_ref(value, part)  # type: ignore[arg-type]
    result = evaluate(unit_name, inputs, cfg, model)
    paths = write_outputs(result, args.out)
    print_summary(result, unit(unit_name).summary_metrics)
    wrote = escape_terminal(", ".join(str(p) for p in paths.values()))
    Console(stderr=True).print(f"wrote {wrote}", highlight=False, soft_wrap=True)
    if args.track:
        from trackeval.tracking.track import track_results

        track_results([args.out], cfg.tracking)
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """``trackeval evaluate <benchmark> [--task T] ...``."""
    name = f"{args.benchmark}/{args.task}" if getattr(args, "task", None) else args.benchmark
    return _run(name, _inputs(args), args)


def run_demo(args: argparse.Namespace) -> int:
    """``trackeval demo``: the bundled UMD example."""
    from trackeval.demo.umd_example import example_dirs

    gt, pred = example_dirs()
    return _run("umd", {"ground_truth": gt, "predictions": pred}, args)
