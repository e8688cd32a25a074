"""3D-MIR: 3D medical image retrieval (Ben Abacha et al., arXiv:2311.13752) on its released labels and splits.

Ground truth (``--ground-truth DIR``, the original repository layout):

* ``DIR/3DMIR_labels/<region>_labels_and_captions.csv``: columns ``name, ..., lesion_group, cancer_flag, ...``
  (UTF-8, a BOM is tolerated). One file per region (the organ searched); ``organ`` is the source scan's task.
* ``DIR/Data_Splits/<region>_full_train_split.csv`` (the region's **index**) and ``..._test_split.csv`` (its
  **queries**): the volume name is the LAST column (lung files have no index column).

Predictions (``--predictions rankings.csv``): columns ``region,query,rank,retrieved[,score]``, one row per
retrieved volume, ``rank`` from 1; or JSON Lines (``.jsonl``/``.ndjson``) with the same fields.

Relevance of a retrieved volume to a query, both looked up in the region's label table: ``flag`` = equal
``cancer_flag``; ``group`` = equal ``lesion_group`` (-1 = no lesion matches -1). Per query and relevance:
``p_at_<k>`` for ``mir3d.ks`` and ``ap_at_<ap_k>`` (see :mod:`trackeval.metrics.ranking` and the
``mir3d.ap_denominator`` / ``mir3d.p10_mode`` switches in :class:`~trackeval.config.Mir3dConfig`).

Aggregates: ``mir3d/<flag|group>/<metric>`` = macro mean over the evaluated regions of the per-region mean over
queries, and ``mir3d/<flag|group>/<metric>/by_region/<region>``; 95% CIs by a bootstrap over queries (one set of
resamples shared by every metric). Counts in ``summary`` (``mir3d/n_queries``, ``mir3d/n_missing_queries``,
``mir3d/n_short_lists``, ``mir3d/audit/n_query_index_overlap``, ...).

Validation (an :class:`InputError` naming the file, the line and the field): unknown region, a query that is not
in the region's test split, a retrieved volume that is not in the region's index, a list retrieving its own
query, the same volume twice in one list, ranks that are not ``1..n``. Not errors, but counted and reported:
a list shorter than the deepest cut-off (padded with non-relevant items), a test query without any ranking
(status ``missing_prediction``, every metric 0, named in one warning line; counted as ``n_missing_queries`` and
``n_missing_predictions``), rows of a region left out by ``mir3d.regions``. No ranking for any query is an error
naming the predictions file. Leakage audit:
volumes that are both index and query of one region are listed in ``warnings``.

Scoring is one vectorised pass per region (no per-case files to read), so it runs in-process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trackeval.benchmarks.mir3d_config import Mir3dConfig
from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.summaries import clusters_of
from trackeval.config import EvalConfig
from trackeval.config.base import KEY_TOKEN
from trackeval.engine.driver import Evaluation, finish
from trackeval.errors import ConfigError, InputError
from trackeval.io.hashing import sha256_files, sha256_text
from trackeval.io.rankings import RankedLists
from trackeval.io.structured import read_jsonl
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.ranking import average_precision, label_relevance, precision_at_10_original_quirk, precision_at_k
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, PlotSpec, metric_key
from trackeval.spec import BenchmarkSpec, MetricInfo, PrimaryMetric
from trackeval.stats.bootstrap import bootstrap_means, group_seed

log = logging.getLogger(__name__)

NAME = "mir3d"
LABELS_DIR = "3DMIR_labels"
SPLITS_DIR = "Data_Splits"
LABELS_SUFFIX = "_labels_and_captions.csv"
#: Relevance definitions: key token -> label-table column.
RELEVANCE: dict[str, str] = {"flag": "cancer_flag", "group": "lesion_group"}
RANKING_FIELDS = ("region", "query", "rank", "retrieved")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True)
class RegionTruth:
    """One region's benchmark: its index (train split), queries (test split) and labels.

    Attributes:
        region: region name (a metric-key token).
        index: train-split volume names, in file order.
        queries: test-split volume names, in file order.
        labels: ``{"flag"|"group": {volume name: label}}`` for every labelled volume of the region.
        overlap: volume names that are both in the index and among the queries (leakage), sorted.
        files: the label and split files read (for the data digest).
    """

    region: str
    index: tuple[str, ...]
    queries: tuple[str, ...]
    labels: dict[str, dict[str, int]]
    overlap: tuple[str, ...]
    files: tuple[Path, ...]

    def label_array(self, kind: str, names: tuple[str, ...]) -> np.ndarray:
        """``(len(names),)`` int64 labels of ``names`` for relevance ``kind`` (``flag`` or ``group``)."""
        table = self.labels[kind]
        return np.array([table[n] for n in names], dtype=np.int64)


@dataclass(frozen=True)
class RankedList:
    """A query's validated ranked list: index positions in rank order (all ranks, not cut)."""

    region: str
    query: str
    positions: tuple[int, ...]


