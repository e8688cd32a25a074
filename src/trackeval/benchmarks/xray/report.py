"""``report``: radiology report generation (IU X-ray, MIMIC-CXR) with pycocoevalcap's caption metrics.

Inputs: ``--ground-truth references.jsonl`` and ``--predictions predictions.jsonl``, one JSON object per line,
``{"id": ..., "report": "..."}`` (a reference ``report`` may also be a list of strings: several references);
the ground truth may also be IU X-ray as distributed (OpenI XML, ``indiana_reports.csv``, R2Gen's
``annotation.json``: :mod:`~trackeval.benchmarks.xray.report_layouts`), told from the files or forced by
``--format``; predictions stay JSON Lines keyed by the layout's report id.
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
from trackeval.benchmarks.xray.common import TaskInputs
from trackeval.benchmarks.xray.report_layouts import (
    is_indiana_csv,
    is_openi_xml,
    is_r2gen,
    read_indiana,
    read_openi,
    read_r2gen,
)
from trackeval.config import EvalConfig
from trackeval.config.base import BootstrapConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.layouts import Layout, choose, layout_digest
from trackeval.io.structured import read_jsonl
from trackeval.metrics.text import BleuStats, NgramCorpus, bleu_from_stats, bleu_stats, cider_d, rouge_l, tokenize
from trackeval.results import CaseRecord, MetricSummary, metric_key, sha256_text
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


GROUND_TRUTH_LAYOUTS = (
    Layout("openi-xml", "OpenI XML reports: a folder of .xml files or one", is_openi_xml),
    Layout("indiana-csv", "CSV with uid, findings, impression columns (indiana_reports.csv)", is_indiana_csv),
    Layout("r2gen", "R2Gen annotation.json: {train, val, test: [{id, report, ...}]}", is_r2gen),
    Layout("generic", "references.jsonl: one {id, report} object per line", Path.is_file, generic=True),
)


def _references(inputs: TaskInputs, cfg: EvalConfig) -> tuple[dict[str, list[str]], list[str], Layout, str]:
    """References in the ground truth's layout, the ids left out (chosen sections empty), the layout and the
    ground-truth digest (a native one names the layout and the reading convention: sections or split)."""
    c = cfg.xray.report
    path = inputs.ground_truth
    layout = choose(path, GROUND_TRUTH_LAYOUTS, inputs.format)
    if layout.generic:
        return _reports(path, allow_list=True), [], layout, sha256_files(path)
    if layout.name == "r2gen":
        return read_r2gen(path, c.split), [], layout, layout_digest(layout, sha256_text(sha256_files(path), c.split))
    reader = read_openi if layout.name == "openi-xml" else read_indiana
    refs, empty = reader(path, c.sections)
    if not refs:
        raise InputError(f"no report has text in the sections {list(c.sections)}", file=str(path), field="sections")
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".xml") if path.is_dir() else [path]
    digest = sha256_text(*(f"{p.name}:{sha256_files(p)}" for p in files), "sections:" + ",".join(c.sections))
    return refs, empty, layout, layout_digest(layout, digest)


def _read_pairs(
    inputs: TaskInputs, cfg: EvalConfig
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str], Layout, str]:
    """References, predictions, the warnings (references without a prediction, reports left out), the ground
    truth's layout and digest; a prediction without a reference is an :class:`InputError` (one for a report
    left out for empty sections is dropped with the warning)."""
    refs, empty, layout, digest = _references(inputs, cfg)
    preds = _reports(inputs.predictions, allow_list=False)
    notes = []
    if empty:
        dropped = sum(1 for i in empty if preds.pop(i, None) is not None)
        notes.append(
            f"{len(empty)} report(s) without text in the sections {list(cfg.xray.report.sections)} left out "
            f"(e.g. {empty[0]!r}); {dropped} prediction(s) for them ignored"
        )
    extra = [i for i in preds if i not in refs]
    if extra:
        raise InputError(
            f"{len(extra)} prediction id(s) without a reference, e.g. {extra[0]!r}",
            file=str(inputs.predictions),
            case_id=extra[0],
            field="id",
        )
    ids = list(refs)
    notes += check_missing(
        ids,
        [i for i in ids if i not in preds],
        predictions=inputs.predictions,
        expected_name=str,
        other_kind="id",
        expected_kind="ids",
    )
    return refs, preds, notes, layout, digest


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
    refs, preds, notes, layout, truth_digest = _read_pairs(inputs, cfg)
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
        ground_truth_digest=truth_digest,
        predictions_digest=sha256_files(inputs.predictions),
        summary={"n_reports": len(ids), "n_missing_predictions": len(ids) - len(preds)},
        warnings=notes,
        params={"tokenizer": "lowercase_strip_punctuation", "bleu_reflen": "closest"},
        formats={"ground_truth": layout.name, "predictions": "generic"},
    )
