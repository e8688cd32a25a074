"""``trackeval pipeline evaluate|track|gate`` and the folder layout every stage shares (mirrored by dvc.yaml).

Layout under ``--work`` (default ``work/``): ``prepared/``, ``models/<v>/``, ``predictions/<v>/``,
``eval/<benchmark>/<v>/`` (results.json, metrics.json, cases.parquet, plot.csv, headline.json), ``track/tracked.json``,
``gate/verdict.json``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trackeval.api import evaluate as evaluate_unit
from trackeval.api import unit_outputs, verify
from trackeval.config import EvalConfig
from trackeval.errors import ConfigError, InputError
from trackeval.io.atomic import atomic_path
from trackeval.io.escape import escape_csv
from trackeval.io.redact import redact_uri
from trackeval.io.results_folder import metrics_file, write_extra_outputs, write_outputs
from trackeval.plotdata import POOLED, plot_rows, reader_point_rows
from trackeval.registry import unit
from trackeval.report.comparison import print_decision
from trackeval.report.console import print_summary
from trackeval.results import headline_metrics
from trackeval.tracking.client import Mlflow, tracking_uri
from trackeval.tracking.gatekeeper import Gate
from trackeval.tracking.logged_models import logged_model
from trackeval.tracking.model_registry import create_version, find_version, resolve_version
from trackeval.tracking.tags import TAG, VERSION_TAG
from trackeval.tracking.track import track_results

if TYPE_CHECKING:  # params imports the network spec (torch); the CLI parser must stay light
    from collections.abc import Sequence

    from trackeval.pipeline.params import EvaluationParams, PipelineParams
    from trackeval.results import BenchmarkResult, PlotSpec
    from trackeval.tracking.verification import AliasStatus

PLOT_CSV = "plot.csv"
#: every declared plot of an evaluation, one CSV each (see :func:`write_plots`)
PLOTS_DIR = "plots"
#: the DVC metrics file of an evaluation: headline keys + CIs (tens, not the ~1,000 keys of metrics.json), so
#: `dvc metrics show/diff` and `dvc exp show` stay readable
HEADLINE_JSON = "headline.json"
#: the human readers' ROC points of an evaluation with ``--readers`` (``plots/``; none without readers)
READERS_CSV = "readers_roc.csv"


@dataclass(frozen=True)
class WorkLayout:
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


def write_plot(path: Path, rows: list[dict[str, object]]) -> None:
    """A CSV with a header (empty file when there are no rows); floats with 6 decimals, None as empty; texts
    (case ids, subject ids, group values) through :func:`~trackeval.io.escape.escape_csv`, so a spreadsheet never
    evaluates one as a formula; written atomically (a failure leaves the previous file, never a truncated one)."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        if not rows:
            return
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6f}" if isinstance(v, float) else escape_csv(v) for k, v in row.items()})


def evaluation_inputs(evaluation: EvaluationParams, version: str, layout: WorkLayout) -> dict[str, Path]:
    """The evaluation's inputs with ``{version}``, ``{data}``, ``{prepared}`` and ``{predictions}`` filled in for
    ``version``."""
    where = {
        "version": version,
        "data": layout.data,
        "prepared": layout.prepared,
        "predictions": layout.predictions(version),
    }
    try:
        return {k: Path(v.format(**where)) for k, v in evaluation.inputs.items()}
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"invalid config: field pipeline.evaluations: {evaluation.inputs}: unknown placeholder {exc}; "
            "use {version}, {data}, {prepared} or {predictions}"
        ) from exc


def evaluate(name: str, version: str, layout: WorkLayout, cfg: EvalConfig, params: PipelineParams) -> int:
    """Evaluate one pipeline evaluation for one version (:func:`trackeval.evaluate`), write its outputs (and the
    unit's extra files, :func:`trackeval.api.unit_outputs`) and its ``plot.csv`` (the unit's first declared
    plot)."""
    params.version(version)
    evaluation = params.evaluation(name)
    model = {"name": params.model_name, "version": version}
    inputs = evaluation_inputs(evaluation, version, layout)
    result = evaluate_unit(evaluation.unit, inputs, cfg, model)
    extra = unit_outputs(evaluation.unit, inputs, cfg, result)
    out = layout.eval(name, version)
    write_outputs(result, out)
    write_extra_outputs(extra, out)
    print_summary(result, unit(evaluation.unit).summary_metrics)
    write_plots(out, result)
    write_headline(out / HEADLINE_JSON, result)
    return 0


def plot_file_name(plot: PlotSpec) -> str:
    """``plots/<kind>_<metric>_by_<dimension>[_per_<series>].csv`` (``/`` in the metric becomes ``__``)."""
    series = f"_per_{plot.series}" if plot.series else ""
    return f"{plot.kind}_{plot.metric.replace('/', '__')}_by_{plot.dimension}{series}.csv"


def write_plots(out: Path, result: BenchmarkResult) -> None:
    """The DVC plots of an evaluation folder ``out``: the first declared plot as ``plot.csv`` and every declared
    plot in ``plots/`` (rows computed once each). In ``plots/``, curves pooled over items (PR, reliability) keep
    only the pooled curve, one line per file and version; a result with human readers adds their ROC points
    (:data:`READERS_CSV`)."""
    folder = out / PLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    if not result.plots:
        write_plot(out / PLOT_CSV, [])
    for i, plot in enumerate(result.plots):
        rows = plot_rows(result, plot)
        if i == 0:
            write_plot(out / PLOT_CSV, rows)
        if plot.kind in ("pr", "reliability"):
            rows = [{k: v for k, v in r.items() if k != plot.dimension} for r in rows if r[plot.dimension] == POOLED]
        write_plot(folder / plot_file_name(plot), rows)
        if plot.kind == "roc" and (readers := reader_point_rows(result, plot.dimension)):
            write_plot(folder / READERS_CSV, readers)  # the readers' points for trackeval_roc_readers