def _int_field(row: dict[str, str], field: str, file: Path, where: str, case_id: str | None = None) -> int:
    """``int(row[field])``; ``where`` (``"line 7"``) locates the row in the error message."""
    try:
        return int(row[field])
    except ValueError:
        raise InputError(
            f"{where}: {field} must be an integer, got {row[field]!r}", file=str(file), case_id=case_id, field=field
        ) from None


def _read_labels(path: Path) -> dict[str, dict[str, int]]:
    """``{"flag": {name: 0|1}, "group": {name: int}}`` from a ``*_labels_and_captions.csv`` file.

    Errors name the data row (1 = first row after the header), not the physical line: captions span lines.
    """
    rows = read_csv_rows(path, required=("name", *RELEVANCE.values()))
    labels: dict[str, dict[str, int]] = {kind: {} for kind in RELEVANCE}
    for n, row in enumerate(rows, start=1):
        name, where = row["name"], f"data row {n}"
        if not name:
            raise InputError(f"{where}: empty volume name", file=str(path), field="name")
        if name in labels["flag"]:
            raise InputError(f"{where}: duplicate volume name", file=str(path), case_id=name, field="name")
        for kind, column in RELEVANCE.items():
            labels[kind][name] = _int_field(row, column, path, where, name)
        if labels["flag"][name] not in (0, 1):
            raise InputError(f"{where}: cancer_flag must be 0 or 1", file=str(path), case_id=name, field="cancer_flag")
    return labels


def _read_split(path: Path, labelled: dict[str, int]) -> tuple[str, ...]:
    """Volume names of a split file (its LAST column), each checked against the region's label table."""
    rows = read_csv_rows(path, required=())
    column = list(rows[0])[-1]
    names: list[str] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        name = row[column]
        if not name:
            raise InputError(f"line {line}: empty volume name", file=str(path), field=column)
        if name in seen:
            raise InputError(
                f"line {line}: volume listed twice in the split (first on line {seen[name]})",
                file=str(path),
                case_id=name,
                field=column,
            )
        if name not in labelled:
            raise InputError(
                f"line {line}: volume has no row in the region's label file", file=str(path), case_id=name, field=column
            )
        seen[name] = line
        names.append(name)
    return tuple(names)


def find_regions(gt_dir: Path) -> list[str]:
    """Sorted region names of the ``3DMIR_labels/<region>_labels_and_captions.csv`` files in ``gt_dir``."""
    labels_dir = gt_dir / LABELS_DIR
    if not labels_dir.is_dir():
        raise InputError(f"ground-truth folder has no {LABELS_DIR}/ folder (3D-MIR layout expected)", file=str(gt_dir))
    found = sorted(p.name[: -len(LABELS_SUFFIX)] for p in labels_dir.glob("*" + LABELS_SUFFIX))
    if not found:
        raise InputError(f"no <region>{LABELS_SUFFIX} file", file=str(labels_dir))
    return found


