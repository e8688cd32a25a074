"""``cls`` predictions and readers matched to the truth: each scored (or read) id is matched to its truth row by
the layout's key (:attr:`~trackeval.benchmarks.xray.cls_layouts.ClsTruth.key_of`), per-image rows of one study
are pooled (:func:`align_scores`), a reader's decisions are aligned the same way (:func:`align_decisions`), and
the findings to evaluate are chosen (:func:`evaluated_findings`).

The files themselves are read in their layouts by :mod:`~trackeval.benchmarks.xray.cls_layouts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trackeval.benchmarks.xray.cls_layouts import ClsTruth, Scores, refuse_aliases
from trackeval.errors import InputError


def parse_score(value: str, *, file: Path, case: str, finding: str, line: int) -> float:
    """A probability in [0, 1]; anything else (not a number, NaN/inf, out of range) names the cell."""
    try:
        x = float(value)
    except ValueError:
        raise InputError(
            f"score {value!r} on line {line} is not a number", file=str(file), case_id=case, field=finding
        ) from None
    if not math.isfinite(x):
        raise InputError(
            f"score {value!r} on line {line} is NaN or infinite", file=str(file), case_id=case, field=finding
        )
    if not 0.0 <= x <= 1.0:
        raise InputError(
            f"score {x} on line {line} is not a probability in [0, 1]", file=str(file), case_id=case, field=finding
        )
    return x


def _members(
    truth: ClsTruth, ids: Sequence[str], file: Path, *, what: str, scores: Scores | None = None
) -> list[list[int]]:
    """The rows of ``ids`` (a predictions or readers file) matching each truth row by key; an id matching no
    truth row is an error, and so are several rows on a truth row that is one image (nothing to pool), and
    two spellings of one key (:func:`refuse_aliases`, naming the lines of ``scores``)."""
    index = {k: i for i, k in enumerate(truth.keys)}
    unit = "image" if truth.pool is None else "study"
    if scores is not None:
        per_image = truth.pool is not None
        variants = scores.variants if per_image else ()
        refuse_aliases(ids, scores.lines, truth.key_of, file=file, per_image=per_image, variants=variants, unit=unit)
    out: list[list[int]] = [[] for _ in truth.ids]
    extra = []
    for r, raw in enumerate(ids):
        i = index.get(truth.key_of(raw))
        if i is None:
            extra.append(raw)
        else:
            out[i].append(r)
    if extra:
        raise InputError(
            f"{len(extra)} {unit}(s) {what} but not labelled, e.g. {extra[0]!r}", file=str(file), case_id=extra[0]
        )
    if unit == "image":
        for i, rs in enumerate(out):
            if len(rs) > 1:
                raise InputError(f"image {truth.ids[i]!r} has {len(rs)} rows", file=str(file), case_id=truth.ids[i])
    return out


def align_scores(truth: ClsTruth, scores: Scores, findings: Sequence[str], pool: str | None) -> np.ndarray:
    """The scores ``(n_truth_rows, n_findings)`` of ``findings``, per truth row; the per-image rows of one
    study pooled by ``pool`` (``max`` / ``mean``; None: the layout's default).

    Raises:
        InputError: a scored id that is no truth row, a truth row without scores, a bad score.
    """
    members = _members(truth, scores.ids, scores.file, what="scored", scores=scores)
    unit = "image" if truth.pool is None else "study"
    missing = [truth.ids[i] for i, rs in enumerate(members) if not rs]
    if missing:
        raise InputError(
            f"{len(missing)} labelled {unit}(s) without scores, e.g. {missing[0]!r}",
            file=str(scores.file),
            case_id=missing[0],
        )
    cols = [scores.findings.index(f) for f in findings]
    values = np.array(
        [
            [parse_score(row[c], file=scores.file, case=i, finding=scores.findings[c], line=line) for c in cols]
            for i, row, line in zip(scores.ids, scores.values, scores.lines, strict=True)
        ]
    ).reshape(len(scores.ids), len(cols))
    reduce = np.mean if (pool or truth.pool) == "mean" else np.max
    return np.array([reduce(values[rs], axis=0) for rs in members]).reshape(len(members), len(cols))


def align_decisions(truth: ClsTruth, reader: ClsTruth, findings: Sequence[str], file: Path) -> np.ndarray:
    """A reader's binary decisions ``(n_truth_rows, n_findings)``: 1 / 0, NaN where the reader gave none (no row,
    no column, blank or -1); per-image rows of one study are one decision (the reader's file was collapsed to
    studies when read in the truth's layout)."""
    members = _members(truth, reader.ids, file, what="read")
    out = np.full((len(truth.ids), len(findings)), np.nan)
    for j, f in enumerate(findings):
        if f not in reader.findings:
            continue
        column = reader.codes[:, reader.findings.index(f)]
        for i, rs in enumerate(members):
            if rs and column[rs[0]] in (0.0, 1.0):
                out[i, j] = column[rs[0]]
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
