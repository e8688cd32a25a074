"""``report``: radiology report generation (IU X-ray, MIMIC-CXR) with pycocoevalcap's caption metrics.

Inputs: ``--ground-truth references.jsonl`` and ``--predictions predictions.jsonl``, one JSON object per line,
``{"id": ..., "report": "..."}`` (a reference ``report`` may also be a list of strings: several references).
Text is tokenised by :func:`trackeval.metrics.text.tokenize` (lower-case, punctuation deleted, whitespace split).

Keys: ``xray/report/bleu_1`` .. ``bleu_4`` (corpus BLEU, closest reference length), ``xray/report/rouge_l``
(beta ``xray.report.rouge_beta`` = 1.2, mean over reports), ``xray/report/cider`` (CIDEr-D, sigma
``xray.report.cider_sigma`` = 6, idf from the evaluated references, mean over reports). CIs: report-level
bootstrap; for BLEU the corpus statistics are re-summed per resample; CIDEr's idf stays that of the full set.

A reference without a prediction is scored as an empty report (status ``missing_prediction``, counted and
named in one warning line); no prediction for any reference, a prediction id without a reference, duplicate ids,
malformed lines, missing fields and references that are empty after tokenisation are :class:`InputError`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from trackeval.benchmarks.missing import check_missing
from trackeval.benchmarks.summaries import clusters_of, column_summary, summary
from trackeval.benchmarks.xray_tasks.common import TaskInputs
from trackeval.config import EvalConfig
from trackeval.config.base import BootstrapConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.files import read_jsonl
from trackeval.io.hashing import sha256_files
from trackeval.metrics.text import BleuStats, NgramCorpus, bleu_from_stats, bleu_stats, cider_d, rouge_l, tokenize
from trackeval.results import CaseRecord, MetricSummary, metric_key
from trackeval.stats.bootstrap import group_seed, n_clusters, percentiles, weight_blocks

log = logging.getLogger(__name__)

PREFIX = "xray/report"
BLEU_N = 4


def _reports(path: Path, *, allow_list: bool) -> dict[str, list[str]]:
    """``{id: [report text, ...]}`` in file order, validated."""
    out: dict[str, list[str]] = {}
    lines: dict[str, int] = {}
    rows = read_jsonl(path)
    for line, obj in rows:
        raw_id = obj.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
            raise InputError(f"line {line}: missing or invalid 'id'", file=str(path), field="id")
        rid = str(raw_id)
        if rid in out:
            raise InputError(f"duplicate id on lines {lines[rid]} and {line}", file=str(path), case_id=rid, field="id")
        text: Any = obj.get("report")
        texts = text if allow_list and isinstance(text, list) and text else [text]
        if not all(isinstance(t, str) for t in texts):
            raise InputError(f"line {line}: 'report' must be a string", file=str(path), case_id=rid, field="report")
        out[rid], lines[rid] = texts, line
    return out


def _bleu_summaries(stats: BleuStats, boot: BootstrapConfig, clusters: np.ndarray | None) -> dict[str, MetricSummary]:
    """Corpus BLEU-1..4 with a report-level (cluster) bootstrap: per resample, weighted sums of the per-report
    statistics."""
    n = stats.testlen.size
    value = bleu_from_stats(stats.correct.sum(0), stats.guess.sum(0), stats.testlen.sum(), stats.reflen.sum())
    samples = [
        bleu_from_stats(w @ stats.correct, w @ stats.guess, w @ stats.testlen, w @ stats.reflen)
        for w in weight_blocks(n, boot.n_resamples, group_seed(boot.seed, "bleu"), clusters)
    ]
    low, high = percentiles(np.concatenate(samples), boot.confidence, n_clusters(n, clusters), boot.interval, value)
    return {
        metric_key(PREFIX, f"bleu_{k + 1}"): summary(float(value[k]), n, n, float(low[k]), float(high[k]))
        for k in range(BLEU_N)
    }


def _read_pairs(inputs: TaskInputs) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """References, predictions, and the warning about references without a prediction; a prediction without a
    reference is an :class:`InputError`."""
    refs = _reports(inputs.ground_truth, allow_list=True)
    preds = _reports(inputs.predictions, allow_list=False)
    extra = [i for i in preds if i not in refs]
    if extra:
        raise InputError(
            f"{len(extra)} prediction id(s) without a reference, e.g. {extra[0]!r}",
            file=str(inputs.predictions),
            case_id=extra[0],
            field="id",
        )
    ids = list(refs)
    notes = check_missing(
        ids,
        [i for i in ids if i not in preds],
        predictions=inputs.predictions,
        expected_name=str,
        other_kind="id",
        expected_kind="ids",
    )
    return refs, preds, notes


def _records(
    ids: list[str], preds: dict[str, list[str]], scores: dict[str, np.ndarray], n_tokens: list[int]
) -> list[CaseRecord]:
    """One record per report: sentence BLEU-1..4, ROUGE-L, CIDEr-D and the prediction's token count."""
    return [
        CaseRecord(
            case_id=rid,
            subject_id=rid,
            metrics={
                "report": {
                    **{f"bleu_{k + 1}": float(scores["bleu"][i, k]) for k in range(BLEU_N)},
                    "rouge_l": float(scores["rouge_l"][i]),
                    "cider": float(scores["cider"][i]),
                    "n_tokens": float(n_tokens[i]),
                }
            },
            status="ok" if rid in preds else "missing_prediction",
            message="" if rid in preds else "no prediction; scored as an empty report",
        )
        for i, rid in enumerate(ids)
    ]


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the report-generation task (see the module docstring)."""
    c = cfg.xray.report
    refs, preds, notes = _read_pairs(inputs)
    ids = list(refs)
    ref_tokens = [[tokenize(t) for t in refs[i]] for i in ids]
    for rid, toks in zip(ids, ref_tokens, strict=True):
        if not all(toks):
            raise InputError(
                "reference report is empty after tokenisation",
                file=str(inputs.ground_truth),
                case_id=rid,
                field="report",
            )
    hyp_tokens = [tokenize(preds[i][0]) if i in preds else [] for i in ids]
    corpus = NgramCorpus(hyp_tokens, ref_tokens, n=BLEU_N)
    stats = bleu_stats(corpus)
    scores = {
        "bleu": bleu_from_stats(stats.correct, stats.guess, stats.testlen, stats.reflen),
        "rouge_l": rouge_l(hyp_tokens, ref_tokens, beta=c.rouge_beta),
        "cider": cider_d(corpus, sigma=c.cider_sigma),
    }
    clusters = clusters_of(ids, cfg.bootstrap)
    out = _bleu_summaries(stats, cfg.bootstrap, clusters)
    out[metric_key(PREFIX, "rouge_l")] = column_summary(scores["rouge_l"], cfg.bootstrap, "rouge_l", clusters)
    out[metric_key(PREFIX, "cider")] = column_summary(scores["cider"], cfg.bootstrap, "cider", clusters)
    for note in notes:
        log.warning(note)
    return Evaluation(
        records=_records(ids, preds, scores, [len(h) for h in hyp_tokens]),
        aggregates=out,
        item_kind="report",
        ground_truth_digest=sha256_files(inputs.ground_truth),
        predictions_digest=sha256_files(inputs.predictions),
        summary={"n_reports": len(ids), "n_missing_predictions": len(ids) - len(preds)},
        warnings=notes,
        params={"tokenizer": "lowercase_strip_punctuation", "bleu_reflen": "closest"},
    )
