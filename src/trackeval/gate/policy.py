"""What the gate applies to each benchmark unit: the unit's declared defaults merged with the ``gate`` config.

Lookup order for a unit ``xray/cls`` (most specific first): ``xray/cls``, then ``xray``, then the default its
spec declares (:class:`trackeval.spec.PrimaryMetric`). ``primary_metrics`` values are key paths relative to
their config key, so ``{xray: cls/auroc}`` selects ``xray/cls/auroc`` for unit ``xray/cls`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from trackeval.config import EvalConfig, GateConfig
from trackeval.errors import ConfigError
from trackeval.registry import units
from trackeval.spec import BenchmarkSpec, MetricInfo, PairedMethod, Reduction

V = TypeVar("V")


class UnitPolicy(BaseModel):
    """The gate's rules for one unit, and the declared facts of the metric it is gated on.

    ``metric``: the primary metric relative to the unit (``dsc``); ``key``: the full aggregate key
    (``umd/dsc``). ``margin`` / ``floor`` / ``superiority`` as in :class:`~trackeval.config.GateConfig`. The
    facts ``higher_is_better``, ``reduction``, ``paired``, ``per_case``, ``best`` and ``corpus`` are the
    metric's :class:`~trackeval.spec.MetricInfo` (see :func:`metric_facts`). A decision records the policy
    (:class:`~trackeval.gate.decide.GateRecord`): every field but ``corpus``, in this order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    unit: str
    metric: str
    higher_is_better: bool
    margin: float
    floor: float | None
    superiority: bool
    group_dimensions: tuple[str, ...]
    default_group_margin: float
    group_margins: tuple[tuple[str, float], ...]
    #: config fields (dotted paths into results.json's ``config``) that affect the metric; None: all of them
    protocol: tuple[str, ...] | None = None
    #: how the headline is built from the case records (:attr:`MetricInfo.reduction`)
    reduction: Reduction = "item_mean"
    #: how two versions are paired on the metric (:attr:`MetricInfo.paired`)
    paired: PairedMethod = "bootstrap"
    #: the name of its per-case values in the case records (:meth:`MetricInfo.record_name`)
    per_case: str = ""
    #: the metric's best value (:attr:`MetricInfo.best_value`)
    best: float = 1.0
    #: the unit's corpus headline function, a :data:`~trackeval.spec.CorpusHeadline` (reduction ``corpus``):
    #: code, so never serialised; a policy read back from a record gets it from the registered unit
    corpus: Callable[..., Any] | None = Field(default=None, exclude=True, repr=False)

    @property
    def key(self) -> str:
        return f"{self.unit}/{self.metric}"

    def group_margin(self, dimension: str, group: str) -> float:
        """Margin of one breakdown group: the most specific of ``<unit or benchmark>[/dimension[/group]]``."""
        table = dict(self.group_margins)
        for owner in _owners(self.unit):
            for key in (f"{owner}/{dimension}/{group}", f"{owner}/{dimension}", owner):
                if key in table:
                    return table[key]
        return self.default_group_margin


def metric_facts(metric: str, info: MetricInfo) -> dict[str, Any]:
    """The facts of metric path ``metric`` (relative to its unit) that ``info``, its declaration, gives a
    :class:`UnitPolicy`: direction, reduction, paired method, per-case record name, best value, corpus function."""
    return {
        "metric": metric,
        "higher_is_better": info.higher_is_better,
        "reduction": info.reduction,
        "paired": info.paired,
        "per_case": info.record_name(metric),
        "best": info.best_value,
        "corpus": info.corpus,
    }


def _owners(unit: str) -> list[str]:
    """Config keys that apply to ``unit``, most specific first (``xray/cls`` -> ``xray/cls``, ``xray``)."""
    benchmark = unit.split("/")[0]
    return [unit] if unit == benchmark else [unit, benchmark]


def _lookup(table: dict[str, V], unit: str, default: V) -> V:
    for owner in _owners(unit):
        if owner in table:
            return table[owner]
    return default


def _primary_metric(cfg: GateConfig, spec: BenchmarkSpec) -> str:
    for owner in _owners(spec.name):
        if owner in cfg.primary_metrics:
            full = f"{owner}/{cfg.primary_metrics[owner]}"
            if full.startswith(spec.name + "/"):
                return full[len(spec.name) + 1 :]
    return spec.primary.metric


def resolve_policies(cfg: GateConfig, specs: Iterable[BenchmarkSpec]) -> dict[str, UnitPolicy]:
    """``{unit: UnitPolicy}`` for every registered unit under the gate config ``cfg``."""
    out = {}
    for spec in specs:
        metric = _primary_metric(cfg, spec)
        info = spec.metric_info(metric)
        if info is None:  # never guess a direction or a pairing: the gate would decide on an assumption
            declared = ", ".join(m.name for m in spec.metrics)
            raise ConfigError(
                f"gate.primary_metrics: {spec.name}/{metric} is not a metric unit {spec.name} declares "
                f"(declared: {declared})"
            )
        out[spec.name] = UnitPolicy(
            unit=spec.name,
            margin=_lookup(cfg.margins, spec.name, spec.primary.margin),
            floor=_lookup(cfg.floors, spec.name, spec.primary.floor),
            superiority=_lookup(cfg.superiority, spec.name, False),
            group_dimensions=cfg.group_dimensions if cfg.group_dimensions is not None else spec.group_dimensions,
            default_group_margin=spec.primary.group_margin,
            group_margins=tuple(
                (k, v) for k, v in sorted(cfg.group_margins.items()) if k.split("/")[0] == spec.benchmark
            ),
            protocol=spec.primary.protocol if metric == spec.primary.metric else None,
            **metric_facts(metric, info),
        )
    return out


def gate_policies(cfg: EvalConfig) -> dict[str, UnitPolicy]:
    """``{unit: policy}``: every registered unit's primary metric, margins and floor under ``cfg.gate``."""
    return resolve_policies(cfg.gate, units().values())