def load_ground_truth(gt_dir: Path, regions: tuple[str, ...] | None = None) -> dict[str, RegionTruth]:
    """Read and validate the labels and splits of ``regions`` (``None``: every region found), sorted by name.

    Raises:
        InputError: missing folder or file, bad label or split rows (naming file, line and field).
        ConfigError: a selected region has no label file in ``gt_dir``.
    """
    labels_dir, splits_dir = gt_dir / LABELS_DIR, gt_dir / SPLITS_DIR
    found = find_regions(gt_dir)
    selected = list(regions) if regions is not None else found
    unknown = sorted(set(selected) - set(found))
    if unknown:
        raise ConfigError(f"mir3d.regions: region(s) {unknown} not in the ground truth {gt_dir} (found {found})")
    out: dict[str, RegionTruth] = {}
    for region in sorted(selected):
        labels_path = labels_dir / f"{region}{LABELS_SUFFIX}"
        if not KEY_TOKEN.fullmatch(region):
            raise InputError(
                f"region name {region!r} must be lowercase letters, digits and '_'",
                file=str(labels_path),
                field="region",
            )
        labels = _read_labels(labels_path)
        train, test = (splits_dir / f"{region}_full_{s}_split.csv" for s in ("train", "test"))
        index, queries = _read_split(train, labels["flag"]), _read_split(test, labels["flag"])
        overlap = tuple(sorted(set(index) & set(queries)))
        out[region] = RegionTruth(region, index, queries, labels, overlap, (labels_path, train, test))
    return out


def _read_ranking_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """``(line, row)`` pairs of a rankings CSV or JSONL file, every row with the four required fields."""
    if path.suffix.lower() not in JSONL_SUFFIXES:
        return list(enumerate(read_csv_rows(path, required=RANKING_FIELDS), start=2))
    rows: list[tuple[int, dict[str, str]]] = []
    for line, obj in read_jsonl(path):
        missing = [f for f in RANKING_FIELDS if obj.get(f) is None]  # JSON null is no value either
        if missing:
            raise InputError(f"line {line}: missing or null field(s) {missing}", file=str(path), field=missing[0])
        rows.append((line, {k: str(v).strip() for k, v in obj.items() if v is not None}))
    return rows


def _region_selected(
    line: int, region: str, query: str, truth: dict[str, RegionTruth], known_regions: set[str], file: str
) -> bool:
    """Whether a ranking row's ``region`` is evaluated: False for a region of the ground truth left out by
    ``mir3d.regions`` (the row is skipped).

    Raises:
        InputError: a region the ground truth does not have (line, query and field named).
    """
    if region in truth:
        return True
    if region in known_regions:
        return False
    raise InputError(
        f"line {line}: unknown region {region!r}; the ground truth has {sorted(known_regions)}",
        file=file,
        case_id=query or None,
        field="region",
    )


def _check_score(line: int, row: dict[str, str], file: str) -> None:
    """Refuse a ranking row whose optional ``score`` is given but not a number (the score is not used)."""
    if row.get("score"):
        try:
            float(row["score"])
        except ValueError:
            raise InputError(
                f"line {line}: score must be a number, got {row['score']!r}",
                file=file,
                case_id=row["query"],
                field="score",
            ) from None


