"""The results contract: per-case records and aggregates, the single source for every sink.

Shape (Grand-Challenge / nnU-Net style, see ``docs/design.md``)::

    {"schema_version", "benchmark", "task", "model", "config", "data": {"digest", ...}, "plots": [...],
     "summary": {...counts...}, "warnings": [...],
     "cases": {"file": "cases.parquet", "sha256", "method", "n_cases", "n_rows", "groups"},
     "aggregates": {key: {value, ci95_low, ci95_high, n, n_valid}}}

The case records (``case_id, subject_id, groups, metrics: {item: {metric: value}}, status, message``) live as
columns in ``cases.parquet`` (:class:`~trackeval.case_table.CaseTable`, one row per case x item); results.json
holds their digest, so its own sha256 (the evidence digest) covers them. Schema 1.x files held the records
inline as a JSON list (``"cases": [...]``); they are still read.

NaN (not applicable, e.g. Dice when both masks are empty) is written as JSON ``null`` and as a parquet null.
Metric keys are lowercase ``[a-z0-9_]`` tokens joined by ``/`` (MLflow rejects ``@``; use ``_at_k``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from trackeval.case_table import CASE_FIELDS, CaseRecord, CaseTable, nan_to_none
from trackeval.errors import InputError

if TYPE_CHECKING:  # pandas is imported by to_frame only: evaluate and the CLI's --help stay light
    import pandas as pd

#: Results schema version: the major part changes when a field is removed, renamed or changes meaning; the minor
#: part when an optional field is added or an interval's method changes (1.1: ``task`` and ``plots``; 1.2:
#: ``config.bootstrap.cluster`` and ``config.bootstrap.interval``, cluster-bootstrap expanded-percentile CIs).
#: 2.0: the case records moved from results.json to the columns of ``cases.parquet``, results.json keeping their
#: digest. Readers accept every 1.x and 2.x file.
SCHEMA_VERSION = "2.0"
#: the major versions this trackeval reads
READABLE_MAJORS = ("1", "2")

#: a metric key (matched with ``fullmatch``; ``\Z`` because ``$`` also matches before a trailing newline)
_KEY = re.compile(r"^[a-z0-9_]+(/[a-z0-9_]+)*\Z")
#: what :func:`key_token` replaces: every run of characters that are not a lowercase letter or a digit
_NON_TOKEN = re.compile(r"[^a-z0-9]+")


#: the per-case columns of ``cases.parquet`` (and fields of a case record) besides its groups, item and metrics
CASE_COLUMNS: tuple[str, ...] = CASE_FIELDS


def metric_key(*tokens: str) -> str:
    """Join tokens into a metric key, validating each (``metric_key("umd", "dsc", "by_organ", "liver")``)."""
    key = "/".join(tokens)
    if not _KEY.fullmatch(key):
        raise ValueError(f"invalid metric key {key!r}: tokens must match [a-z0-9_]+")
    return key


def key_token(name: object, *, fallback: str | None = None, file: str | None = None, field: str | None = None) -> str:
    """A free name (finding, class, organ, label, modality) as one metric-key token: lowercased, each run of other
    characters than ``[a-z0-9]`` replaced by ``_``, leading and trailing ``_`` removed (``"Pleural Effusion"`` ->
    ``pleural_effusion``; ``name`` is ``str()``-ed first: a JSON value may be a number).

    A name without any letter or digit gives ``fallback`` when one is given (IMIS: ``label_<id>``, ``unknown``),
    else an :class:`InputError` naming ``file`` and ``field``. Two names giving one token are the caller's to
    refuse (the X-ray tasks do).
    """
    token = _NON_TOKEN.sub("_", str(name).lower()).strip("_")
    if token:
        return token
    if fallback is not None:
        return fallback
    raise InputError(f"name {name!r} has no letter or digit to build a metric key from", file=file, field=field)


def check_group_columns(
    groups: Mapping[str, str] | Iterable[str],
    *,
    item_kind: str,
    metrics: Iterable[str],
    items: Iterable[str] | None = None,
    file: str | None = None,
    case_id: str | None = None,
) -> None:
    """Refuse case group names that would overwrite another column of ``cases.parquet``.

    ``cases.parquet`` has one column per case field (:data:`CASE_COLUMNS`), per group, for the item
    (named ``item_kind``) and per metric: a group named like any of the others (a manifest column ``status``,
    ``organ`` or ``dsc``) would silently replace it. A group named like the item column is allowed only when
    its value is every item of the case (3D-MIR: group ``region`` of a case whose one item is that region);
    ``items`` None (not known yet, e.g. while reading a manifest) refuses it.

    Args:
        groups: the group names (or the ``{name: value}`` mapping, needed for the item-column exception).
        item_kind: the item column's name (``organ``, ``region``, ``finding``...).
        metrics: every per-item metric name of the result.
        items: the items of this case, None when not known yet.
        file, case_id: where the groups come from (a manifest and the case's row), for the message.

    Raises:
        InputError: naming the file, the case and, as ``field``, the colliding column.
    """
    values = groups if isinstance(groups, Mapping) else dict.fromkeys(groups, "")
    taken = {name: "a case field" for name in CASE_COLUMNS} | {m: "a metric" for m in metrics}
    for name in sorted(values):
        what = taken.get(name)
        if name == item_kind and (items is None or set(items) - {values[name]}):
            what = "the item column"
        if what:
            raise InputError(
                f"case group column {name!r} has the name of {what} of cases.parquet and would overwrite it; "
                "rename the column",
                file=file,
                case_id=case_id,
                field=name,
            )


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricSummary(_Model):
    """An aggregate with its uncertainty. ``n``: cases considered; ``n_valid``: values that were not NaN."""

    value: float | None
    ci95_low: float | None = None
    ci95_high: float | None = None
    n: int
    n_valid: int

    @field_validator("value", "ci95_low", "ci95_high")
    @classmethod
    def _nan_as_null(cls, v: float | None) -> float | None:
        return nan_to_none(v)


class PlotSpec(_Model):
    """A figure a benchmark unit declares: the report draws it and the DVC pipeline writes it as ``plot.csv``.

    ``metric``: aggregate key relative to the unit (``dsc`` -> ``umd/dsc``); ``dimension``: the breakdown
    (``organ`` -> ``umd/dsc/by_organ/<organ>``). ``kind``:

    * ``bar``: one bar per group of ``<metric>/by_<dimension>/<group>``, 95% CI whiskers.
    * ``line``: the groups are ordered numbers (clicks) drawn as a line with a CI band. With ``series`` set, one
      line per value of that second dimension: from the nested aggregates
      ``<metric>/by_<series>/<s>/by_<dimension>/<x>`` when they exist, otherwise from the per-case records
      through ``case_metric``, a per-item metric name with ``{<series>}`` and ``{<dimension>}`` placeholders
      (IMIS: ``series="prompt"``, ``case_metric="dice_{prompt}_{click}"``; placeholder values are
      ``[a-z0-9]+``). From records, a case's value is the mean over its items, the line the mean over cases
      with a bootstrap CI as the results ``bootstrap`` config says (cluster, interval; seed group ``""``).
    * ``roc``: ROC curves of every case x item that carries a 0/1 ``label`` and a ``score``: one per item
      (``dimension`` names the items, e.g. ``finding``) plus the pooled (micro) curve, with the operating point
      of the ``<unit>/threshold_at_sens95/by_<dimension>/<item>`` threshold marked where that aggregate exists.
      ``plot.csv`` of a ``roc`` plot stays the pooled curve (``fpr,tpr,threshold``).
    * ``pr``: precision-recall curves from the same label/score pairs, per item plus pooled (operating points
      marked as for ``roc``).
    * ``reliability``: calibration diagram, mean predicted probability vs observed frequency of positives in
      equal-width bins (the bins of the result's ``ece_bins`` config, else 10; binned as the ECE), per item
      plus pooled, with the diagonal.
    * ``box``: distribution of a per-case metric (``case_metric``, default ``metric``) per item when
      ``dimension`` is the result's ``item_kind``, else per value of the case group ``dimension`` (a case's value
      is then its mean over items): a box plot with the cases as points.
    * ``curve_k``: a metric over a cut-off k, one line per group: ``metric`` ends in ``_k``
      (``group/p_at_k`` reads ``<unit>/group/p_at_<k>/by_<dimension>/<group>`` for every k found).

    ``title``: the figure's title (a default is built from the metric and dimension).
    """

    metric: str
    dimension: str
    kind: Literal["bar", "line", "roc", "pr", "reliability", "box", "curve_k"] = "bar"
    title: str = ""
    #: ``line`` only: a second breakdown dimension, one line per value ("" = a single line)
    series: str = ""
    #: per-item metric name in the case records (``box``; ``line`` with ``series``: a template); "" = ``metric``
    case_metric: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> PlotSpec:
        if self.series and self.kind != "line":
            raise ValueError(f"series is only used by line plots, not {self.kind}")
        if self.kind == "curve_k" and not self.metric.endswith("_k"):
            raise ValueError(f"a curve_k plot's metric ends in '_k' (e.g. 'p_at_k'), got {self.metric!r}")
        if self.series and self.case_metric:
            missing = [d for d in (self.series, self.dimension) if f"{{{d}}}" not in self.case_metric]
            if missing:
                raise ValueError(f"case_metric {self.case_metric!r} lacks the placeholder(s) {missing}")
        return self


class DataInfo(_Model):
    """Content digests of the evaluated inputs (sha256 over file bytes, case by case)."""

    digest: str
    ground_truth_digest: str
    predictions_digest: str
    n_cases: int


class BenchmarkResult(_Model):
    """Everything one evaluation produced; sinks (files, MLflow) are fed from this object alone.

    ``cases`` is a :class:`~trackeval.case_table.CaseTable` (a list of :class:`CaseRecord` or of their dicts is
    accepted and converted); iterating it gives the records.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    schema_version: str = SCHEMA_VERSION
    benchmark: str
    #: the task of a multi-task benchmark (X-ray ``cls``, ``seg``...); "" for a single-unit benchmark
    task: str = ""
    model: dict[str, str] = Field(default_factory=dict)
    config: dict[str, Any]
    config_digest: str
    trackeval_version: str
    data: DataInfo
    item_kind: str = "item"
    summary: dict[str, int] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    cases: CaseTable
    aggregates: dict[str, MetricSummary]
    #: the unit's declared figures (empty in 1.0 files)
    plots: list[PlotSpec] = Field(default_factory=list)

    @field_validator("schema_version")
    @classmethod
    def _readable_version(cls, v: str) -> str:
        if v.split(".")[0] not in READABLE_MAJORS:
            readable = ", ".join(f"{m}.x" for m in READABLE_MAJORS)
            raise ValueError(f"results schema {v} is not readable by this trackeval (reads {readable})")
        return v

    @field_validator("cases", mode="before")
    @classmethod
    def _as_table(cls, v: object) -> CaseTable:
        if isinstance(v, CaseTable):
            return v
        if isinstance(v, dict):
            raise ValueError("the case records are in cases.parquet beside results.json: read the results folder")
        records = [r if isinstance(r, CaseRecord) else CaseRecord.model_validate(r) for r in v]  # type: ignore[attr-defined]
        return CaseTable.from_records(records)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> BenchmarkResult:
        """A copy with ``update`` applied (pydantic's, without validation); ``cases`` given as records becomes a
        :class:`~trackeval.case_table.CaseTable`."""
        if update and "cases" in update and not isinstance(update["cases"], CaseTable):
            update = {**update, "cases": CaseTable.from_records(update["cases"])}
        return super().model_copy(update=update, deep=deep)

    @field_serializer("cases")
    def _case_descriptor(self, cases: CaseTable) -> dict[str, Any]:
        """What results.json says of its case records (:meth:`CaseTable.descriptor
        <trackeval.case_table.CaseTable.descriptor>`): where they are, how many, their groups and digests."""
        return cases.descriptor(self.item_kind)

    @property
    def unit(self) -> str:
        """The benchmark unit's name: ``benchmark`` or ``benchmark/task`` (the key tracking and the gate use).

        A 1.0 file of a multi-task benchmark has no ``task`` field; the task recorded under
        ``config.<benchmark>_run.task`` is used then.
        """
        task = self.task or str(self.config.get(f"{self.benchmark}_run", {}).get("task", ""))
        return f"{self.benchmark}/{task}" if task else self.benchmark

    @property
    def resampling(self) -> tuple[Literal["subject_id", "case"], Literal["expanded_percentile", "percentile"]]:
        """``(bootstrap.cluster, bootstrap.interval)`` behind this result's CIs; a result written before schema
        1.2 resampled cases with plain percentile intervals."""
        boot = self.config.get("bootstrap", {})
        cluster = "subject_id" if boot.get("cluster") == "subject_id" else "case"
        interval = "expanded_percentile" if boot.get("interval") == "expanded_percentile" else "percentile"
        return cluster, interval

    @field_validator("aggregates")
    @classmethod
    def _valid_keys(cls, v: dict[str, MetricSummary]) -> dict[str, MetricSummary]:
        for key in v:
            if not _KEY.fullmatch(key):
                raise ValueError(f"invalid metric key {key!r}")
        return v

    @model_validator(mode="after")
    def _groups_keep_columns(self) -> BenchmarkResult:
        """No case group overwrites another ``cases.parquet`` column (:func:`check_group_columns`); raises
        :class:`InputError` (not wrapped by pydantic) naming the case and the column."""
        table, metrics = self.cases, set(self.cases.metrics)
        offenders = [_first_offender(table, name, self.item_kind, metrics) for name in table.groups]
        found = [i for i in offenders if i is not None]
        if found:
            case = table[min(found)]
            check_group_columns(
                case.groups, item_kind=self.item_kind, metrics=metrics, items=case.metrics, case_id=case.case_id
            )
        return self

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, no timestamps; :func:`json_text`): same inputs
        + config -> same bytes."""
        return json_text(self.model_dump(mode="json"))

    def to_frame(self) -> pd.DataFrame:
        """The case records as a pandas DataFrame, the table ``cases.parquet`` holds
        (:meth:`CaseTable.to_arrow <trackeval.case_table.CaseTable.to_arrow>`), so ``pd.read_parquet`` of a results
        folder gives the same frame: one row per case x item (a case without items: one row, its item None), the
        columns ``case_id``, ``subject_id``, ``status``, ``message``, one per case group (``modality``, ``site``...;
        None where a case lacks it), the item column (named :attr:`item_kind`: ``organ``, ``finding``...) and one
        float64 column per per-item metric (NaN where not applicable or absent). Imports pandas (a dependency of
        trackeval's) on first use. A UMD result's mean Dice per organ, for instance, is
        ``result.to_frame().groupby("organ")["dsc"].mean()``.
        """
        return self.cases.to_arrow(self.item_kind).to_pandas()

    def flat_metrics(self) -> dict[str, float]:
        """``{key: value}`` plus ``key/ci95_low``, ``key/ci95_high``, ``key/n_valid`` siblings.

        Siblings are emitted for headline and single-breakdown keys; nested breakdowns
        (``.../by_a/x/by_b/y``) keep their CI in results.json only, so a run stays at a few hundred keys.
        NaN aggregates (nothing valid) are left out: MLflow charts and ``dvc metrics diff`` want numbers.
        """
        flat: dict[str, float] = {}
        for key, s in sorted(self.aggregates.items()):
            flat.update(_flat_entries(key, s))
        for name, count in sorted(self.summary.items()):
            flat[metric_key(self.benchmark, name)] = float(count)
        return flat


#: compact size above which a results file's JSON stays compact (a file nobody reads by eye)
READABLE_JSON_BYTES = 1 << 20


def json_text(value: Any) -> str:
    """The JSON text of a results-folder file (results.json, metrics.json): sorted keys, no NaN (``ValueError``:
    NaN must have become ``null`` before), a final newline. Indented (one space per level) while it is small
    enough for a person to read (compact size at most :data:`READABLE_JSON_BYTES`); beyond that compact, which
    CPython's C encoder writes (``indent`` forces the pure-Python encoder, several times slower on large values).
    Either way the same value gives the same bytes."""
    compact = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    if len(compact) > READABLE_JSON_BYTES:
        return compact + "\n"
    return json.dumps(value, sort_keys=True, indent=1, allow_nan=False) + "\n"


def _first_offender(table: CaseTable, name: str, item_kind: str, metrics: set[str]) -> int | None:
    """The first case whose group ``name`` overwrites another ``cases.parquet`` column (see
    :func:`check_group_columns`), None if none does: any case having the group when it is named like a case
    field or a metric; one with an item other than the group's value when it is named like the item column."""
    values = table.groups[name]
    if name == item_kind:
        row_group = np.asarray(values, dtype=object)[table.row_case]
        row_item = np.asarray(table.items, dtype=object)[table.row_item]
        bad = np.flatnonzero(np.not_equal(row_group, None) & np.not_equal(row_group, row_item))
        return int(table.row_case[bad[0]]) if bad.size else None
    if name in CASE_COLUMNS or name in metrics:
        return next((i for i, v in enumerate(values) if v is not None), None)
    return None


def _flat_entries(key: str, s: MetricSummary) -> dict[str, float]:
    """One aggregate as flat metrics: its value and, for headline and single-breakdown keys with a CI, the
    ``ci95_low``/``ci95_high``/``n_valid`` siblings; nothing for a NaN aggregate."""
    if s.value is None:
        return {}
    out = {key: s.value}
    if s.ci95_low is not None and s.ci95_high is not None and key.count("/by_") < 2:
        out.update({f"{key}/ci95_low": s.ci95_low, f"{key}/ci95_high": s.ci95_high, f"{key}/n_valid": float(s.n_valid)})
    return out


def headline_metrics(result: BenchmarkResult) -> dict[str, float]:
    """The part of :meth:`BenchmarkResult.flat_metrics` that belongs to headline aggregates (no ``/by_``
    breakdown), with their ``ci95_low``/``ci95_high``/``n_valid`` siblings: tens of keys per unit, not hundreds."""
    out: dict[str, float] = {}
    for key, s in sorted(result.aggregates.items()):
        if "/by_" not in key:
            out.update(_flat_entries(key, s))
    return out


def config_value(config: Mapping[str, Any], path: str) -> object:
    """The value at dotted ``path`` of a result's ``config`` (``umd.labels``, ``xray.cls.ece_bins``); None when any
    part is absent or sits below a value that is not a mapping."""
    node: object = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def item_matrix(cases: CaseTable | Sequence[CaseRecord], items: Sequence[str], metric: str) -> np.ndarray:
    """``(n_cases, n_items)`` float array of one per-item metric; NaN where a value is missing or null."""
    if isinstance(cases, CaseTable):
        return cases.matrix(metric, items)
    out = np.full((len(cases), len(items)), np.nan)
    for i, case in enumerate(cases):
        for j, item in enumerate(items):
            v = case.metrics.get(item, {}).get(metric)
            if v is not None:
                out[i, j] = v
    return out


def sha256_text(*parts: str) -> str:
    """sha256 (hex) of the parts joined by newlines: digests of digests, canonical config JSON."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def build_result(
    benchmark: str,
    *,
    task: str = "",
    model: dict[str, str] | None,
    config: dict[str, Any],
    ground_truth_digest: str,
    predictions_digest: str,
    summary: dict[str, int],
    warnings: list[str],
    cases: list[CaseRecord] | CaseTable,
    aggregates: dict[str, MetricSummary],
    item_kind: str,
) -> BenchmarkResult:
    """A :class:`BenchmarkResult` with the derived fields (config digest, data digest, version) filled in.

    ``task``: the task of a multi-task benchmark ("" for a single-unit benchmark). ``config`` holds the sections
    that determine the numbers (never the engine: results must not depend on the executor).
    """
    from trackeval._version import __version__

    table = cases if isinstance(cases, CaseTable) else CaseTable.from_records(cases)
    return BenchmarkResult(
        benchmark=benchmark,
        task=task,
        model=model or {},
        config=config,
        config_digest=sha256_text(json.dumps(config, sort_keys=True)),
        trackeval_version=__version__,
        data=DataInfo(
            digest=sha256_text(ground_truth_digest, predictions_digest),
            ground_truth_digest=ground_truth_digest,
            predictions_digest=predictions_digest,
            n_cases=len(table),
        ),
        summary=summary,
        warnings=warnings,
        cases=table,
        aggregates=aggregates,
        item_kind=item_kind,
    )
