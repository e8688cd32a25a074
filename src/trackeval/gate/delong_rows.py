"""The rows of a DeLong comparison (method ``delong``, AUROC): images paired by case id, the case records'
per-image ``label`` and ``score`` of each finding, the AUC differences with Wald CIs on a Student t reference
(:func:`~trackeval.stats.paired.paired_delong`); the rows keep the standard error and the degrees of freedom for
p-values. Labels that differ between the two results are a pairing problem."""

from __future__ import annotations

import math

import numpy as np

from trackeval.case_table import CaseTable
from trackeval.gate.pairing import DeltaRow, Paired, delta_row, or_none
from trackeval.results import BenchmarkResult, item_matrix
from trackeval.stats.paired import PairedAUC, paired_delong


def headline_exclusions(result: BenchmarkResult) -> list[str]:
    """Items a result reports but leaves out of its headline and of the gate: X-ray findings with fewer than
    ``xray.cls.min_positives`` positives or negatives, listed in ``config.<benchmark>_run.
    findings_below_min_positives``."""
    run = result.config.get(f"{result.benchmark}_run", {})
    return [str(t) for t in run.get("findings_below_min_positives", [])] if isinstance(run, dict) else []


def _delong_inputs(
    cand_cases: CaseTable, base_cases: CaseTable, items: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Labels and both score matrices (case x item, rows in the same case order) and the pairing problems."""
    y = item_matrix(cand_cases, items, "label")
    y_base = item_matrix(base_cases, items, "label")
    problems = []
    if np.isnan(y).all() and np.isnan(y_base).all():
        problems.append(
            "the case records carry no per-image 'label'/'score' values, which DeLong's AUROC comparison needs "
            "(an xray result of --task cls has them)"
        )
    elif not np.array_equal(y, y_base, equal_nan=True):
        i, j = np.argwhere(~((y == y_base) | (np.isnan(y) & np.isnan(y_base))))[0]
        problems.append(
            f"labels differ between the two results (case {cand_cases.field('case_id')[i]!r}, {items[j]}: "
            f"{y[i, j]} vs {y_base[i, j]}); re-evaluate both versions on the same ground truth"
        )
    return y, item_matrix(cand_cases, items, "score"), item_matrix(base_cases, items, "score"), problems


def delong_rows(pair: Paired) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a DeLong comparison (AUROC): the headline, one row per finding and per case group;
    findings a result leaves out of its headline (:func:`headline_exclusions`) are left out."""
    left_out = set(headline_exclusions(pair.cand)) | set(headline_exclusions(pair.base))
    items = [i for i in pair.items if i not in left_out]
    y, cs, bs, problems = _delong_inputs(pair.cand_cases, pair.base_cases, items)
    if problems:
        return problems, []
    codes = pair.clusters()
    labelled = ~np.isnan(y)
    confidence = pair.resampling[2]

    def analyse(rows: np.ndarray | slice) -> PairedAUC:
        return paired_delong(y[rows], cs[rows], bs[rows], confidence, None if codes is None else codes[rows])

    def units(images: np.ndarray) -> int:
        """Resampling units (patients, or images) among the ``images`` mask."""
        return int(images.sum()) if codes is None else int(np.unique(codes[images]).size)

    def row(key: str, dim: str, group: str, d: PairedAUC, j: int | None, rows: np.ndarray) -> DeltaRow:
        if j is None:
            values = (d.overall_candidate, d.overall_baseline, d.overall, d.overall_low, d.overall_high)
            n, var, n_units = int(d.n_pairs.sum()), d.overall_variance, units(rows & labelled.any(axis=1))
            df = d.overall_df
        else:
            values = (d.candidate[j], d.baseline[j], d.value[j], d.low[j], d.high[j])
            n, var, n_units = int(d.n_pairs[j]), d.variance[j], units(rows & labelled[:, j])
            df = int(d.df[j])
        se = or_none(math.sqrt(var)) if var >= 0 else None
        return delta_row(pair.unit, key, dim, group, values, n, n_units, se, df=df)

    every = np.ones(len(pair.cand_cases), dtype=bool)
    whole = analyse(slice(None))
    if whole.n_pairs.sum() == 0:
        return ["no paired images: no finding has a defined AUROC in both results"], []
    problems = pair.mismatches(pair.head_key, whole.overall_candidate, whole.overall_baseline)
    if problems:
        return problems, []
    out = [row(pair.head_key, "", "", whole, None, every)]
    if pair.cand.item_kind in pair.dimensions:
        kind = pair.cand.item_kind
        out += [
            row(f"{pair.head_key}/by_{kind}/{item}", kind, item, whole, j, every)
            for j, item in enumerate(items)
            if whole.n_pairs[j] > 0
        ]
    for key, dim, group, sel in pair.case_groups():
        d = analyse(sel)
        if d.n_pairs.sum() > 0:
            out.append(row(key, dim, group, d, None, sel))
    return [], out
