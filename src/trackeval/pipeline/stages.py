"""``trackeval pipeline evaluate|track|gate`` and the folder layout every stage shares (mirrored by dvc.yaml).

Layout under ``--work`` (default ``work/``): ``prepared/``, ``models/<v>/``, ``predictions/<v>/``,
``eval/<benchmark>/<v>/`` (results.json, metrics.json, cases.parquet, plot.csv), ``track/tracked.json``,
``gate/verdict.json``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trackeval.config import EvalConfig
from trackeval.errors import InputError
from trackeval.results import BenchmarkResult

if TYPE_CHECKING:  # params imports the network spec (torch); the CLI parser must stay light
    from trackeval.pipeline.params import PipelineParams

#: pipeline benchmarks (X-ray runs two tasks, each its own results). Tracking order matters: a version's
#: ``eval_run.xray`` tag (what the gate reads) points at the LAST X-ray result tracked: ``cls``, whose primary
#: metric ``xray/cls/auroc`` the gate pairs with DeLong's test; the ``seg`` run is logged too.
BENCHMARKS: tuple[str, ...] = ("umd", "mir3d", "xray_seg", "imis", "xray_cls")
PLOT_CSV = "plot.csv"


@dataclass(frozen=True)
class Layout:
    """Where the stages read and write (``data``: the DVC-tracked raw data; ``work``: stage outputs)."""

    data: Path
    work: Path

    @property
    def prepared(self) -> Path:
        return self.work / "prepared"

    def models(self, version: str) -> Path:
        return self.work / "models" / version

    def predictions(self, version: str) -> Path:
        return self.work / "predictions" / version

    def eval(self, benchmark: str, version: str) -> Path:
        return self.work / "eval" / benchmark / version

    @property
    def tracked(self) -> Path:
        return self.work / "track" / "tracked.json"

    @property
    def verdict(self) -> Path:
        return self.work / "gate" / "verdict.json"


def evaluate_argv(benchmark: str, version: str, layout: Layout, params_file: Path, model_name: str) -> list[str]:
    """The ``trackeval evaluate ...`` arguments of one pipeline benchmark for one version."""
    pred = layout.predictions(version)
    p = layout.prepared
    inputs = {
        "umd": ["umd", "--ground-truth", p / "umd" / "gt", "--predictions", pred / "umd"],
        "mir3d": ["mir3d", "--ground-truth", layout.data / "mir3d", "--predictions", pred / "mir3d" / "rankings.csv"],
        "xray_cls": ["xray", "--task", "cls", "--ground-truth", p / "xray" / "cls" / "labels.csv"]
        + ["--predictions", pred / "xray_cls" / "scores.csv"],
        "xray_seg": ["xray", "--task", "seg", "--ground-truth", p / "xray" / "seg" / "gt"]
        + ["--predictions", pred / "xray_seg", "--label-names", p / "xray" / "seg" / "label_names.csv"],
        "imis": ["imis", "--ground-truth", layout.data / "imis", "--predictions", pred / "imis" / "log.jsonl"],
    }
    if benchmark not in inputs:
        raise InputError(f"unknown pipeline benchmark {benchmark!r}; expected one of {list(BENCHMARKS)}")
    common = ["--out", layout.eval(benchmark, version), "--config", params_file]
    common += ["--model-name", model_name, "--model-version", version]
    return ["evaluate", *map(str, inputs[benchmark] + common)]


def _breakdown(result: BenchmarkResult, head: str, dim: str) -> list[dict[str, object]]:
    """Rows ``{dim, value, ci95_low, ci95_high}`` of the single-level breakdown ``<head>/by_<dim>/<group>``."""
    prefix = f"{head}/by_{dim}/"
    rows = []
    for key, s in sorted(result.aggregates.items()):
        group = key[len(prefix) :]
        if key.startswith(prefix) and "/" not in group and s.value is not None:
            rows.append({dim: group, "value": s.value, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high})
    return rows


def _roc(result: BenchmarkResult) -> list[dict[str, object]]:
    """Micro-averaged ROC over every (image, finding) pair with a 0/1 label: rows ``{fpr, tpr, threshold}``."""
    from sklearn.metrics import roc_curve

    pairs = [
        (m["label"], m["score"])
        for case in result.cases
        for m in case.metrics.values()
        if m.get("label") in (0.0, 1.0) and m.get("score") is not None
    ]
    if not pairs:
        return []
    y, s = np.array(pairs).T
    fpr, tpr, thr = roc_curve(y, s)
    return [{"fpr": f, "tpr": t, "threshold": min(float(h), 1.0)} for f, t, h in zip(fpr, tpr, thr, strict=True)]


def plot_rows(benchmark: str, result: BenchmarkResult) -> list[dict[str, object]]:
    """Data for ``dvc plots``: per-organ / per-region / per-class bars with CIs, the ROC, Dice vs clicks."""
    if benchmark == "umd":
        return _breakdown(result, "umd/dsc", "organ")
    if benchmark == "mir3d":
        return _breakdown(result, "mir3d/group/ap_at_10", "region")
    if benchmark == "xray_seg":
        return _breakdown(result, "xray/seg/dsc", "class")
    if benchmark == "xray_cls":
        return _roc(result)
    rows = _breakdown(result, "imis/dice", "click")
    return sorted(({**r, "click": int(str(r["click"]))} for r in rows), key=lambda r: r["click"])


def write_plot(path: Path, rows: list[dict[str, object]]) -> None:
    """A CSV with a header (empty file when there are no rows); floats with 6 decimals."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        if not rows:
            return
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6f}" if isinstance(v, float) else v for k, v in row.items()})