def load_rankings(
    path: Path, truth: dict[str, RegionTruth], known_regions: set[str]
) -> tuple[dict[tuple[str, str], RankedList], int]:
    """Validate the rankings against the ground truth; return ``{(region, query): list}`` and rows skipped.

    Args:
        path: ``rankings.csv`` or ``.jsonl``.
        truth: the evaluated regions.
        known_regions: every region of the ground truth; rows of a known but unselected region are skipped
            (and counted), rows of any other region are an error.

    Raises:
        InputError: see the module docstring (file, line and field named).
    """
    file = str(path)
    ranked: dict[str, RankedLists] = {}  # per region: the rank, self-retrieval and duplicate checks
    positions = {r: {name: i for i, name in enumerate(t.index)} for r, t in truth.items()}
    queries = {r: set(t.queries) for r, t in truth.items()}
    skipped = 0
    for line, row in _read_ranking_rows(path):
        region, query, retrieved = row["region"], row["query"], row["retrieved"]
        if not _region_selected(line, region, query, truth, known_regions, file):
            skipped += 1
            continue
        if query not in queries[region]:
            raise InputError(
                f"line {line}: query is not in the {region} test split", file=file, case_id=query or None, field="query"
            )
        if region not in ranked:
            ranked[region] = RankedLists(path, list_name=f"{region} list")
        ranked[region].add(line, query, row["rank"], retrieved)
        _check_score(line, row, file)
        if retrieved not in positions[region]:
            what = "a test query" if retrieved in queries[region] else "unknown to the region"
            raise InputError(
                f"line {line}: retrieved volume {retrieved!r} is not in the {region} index (train split; it is {what})",
                file=file,
                case_id=query,
                field="retrieved",
            )
    return {
        (region, query): RankedList(region, query, tuple(positions[region][name] for name in items))
        for region, lists in ranked.items()
        for query, items in lists.lists().items()
    }, skipped


def score_region(
    truth: RegionTruth, lists: dict[tuple[str, str], RankedList], cfg: Mir3dConfig
) -> dict[str, dict[str, np.ndarray]]:
    """Per-query metrics of one region: ``{"flag"|"group": {metric: (n_queries,) array}}`` in query order.

    A query without a list has an all-non-relevant row (every metric 0); a list shorter than ``cfg.depth`` is
    padded with non-relevant positions; ranks beyond ``cfg.depth`` are not read.
    """
    depth = cfg.depth
    pos = np.full((len(truth.queries), depth), -1, dtype=np.int64)
    for i, query in enumerate(truth.queries):
        ranked = lists.get((truth.region, query))
        if ranked is not None:
            top = ranked.positions[:depth]
            pos[i, : len(top)] = top
    valid = pos >= 0
    safe = np.where(valid, pos, 0)
    out: dict[str, dict[str, np.ndarray]] = {}
    for kind in RELEVANCE:
        q_lab, idx_lab = truth.label_array(kind, truth.queries), truth.label_array(kind, truth.index)
        rel = label_relevance(q_lab, idx_lab[safe], valid)
        metrics = {f"p_at_{k}": precision_at_k(rel, k) for k in cfg.ks}
        if cfg.p10_mode == "original_quirk" and 10 in cfg.ks:
            metrics["p_at_10"] = precision_at_10_original_quirk(rel)
        n_relevant = (idx_lab[None, :] == q_lab[:, None]).sum(axis=1)
        denominator = n_relevant if cfg.ap_denominator == "total_in_index" else None
        metrics[f"ap_at_{cfg.ap_k}"] = average_precision(rel, k=cfg.ap_k, n_relevant=denominator)
        out[kind] = metrics
    return out


def _records(
    truth: RegionTruth, scores: dict[str, dict[str, np.ndarray]], lists: dict[tuple[str, str], RankedList], depth: int
) -> list[CaseRecord]:
    records = []
    for i, query in enumerate(truth.queries):
        ranked = lists.get((truth.region, query))
        if ranked is None:
            status, message = "missing_prediction", "no ranking for this query; every metric scored 0"
        elif len(ranked.positions) < depth:
            n = len(ranked.positions)
            status, message = "ok", f"{n} result(s); ranks {n + 1}..{depth} scored as non-relevant"
        else:
            status, message = "ok", ""
        metrics = {f"{kind}/{m}": float(v[i]) for kind, per in scores.items() for m, v in per.items()}
        records.append(
            CaseRecord(
                case_id=f"{truth.region}/{query}",
                subject_id=query,
                groups={
                    "region": truth.region,
                    "lesion_flag": str(truth.labels["flag"][query]),
                    "lesion_group": str(truth.labels["group"][query]),
                },
                metrics={truth.region: metrics},
                status=status,
                message=message,
            )
        )
    return records


