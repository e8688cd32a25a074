"""``cls``: multi-label image classification (CheXpert / NIH style).

Inputs: ``--ground-truth labels.csv`` (``image_id,<finding>...``; 1 positive, 0 negative, blank or -1 uncertain;
``1.0``/``0.0``/``-1.0`` accepted) and ``--predictions scores.csv`` (the same ``image_id`` set and finding
columns, probabilities in [0, 1]). Optional ``--validation DIR`` with its own ``labels.csv`` and ``scores.csv``
(same findings): the operating-point thresholds are chosen there instead of on the test set. The ground truth
may also be a dataset's own label file (CheXpert, MIMIC-CXR, ChestX-ray14, MURA: told from the file or forced by
``--format``; :mod:`~trackeval.benchmarks.xray.cls_layouts`), with predictions keyed by that dataset's ids
(per-image scores pooled to the labelled study, ``xray.cls.pool``) and only the findings both files have
evaluated (``xray.cls.findings`` to choose). The MURA layout adds Cohen's kappa at
``xray.cls.decision_threshold``. ``--readers`` files (human readers' 0/1 decisions in the truth's layout) add
the readers' metrics (:mod:`~trackeval.benchmarks.xray.cls_readers`); their names and the digest of their
files are recorded in ``xray_run`` (``readers``, ``readers_digest``), in neither data digest, so that a run with
readers pairs with one without on the model's metrics.

Per finding: AUROC with its DeLong CI on the logit scale, the DeLong influence terms summed within each bootstrap
cluster before squaring (``bootstrap.cluster: subject_id`` with a layout that names patients: a patient's studies
are one cluster, as in the gate's paired DeLong) and a t quantile with ``min(clusters with a positive, clusters
with a negative) - 1`` degrees of freedom (:func:`trackeval.metrics.classification.auroc_interval`);
sensitivity, specificity and PPV of ``score >= t``
where ``t`` is the highest threshold reaching 95% sensitivity (on the validation set when given, else on the test
set: the source is logged as ``xray_run.operating_point``; a source without a positive or without a negative for
the finding defines no point: NaN and a warning naming the finding); ECE with ``xray.cls.ece_bins`` bins, and
next to it ``ece_reference``, the expected ECE of a perfectly calibrated model with the same scores
(:func:`trackeval.metrics.classification.ece_reference`). Headlines are macro means over the findings with at
least ``xray.cls.min_positives`` positives and as many negatives in the test labels; the others keep their
``by_finding`` aggregates, are named in a warning and listed (tokens) in ``xray_run.findings_below_min_positives``
and counted in ``summary.n_findings_below_min_positives``, so that the gate can leave them out too. The macro
AUROC CI uses the DeLong influence terms of those findings on the same images
(:func:`trackeval.metrics.classification.delong_influence`), summed within clusters, on the logit scale, with the
smallest degrees of freedom of those findings; sensitivity/specificity/PPV CIs
come from an image-level bootstrap at the fixed thresholds. Uncertain labels follow ``xray.cls.uncertain``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trackeval.benchmarks.summaries import clusters_of, mean_summaries, summary
from trackeval.benchmarks.xray import cls_align, cls_readers
from trackeval.benchmarks.xray import cls_layouts as layouts
from trackeval.benchmarks.xray.cls_layouts import ClsTruth
from trackeval.benchmarks.xray.common import TaskInputs, unique_tokens
from trackeval.benchmarks.xray.config import XRayClsConfig
from trackeval.case_table import CaseTable
from trackeval.config import EvalConfig
from trackeval.config.base import BootstrapConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.layouts import layout_digest
from trackeval.metrics.classification import (
    auc_df,
    auroc_interval,
    clustered_variance,
    cohen_kappa,
    delong,
    delong_influence,
    ece_reference,
    expected_calibration_error,
    logit_interval,
    threshold_at_sensitivity,
    undefined_roc_point,
)
from trackeval.results import MetricSummary, metric_key

log = logging.getLogger(__name__)

PREFIX = "xray/cls"
TARGET_SENSITIVITY = 0.95


@dataclass(frozen=True)
class Table:
    """Aligned labels and scores of one split: ``labels`` has NaN for uncertain entries (policy applied);
    ``image_ids`` are the label rows (images, or studies for a layout with per-study labels), ``subjects`` their
    bootstrap clusters and ``groups`` their case groups; ``truth`` is what was read (layout, files)."""

    image_ids: list[str]
    findings: list[str]
    tokens: list[str]
    labels: np.ndarray
    scores: np.ndarray
    n_uncertain: int
    subjects: list[str]
    groups: list[dict[str, str]]
    truth: ClsTruth
    scores_layout: str
    notes: list[str]


def load_split(
    labels_csv: Path, scores_csv: Path, policy: str, c: XRayClsConfig | None = None, forced: str | None = None
) -> Table:
    """Read and cross-validate one split (labels in their layout + scores); see
    :mod:`~trackeval.benchmarks.xray.cls_layouts` for the layouts and :mod:`~trackeval.benchmarks.xray.cls_align`
    for the matching of ids.

    ``policy``: ``xray.cls.uncertain``; ``c``: the rest of ``xray.cls`` (blank, findings, pool; None: defaults);
    ``forced``: the truth's ``--format``. Raises :class:`InputError` for unknown/missing finding columns,
    duplicate or mismatched ids, bad labels, and NaN/inf/non-probability scores, naming the file, line, case and
    finding.
    """
    c = c if c is not None else XRayClsConfig()
    truth = layouts.read_truth(labels_csv, forced)
    scores = layouts.read_scores(scores_csv)
    findings, notes = cls_align.evaluated_findings(truth, scores, c.findings)
    tokens = unique_tokens(findings, file=str(labels_csv), field="header")
    values = cls_align.align_scores(truth, scores, findings, c.pool)
    codes = truth.codes[:, [truth.findings.index(f) for f in findings]]
    labels, n_uncertain = layouts.labels_of(codes, c.blank or truth.blank, policy)
    return Table(
        truth.ids,
        findings,
        tokens,
        labels,
        values,
        n_uncertain,
        truth.subjects,
        truth.groups,
        truth,
        scores.layout,
        notes,
    )


def _threshold(finding: str, y: np.ndarray, s: np.ndarray, val: Table | None, val_file: str) -> tuple[float, str]:
    """The operating-point threshold of one finding at :data:`TARGET_SENSITIVITY` and ``""``, chosen on the
    validation split when there is one (else on the test labels ``y`` / scores ``s``, uncertain entries removed).

    When that split lacks a class for the finding (no positive, or no negative: the ROC curve's TPR or FPR is
    undefined), no point can be chosen: NaN and a warning naming the finding, so that the finding's
    sensitivity, specificity and PPV at the point are NaN, never a fake 0 / 1.
    """
    if val is not None:
        k = val.findings.index(finding)
        v_ok = ~np.isnan(val.labels[:, k])
        y, s = val.labels[v_ok, k].astype(np.int8), val.scores[v_ok, k]
    reason = undefined_roc_point(y)
    if reason:
        source = f"the validation labels ({val_file})" if val is not None else "the test labels"
        return math.nan, (
            f"finding {finding!r}: no operating point at 95% sensitivity: {source} have {reason} for it "
            "(uncertain labels left out); its threshold and sens/spec/ppv_at_sens95 are NaN"
        )
    return threshold_at_sensitivity(y, s, TARGET_SENSITIVITY), ""


def _below_min_positives(finding: str, y: np.ndarray, min_positives: int) -> str:
    """The warning for a finding whose test labels ``y`` (uncertain entries removed) have fewer than
    ``min_positives`` positives or negatives (it stays reported but out of the headlines), else ``""``."""
    m = int(y.sum())
    counts = [f"{k} {what}" for k, what in ((m, "positives"), (y.size - m, "negatives")) if k < min_positives]
    if not counts:
        return ""
    return (
        f"{PREFIX}: finding {finding!r} has {' and '.join(counts)} (< xray.cls.min_positives={min_positives}): "
        "reported, not in the headline"
    )


@dataclass
class _Findings:
    """The per-finding pass of :func:`evaluate`: its ``by_finding`` aggregates and warnings, and what the macro
    headlines need (the in-headline findings' AUROCs with their DeLong influence terms ``phi``, ECEs and
    reference ECEs; ``called``: the images called positive at each finding's operating point, NaN where
    unknown)."""

    out: dict[str, MetricSummary]
    notes: list[str]
    phi: np.ndarray
    called: np.ndarray
    in_headline: np.ndarray  # False: fewer than xray.cls.min_positives positives or negatives
    aucs: list[float] = field(default_factory=list)
    eces: list[float] = field(default_factory=list)
    references: list[float] = field(default_factory=list)
    variance_ok: bool = True
    dfs: list[int] = field(default_factory=list)  # the t reference's degrees of freedom of each AUROC
    #: the bootstrap cluster code of each image (``bootstrap.cluster``; None: every image its own cluster)
    clusters: np.ndarray | None = None


def _load(inputs: TaskInputs, cfg: EvalConfig) -> tuple[Table, Table | None]:
    """The test split and the validation split (None without ``--validation``), with the same findings (the
    validation files are told from their own headers; they must hold the test split's evaluated findings)."""
    c = cfg.xray.cls
    test = load_split(inputs.ground_truth, inputs.predictions, c.uncertain, c, inputs.format)
    for note in test.notes:
        log.warning(note)
    if inputs.validation is None:
        return test, None
    labels_csv = inputs.validation / "labels.csv"
    val_cfg = c if test.truth.layout.generic else c.model_copy(update={"findings": tuple(test.findings)})
    val = load_split(labels_csv, inputs.validation / "scores.csv", c.uncertain, val_cfg)
    if set(val.findings) != set(test.findings):
        raise InputError(
            f"validation findings {val.findings} differ from the test findings {test.findings}",
            file=str(labels_csv),
            field="header",
        )
    return test, val


def _score_finding(acc: _Findings, j: int, test: Table, val: Table | None, val_file: str, cfg: EvalConfig) -> None:
    """Finding ``j``'s AUROC (DeLong CI), operating point and ECEs into ``acc``."""
    c, n_img, token = cfg.xray.cls, test.labels.shape[0], test.tokens[j]
    ok = ~np.isnan(test.labels[:, j])
    y, s = test.labels[ok, j].astype(np.int8), test.scores[ok, j]
    note = _below_min_positives(test.findings[j], y, c.min_positives)
    if note:
        acc.in_headline[j] = False
        acc.notes.append(note)
        log.warning(note)
    d = delong(y, s)
    clusters = None if acc.clusters is None else acc.clusters[ok]
    low, high = auroc_interval(y, d, clusters, cfg.bootstrap.confidence)
    n_valid = int(ok.sum())
    acc.out[metric_key(PREFIX, "auroc", "by_finding", token)] = summary(
        d.auc, n_img, n_valid if not math.isnan(d.auc) else 0, low, high
    )
    if not math.isnan(d.auc) and acc.in_headline[j]:
        acc.aucs.append(d.auc)
        if math.isnan(d.variance):
            acc.variance_ok = False
        else:
            acc.phi[ok, j] = delong_influence(y, d)
            acc.dfs.append(auc_df(y, clusters))
    threshold, note = _threshold(test.findings[j], y, s, val, val_file)
    if note:
        acc.notes.append(note)
    else:
        acc.called[ok, j] = test.scores[ok, j] >= threshold
    acc.out[metric_key(PREFIX, "threshold_at_sens95", "by_finding", token)] = summary(threshold, n_img, n_valid)
    ece, reference = expected_calibration_error(y, s, c.ece_bins), ece_reference(s, c.ece_bins)
    if acc.in_headline[j]:
        acc.eces.append(ece)
        acc.references.append(reference)
    acc.out[metric_key(PREFIX, "ece", "by_finding", token)] = summary(ece, n_img, n_valid)
    acc.out[metric_key(PREFIX, "ece_reference", "by_finding", token)] = summary(reference, n_img, n_valid)


def _macro_summaries(acc: _Findings, n_img: int, cfg: EvalConfig) -> dict[str, MetricSummary]:
    """The macro AUROC (DeLong influence CI on the logit scale), ECE and reference ECE over the in-headline
    findings; NaN (and a warning) when there is none."""
    c = cfg.xray.cls
    if not acc.in_headline.any():
        note = (
            f"{PREFIX}: no finding has {c.min_positives} positives and {c.min_positives} negatives "
            f"(xray.cls.min_positives): the macro headlines are NaN"
        )
        acc.notes.append(note)
        log.warning(note)
    macro = float(np.mean(acc.aucs)) if acc.aucs else math.nan
    low = high = math.nan
    if acc.aucs and acc.variance_ok:
        var = clustered_variance((acc.phi / len(acc.aucs)).sum(axis=1), acc.clusters)
        low, high = logit_interval(macro, var, cfg.bootstrap.confidence, min(acc.dfs))
    out = {metric_key(PREFIX, "auroc"): summary(macro, n_img, n_img if acc.aucs else 0, low, high)}
    for name, values in (("ece", acc.eces), ("ece_reference", acc.references)):
        valid = [e for e in values if not math.isnan(e)]
        out[metric_key(PREFIX, name)] = summary(
            float(np.mean(valid)) if valid else math.nan, n_img, n_img if valid else 0
        )
    return out


def _rate_summaries(test: Table, acc: _Findings, boot: BootstrapConfig) -> dict[str, MetricSummary]:
    """Sensitivity, specificity and PPV at the operating points: ``by_finding`` for every finding, the headline
    over the in-headline findings, image-level bootstrap CIs."""
    y_all, called, out = test.labels, acc.called, {}
    with np.errstate(invalid="ignore"):
        rates = {
            "sens_at_sens95": np.where(y_all == 1, called, np.nan),
            "spec_at_sens95": np.where(y_all == 0, 1.0 - called, np.nan),
            "ppv_at_sens95": np.where(called == 1, y_all, np.nan),
        }
    clusters = clusters_of(test.subjects, boot)
    for name, matrix in rates.items():
        key = metric_key(PREFIX, name)
        out.update(mean_summaries(key, matrix, test.tokens, "finding", boot, name, clusters))
        if not acc.in_headline.all():  # the headline over the findings in it; by_finding (above) keeps them all
            kept = np.where(acc.in_headline, matrix, np.nan)
            out[key] = mean_summaries(key, kept, test.tokens, "finding", boot, name, clusters)[key]
    return out


def _records(test: Table, called: np.ndarray) -> CaseTable:
    """One record per image, as columns: per finding its ``label``, ``score`` and ``called_at_sens95``."""
    names = sorted({g for groups in test.groups for g in groups})
    return CaseTable.dense(
        test.image_ids,
        test.subjects,
        {g: [groups.get(g) for groups in test.groups] for g in names},
        test.tokens,
        {"label": test.labels, "score": test.scores, "called_at_sens95": called},
    )


def _kappa_summaries(test: Table, acc: _Findings, threshold: float) -> dict[str, MetricSummary]:
    """Cohen's kappa of ``score >= threshold`` against the labels (uncertain entries left out): ``by_finding``
    for every finding, the headline the mean over the in-headline findings (NaN when there is none)."""
    n_img, out, kept = test.labels.shape[0], {}, []
    for j, token in enumerate(test.tokens):
        ok = ~np.isnan(test.labels[:, j])
        kappa = cohen_kappa(test.labels[ok, j].astype(np.int8), test.scores[ok, j], threshold)
        out[metric_key(PREFIX, "kappa", "by_finding", token)] = summary(kappa, n_img, int(ok.sum()))
        if acc.in_headline[j] and not math.isnan(kappa):
            kept.append(kappa)
    out[metric_key(PREFIX, "kappa")] = summary(float(np.mean(kept)) if kept else math.nan, n_img, n_img if kept else 0)
    return out


def _reader_files(paths: tuple[Path, ...]) -> list[Path]:
    """The reader CSVs of ``--readers``: each file, and the ``*.csv`` files of each folder (sorted); two readers
    with one name (file stem) are an error."""
    files: list[Path] = []
    for p in paths:
        found = sorted(p.glob("*.csv")) if p.is_dir() else [p]
        if not found:
            raise InputError("no reader CSV (*.csv) in the folder", file=str(p), field="readers")
        files += found
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise InputError(f"two readers named {f.stem!r}: {stems[f.stem]} and {f}", file=str(f), field="readers")
        stems[f.stem] = f
    return files


def _readers(
    inputs: TaskInputs, test: Table, boot: BootstrapConfig, in_headline: np.ndarray
) -> tuple[dict[str, MetricSummary], list[str], dict]:
    """The ``--readers`` aggregates and warnings (:func:`cls_readers.reader_aggregates`; their means over the
    findings of the headline, ``in_headline``, as the AUROC's) and the run facts (reader names, the digest of
    their files); nothing without ``--readers``. Each file is read in the truth's layout and aligned to the test
    table's rows and evaluated findings."""
    if not inputs.readers:
        return {}, [], {}
    files = _reader_files(inputs.readers)
    readers = []
    for f in files:
        decisions = cls_align.align_decisions(
            test.truth, layouts.read_in_layout(f, test.truth.layout), test.findings, f
        )
        readers.append(cls_readers.Reader(f.stem, f, decisions))
    aggregates, notes = cls_readers.reader_aggregates(
        test.labels, test.scores, test.tokens, readers, boot, clusters_of(test.subjects, boot), headline=in_headline
    )
    params = {"readers": [r.name for r in readers], "readers_digest": sha256_files(*files)}
    return aggregates, notes, params


def _digests(inputs: TaskInputs, test: Table, val: Table | None) -> tuple[str, str]:
    """The ground-truth digest (every truth file read, folded with the test layout by :func:`layout_digest`) and
    the predictions digest."""
    gt_files, pred_files = list(test.truth.files), [inputs.predictions]
    if val is not None and inputs.validation is not None:
        gt_files += list(val.truth.files)
        pred_files.append(inputs.validation / "scores.csv")
    return layout_digest(test.truth.layout, sha256_files(*gt_files)), sha256_files(*pred_files)


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the classification task (see the module docstring)."""
    test, val = _load(inputs, cfg)
    validation_file = str(inputs.validation / "labels.csv") if inputs.validation is not None else ""
    n_img, n_f = test.labels.shape
    acc = _Findings(
        {}, list(test.notes), np.zeros((n_img, n_f)), np.full((n_img, n_f), np.nan), np.ones(n_f, dtype=bool)
    )
    acc.clusters = clusters_of(test.subjects, cfg.bootstrap)
    for j in range(n_f):
        _score_finding(acc, j, test, val, validation_file, cfg)
    aggregates = {**acc.out, **_macro_summaries(acc, n_img, cfg), **_rate_summaries(test, acc, cfg.bootstrap)}
    if test.truth.layout.name == "mura":
        aggregates.update(_kappa_summaries(test, acc, cfg.xray.cls.decision_threshold))
    reader_out, reader_notes, reader_params = _readers(inputs, test, cfg.bootstrap, acc.in_headline)
    aggregates.update(reader_out)
    truth_digest, predictions_digest = _digests(inputs, test, val)
    return Evaluation(
        records=_records(test, acc.called),
        aggregates=aggregates,
        item_kind="finding",
        ground_truth_digest=truth_digest,
        predictions_digest=predictions_digest,
        summary={
            "n_images": n_img,
            "n_findings": n_f,
            "n_uncertain_labels": test.n_uncertain,
            "n_findings_below_min_positives": int((~acc.in_headline).sum()),
        },
        warnings=[*acc.notes, *reader_notes],
        params={
            "operating_point": "validation" if val is not None else "test",
            "target_sensitivity": TARGET_SENSITIVITY,
            "findings_below_min_positives": [
                t for t, keep in zip(test.tokens, acc.in_headline, strict=True) if not keep
            ],
            **reader_params,
        },
        formats={
            "ground_truth": test.truth.layout.name,
            "predictions": test.scores_layout,
        },
    )
