"""``cls`` with human readers: each reader's (1 - specificity, sensitivity) operating point against the model's ROC
curve (the CheXpert leaderboard's "Num Rads Below Curve"), per reader and finding.

The cls layout reader reads the ``--readers`` files (one reader per file, named by its stem) and aligns each
reader's binary decisions to the test table (:class:`Reader`); :func:`reader_aggregates` turns them into these
aggregates (``<r>``: the reader's key token, ``<f>``: the finding's):

=============================================================  ===================================================
key (``xray/cls/...``)                                          value
=============================================================  ===================================================
``readers_below_curve/by_finding/<f>``                          how many readers lie strictly below the model's ROC
                                                                curve for ``f`` (n: readers; n_valid: readers with
                                                                a point there); no CI
``readers_below_curve``                                         its mean over the headline findings (n: those
                                                                findings; n_valid: those with a count); no CI
``reader_sens/by_reader/<r>/by_finding/<f>``,                   the reader's sensitivity and specificity on the
``reader_spec/...``                                             images it decided; ``.../by_reader/<r>``: the mean
                                                                over the headline findings
``sens_at_reader_spec/by_reader/<r>/by_finding/<f>``            the model's sensitivity at the reader's
                                                                specificity (the curve read at the reader's FPR)
``sens_gap_at_reader_spec/by_reader/<r>/by_finding/<f>``        that sensitivity minus the reader's: > 0, the model
                                                                finds more positives at the reader's specificity
=============================================================  ===================================================

A reader is compared with the model on the images it decided for the finding whose label is known (uncertain
labels left out); the model's curve is the curve of those images (:mod:`trackeval.metrics.readers`: the test,
the interpolation and the edge cases). The reader points of the ROC figure are the ``reader_sens`` and
``reader_spec`` aggregates (:mod:`trackeval.plotdata` reads them; nothing is recomputed there).

**Intervals.** All CIs come from one image-level cluster bootstrap per reader (``bootstrap.*``: the resampling
unit, resamples, interval method; the seed group ``reader=<r>``, so every interval of one reader uses the same
resamples). Sensitivity and specificity are means of per-image 0/1 decisions and get the same bootstrap as the
model's ``sens_at_sens95`` (Wilson's interval would assume independent images: it is too narrow when a patient
contributes several images, which ``bootstrap.cluster=subject_id`` accounts for). The model's sensitivity at the
reader's specificity and the gap are bootstrapped **paired**: each resample recomputes the reader's specificity
and sensitivity and the model's curve on the same resampled images and reads the curve at that resample's reader
FPR, so the threshold is re-chosen in every resample. The estimate is "the model operated at the reader's
specificity", and the uncertainty of where that specificity lies is part of it; a threshold fixed on the full set
would compare the two at different specificities in most resamples. ``readers_below_curve`` is a count and has no
interval. None of these is gated (``paired="none"``): the gate and ``compare`` deltas never use them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trackeval.benchmarks.summaries import mean_summaries, summary
from trackeval.config.base import BootstrapConfig
from trackeval.errors import InputError
from trackeval.metrics.readers import (
    READER_DIMENSION,
    READER_SENSITIVITY,
    READER_SPECIFICITY,
    reader_below_curve,
    reader_rates,
    sensitivity_at_reader,
)
from trackeval.results import MetricSummary, key_token, metric_key
from trackeval.spec import MetricInfo
from trackeval.stats.bootstrap import group_seed, n_clusters, percentiles, units_per_column, weight_blocks
from trackeval.stats.reduce import mean_over

log = logging.getLogger(__name__)

PREFIX = "xray/cls"


def _not_gated(name: str, label: str) -> MetricInfo:
    """A reader metric: over many images (no per-case values in the records), never gated or compared."""
    return MetricInfo(name, label=label, level="corpus", paired="none", reduction="corpus")


#: the readers' metric declarations, spliced into the ``xray/cls`` unit's ``metrics`` (benchmarks/xray.py)
READER_METRICS: tuple[MetricInfo, ...] = (
    _not_gated("readers_below_curve", "readers below the ROC curve"),
    _not_gated(READER_SENSITIVITY, "reader sensitivity"),
    _not_gated(READER_SPECIFICITY, "reader specificity"),
    _not_gated("sens_at_reader_spec", "model sensitivity at the reader's specificity"),
    _not_gated("sens_gap_at_reader_spec", "sensitivity gap model − reader at the reader's specificity (paired)"),
)


@dataclass(frozen=True)
class Reader:
    """One human reader: ``name`` (the file stem; its key token is :func:`trackeval.results.key_token` of it),
    the ``file`` read, and ``decisions``: ``(n_images, n_findings)`` floats aligned to the test table's images and
    findings, 1 = called positive, 0 = called negative, NaN = no decision for that image and finding."""

    name: str
    file: Path
    decisions: np.ndarray


@dataclass(frozen=True)
class _Split:
    """What every reader is compared on: labels (NaN = not scored), scores, finding tokens, the headline
    findings (bool per finding), the bootstrap config and the images' clusters."""

    labels: np.ndarray
    scores: np.ndarray
    tokens: Sequence[str]
    headline: np.ndarray
    boot: BootstrapConfig
    clusters: np.ndarray | None