def aggregate(records: list[CaseRecord], regions: list[str], cfg: EvalConfig) -> dict[str, MetricSummary]:
    """Macro means over regions and per-region means, with CIs from one shared bootstrap over queries."""
    names = [
        f"{kind}/{m}" for kind in RELEVANCE for m in (*(f"p_at_{k}" for k in cfg.mir3d.ks), f"ap_at_{cfg.mir3d.ap_k}")
    ]
    values = np.full((len(records), len(regions), len(names)), np.nan)
    col = {r: j for j, r in enumerate(regions)}
    for i, rec in enumerate(records):
        region = rec.groups["region"]
        values[i, col[region]] = [rec.metrics[region][name] for name in names]
    b = cfg.bootstrap
    seed = group_seed(b.seed, NAME)
    clusters = clusters_of(records, b)
    out: dict[str, MetricSummary] = {}
    for m, name in enumerate(names):
        ci = bootstrap_means(values[:, :, m], b.n_resamples, seed, b.confidence, clusters, b.interval)
        key = metric_key(NAME, *name.split("/"))
        n = len(records)
        out[key] = MetricSummary(value=ci.overall, ci95_low=ci.overall_low, ci95_high=ci.overall_high, n=n, n_valid=n)
        for j, region in enumerate(regions):
            nv = int(ci.n_valid[j])
            out[metric_key(key, "by_region", region)] = MetricSummary(
                value=float(ci.value[j]), ci95_low=float(ci.low[j]), ci95_high=float(ci.high[j]), n=nv, n_valid=nv
            )
    return out


def _audit_warnings(truth: dict[str, RegionTruth]) -> list[str]:
    return [
        f"leakage audit: {t.region}: {len(t.overlap)} volume(s) are both in the index (train split) and among the "
        f"queries (test split): {', '.join(t.overlap[:10])}"
        for t in truth.values()
        if t.overlap
    ]


def _missing_note(
    predictions: Path, truth: dict[str, RegionTruth], lists: dict[tuple[str, str], RankedList], skipped: int
) -> list[str]:
    """The warning line naming the test queries without a ranking (none: empty list).

    Raises:
        InputError: no query has a ranking (the predictions file named).
    """
    queries = [(t.region, q) for t in truth.values() for q in t.queries]
    return check_missing(
        [f"{r}/{q}" for r, q in queries],
        [f"{r}/{q}" for r, q in queries if (r, q) not in lists],
        predictions=predictions,
        expected_name=str,
        expected_kind="queries",
        other_kind="row",
        found=f"found {skipped} row(s) of regions not selected by mir3d.regions" if skipped else "",
    )


def _warnings(
    truth: dict[str, RegionTruth], missing_note: list[str], n_short: int, skipped: int, depth: int
) -> list[str]:
    """The run's warning lines (leakage audit, missing queries, short lists, ignored rows), each logged."""
    notes = _audit_warnings(truth) + missing_note
    if n_short:
        notes.append(f"{n_short} ranked list(s) with fewer than {depth} results padded as non-relevant")
    if skipped:
        notes.append(f"{skipped} ranking row(s) of regions not selected by mir3d.regions ignored")
    for note in notes:
        log.warning(note)
    return notes


