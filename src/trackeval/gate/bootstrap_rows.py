"""The rows of a paired bootstrap comparison (method ``paired_bootstrap``): both headlines recomputed on the same
resamples of the results' clusters, for metrics whose headline is a mean of per-case values (:func:`mean_rows`,
``reduction`` ``item_mean`` or ``case_mean``: overall, per item and per case group) and for corpus metrics
(:func:`corpus_rows`, ``reduction="corpus"``: overall and per case group)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from trackeval.case_table import CaseTable
from trackeval.gate.pairing import DeltaRow, Paired, delta_row, reported
from trackeval.gate.policy import Policy
from trackeval.results import item_matrix
from trackeval.spec import CorpusHeadline
from trackeval.stats.bootstrap import group_seed
from trackeval.stats.paired import PairedHeadline, paired_corpus, paired_headlines
from trackeval.stats.reduce import MeanReduction


def mean_rows(pair: Paired, policy: Policy) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a comparison of a mean of per-case values (``reduction`` ``item_mean`` or
    ``case_mean``): both headlines recomputed on the same cluster resamples
    (:func:`~trackeval.stats.paired.paired_headlines`), overall, per item and per case group."""
    cm = item_matrix(pair.cand_cases, pair.items, policy.per_case)
    bm = item_matrix(pair.base_cases, pair.items, policy.per_case)
    codes = pair.clusters()
    has_value = ~(np.isnan(cm) & np.isnan(bm))
    n_resamples, seed, confidence = pair.resampling
    reduction = cast(MeanReduction, policy.reduction)  # "corpus" is compared by corpus_rows

    def analyse(key: str, rows: np.ndarray | slice) -> PairedHeadline:
        return paired_headlines(
            cm[rows],
            bm[rows],
            reduction=reduction,
            best=policy.best,
            n_resamples=n_resamples,
            seed=group_seed(seed, key),
            confidence=confidence,
            clusters=None if codes is None else codes[rows],
            method=pair.cand.resampling[1],
        )

    whole = analyse(pair.head_key, slice(None))
    if not has_value.any():
        return [f"no case has a {policy.per_case} value in either result"], []
    problems = pair.mismatches(pair.head_key, whole.candidate, whole.baseline)
    if problems:
        return problems, []
    rows = [pair.headline_row(pair.head_key, "", "", whole, int(has_value.any(axis=1).sum()))]
    if pair.cand.item_kind in pair.dimensions:
        item_problems, item_rows = _item_rows(pair, whole, has_value, policy.best)
        problems += item_problems
        rows += item_rows
    for key, dim, group, sel in pair.case_groups():
        if has_value[sel].any():
            d = analyse(key, sel)
            found = pair.mismatches(key, d.candidate, d.baseline)
            problems += found
            if not found:
                rows.append(pair.headline_row(key, dim, group, d, int(has_value[sel].any(axis=1).sum())))
    return (problems, []) if problems else ([], rows)


def _item_rows(
    pair: Paired, whole: PairedHeadline, has_value: np.ndarray, best: float
) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of the items with a value on either side: the delta of the two item means, a side with
    no value for the item counting as ``best``; the intervals from the headline's resamples."""
    problems: list[str] = []
    rows = []
    kind = pair.cand.item_kind
    for j, item in enumerate(pair.items):
        if not has_value[:, j].any():
            continue
        key = f"{pair.head_key}/by_{kind}/{item}"
        found = pair.mismatches(key, whole.item_candidate[j], whole.item_baseline[j])
        problems += found
        if found:
            continue
        ic = reported(pair.cand, key, whole.item_candidate[j])
        ib = reported(pair.base, key, whole.item_baseline[j])
        delta = (best if math.isnan(ic) else ic) - (best if math.isnan(ib) else ib)
        values = (ic, ib, delta, whole.item_low[j], whole.item_high[j])
        n, units = int(has_value[:, j].sum()), int(whole.item_units[j])
        effective = float(whole.item_effective[j])
        rows.append(
            delta_row(pair.unit, key, kind, item, values, n, units, None, whole.item_samples[:, j], None, effective)
        )
    return problems, rows


def _has_items(cases: CaseTable) -> np.ndarray:
    """Per case, whether it has any item (a record with metrics)."""
    out = np.zeros(len(cases), dtype=bool)
    out[cases.row_case] = True
    return out


def corpus_rows(pair: Paired, corpus: Callable[..., Any] | None) -> tuple[list[str], list[DeltaRow]]:
    """Problems and rows of a corpus comparison (``reduction="corpus"``): both headlines recomputed by the unit's
    ``corpus`` function (a :data:`~trackeval.spec.CorpusHeadline`) on the same resamples of the cases
    (:func:`~trackeval.stats.paired.paired_corpus`), overall and per case group."""
    if corpus is None:
        return [f"{pair.head_key} is a corpus metric, but the policy carries no function to recompute it with"], []
    fn: CorpusHeadline = corpus
    n_resamples, seed, confidence = pair.resampling
    codes = pair.clusters()
    cand_cases, base_cases = pair.cand_cases, pair.base_cases
    has_value = _has_items(cand_cases) | _has_items(base_cases)

    def analyse(key: str, idx: np.ndarray) -> PairedHeadline:
        cr, br = [cand_cases[i] for i in idx], [base_cases[i] for i in idx]
        return paired_corpus(
            lambda w: fn(cr, w),
            lambda w: fn(br, w),
            idx.size,
            n_resamples=n_resamples,
            seed=group_seed(seed, key),
            confidence=confidence,
            clusters=None if codes is None else codes[idx],
            method=pair.cand.resampling[1],
        )

    whole = analyse(pair.head_key, np.arange(len(cand_cases)))
    if math.isnan(whole.candidate) and math.isnan(whole.baseline):
        return [f"neither result's case records give {pair.head_key} (nothing to recompute it from)"], []
    problems = pair.mismatches(pair.head_key, whole.candidate, whole.baseline)
    if problems:
        return problems, []
    rows = [pair.headline_row(pair.head_key, "", "", whole, int(has_value.sum()))]
    for key, dim, group, sel in pair.case_groups():
        if has_value[sel].any():
            d = analyse(key, np.flatnonzero(sel))
            found = pair.mismatches(key, d.candidate, d.baseline)
            problems += found
            if not found:
                rows.append(pair.headline_row(key, dim, group, d, int(has_value[sel].sum())))
    return (problems, []) if problems else ([], rows)