def write_headline(path: Path, result: BenchmarkResult) -> None:
    """``headline.json``: the headline subset of metrics.json (same keys and rounded values), written atomically."""
    flat = metrics_file(result)  # the same rounding as metrics.json
    headline = {k: flat[k] for k in headline_metrics(result)}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(headline, sort_keys=True, indent=1) + "\n", encoding="utf-8")


def register_version(cfg: EvalConfig, name: str, version: str, model_dir: Path) -> str:
    """Log a version's trained networks (``model_dir``: state_dicts + specs) as the ``model/`` artifacts of a
    ``model`` run and as an MLflow 3 LoggedModel, and register that (``models:/<model_id>``) as a version of
    ``name`` tagged ``trackeval.model_version=<version>``; once per version (an existing one is returned as is).
    Returns the registry version number."""
    ml = Mlflow(cfg.tracking)
    mv = find_version(ml, name, version)
    if mv is not None:
        return str(mv.version)
    tags = {TAG + "kind": "model", TAG + "model_name": name, TAG + "model_version": version}
    with ml.run(f"model {name}/{version}", tags) as run_id:
        ml.call("log_artifacts", ml.client.log_artifacts, run_id, str(model_dir), "model")
        model_id = logged_model(ml, name, version, run_id, artifacts=model_dir)
    return str(create_version(ml, name, version, f"models:/{model_id}", run_id, model_id).version)


def track(layout: WorkLayout, cfg: EvalConfig, params: PipelineParams) -> dict[str, dict[str, str]]:
    """Register every version's networks (the demo's ``work/models/<v>``; a repository without that folder
    registers the version from its evaluations alone), log its evaluations (``trackeval track``) and link them to
    the registered version; writes ``tracked.json`` (``{version: {"registry_version", <evaluation>: idempotency
    key}}``: the same on every machine, so the committed dvc.lock stays valid; run ids are printed)."""
    out: dict[str, dict[str, str]] = {}
    for version in params.versions:
        entry = {}
        if layout.models(version).is_dir():
            entry["registry_version"] = register_version(cfg, params.model_name, version, layout.models(version))
        # the pipeline is declarative: the workspace's results are the version's evaluations, even after a
        # change of the demo data (decisions keep the exact runs they were made on)
        folders = [layout.eval(e, version) for e in params.evaluations]
        for t in track_results(folders, cfg.tracking, replace=True):
            entry[t.folder.parent.name] = t.key
            print(f"{t.model} {t.folder.parent.name}: {'logged' if t.logged else 'already tracked'} as run {t.run_id}")
        out[version] = entry
    print(redact_uri(f"tracking URI: {tracking_uri(cfg.tracking)}; MLflow UI: {Mlflow(cfg.tracking).ui_url()}"))
    layout.tracked.parent.mkdir(parents=True, exist_ok=True)
    layout.tracked.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def gate(layout: WorkLayout, cfg: EvalConfig, params: PipelineParams) -> dict[str, object]:
    """The promotion gate of the demo, reconciled with the registry on every run (the stage is
    ``always_changed``): the first version is gated against the floors, each later one against the champion so
    far, and the registry's aliases are set to that outcome (:func:`~trackeval.tracking.promotion.reconcile`),
    so the registry, ``verdict.json`` (``{version: {verdict, reasons, decision_run}, "champion"}``) and what is
    printed never disagree, even after a revert. A failed gate is a result, not an error."""
    decisions, champion = Gate.from_config(cfg).reconcile(params.model_name, list(params.versions))
    out: dict[str, object] = {}
    for version, decision, run_id in decisions:
        print_decision(decision)
        out[version] = {"verdict": decision.verdict, "reasons": decision.reasons, "decision_run": run_id}
    out["champion"] = champion
    write_verdict(layout.verdict, out)
    return out


def write_verdict(path: Path, verdict: dict[str, object]) -> None:
    """``verdict.json``, written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(verdict, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def registry_status(cfg: EvalConfig, params: PipelineParams, trusted_keys: Sequence[str] = ()) -> list[AliasStatus]:
    """``trackeval verify`` for the pipeline's model, with ``gate.trusted_keys`` and ``trusted_keys`` (public key
    files): one status per alias ([] when the model is not registered yet)."""
    try:
        return verify(params.model_name, config=cfg, trusted_keys=trusted_keys)
    except InputError as exc:
        if exc.field == "model":  # not registered yet (a bad key file is an error)
            return []
        raise


def registry_verdict(cfg: EvalConfig, params: PipelineParams) -> tuple[dict[str, tuple[str, str]], str | None]:
    """What the MLflow registry says now: ``{version: (gate verdict, reason)}`` (the version's
    ``trackeval.gate.*`` tags) and the ``@champion``'s version."""
    ml = Mlflow(cfg.tracking)
    name = params.model_name
    verdicts = {}
    for version in params.versions:
        mv = find_version(ml, name, version)
        tags = {} if mv is None else mv.tags
        verdict = "not tracked" if mv is None else tags.get(TAG + "gate.verdict", "not gated")
        verdicts[version] = (verdict, tags.get(TAG + "gate.reason", ""))
    try:
        champion = resolve_version(ml, name, "@champion")
    except InputError:
        return verdicts, None
    return verdicts, champion.tags.get(VERSION_TAG, str(champion.version))