def _reader_key(metric: str, reader: str, *rest: str) -> str:
    return metric_key(PREFIX, metric, f"by_{READER_DIMENSION}", reader, *rest)


def _claim_reader_key(reader: Reader, seen: dict[str, Reader]) -> str:
    """The reader's key token, :func:`trackeval.results.key_token` of its ``name`` (``"Rad 1"`` -> ``rad_1``),
    claimed in ``seen``: refused when another reader has claimed the same token."""
    token = key_token(reader.name, file=str(reader.file), field="readers")
    if token in seen:
        raise InputError(
            f"readers {seen[token].name!r} ({seen[token].file}) and {reader.name!r} have the same key {token!r}",
            file=str(reader.file),
            field="readers",
        )
    seen[token] = reader
    return token


def _rate_summaries(split: _Split, reader: Reader, token: str) -> dict[str, MetricSummary]:
    """``reader_sens`` / ``reader_spec`` of one reader: per finding and the mean over the headline findings,
    cluster-bootstrap CIs (seed group ``reader=<token>``)."""
    y, d = split.labels, reader.decisions
    with np.errstate(invalid="ignore"):
        rates = {
            READER_SENSITIVITY: np.where((y == 1) & ~np.isnan(d), d, np.nan),
            READER_SPECIFICITY: np.where((y == 0) & ~np.isnan(d), 1.0 - d, np.nan),
        }
    out: dict[str, MetricSummary] = {}
    for name, matrix in rates.items():
        key = _reader_key(name, token)
        group = f"{READER_DIMENSION}={token}"
        out.update(mean_summaries(key, matrix, list(split.tokens), "finding", split.boot, group, split.clusters))
        if not split.headline.all():
            kept = np.where(split.headline, matrix, np.nan)
            out[key] = mean_summaries(key, kept, list(split.tokens), "finding", split.boot, group, split.clusters)[key]
    return out