def _summary(truth: dict[str, RegionTruth], records: list[CaseRecord], n_short: int, skipped: int) -> dict[str, int]:
    """The counts of ``summary`` (see the module docstring), per-region query and index sizes last."""
    n_missing = sum(1 for r in records if r.status == "missing_prediction")
    summary = {
        "n_regions": len(truth),
        "n_queries": len(records),
        "n_missing_queries": n_missing,
        "n_missing_predictions": n_missing,
        "n_short_lists": n_short,
        "n_rows_ignored": skipped,
        "audit/n_query_index_overlap": sum(len(t.overlap) for t in truth.values()),
    }
    summary.update({f"n_queries/by_region/{t.region}": len(t.queries) for t in truth.values()})
    summary.update({f"n_index/by_region/{t.region}": len(t.index) for t in truth.values()})
    return summary


def evaluate(gt_dir: Path, predictions: Path, cfg: EvalConfig, model: dict[str, str] | None = None) -> BenchmarkResult:
    """Run the 3D-MIR benchmark end to end and return the results object (no files written)."""
    mcfg = cfg.mir3d
    truth = load_ground_truth(gt_dir, mcfg.regions)
    known = set(find_regions(gt_dir))
    lists, skipped = load_rankings(predictions, truth, known)
    missing_note = _missing_note(predictions, truth, lists, skipped)
    records: list[CaseRecord] = []
    for t in truth.values():
        records += _records(t, score_region(t, lists, mcfg), lists, mcfg.depth)
    n_short = sum(1 for rl in lists.values() if len(rl.positions) < mcfg.depth)
    notes = _warnings(truth, missing_note, n_short, skipped, mcfg.depth)
    gt_digest = sha256_text(*(f"{p.parent.name}/{p.name}:{sha256_files(p)}" for t in truth.values() for p in t.files))
    summary = _summary(truth, records, n_short, skipped)
    aggregates = aggregate(records, list(truth), cfg)
    evaluation = Evaluation(records, aggregates, "region", gt_digest, sha256_files(predictions), summary, notes)
    return finish(NAME, evaluation, config=cfg.model_dump(mode="json", include={"bootstrap", "mir3d"}), model=model)


class Mir3dInputs(BaseModel):
    """Inputs of ``trackeval evaluate mir3d``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ground_truth: Path = Field(
        description="3D-MIR folder: 3DMIR_labels/<region>_labels_and_captions.csv, "
        "Data_Splits/<region>_full_*_split.csv"
    )
    predictions: Path = Field(
        description="rankings.csv (region,query,rank,retrieved[,score]; rank from 1) or .jsonl with the same fields"
    )


def _evaluate(inputs: Mir3dInputs, cfg: EvalConfig, model: dict[str, str]) -> BenchmarkResult:
    return evaluate(inputs.ground_truth, inputs.predictions, cfg, model)


SPEC = BenchmarkSpec(
    name=NAME,
    help="3D-MIR: volume retrieval P@k and AP@10 by lesion flag and lesion group",
    inputs=Mir3dInputs,
    config_section="mir3d",
    config_model=Mir3dConfig,
    evaluate=_evaluate,
    primary=PrimaryMetric(
        "group/ap_at_10",
        margin=0.01,
        group_margin=0.05,
        floor=0.1,
        protocol=("mir3d.ap_k", "mir3d.ap_denominator", "mir3d.regions"),
    ),
    metrics=tuple(
        MetricInfo(f"{relevance}/{name}_at_{{k}}", label=f"{label}@{{k}} ({words})", record_path=True)
        for relevance, words in (("flag", "cancer-flag relevance"), ("group", "lesion-group relevance"))
        for name, label in (("p", "P"), ("ap", "AP"))
    ),
    group_dimensions=("region",),
    plots=(
        PlotSpec(metric="group/ap_at_10", dimension="region"),
        PlotSpec(metric="group/p_at_k", dimension="region", kind="curve_k", title="P@k vs k by region"),
        PlotSpec(metric="flag/ap_at_10", dimension="region"),
    ),
    summary_metrics=("flag/p_at_10", "flag/ap_at_10", "group/p_at_10", "group/ap_at_10"),
)
