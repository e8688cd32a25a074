"""A benchmark unit's declaration: :class:`BenchmarkSpec` is the single description of a benchmark (or of one
task of a multi-task benchmark, e.g. ``xray/cls``).

Everything else is built from the registered specs (see :mod:`trackeval.registry`): the CLI options
of ``trackeval evaluate`` (from the ``inputs`` model), the evaluation config (from ``config_section`` /
``config_model``), the promotion gate's defaults (``primary``, ``group_dimensions``), the report's figures and
the DVC pipeline's plots (``plots``), and every fact about each metric (``metrics``: label, direction,
reduction, paired method). A spec is plain data plus one callable: declaring it imports nothing heavy,
so ``trackeval --help`` stays fast; ``evaluate`` imports what it needs when it runs.

Example (a complete toy unit; see ``CONTRIBUTING.md``)::

    SPEC = BenchmarkSpec(
        name="toy",
        help="toy: fraction of correct labels",
        inputs=ToyInputs,                      # pydantic model: ground_truth: Path, predictions: Path
        config_section="toy",
        config_model=ToyConfig,                # a trackeval.config.base.Section
        evaluate=evaluate,                     # (ToyInputs, EvalConfig, {"name", "version"}) -> BenchmarkResult
        primary=PrimaryMetric("accuracy", margin=0.02, floor=0.5),
        metrics=(MetricInfo("accuracy", label="accuracy"),),
        group_dimensions=("site",),
        plots=(PlotSpec(metric="accuracy", dimension="site"),),
    )
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from trackeval.results import BenchmarkResult, CaseRecord, PlotSpec

if TYPE_CHECKING:
    import numpy as np

    from trackeval.config import EvalConfig
    from trackeval.config.base import Section

__all__ = [
    "AuditFinding",
    "AuditHook",
    "AuditReport",
    "BenchmarkSpec",
    "ExampleHook",
    "OutputsHook",
    "CorpusHeadline",
    "MetricInfo",
    "PairedMethod",
    "PlotSpec",
    "PrimaryMetric",
    "Reduction",
    "UNIT_NAME",
]

#: a unit's corpus headline: ``(case records, (B, n_cases) case weights) -> (B,)`` headline values
CorpusHeadline = Callable[[Sequence[CaseRecord], "np.ndarray"], "np.ndarray"]

#: ``benchmark`` or ``benchmark/task``: lowercase ``[a-z0-9_]`` tokens (also the metric-key prefix).
UNIT_NAME = re.compile(r"^[a-z][a-z0-9_]*(/[a-z][a-z0-9_]*)?\Z")  # fullmatch: ``$`` also matches before "\n"


#: how a metric's headline is built from the case records (see :class:`MetricInfo`)
Reduction = Literal["item_mean", "case_mean", "corpus"]
#: how the gate pairs two versions on a metric (see :class:`MetricInfo`)
PairedMethod = Literal["bootstrap", "delong", "none"]

_PLACEHOLDER = re.compile(r"\{([a-z]+)\}")


@dataclass(frozen=True)
class MetricInfo:
    """Every fact about one metric a unit produces, declared once, with the unit (:attr:`BenchmarkSpec.metrics`).

    The report, the gate, ``compare``, the leaderboard and evidence verification read these facts; no module
    outside the unit's adapter names one of its metrics.

    Attributes:
        name: the metric's path relative to the unit, without breakdowns (``dsc`` for ``umd/dsc`` and
            ``umd/dsc/by_organ/liver``; ``group/p_at_10``). ``{x}`` placeholders (lowercase names) each match one
            ``[a-z0-9]+`` token: ``p_at_{k}`` declares ``p_at_1``, ``p_at_10``...
        label: readable name for axes and tables, a format string over the placeholders (``P@{k}``); an
            upper-case placeholder gives the value upper-cased (``{A}`` -> ``CT`` for ``a=ct``).
        unit: the unit of measurement shown after the label (``mm``; "" for a ratio or a count).
        higher_is_better: the direction (the gate applies margins to the lower CI bound when True, else the upper).
        level: ``case`` when the case records hold one value per case and item (Dice), ``corpus`` when the
            metric exists only over many cases (AUROC, mAP, BLEU, ECE).
        paired: how the gate pairs two versions on it: ``bootstrap`` (joint cluster resamples of the case
            records, each version's headline recomputed with ``reduction``), ``delong`` (AUROC from the records'
            per-image ``label``/``score``), ``none`` (cannot be gated).
        reduction: how the headline is built from the case records: ``item_mean`` (mean over items of the item
            means), ``case_mean`` (mean over cases of each case's item mean), ``corpus`` (the function
            ``corpus``). NaN (a null value: not applicable) is left out of every mean; a mean over nothing is NaN
            (see :mod:`trackeval.stats.reduce`).
        record_path: the case records hold the per-case values under the whole metric path (3D-MIR:
            ``group/ap_at_10``) rather than under its last token (UMD: ``dsc``).
        corpus: for ``reduction="corpus"`` with ``paired="bootstrap"``: a pure function ``(records, weights) ->
            values`` of the case records and a ``(B, n_cases)`` matrix of case weights (one resample per row,
            columns in the order of ``records``) giving the ``(B,)`` headlines (NaN where a resample has none); a
            row of ones gives the stored headline. Code, so never serialised.
        best: the best value (None: 1 when higher is better, else 0), which a side without any value for a
            group counts as in the gate's group deltas.
        bins: for a calibration metric, the dotted path into the results' ``config`` of its number of
            equal-width bins (``xray.cls.ece_bins``), which the reliability figure uses.
        operating_point: the metric is a decision threshold on the records' scores (per item): the ROC and
            precision-recall figures mark the operating point ``score >= threshold`` of each item.
    """

    name: str
    label: str
    unit: str = ""
    higher_is_better: bool = True
    level: Literal["case", "corpus"] = "case"
    paired: PairedMethod = "bootstrap"
    reduction: Reduction = "item_mean"
    record_path: bool = False
    corpus: CorpusHeadline | None = field(default=None, compare=False, repr=False)
    best: float | None = None
    bins: str | None = None
    operating_point: bool = False

    def __post_init__(self) -> None:
        if (self.reduction == "corpus" and self.paired == "bootstrap") != (self.corpus is not None):
            raise ValueError(
                f"{self.name}: a corpus function is needed by, and only allowed with, reduction 'corpus' paired "
                "by the bootstrap"
            )

    @property
    def pattern(self) -> re.Pattern[str]:
        """The metric paths this declaration covers (placeholders as named groups)."""
        parts = _PLACEHOLDER.split(self.name)
        body = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[a-z0-9]+)" for i, p in enumerate(parts))
        return re.compile(body + r"\Z")

    @property
    def best_value(self) -> float:
        """``best``, or 1 / 0 by direction."""
        if self.best is not None:
            return self.best
        return 1.0 if self.higher_is_better else 0.0

    def record_name(self, path: str) -> str:
        """The name of ``path``'s per-case values in the case records (``path`` relative to the unit, without
        breakdowns)."""
        return path if self.record_path else path.rsplit("/", 1)[-1]

    def display(self, path: str) -> str:
        """The label of ``path`` (a path this declaration covers), with the unit of measurement:
        ``HD95 (mm)``, ``P@10``."""
        m = self.pattern.match(path)
        values = m.groupdict() if m else {}
        label = self.label.format(**values, **{k.upper(): v.upper() for k, v in values.items()})
        return f"{label} ({self.unit})" if self.unit else label


@dataclass(frozen=True)
class AuditFinding:
    """One check of a unit's audit: ``count`` offending items (0 = pass) and a readable note when it failed."""

    check: str
    count: int
    note: str


