"""3D-MIR's readers: the ground truth (the region label tables and the train/test splits) and the rankings,
validated against it (see :mod:`trackeval.benchmarks.mir3d`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trackeval.config.base import KEY_TOKEN
from trackeval.errors import ConfigError, InputError
from trackeval.io.rankings import RankedLists
from trackeval.io.structured import read_jsonl
from trackeval.io.tables import read_csv_rows

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
        InputError: see :mod:`trackeval.benchmarks.mir3d` (file, line and field named).
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
