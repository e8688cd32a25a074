"""What the gate applies to each benchmark unit: the unit's declared defaults merged with the ``gate`` config.

Lookup order for a unit ``xray/cls`` (most specific first): ``xray/cls``, then ``xray``, then the default its
spec declares (:class:`trackeval.spec.PrimaryMetric`). ``primary_metrics`` values are key paths relative to
their config key, so ``{xray: cls/auroc}`` selects ``xray/cls/auroc`` for unit ``xray/cls`` only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, InstanceOf

from trackeval.config import EvalConfig, GateConfig
from trackeval.errors import ConfigError
from trackeval.registry import units
from trackeval.spec import BenchmarkSpec, CorpusHeadline, MetricInfo, PairedMethod, Reduction

V = TypeVar("V")


#: the facts decisions recorded before trackeval 0.4 lack (``paired``, ``per_case``) or before 0.3 (``reduction``,
#: ``best``)
_LATE_FACTS = ("reduction", "paired", "per_case", "best")
#: a policy's rules: the gate config's parts of it (the rest is the unit, the metric and its declaration)
_RULES = ("margin", "floor", "superiority", "group_dimensions", "default_group_margin", "group_margins", "protocol")


class UnitPolicy(BaseModel):
    """The gate's rules for one unit, and the declaration of the metric it is gated on.

    ``metric``: the primary metric relative to the unit (``dsc``); ``key``: the full aggregate key
    (``umd/dsc``); ``info``: the unit's :class:`~trackeval.spec.MetricInfo` of it, whose facts the policy reads
    (direction, reduction, paired method, per-case record name, best value, corpus function). ``margin`` /
    ``floor`` / ``superiority`` as in :class:`~trackeval.config.GateConfig`. A decision records the policy flat
    (:meth:`record`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    unit: str
    metric: str
    info: InstanceOf[MetricInfo]
    margin: float
    floor: float | None
    superiority: bool
    group_dimensions: tuple[str, ...]
    default_group_margin: float
    group_margins: tuple[tuple[str, float], ...]
    #: config fields (dotted paths into results.json's ``config``) that affect the metric; None: all of them
    protocol: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.unit}/{self.metric}"

    @property
    def higher_is_better(self) -> bool:
        return self.info.higher_is_better

    @property
    def reduction(self) -> Reduction:
        """How the headline is built from the case records (:attr:`MetricInfo.reduction`)."""
        return self.info.reduction

    @property
    def paired(self) -> PairedMethod:
        """How two versions are paired on the metric (:attr:`MetricInfo.paired`)."""
        return self.info.paired

    @property
    def per_case(self) -> str:
        """The name of its per-case values in the case records (:meth:`MetricInfo.record_name`)."""
        return self.info.record_name(self.metric)

    @property
    def best(self) -> float:
        """The metric's best value (:attr:`MetricInfo.best_value`)."""
        return self.info.best_value

    @property
    def corpus(self) -> CorpusHeadline | None:
        """The unit's corpus headline function (reduction ``corpus``; :attr:`MetricInfo.corpus`)."""
        return self.info.corpus

    def group_margin(self, dimension: str, group: str) -> float:
        """Margin of one breakdown group: the most specific of ``<unit or benchmark>[/dimension[/group]]``."""
        return _group_margin(self.unit, self.group_margins, self.default_group_margin, dimension, group)

    def record(self) -> PolicyRecord:
        """The policy as a decision records it: its rules and the metric's facts, flat."""
        return PolicyRecord(
            unit=self.unit,
            metric=self.metric,
            higher_is_better=self.higher_is_better,
            margin=self.margin,
            floor=self.floor,
            superiority=self.superiority,
            group_dimensions=self.group_dimensions,
            default_group_margin=self.default_group_margin,
            group_margins=self.group_margins,
            protocol=self.protocol,
            reduction=self.reduction,
            paired=self.paired,
            per_case=self.per_case,
            best=self.best,
        )


