"""Reference runner: drive any protocol model through the IMIS protocol and write an interaction log.

``python -m trackeval.benchmarks.imis.runner --ground-truth DIR --model MODULE:FACTORY [--model-arg K=V]
--out LOG_DIR [--config params.yaml] [--set imis.seed=7]`` writes ``LOG_DIR/log.jsonl`` and the turn masks under
``LOG_DIR/masks/<case>/<target>/<prompt>_<turn>.png`` (``.npz`` for 3D). ``trackeval evaluate imis --predictions
LOG_DIR/log.jsonl`` then verifies every click against the protocol and scores the log. Exit codes and one-line
errors as the CLI (:func:`trackeval.errors.report_failure`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ConfigDict

from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.logs import log_lines
from trackeval.benchmarks.imis.protocol import supported_prompts
from trackeval.benchmarks.imis.session import interact_case, load_model, parse_model_args
from trackeval.config import EvalConfig, parse_config
from trackeval.errors import InputError, debug_from_env, report_failure
from trackeval.io.atomic import atomic_path
from trackeval.io.redact import redact

LOG_NAME = "log.jsonl"


class _RunnerConfig(EvalConfig):
    """The runner reads the shared sections and ``imis``; other benchmark sections of params.yaml are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    imis: IMISConfig = IMISConfig()


def write_log(
    gt_dir: Path, model_spec: str, out_dir: Path, cfg: IMISConfig, model_kwargs: dict[str, str] | None = None
) -> Path:
    """Run every sequence of every image in ``gt_dir`` and write ``out_dir/log.jsonl`` (atomically) + masks."""
    model = load_model(model_spec, tuple(sorted((model_kwargs or {}).items())))
    prompt_types = tuple(p for p in cfg.prompt_types if p in supported_prompts(model))
    if not prompt_types:
        raise InputError(f"the model supports none of imis.prompt_types {list(cfg.prompt_types)}")
    cases, _ = load_cases(gt_dir, cfg)
    path = out_dir / LOG_NAME
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for case in cases:
            loaded = read_case(case, cfg)
            seqs = interact_case(model, case.case_id, loaded.image, loaded.masks, prompt_types, cfg)
            for line in log_lines(case.case_id, seqs, cfg.seed, out_dir / "masks", out_dir):
                f.write(line + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trackeval.benchmarks.imis.runner", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--ground-truth", type=Path, required=True)
    parser.add_argument("--model", required=True, help="MODULE:FACTORY or an MLflow model URI")
    parser.add_argument("--model-arg", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, required=True, help="folder for log.jsonl and masks/")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        cfg = parse_config(_RunnerConfig, args.config, args.overrides).imis
        path = write_log(args.ground_truth, args.model, args.out, cfg, parse_model_args(args.model_arg))
    except SystemExit:
        raise
    except BaseException as exc:
        return report_failure(exc, "runner", debug=debug_from_env(), clean=redact)  # no secret of the model URI
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