def evaluate(benchmark: str, version: str, layout: Layout, params_file: Path, params: PipelineParams) -> int:
    """Run ``trackeval evaluate`` for one benchmark and version, then write its ``plot.csv``."""
    from trackeval.cli import main
    from trackeval.tracking.mlflow_sink import read_results

    params.version(version)
    rc = main(evaluate_argv(benchmark, version, layout, params_file, params.model_name))
    if rc != 0:
        return rc
    out = layout.eval(benchmark, version)
    write_plot(out / PLOT_CSV, plot_rows(benchmark, read_results(out)))
    return 0


def register_version(cfg: EvalConfig, name: str, version: str, model_dir: Path) -> str:
    """Log a version's trained networks (``model_dir``: state_dicts + specs) as the ``model/`` artifacts of a
    ``model`` run and register them as a version of ``name`` tagged ``trackeval.model_version=<version>``; once
    per version (an existing one is returned as is). Returns the registry version number."""
    from trackeval.tracking.mlflow_sink import TAG, Mlflow
    from trackeval.tracking.registry import create_version, find_version

    ml = Mlflow(cfg.tracking)
    mv = find_version(ml, name, version)
    if mv is not None:
        return str(mv.version)
    tags = {TAG + "kind": "model", TAG + "model_name": name, TAG + "model_version": version}
    with ml.run(f"model {name}/{version}", tags) as run_id:
        ml.call("log_artifacts", ml.client.log_artifacts, run_id, str(model_dir), "model")
    source = ml.call("get_run", ml.client.get_run, run_id).info.artifact_uri + "/model"
    return str(create_version(ml, name, version, source, run_id).version)


def track(layout: Layout, cfg: EvalConfig, params: PipelineParams) -> dict[str, dict[str, str]]:
    """Register every version's networks, log its evaluations (``trackeval track``) and link them to the
    registered version; writes ``tracked.json`` (``{version: {"registry_version", <pipeline benchmark>: run id}}``)."""
    from trackeval.tracking.mlflow_sink import track_results, tracking_uri

    out: dict[str, dict[str, str]] = {}
    for version in params.versions:
        entry = {"registry_version": register_version(cfg, params.model_name, version, layout.models(version))}
        for t in track_results([layout.eval(b, version) for b in BENCHMARKS], cfg.tracking):
            entry[t.folder.parent.name] = t.run_id
            print(f"{t.model} {t.folder.parent.name}: {'logged' if t.logged else 'already tracked'} as run {t.run_id}")
        out[version] = entry
    print(f"tracking URI: {tracking_uri(cfg.tracking)}")
    layout.tracked.parent.mkdir(parents=True, exist_ok=True)
    layout.tracked.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def gate(layout: Layout, cfg: EvalConfig, params: PipelineParams) -> dict[str, object]:
    """The promotion gate of the demo: the first version becomes champion through the floors (when there is no
    champion yet), then the last version is gated against ``@champion``. Prints both decisions and writes
    ``verdict.json`` (``{version: {verdict, reasons, decision_run}}``). A failed gate is a result, not an error."""
    from trackeval.report.comparison import print_decision
    from trackeval.tracking.mlflow_sink import Mlflow
    from trackeval.tracking.registry import VERSION_TAG, promote

    ml = Mlflow(cfg.tracking)
    name = params.model_name
    first, candidate = list(params.versions)[0], list(params.versions)[-1]
    out: dict[str, object] = {}

    def champion() -> str | None:
        aliases = ml.call("get_registered_model", ml.client.get_registered_model, name).aliases
        if "champion" not in aliases:
            return None
        mv = ml.call("get_model_version", ml.client.get_model_version, name, aliases["champion"])
        return mv.tags.get(VERSION_TAG, str(mv.version))

    for version in (first, candidate):
        current = champion()
        if current == version or (version == first and current is not None):
            print(f"gate: {name}/{version}: skipped ({name}@champion is {current})")
            continue
        decision, run_id = promote(ml, name, version, cfg)
        print_decision(decision)
        out[version] = {"verdict": decision.verdict, "reasons": decision.reasons, "decision_run": run_id}
    out["champion"] = champion()
    verdict = out.get(candidate, {})
    line = f"gate verdict for {name}/{candidate}: " + (
        verdict["verdict"].upper() if isinstance(verdict, dict) and verdict else "not re-run"
    )
    print(line + f"; {name}@champion = {out['champion']}")
    layout.verdict.parent.mkdir(parents=True, exist_ok=True)
    layout.verdict.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out
