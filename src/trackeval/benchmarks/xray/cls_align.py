"""``cls`` predictions and readers matched to the truth: each scored (or read) id is matched to its truth row by
the layout's key (:attr:`~trackeval.benchmarks.xray.cls_layouts.ClsTruth.key_of`), per-image rows of one study
are pooled (:func:`align_scores`), a reader's decisions are aligned the same way (:func:`align_decisions`), and
the findings to evaluate are chosen (:func:`evaluated_findings`).

The files themselves are read in their layouts by :mod:`~trackeval.benchmarks.xray.cls_layouts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from trackeval.benchmarks.xray.cls_layouts import ClsTruth, Scores, refuse_aliases
from trackeval.errors import InputError


def score_error(value: str, *, file: Path, case: str, finding: str, line: int) -> InputError:
    """The error naming a score cell that is no probability in [0, 1]: not a number, NaN / infinite, or out of
    range (``value``: the cell's stripped text)."""
    try:
        x = float(value)
    except ValueError:
        what = f"score {value!r} on line {line} is not a number"
    else:
        what = (
            f"score {value!r} on line {line} is NaN or infinite"
            if not math.isfinite(x)
            else f"score {x} on line {line} is not a probability in [0, 1]"
        )
    return InputError(what, file=str(file), case_id=case, field=finding)


def _refuse_scores(scores: Scores, cols: Sequence[int]) -> None:
    """Raise the first refused score of the finding columns ``cols`` (file order: row, then ``cols`` order)."""
    first = [(scores.refused[c][0], p) for p, c in enumerate(cols) if c in scores.refused]
    if first:
        r, p = min(first)
        c = cols[p]
        case, finding = scores.ids[r], scores.findings[c]
        raise score_error(scores.refused[c][1], file=scores.file, case=case, finding=finding, line=scores.lines[r])


def _grouped(row_of: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The file rows grouped by their truth row ``row_of`` (file order within a group), and the ``n + 1`` bounds
    of the ``n`` truth rows' groups in it (an empty group: two equal bounds)."""
    order = np.argsort(row_of, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(row_of, minlength=n))))
    return order, bounds