@dataclass(frozen=True)
class AuditReport:
    """What a unit's :attr:`BenchmarkSpec.audit` found: ``findings`` (the audit fails when any count is
    non-zero) and ``notes``, lines printed after them that never fail it (coverage: cases without prediction)."""

    findings: tuple[AuditFinding, ...]
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """True when a check found an offending item."""
        return any(f.count for f in self.findings)


#: a unit's audit: ``(inputs, config, train_manifest) -> AuditReport``; ``inputs`` is the unit's inputs model,
#: ``train_manifest`` the training-split CSV the test set is checked against. Raises
#: :class:`~trackeval.errors.TrackevalError` on bad input, as ``evaluate`` does.
AuditHook = Callable[[Any, "EvalConfig", Path], AuditReport]
#: a unit's bundled example: ``() -> inputs`` (field name -> value, e.g. ``{"ground_truth": Path(...)}``)
ExampleHook = Callable[[], dict[str, Any]]
#: a unit's extra output files: ``(inputs, config, result) -> {file name: bytes}`` (``{}``: none for these inputs),
#: written by ``trackeval evaluate`` into the results folder next to results.json (UMD: nnU-Net's summary.json)
OutputsHook = Callable[[Any, "EvalConfig", BenchmarkResult], Mapping[str, bytes]]


