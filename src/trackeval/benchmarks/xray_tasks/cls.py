"""``cls``: multi-label image classification (CheXpert / NIH style).

Inputs: ``--ground-truth labels.csv`` (``image_id,<finding>...``; 1 positive, 0 negative, blank or -1 uncertain;
``1.0``/``0.0``/``-1.0`` accepted) and ``--predictions scores.csv`` (the same ``image_id`` set and finding
columns, probabilities in [0, 1]). Optional ``--validation DIR`` with its own ``labels.csv`` and ``scores.csv``
(same findings): the operating-point thresholds are chosen there instead of on the test set.

Per finding: AUROC with its DeLong CI on the logit scale
(:func:`trackeval.metrics.classification.logit_interval`); sensitivity, specificity and PPV of ``score >= t``
where ``t`` is the highest threshold reaching 95% sensitivity (on the validation set when given, else on the test
set: the source is logged as ``xray_run.operating_point``; a source without a positive or without a negative for
the finding defines no point: NaN and a warning naming the finding); ECE with ``xray.cls.ece_bins`` bins, and
next to it ``ece_reference``, the expected ECE of a perfectly calibrated model with the same scores
(:func:`trackeval.metrics.classification.ece_reference`). Headlines are macro means over the findings with at
least ``xray.cls.min_positives`` positives and as many negatives in the test labels; the others keep their
``by_finding`` aggregates, are named in a warning and listed (tokens) in ``xray_run.findings_below_min_positives``
and counted in ``summary.n_findings_below_min_positives``, so that the gate can leave them out too. The macro
AUROC CI uses the DeLong influence terms of those findings on the same images
(:func:`trackeval.metrics.classification.delong_influence`), on the logit scale; sensitivity/specificity/PPV CIs
come from an image-level bootstrap at the fixed thresholds. Uncertain labels follow ``xray.cls.uncertain``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trackeval.benchmarks.summaries import clusters_of, mean_summaries, summary
from trackeval.benchmarks.xray_tasks.common import TaskInputs, unique_tokens
from trackeval.config import EvalConfig
from trackeval.config.base import BootstrapConfig
from trackeval.engine.driver import Evaluation
from trackeval.errors import InputError
from trackeval.io.hashing import sha256_files
from trackeval.io.tables import read_csv_rows
from trackeval.metrics.classification import (
    delong,
    delong_influence,
    ece_reference,
    expected_calibration_error,
    logit_interval,
    threshold_at_sensitivity,
    undefined_roc_point,
)
from trackeval.results import CaseRecord, MetricSummary, metric_key

log = logging.getLogger(__name__)

PREFIX = "xray/cls"
TARGET_SENSITIVITY = 0.95
_POSITIVE = {"1", "1.0"}
_NEGATIVE = {"0", "0.0"}
_UNCERTAIN = {"", "-1", "-1.0"}


@dataclass(frozen=True)
class Table:
    """Aligned labels and scores of one split: ``labels`` has NaN for uncertain entries (policy applied)."""

    image_ids: list[str]
    findings: list[str]
    tokens: list[str]
    labels: np.ndarray
    scores: np.ndarray
    n_uncertain: int


def _read(path: Path) -> tuple[list[str], list[str], list[dict[str, str]]]:
    rows = read_csv_rows(path, required=("image_id",))
    columns = [c for c in rows[0] if c != "image_id"]
    if not columns:
        raise InputError("no finding columns besides image_id", file=str(path), field="header")
    ids: list[str] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows, start=2):
        image_id = row["image_id"]
        if not image_id:
            raise InputError(f"empty image_id on line {i}", file=str(path), field="image_id")
        if image_id in seen:
            raise InputError(
                f"duplicate image_id on lines {seen[image_id]} and {i}",
                file=str(path),
                case_id=image_id,
                field="image_id",
            )
        seen[image_id] = i
        ids.append(image_id)
    return columns, ids, rows


def _label(value: str, policy: str, *, file: str, case: str, finding: str, line: int) -> float:
    if value in _POSITIVE:
        return 1.0
    if value in _NEGATIVE:
        return 0.0
    if value in _UNCERTAIN:
        return {"ignore": math.nan, "zeros": 0.0, "ones": 1.0}[policy]
    raise InputError(
        f"label {value!r} on line {line} is not 1, 0, -1 or blank (uncertain)", file=file, case_id=case, field=finding
    )


def _score(value: str, *, file: str, case: str, finding: str, line: int) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(
            f"score {value!r} on line {line} is not a number", file=file, case_id=case, field=finding
        ) from None
    if not math.isfinite(x):
        raise InputError(f"score {value!r} on line {line} is NaN or infinite", file=file, case_id=case, field=finding)
    if not 0.0 <= x <= 1.0:
        raise InputError(
            f"score {x} on line {line} is not a probability in [0, 1]", file=file, case_id=case, field=finding
        )
    return x


def _check_columns(findings: list[str], score_cols: list[str], scores_csv: Path) -> None:
    """Refuse a scores file whose finding columns are not those of the labels (unknown ones first)."""
    unknown = [c for c in score_cols if c not in findings]
    if unknown:
        raise InputError(
            f"unknown finding column(s) {unknown}; labels have {findings}", file=str(scores_csv), field=unknown[0]
        )
    absent = [c for c in findings if c not in score_cols]
    if absent:
        raise InputError(f"finding column(s) {absent} missing", file=str(scores_csv), field=absent[0])


def _check_image_ids(ids: list[str], score_ids: list[str], scores_csv: Path) -> None:
    """Refuse a scores file whose image ids are not those of the labels (scored but unlabelled ones first)."""
    label_set, score_set = set(ids), set(score_ids)
    extra = [i for i in score_ids if i not in label_set]
    if extra:
        raise InputError(
            f"{len(extra)} image(s) scored but not labelled, e.g. {extra[0]!r}",
            file=str(scores_csv),
            case_id=extra[0],
            field="image_id",
        )
    missing = [i for i in ids if i not in score_set]
    if missing:
        raise InputError(
            f"{len(missing)} labelled image(s) without scores, e.g. {missing[0]!r}",
            file=str(scores_csv),
            case_id=missing[0],
            field="image_id",
        )


def load_split(labels_csv: Path, scores_csv: Path, policy: str) -> Table:
    """Read and cross-validate one split (labels + scores); see the module docstring for the formats.

    Raises :class:`InputError` for unknown/missing finding columns, duplicate or mismatched image ids, bad
    labels, and NaN/inf/non-probability scores, naming the file, line, image and finding.
    """
    findings, ids, label_rows = _read(labels_csv)
    tokens = unique_tokens(findings, file=str(labels_csv), field="header")
    score_cols, score_ids, score_rows = _read(scores_csv)
    _check_columns(findings, score_cols, scores_csv)
    _check_image_ids(ids, score_ids, scores_csv)
    score_line = {i: (line, row) for line, (i, row) in enumerate(zip(score_ids, score_rows, strict=True), start=2)}
    labels = np.empty((len(ids), len(findings)))
    scores = np.empty((len(ids), len(findings)))
    n_uncertain = 0
    for r, (image_id, row) in enumerate(zip(ids, label_rows, strict=True)):
        s_line, s_row = score_line[image_id]
        for c, f in enumerate(findings):
            n_uncertain += row[f] in _UNCERTAIN
            labels[r, c] = _label(row[f], policy, file=str(labels_csv), case=image_id, finding=f, line=r + 2)
            scores[r, c] = _score(s_row[f], file=str(scores_csv), case=image_id, finding=f, line=s_line)
    return Table(ids, findings, tokens, labels, scores, n_uncertain)


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


def _load(inputs: TaskInputs, policy: str) -> tuple[Table, Table | None]:
    """The test split and the validation split (None without ``--validation``), with the same findings."""
    test = load_split(inputs.ground_truth, inputs.predictions, policy)
    if inputs.validation is None:
        return test, None
    val = load_split(inputs.validation / "labels.csv", inputs.validation / "scores.csv", policy)
    if set(val.findings) != set(test.findings):
        raise InputError(
            f"validation findings {val.findings} differ from the test findings {test.findings}",
            file=str(inputs.validation / "labels.csv"),
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
    low, high = d.ci(cfg.bootstrap.confidence)
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
        var = float(((acc.phi / len(acc.aucs)).sum(axis=1) ** 2).sum())
        low, high = logit_interval(macro, var, cfg.bootstrap.confidence)
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
    clusters = clusters_of(test.image_ids, boot)
    for name, matrix in rates.items():
        key = metric_key(PREFIX, name)
        out.update(mean_summaries(key, matrix, test.tokens, "finding", boot, name, clusters))
        if not acc.in_headline.all():  # the headline over the findings in it; by_finding (above) keeps them all
            kept = np.where(acc.in_headline, matrix, np.nan)
            out[key] = mean_summaries(key, kept, test.tokens, "finding", boot, name, clusters)[key]
    return out


def _records(test: Table, called: np.ndarray) -> list[CaseRecord]:
    """One record per image: per finding its ``label``, ``score`` and ``called_at_sens95``."""
    return [
        CaseRecord(
            case_id=image_id,
            subject_id=image_id,
            metrics={
                token: {"label": test.labels[i, j], "score": test.scores[i, j], "called_at_sens95": called[i, j]}
                for j, token in enumerate(test.tokens)
            },
        )
        for i, image_id in enumerate(test.image_ids)
    ]


def evaluate(inputs: TaskInputs, cfg: EvalConfig) -> Evaluation:
    """Score the classification task (see the module docstring)."""
    test, val = _load(inputs, cfg.xray.cls.uncertain)
    validation_file = str(inputs.validation / "labels.csv") if inputs.validation is not None else ""
    n_img, n_f = test.labels.shape
    acc = _Findings({}, [], np.zeros((n_img, n_f)), np.full((n_img, n_f), np.nan), np.ones(n_f, dtype=bool))
    for j in range(n_f):
        _score_finding(acc, j, test, val, validation_file, cfg)
    aggregates = {**acc.out, **_macro_summaries(acc, n_img, cfg), **_rate_summaries(test, acc, cfg.bootstrap)}
    gt_files, pred_files = [inputs.ground_truth], [inputs.predictions]
    if inputs.validation is not None:
        gt_files.append(inputs.validation / "labels.csv")
        pred_files.append(inputs.validation / "scores.csv")
    return Evaluation(
        records=_records(test, acc.called),
        aggregates=aggregates,
        item_kind="finding",
        ground_truth_digest=sha256_files(*gt_files),
        predictions_digest=sha256_files(*pred_files),
        summary={
            "n_images": n_img,
            "n_findings": n_f,
            "n_uncertain_labels": test.n_uncertain,
            "n_findings_below_min_positives": int((~acc.in_headline).sum()),
        },
        warnings=acc.notes,
        params={
            "operating_point": "validation" if val is not None else "test",
            "target_sensitivity": TARGET_SENSITIVITY,
            "findings_below_min_positives": [
                t for t, keep in zip(test.tokens, acc.in_headline, strict=True) if not keep
            ],
        },
    )