class PolicyRecord(BaseModel):
    """A :class:`UnitPolicy` as a decision records it (:class:`~trackeval.gate.decide.GateRecord`): its unit,
    metric and rules and the facts it reads of the metric's declaration but the corpus function (code), flat, in
    this order. A record read back lacks the facts older decisions did not record (defaults here; see
    :meth:`policy`); the gate's rules read it as they read a policy (its ``corpus`` is None)."""

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
    protocol: tuple[str, ...] | None = None
    reduction: Reduction = "item_mean"
    paired: PairedMethod = "bootstrap"
    per_case: str = ""
    best: float = 1.0

    @property
    def key(self) -> str:
        return f"{self.unit}/{self.metric}"

    @property
    def corpus(self) -> None:
        """A record holds no corpus function."""
        return None

    def group_margin(self, dimension: str, group: str) -> float:
        """Margin of one breakdown group (:meth:`UnitPolicy.group_margin`)."""
        return _group_margin(self.unit, self.group_margins, self.default_group_margin, dimension, group)

    def record(self) -> PolicyRecord:
        """The record itself (:meth:`UnitPolicy.record`)."""
        return self

    def policy(self, info: MetricInfo | None) -> Policy:
        """The policy this record was decided under, given ``info``, the installed unit's declaration of the
        recorded metric (None: not installed): the declaration with the recorded facts applied, the facts the
        record lacks (:data:`_LATE_FACTS`) taken from it, and its corpus function, which a record cannot hold.
        The record itself when the unit is not installed, or the record with the declared facts filled in when
        the declaration cannot take the recorded facts (no corpus function declared for a recorded corpus metric,
        a per-case name it would not give)."""
        if info is None:
            return self
        rules = {f: getattr(self, f) for f in _RULES}
        declared = UnitPolicy(unit=self.unit, metric=self.metric, info=info, **rules)
        filled = self.model_copy(
            update={f: getattr(declared, f) for f in _LATE_FACTS if f not in self.model_fields_set}
        )
        keeps_corpus = filled.reduction == "corpus" and filled.paired == "bootstrap"
        try:
            applied = replace(
                info,
                higher_is_better=filled.higher_is_better,
                reduction=filled.reduction,
                paired=filled.paired,
                record_path=filled.per_case == filled.metric,
                best=filled.best,
                corpus=info.corpus if keeps_corpus else None,
            )
        except ValueError:  # a corpus metric recorded, and the unit now declares no corpus function for it
            return filled
        policy = UnitPolicy(unit=self.unit, metric=self.metric, info=applied, **rules)
        return policy if policy.record() == filled else filled


#: what the gate's rules read: a unit's policy, or a recorded one read back (:meth:`PolicyRecord.policy`)
Policy = UnitPolicy | PolicyRecord


def _group_margin(
    unit: str, margins: tuple[tuple[str, float], ...], default: float, dimension: str, group: str
) -> float:
    """The margin of ``group`` of ``dimension`` in ``unit``: the most specific of ``margins``'
    ``<unit or benchmark>[/dimension[/group]]``, else ``default``."""
    table = dict(margins)
    for owner in _owners(unit):
        for key in (f"{owner}/{dimension}/{group}", f"{owner}/{dimension}", owner):
            if key in table:
                return table[key]
    return default


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
            metric=metric,
            info=info,
            margin=_lookup(cfg.margins, spec.name, spec.primary.margin),
            floor=_lookup(cfg.floors, spec.name, spec.primary.floor),
            superiority=_lookup(cfg.superiority, spec.name, False),
            group_dimensions=cfg.group_dimensions if cfg.group_dimensions is not None else spec.group_dimensions,
            default_group_margin=spec.primary.group_margin,
            group_margins=tuple(
                (k, v) for k, v in sorted(cfg.group_margins.items()) if k.split("/")[0] == spec.benchmark
            ),
            protocol=spec.primary.protocol if metric == spec.primary.metric else None,
        )
    return out


def gate_policies(cfg: EvalConfig) -> dict[str, UnitPolicy]:
    """``{unit: policy}``: every registered unit's primary metric, margins and floor under ``cfg.gate``."""
    return resolve_policies(cfg.gate, units().values())
