"""``ret``: image-level retrieval with same-label relevance (e.g. MURA anatomy, CheXpert finding).

Inputs: ``--ground-truth labels.csv`` (``image_id,label``: every image of the index and every query) and
``--predictions rankings.csv`` (``query,rank,retrieved[,score]``, rank 1 = best, ranks 1..n without gaps per
query). An item retrieved at rank ``i`` is relevant when its label equals the query's label. ``xray/ret/p_at_<k>``
for each ``k`` in ``xray.ret.ks``: mean over queries of :func:`trackeval.metrics.ranking.precision_at_k`, with
a query-level bootstrap CI. A list shorter than ``k`` is padded with non-relevant items (counted in
``n_short_lists``).

Errors: unknown query or retrieved id, a duplicate retrieved id or rank in one list, a query retrieving itself,
non-integer or non-positive ranks, gaps in the ranks (the list checks of :class:`trackeval.io.rankings.RankedLists`),
duplicate image ids in labels.csv.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from trackeval.benchmarks.summaries import clusters_of, column_summary
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.config import EvalConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.rankings import RankedLists
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.ranking import label_relevance, precision_at_k
from trackeval.results import CaseRecord, metric_key

log = logging.getLogger(__name__)

PREFIX = "xray/ret"


def read_labels(path: Path) -> dict[str, str]:
    """``{image_id: label}``; empty or duplicate ids and empty labels are :class:`InputError`."""
    out: dict[str, str] = {}
    for line, row in enumerate(read_csv_rows(path, required=("image_id", "label")), start=2):
        image_id, label = row["image_id"], row["label"]
        if not image_id:
            raise InputError(f"empty image_id on line {line}", file=str(path), field="image_id")
        if image_id in out:
            raise InputError(f"duplicate image_id on line {line}", file=str(path), case_id=image_id, field="image_id")
        if not label:
            raise InputError(f"empty label on line {line}", file=str(path), case_id=image_id, field="label")
        out[image_id] = label
    return out


def read_rankings(path: Path, labels: dict[str, str]) -> dict[str, list[str]]:
    """``{query: retrieved ids in rank order}``, validated against ``labels`` (see the module docstring)."""
    ranked = RankedLists(path)
    for line, row in enumerate(read_csv_rows(path, required=("query", "rank", "retrieved")), start=2):
        q, item = row["query"], row["retrieved"]
        where = {"file": str(path), "case_id": q or None}
        if q not in labels:
            raise InputError(f"line {line}: query {q!r} is not in the labels file", field="query", **where)
        if item not in labels:
            raise InputError(
                f"line {line}: retrieved id {item!r} is not in the labels file", field="retrieved", **where
            )
        ranked.add(line, q, row["rank"], item)
    return ranked.lists()


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the retrieval task (see the module docstring)."""
    ks = sorted(set(cfg.xray.ret.ks))
    labels = read_labels(inputs.ground_truth)
    lists = read_rankings(inputs.predictions, labels)
    queries = list(lists)
    depth = max(max(ks), max(len(v) for v in lists.values()))
    ranked = np.full((len(queries), depth), "", dtype=object)
    valid = np.zeros((len(queries), depth), dtype=bool)
    for i, q in enumerate(queries):
        ranked[i, : len(lists[q])] = [labels[x] for x in lists[q]]
        valid[i, : len(lists[q])] = True
    rel = label_relevance(np.array([labels[q] for q in queries], dtype=object), ranked, valid)
    p = {k: precision_at_k(rel, k) for k in ks}
    short = sum(len(v) < max(ks) for v in lists.values())
    notes = [f"{short} ranked list(s) shorter than {max(ks)}: padded with non-relevant items"] if short else []
    for note in notes:
        log.warning(note)
    records = [
        CaseRecord(
            case_id=q,
            subject_id=q,
            groups={"label": labels[q]},
            metrics={"ranking": {**{f"p_at_{k}": float(p[k][i]) for k in ks}, "n_retrieved": float(len(lists[q]))}},
        )
        for i, q in enumerate(queries)
    ]
    clusters = clusters_of(queries, cfg.bootstrap)
    aggregates = {
        metric_key(PREFIX, f"p_at_{k}"): column_summary(p[k], cfg.bootstrap, f"p_at_{k}", clusters) for k in ks
    }
    return Evaluation(
        records=records,
        aggregates=aggregates,
        item_kind="list",
        ground_truth_digest=sha256_files(inputs.ground_truth),
        predictions_digest=sha256_files(inputs.predictions),
        summary={"n_queries": len(queries), "n_index": len(labels), "n_short_lists": short},
        warnings=notes,
    )