def _pool(values: np.ndarray, row_of: np.ndarray, n: int, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    """Per truth row (``n``, each matched by at least one row of ``values``), its rows reduced by ``reduce``
    (``np.max`` / ``np.mean``) over them, in file order. The rows alone on their truth row are reduced at once
    (over a length-1 axis: ``np.mean`` turns a ``-0.0`` into ``0.0`` there too), the others one truth row at a
    time."""
    order, bounds = _grouped(row_of, n)
    out = reduce(values[order[bounds[:-1]]][np.newaxis], axis=0)
    for i in np.flatnonzero(np.diff(bounds) > 1):
        out[i] = reduce(values[order[bounds[i] : bounds[i + 1]]], axis=0)
    return out


def _members(truth: ClsTruth, ids: Sequence[str], file: Path, *, what: str, scores: Scores | None = None) -> np.ndarray:
    """The truth row matching each row of ``ids`` (a predictions or readers file) by key; an id matching no
    truth row is an error, and so are several rows on a truth row that is one image (nothing to pool), and
    two spellings of one key (:func:`refuse_aliases`, naming the lines of ``scores``)."""
    index = {k: i for i, k in enumerate(truth.keys)}
    unit = "image" if truth.pool is None else "study"
    if scores is not None:
        per_image = truth.pool is not None
        variants = scores.variants if per_image else ()
        refuse_aliases(ids, scores.lines, truth.key_of, file=file, per_image=per_image, variants=variants, unit=unit)
    row_of = np.array([index.get(truth.key_of(raw), -1) for raw in ids], dtype=np.intp)
    extra = np.flatnonzero(row_of < 0)
    if extra.size:
        first = ids[extra[0]]
        raise InputError(
            f"{extra.size} {unit}(s) {what} but not labelled, e.g. {first!r}", file=str(file), case_id=first
        )
    counts = np.bincount(row_of, minlength=len(truth.ids))
    if unit == "image" and (counts > 1).any():
        i = int(np.argmax(counts > 1))
        raise InputError(f"image {truth.ids[i]!r} has {counts[i]} rows", file=str(file), case_id=truth.ids[i])
    return row_of


def align_scores(truth: ClsTruth, scores: Scores, findings: Sequence[str], pool: str | None) -> np.ndarray:
    """The scores ``(n_truth_rows, n_findings)`` of ``findings``, per truth row; the per-image rows of one
    study pooled by ``pool`` (``max`` / ``mean``; None: the layout's default).

    Raises:
        InputError: a scored id that is no truth row, a truth row without scores, a bad score.
    """
    row_of = _members(truth, scores.ids, scores.file, what="scored", scores=scores)
    unit = "image" if truth.pool is None else "study"
    missing = np.flatnonzero(np.bincount(row_of, minlength=len(truth.ids)) == 0)
    if missing.size:
        first = truth.ids[missing[0]]
        raise InputError(
            f"{missing.size} labelled {unit}(s) without scores, e.g. {first!r}", file=str(scores.file), case_id=first
        )
    cols = [scores.findings.index(f) for f in findings]
    _refuse_scores(scores, cols)
    reduce = np.mean if (pool or truth.pool) == "mean" else np.max
    return _pool(scores.values[:, cols], row_of, len(truth.ids), reduce)


def align_decisions(truth: ClsTruth, reader: ClsTruth, findings: Sequence[str], file: Path) -> np.ndarray:
    """A reader's binary decisions ``(n_truth_rows, n_findings)``: 1 / 0, NaN where the reader gave none (no row,
    no column, blank or -1); per-image rows of one study are one decision (the reader's file was collapsed to
    studies when read in the truth's layout; of several rows on one truth row, the first counts)."""
    order, bounds = _grouped(_members(truth, reader.ids, file, what="read"), len(truth.ids))
    decided = np.flatnonzero(np.diff(bounds) > 0)
    first = order[bounds[decided]]
    out = np.full((len(truth.ids), len(findings)), np.nan)
    for j, f in enumerate(findings):
        if f in reader.findings:
            column = reader.codes[first, reader.findings.index(f)]
            known = (column == 0.0) | (column == 1.0)
            out[decided[known], j] = column[known]
    return out


def _check_chosen(chosen: Sequence[str], truth: ClsTruth, scores: Scores) -> None:
    """Every ``xray.cls.findings`` entry is a column of the truth and of the predictions."""
    for names, file in ((truth.findings, truth.files[0]), (scores.findings, scores.file)):
        absent = [f for f in chosen if f not in names]
        if absent:
            raise InputError(f"xray.cls.findings {absent} not in the columns {names}", file=str(file), field=absent[0])


def evaluated_findings(truth: ClsTruth, scores: Scores, chosen: Sequence[str]) -> tuple[list[str], list[str]]:
    """The findings to evaluate, in the truth's order, and the warnings.

    ``chosen`` (``xray.cls.findings``) non-empty: those, each in the truth and in the predictions. Else the
    findings of both; a truth finding without predictions is named in a warning (the generic layout keeps its
    strict rule: the predictions have exactly the truth's columns). A prediction column that is no truth finding
    is an error either way (a misspelt column must not pass silently).
    """
    scores_file = str(scores.file)
    unknown = [c for c in scores.findings if c not in truth.findings]
    if unknown:
        raise InputError(
            f"unknown finding column(s) {unknown}; labels have {truth.findings}", file=scores_file, field=unknown[0]
        )
    if chosen:
        _check_chosen(chosen, truth, scores)
        return [f for f in truth.findings if f in chosen], []
    absent = [f for f in truth.findings if f not in scores.findings]
    if absent and truth.layout.generic:
        raise InputError(f"finding column(s) {absent} missing", file=scores_file, field=absent[0])
    notes = []
    if absent:
        notes.append(
            f"xray/cls: {len(absent)} truth finding(s) without predictions, not evaluated: {absent} "
            "(set xray.cls.findings to choose the findings)"
        )
    return [f for f in truth.findings if f in scores.findings], notes