def _finding_inputs(split: _Split, reader: Reader, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(scored, labels, scores, decisions)`` of finding ``j``: the images with a known label, and theirs."""
    ok = ~np.isnan(split.labels[:, j])
    return ok, split.labels[ok, j], split.scores[ok, j], reader.decisions[ok, j]


def _point_and_samples(split: _Split, reader: Reader, token: str) -> tuple[np.ndarray, ...]:
    """Per finding ``(k,)``: the model's sensitivity at the reader's specificity and the reader's sensitivity;
    then the bootstrap replicates ``(B, k)`` of the former and of the gap (model minus reader), from the same
    resamples as the reader's rates (seed group ``reader=<token>``)."""
    n, k = split.labels.shape
    inputs = [_finding_inputs(split, reader, j) for j in range(k)]
    model = np.array([sensitivity_at_reader(y, s, d) for _, y, s, d in inputs])
    sens = np.array([reader_rates(y, d)[1] for _, y, _, d in inputs])
    models, gaps = [], []
    seed = group_seed(split.boot.seed, f"{READER_DIMENSION}={token}")
    for w in weight_blocks(n, split.boot.n_resamples, seed, split.clusters):
        m, g = np.full((w.shape[0], k), np.nan), np.full((w.shape[0], k), np.nan)
        for j in np.flatnonzero(~np.isnan(model)):
            ok, y, s, d = inputs[j]
            m[:, j] = sensitivity_at_reader(y, s, d, w[:, ok])
            g[:, j] = m[:, j] - reader_rates(y, d, w[:, ok])[1]
        models.append(m)
        gaps.append(g)
    return model, sens, np.concatenate(models), np.concatenate(gaps)


def _interval_summaries(
    key: str, point: np.ndarray, samples: np.ndarray, split: _Split, valid: np.ndarray
) -> dict[str, MetricSummary]:
    """``key/by_finding/<f>`` with percentile CIs of ``samples`` (``(B, k)``), and ``key``: the mean over the
    headline findings with the CI of the resamples' means (NaN where a resample misses one)."""
    boot, n = split.boot, split.labels.shape[0]
    low, high = percentiles(samples, boot.confidence, units_per_column(valid, split.clusters), boot.interval, point)
    out = {
        metric_key(key, "by_finding", t): summary(point[j], n, int(valid[:, j].sum()), low[j], high[j])
        for j, t in enumerate(split.tokens)
    }
    items = split.headline & ~np.isnan(point)
    overall = float(point[items].mean()) if items.any() else math.nan
    units = n_clusters(n, split.clusters) if items.any() else math.nan
    o_low, o_high = percentiles(mean_over(samples, items), boot.confidence, units, boot.interval, overall)
    out[key] = summary(overall, n, int(valid[:, items].any(axis=1).sum()), float(o_low), float(o_high))
    return out


def _model_summaries(split: _Split, reader: Reader, token: str) -> dict[str, MetricSummary]:
    """``sens_at_reader_spec`` and ``sens_gap_at_reader_spec`` of one reader (paired bootstrap, module docstring)."""
    model, sens, models, gaps = _point_and_samples(split, reader, token)
    valid = ~np.isnan(split.labels) & ~np.isnan(reader.decisions)
    return {
        **_interval_summaries(_reader_key("sens_at_reader_spec", token), model, models, split, valid),
        **_interval_summaries(_reader_key("sens_gap_at_reader_spec", token), model - sens, gaps, split, valid),
    }


def _undefined_note(reader: Reader, finding: str, y: np.ndarray, d: np.ndarray) -> str:
    """Why ``reader`` has no point against the curve for ``finding`` (``y``/``d``: its scored images), or ``""``."""
    decided = ~np.isnan(d)
    if not decided.any():
        why = "no decision on any scored image"
    elif not (y[decided] == 1).any():
        why = "no positive among the images it decided"
    elif not (y[decided] == 0).any():
        why = "no negative among the images it decided"
    else:
        return ""
    return (
        f"{PREFIX}: reader {reader.name!r} ({reader.file}), finding {finding!r}: {why}; its point, "
        "readers_below_curve and the model's sensitivity at its specificity are NaN there"
    )


def _below(split: _Split, reader: Reader, notes: list[str]) -> np.ndarray:
    """Per finding: 1.0 when the reader lies strictly below the model's curve, 0.0 when not, NaN when undefined
    (a note names the reader and the finding)."""
    row = np.full(len(split.tokens), np.nan)
    for j, finding in enumerate(split.tokens):
        _, y, s, d = _finding_inputs(split, reader, j)
        below = reader_below_curve(y, s, d)
        if below is None:
            notes.append(_undefined_note(reader, finding, y, d))
        else:
            row[j] = float(below)
    return row


def _count_summaries(below: np.ndarray, split: _Split) -> dict[str, MetricSummary]:
    """``readers_below_curve`` per finding (the count over the readers with a point) and its mean over the
    headline findings that have a count."""
    n_readers = below.shape[0]
    compared = (~np.isnan(below)).sum(axis=0)
    counts = np.where(compared > 0, np.nansum(np.nan_to_num(below, nan=0.0), axis=0), np.nan)
    key = metric_key(PREFIX, "readers_below_curve")
    out = {
        metric_key(key, "by_finding", t): summary(counts[j], n_readers, int(compared[j]))
        for j, t in enumerate(split.tokens)
    }
    items = split.headline & ~np.isnan(counts)
    value = float(counts[items].mean()) if items.any() else math.nan
    out[key] = summary(value, int(split.headline.sum()), int(items.sum()))
    return out


def _partial_note(reader: Reader, split: _Split) -> str:
    """A note when the reader left scored images undecided (it is compared on the images it decided), or ``""``."""
    scored = ~np.isnan(split.labels)
    missing = int((scored & np.isnan(reader.decisions)).sum())
    if not missing:
        return ""
    return (
        f"{PREFIX}: reader {reader.name!r} ({reader.file}) has no decision for {missing} of {int(scored.sum())} "
        "scored (image, finding) pairs; it is compared with the model on the images it decided"
    )


def reader_aggregates(
    labels: np.ndarray,
    scores: np.ndarray,
    tokens: Sequence[str],
    readers: Sequence[Reader],
    boot: BootstrapConfig,
    clusters: np.ndarray | None,
    *,
    headline: np.ndarray | None = None,
) -> tuple[dict[str, MetricSummary], list[str]]:
    """The readers' aggregates (module docstring) and warnings.

    ``labels``: ``(n_images, n_findings)`` 1/0, NaN = not scored (uncertain left out); ``scores``: the model's
    probabilities, same shape; ``tokens``: the findings' key tokens; ``clusters``: the bootstrap cluster of each
    image (:func:`trackeval.benchmarks.summaries.clusters_of`) or None; ``headline``: per finding, whether it is
    in the headline means (the cls unit's ``xray.cls.min_positives`` rule; None: every finding). No reader: no
    aggregate. Warnings (also logged) name each reader and finding without a point and each reader that left
    scored images undecided.

    Raises:
        InputError: a reader name without a letter or digit, two readers with one key token, or decisions not
            aligned to the labels (naming the reader's file).
    """
    if not readers:
        return {}, []
    keep = np.ones(len(tokens), dtype=bool) if headline is None else np.asarray(headline, dtype=bool)
    split = _Split(np.asarray(labels, dtype=np.float64), np.asarray(scores, dtype=np.float64), tokens, keep, boot,
                   clusters)  # fmt: skip
    out: dict[str, MetricSummary] = {}
    notes: list[str] = []
    seen: dict[str, Reader] = {}
    below = np.full((len(readers), len(tokens)), np.nan)
    for r, reader in enumerate(readers):
        token = _claim_reader_key(reader, seen)
        if reader.decisions.shape != split.labels.shape:
            raise InputError(
                f"decisions of shape {reader.decisions.shape} are not aligned to the labels {split.labels.shape}",
                file=str(reader.file),
                field="readers",
            )
        notes += [n for n in (_partial_note(reader, split),) if n]
        below[r] = _below(split, reader, notes)
        out.update(_rate_summaries(split, reader, token))
        out.update(_model_summaries(split, reader, token))
    out.update(_count_summaries(below, split))
    for note in notes:
        log.warning(note)
    return out, notes
