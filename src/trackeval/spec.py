"""A benchmark unit's declaration: :class:`BenchmarkSpec` is the single description of a benchmark (or of one
task of a multi-task benchmark, e.g. ``xray/cls``).

Everything else is built from the registered specs (see :mod:`trackeval.benchmarks.discovery`): the CLI options
of ``trackeval evaluate`` (from the ``inputs`` model), the evaluation config (from ``config_section`` /
``config_model``), the promotion gate's defaults (``primary``, ``group_dimensions``), the report's figures and
the DVC pipeline's plots (``plots``). A spec is plain data plus one callable: declaring it imports nothing heavy,
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
        group_dimensions=("site",),
        plots=(PlotSpec(metric="accuracy", dimension="site"),),
    )
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from trackeval.results import BenchmarkResult, CaseRecord, PlotSpec

if TYPE_CHECKING:
    import numpy as np

    from trackeval.config import EvalConfig
    from trackeval.config.base import Section

__all__ = ["BenchmarkSpec", "CorpusHeadline", "PlotSpec", "PrimaryMetric", "UNIT_NAME"]

#: a unit's corpus headline: ``(case records, (B, n_cases) case weights) -> (B,)`` headline values
CorpusHeadline = Callable[[Sequence[CaseRecord], "np.ndarray"], "np.ndarray"]

#: ``benchmark`` or ``benchmark/task``: lowercase ``[a-z0-9_]`` tokens (also the metric-key prefix).
UNIT_NAME = re.compile(r"^[a-z][a-z0-9_]*(/[a-z][a-z0-9_]*)?\Z")  # fullmatch: ``$`` also matches before "\n"


@dataclass(frozen=True)
class PrimaryMetric:
    """The metric a unit is gated on, with the gate's defaults for it (the ``gate`` config section overrides).

    ``metric``: aggregate key relative to the unit (``dsc`` -> ``umd/dsc``); its last token is the per-case
    metric that the paired statistics use. ``higher_is_better``: direction (for a lower-is-better metric the
    margins apply to the upper CI bound and ``floor`` is a ceiling). ``margin``: non-inferiority margin in the
    metric's units; ``group_margin``: margin of the worst-group guard; ``floor``: absolute bound a first
    version must reach (None: a first version cannot be promoted on this unit without a configured floor).
    ``protocol``: the config fields (dotted paths into the results' ``config``, e.g. ``umd.labels``) that change
    this metric's per-case values; two results pair when those agree (None: the whole config must agree). When
    the gate config picks another primary metric, the whole config is compared.
    ``reduction``: how the headline is built from the case records (``item_mean``: mean over items of the item
    means; ``case_mean``: mean over cases of each case's item mean; ``corpus``: the unit's own function
    ``corpus``), which the gate recomputes on every resample and checks against the stored headline.
    ``corpus``: for a metric that is not a mean of per-case values (mAP, corpus BLEU), a pure function
    ``(records, weights) -> values`` of the case records and a ``(B, n_cases)`` matrix of case weights (one
    resample per row, the columns in the order of ``records``) giving the ``(B,)`` headlines (NaN where a
    resample has none); a row of ones must give the stored headline. Required with ``reduction="corpus"`` and
    only allowed then; it applies to ``metric`` only (a gate config that picks another metric uses
    ``item_mean``). ``best``: the metric's best value (None: 1 when higher is better, else 0), which a side
    without any value for a group counts as in the gate's group deltas.
    """

    metric: str
    higher_is_better: bool = True
    margin: float = 0.01
    group_margin: float = 0.05
    floor: float | None = None
    protocol: tuple[str, ...] | None = None
    reduction: Literal["item_mean", "case_mean", "corpus"] = "item_mean"
    best: float | None = None
    corpus: CorpusHeadline | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.reduction == "corpus") != (self.corpus is not None):
            raise ValueError(f"{self.metric}: reduction 'corpus' needs a corpus function, and only it takes one")

    @property
    def best_value(self) -> float:
        """``best``, or 1 / 0 by direction."""
        if self.best is not None:
            return self.best
        return 1.0 if self.higher_is_better else 0.0


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
        group_dimensions: breakdowns checked by the gate's worst-group guard (``organ``, ``modality``...).
        plots: figures of the report and plots of the DVC pipeline (the first is the pipeline's ``plot.csv``).
        summary_metrics: metrics shown in the terminal table (relative to the unit).
    """

    name: str
    help: str
    inputs: type[BaseModel]
    config_section: str
    config_model: type[Section]
    evaluate: Callable[[Any, EvalConfig, dict[str, str]], BenchmarkResult]
    primary: PrimaryMetric
    group_dimensions: tuple[str, ...] = ()
    plots: tuple[PlotSpec, ...] = ()
    summary_metrics: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not UNIT_NAME.fullmatch(self.name):
            raise ValueError(f"benchmark unit name {self.name!r} must be 'benchmark' or 'benchmark/task' ([a-z0-9_])")
        if not UNIT_NAME.fullmatch(self.config_section) or "/" in self.config_section:
            raise ValueError(f"{self.name}: config_section {self.config_section!r} must be one [a-z0-9_] token")

    @property
    def benchmark(self) -> str:
        """The benchmark (``xray`` for ``xray/cls``): the CLI subcommand and ``results.json``'s ``benchmark``."""
        return self.name.split("/")[0]

    @property
    def task(self) -> str:
        """The task (``cls`` for ``xray/cls``), or "" for a single-unit benchmark."""
        return self.name.partition("/")[2]

    @property
    def primary_key(self) -> str:
        """The headline aggregate key gated by default (``umd/dsc``)."""
        return f"{self.name}/{self.primary.metric}"