@dataclass(frozen=True)
class PrimaryMetric:
    """The metric a unit is gated on, with the gate's defaults for it (the ``gate`` config section overrides).

    ``metric``: aggregate key relative to the unit (``dsc`` -> ``umd/dsc``), one of the unit's declared
    :class:`MetricInfo` (which holds its direction, reduction and paired method). ``margin``: non-inferiority
    margin in the metric's units; ``group_margin``: margin of the worst-group guard; ``floor``: absolute bound a
    first version must reach (a ceiling for a lower-is-better metric; None: a first version cannot be promoted
    on this unit without a configured floor). ``protocol``: the config fields (dotted paths into the results'
    ``config``, e.g. ``umd.labels``) that change this metric's per-case values; two results pair when those
    agree (None: the whole config must agree); ``path=value`` reads a result written before that setting existed
    (the path absent) as ``value``, so older results still pair. When the gate config picks another primary
    metric, the whole config is compared.
    """

    metric: str
    margin: float = 0.01
    group_margin: float = 0.05
    floor: float | None = None
    protocol: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark unit.

    Attributes:
        name: unit name, ``benchmark`` or ``benchmark/task`` (``umd``, ``xray/cls``); metric keys start with it.
        help: one line for ``--help``.
        inputs: pydantic model of the unit's inputs; each field becomes a ``trackeval evaluate`` option
            (``ground_truth`` -> ``--ground-truth``; ``Path`` fields take a path, ``list[str]`` fields repeat).
            Field descriptions are the options' help.
        config_section: its section of params.yaml / ``--config`` (units of one benchmark may share one).
        config_model: the section's pydantic model (a :class:`trackeval.config.base.Section`).
        evaluate: ``(inputs, config, model) -> BenchmarkResult``; ``model`` is ``{"name", "version"}`` (either
            may be absent). Raises :class:`trackeval.errors.TrackevalError` on bad input.
        primary: the gated metric and its default margins and floor.
        metrics: every metric the unit produces (:class:`MetricInfo`); ``primary``, ``summary_metrics`` and the
            ``plots`` must name declared metrics.
        group_dimensions: breakdowns checked by the gate's worst-group guard (``organ``, ``modality``...).
        plots: figures of the report and plots of the DVC pipeline (the first is the pipeline's ``plot.csv``).
        summary_metrics: metrics shown in the terminal table (relative to the unit).
        dimension_labels: ``(dimension, label)`` pairs naming breakdown dimensions in figures (IMIS:
            ``("click", "clicks")``); an undeclared dimension is shown with spaces for underscores.
        audit: the unit's leakage audit (:data:`AuditHook`), run by ``trackeval audit <unit>``; None: the unit
            has none. A callable, or ``"module:function"`` naming one, imported only when the audit runs (so the
            declaration stays light and may name code the adapter's module cannot import).
        example: the unit's bundled example (:data:`ExampleHook`), evaluated by ``trackeval demo``; a callable or
            ``"module:function"`` as ``audit``; None: the unit bundles none.
        outputs: files the unit writes beside results.json (:data:`OutputsHook`; a callable or
            ``"module:function"`` as ``audit``), called by ``trackeval evaluate`` and the pipeline's evaluate
            stage after the evaluation (:func:`trackeval.api.unit_outputs`); None: none. Plain file names other
            than the results set's (results.json, metrics.json, cases.parquet).
    """

    name: str
    help: str
    inputs: type[BaseModel]
    config_section: str
    config_model: type[Section]
    evaluate: Callable[[Any, EvalConfig, dict[str, str]], BenchmarkResult]
    primary: PrimaryMetric
    metrics: tuple[MetricInfo, ...] = ()
    group_dimensions: tuple[str, ...] = ()
    plots: tuple[PlotSpec, ...] = ()
    summary_metrics: tuple[str, ...] = field(default=())
    dimension_labels: tuple[tuple[str, str], ...] = ()
    audit: AuditHook | str | None = None
    example: ExampleHook | str | None = None
    outputs: OutputsHook | str | None = None

    def __post_init__(self) -> None:
        if not UNIT_NAME.fullmatch(self.name):
            raise ValueError(f"benchmark unit name {self.name!r} must be 'benchmark' or 'benchmark/task' ([a-z0-9_])")
        if not UNIT_NAME.fullmatch(self.config_section) or "/" in self.config_section:
            raise ValueError(f"{self.name}: config_section {self.config_section!r} must be one [a-z0-9_] token")
        named = [self.primary.metric, *self.summary_metrics, *(p.metric for p in self.plots)]
        for metric in named:
            if self.metric_info(metric) is None:
                declared = ", ".join(m.name for m in self.metrics) or "none"
                raise ValueError(f"{self.name}: metric {metric!r} is not declared in metrics (declared: {declared})")

    @property
    def benchmark(self) -> str:
        """The benchmark (``xray`` for ``xray/cls``): the CLI subcommand and ``results.json``'s ``benchmark``."""
        return self.name.split("/")[0]

    @property
    def task(self) -> str:
        """The task (``cls`` for ``xray/cls``), or "" for a single-unit benchmark."""
        return self.name.partition("/")[2]

    def metric_info(self, path: str) -> MetricInfo | None:
        """The declaration covering ``path`` (relative to the unit; breakdowns ``/by_<dim>/<value>`` are
        dropped: ``dsc/by_organ/liver`` -> ``dsc``), or None."""
        head = path.split("/by_", 1)[0]
        for info in self.metrics:
            if info.pattern.match(head):
                return info
        return None

    @property
    def primary_info(self) -> MetricInfo:
        """The :class:`MetricInfo` of the primary metric."""
        info = self.metric_info(self.primary.metric)
        assert info is not None  # checked in __post_init__
        return info

    @property
    def primary_key(self) -> str:
        """The headline aggregate key gated by default (``umd/dsc``)."""
        return f"{self.name}/{self.primary.metric}"
