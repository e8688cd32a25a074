"""Human readers against a model's ROC curve, for one finding: the curve's vertices, the curve's sensitivity at a
false positive rate, whether a reader's operating point lies strictly below the curve, and the model's
sensitivity at the reader's specificity.

Pure functions: 1D arrays in (``labels`` in {0, 1}, ``scores`` finite floats, higher = more likely positive,
``decisions`` 1 = called positive, 0 = called negative, NaN = the reader gave no decision for that image), numbers
out. A reader is compared with the model **on the images the reader decided** (the images whose decision is
NaN are left out of the reader's rates and of the model's curve), so that both points come from the same
images.

**The curve** is the empirical ROC curve of ``score >= t`` over every distinct score ``t``, one vertex per
distinct score from the highest down, starting at ``(0, 0)`` (threshold ``+inf``) and ending at ``(1, 1)``:
the vertices of ``sklearn.metrics.roc_curve(labels, scores, drop_intermediate=False)``. Between two vertices
the curve is the straight segment joining them (the ROC of the randomised rule that mixes the two thresholds;
its area is the trapezoidal AUROC). Tied scores of a positive and a negative make a diagonal segment, not a
step. Where the curve is vertical (several vertices at one false positive rate, e.g. positives scored between
two negatives), its sensitivity at that false positive rate is the **highest** of them: the best rule at that
rate.

**Strictly below**: a reader ``(1 - specificity, sensitivity)`` is below when its sensitivity is lower than the
curve's at its false positive rate; a reader exactly on the curve (at a vertex, or on a segment between two
vertices) is not below. On a vertical segment the curve's sensitivity is the segment's top, so a reader lower on
it is below: the model reaches a higher sensitivity at the same false positive rate. The test is done exactly,
in integer counts (no rounding can put a point that lies on the curve below it).

**Undefined** (NaN, or None for the yes/no answer): a finding without a positive has no sensitivity (TPR), one
without a negative no false positive rate (sklearn's NaN convention, without its warning), and a reader without
any decision on the finding has no operating point.

Resamples: :func:`roc_vertices`, :func:`reader_rates` and :func:`sensitivity_at_reader` take optional
``weights`` ``(B, n)`` (one bootstrap resample per row, the count of each image:
:func:`trackeval.stats.bootstrap.weight_blocks`) and then return one curve or value per row.
"""

from __future__ import annotations

import numpy as np

from trackeval.metrics.checks import check_binary, check_finite, check_paired_1d

__all__ = [
    "READER_DIMENSION",
    "READER_SENSITIVITY",
    "READER_SPECIFICITY",
    "reader_below_curve",
    "reader_rates",
    "roc_vertices",
    "sensitivity_at_fpr",
    "sensitivity_at_reader",
]

#: The names under which a unit records each reader's operating point, as the kernel's outputs are named:
#: ``<unit>/<READER_SENSITIVITY>/by_<READER_DIMENSION>/<reader>/by_<item dim>/<item>`` (and the specificity
#: alike); the ROC figure (:mod:`trackeval.plotdata`) draws the readers from them.
READER_SENSITIVITY = "reader_sens"
READER_SPECIFICITY = "reader_spec"
READER_DIMENSION = "reader"


def _check(labels: np.ndarray, scores: np.ndarray, decisions: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """``labels`` as float 0/1, ``scores`` as float, ``decisions`` as float 0/1/NaN; ValueError otherwise."""
    y = np.asarray(labels, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    check_paired_1d(("labels", "scores"), y, s)
    check_binary("labels", y)
    check_finite("scores", s)
    if decisions is None:
        return y, s
    d = np.asarray(decisions, dtype=np.float64)
    if d.shape != y.shape:
        raise ValueError(f"decisions must have the labels' shape {y.shape}, got {d.shape}")
    if not np.isin(d[~np.isnan(d)], (0.0, 1.0)).all():
        raise ValueError("decisions must hold only 0, 1 and NaN (no decision)")
    return y, s, d


def _rows(n: int, weights: np.ndarray | None) -> np.ndarray:
    """``(B, n)`` image weights: ``weights`` checked, or one row of ones."""
    if weights is None:
        return np.ones((1, n))
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != n:
        raise ValueError(f"weights must be (B, {n}), got {w.shape}")
    return w


def _rates(counts: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``counts / total`` per row, NaN where the row's total is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / np.where(total > 0, total, 1.0), np.nan)


def _cumulative(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fp, tp, thresholds)``: weighted cumulative negatives and positives ``(B, V)`` called by ``score >= t``
    at each vertex threshold ``t`` (``+inf`` first, then the distinct scores from the highest down)."""
    order = np.argsort(-s, kind="mergesort")
    s_sorted = s[order]
    last = np.r_[np.flatnonzero(s_sorted[1:] != s_sorted[:-1]), s.size - 1] if s.size else np.zeros(0, np.int64)
    w = w[:, order]
    tp = np.cumsum(w * y[order], axis=1)[:, last]
    fp = np.cumsum(w * (1.0 - y[order]), axis=1)[:, last]
    zero = np.zeros((w.shape[0], 1))
    return np.hstack([zero, fp]), np.hstack([zero, tp]), np.r_[np.inf, s_sorted[last]]


def roc_vertices(
    labels: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)``: the vertices of the model's ROC curve (module docstring).

    Vertex ``i`` is the rule ``score >= thresholds[i]``; ``thresholds[0]`` is ``+inf`` (nothing called: ``(0,
    0)``), then one vertex per distinct score, highest first. Without ``weights`` this equals
    ``sklearn.metrics.roc_curve(labels, scores, drop_intermediate=False)`` (1D arrays); with ``weights`` ``(B,
    n)`` ``fpr`` and ``tpr`` are ``(B, V)``, one curve per resample (same thresholds). No positive: ``tpr`` is
    NaN; no negative: ``fpr`` is NaN; no image: one vertex ``(NaN, NaN)`` at ``+inf``.

    Examples:
        >>> from trackeval.metrics.readers import roc_vertices
        >>> fpr, tpr, thr = roc_vertices([0, 1, 0, 1], [0.1, 0.8, 0.4, 0.4])
        >>> fpr.tolist(), tpr.tolist(), thr.tolist()
        ([0.0, 0.0, 0.5, 1.0], [0.0, 0.5, 1.0, 1.0], [inf, 0.8, 0.4, 0.1])
    """
    y, s = _check(labels, scores)
    fp, tp, thresholds = _cumulative(y, s, _rows(y.size, weights))
    fpr, tpr = _rates(fp, fp[:, -1:]), _rates(tp, tp[:, -1:])
    return (fpr[0], tpr[0], thresholds) if weights is None else (fpr, tpr, thresholds)


def _sensitivity_rows(fpr: np.ndarray, tpr: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The curves' ``(B, V)`` sensitivity at false positive rates ``x`` ``(B,)``: ``(B,)``, NaN where undefined."""
    v = fpr.shape[1]
    with np.errstate(invalid="ignore"):
        i = (fpr <= x[:, None]).sum(axis=1) - 1  # the last vertex at or left of x: the highest at its rate
    inside = (i >= 0) & ~np.isnan(x) & ~np.isnan(fpr).any(axis=1) & (x <= fpr[:, -1])
    i = np.clip(i, 0, v - 1)
    j = np.minimum(i + 1, v - 1)
    rows = np.arange(fpr.shape[0])
    f_i, f_j, t_i, t_j = fpr[rows, i], fpr[rows, j], tpr[rows, i], tpr[rows, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        step = np.where(f_j > f_i, (x - f_i) / np.where(f_j > f_i, f_j - f_i, 1.0), 0.0)
        value = np.where(f_i == x, t_i, t_i + step * (t_j - t_i))
    return np.where(inside, value, np.nan)


def sensitivity_at_fpr(fpr: np.ndarray, tpr: np.ndarray, x: float | np.ndarray) -> float | np.ndarray:
    """The curve's highest sensitivity at false positive rate ``x``, linear between its vertices.

    ``fpr``/``tpr``: the vertices of :func:`roc_vertices`, 1D (one curve; ``x`` a number; returns a float) or
    ``(B, V)`` (one curve per row; ``x`` ``(B,)``; returns ``(B,)``). At a rate where the curve is vertical the
    highest vertex counts. NaN when ``x`` is NaN or outside ``[0, 1]`` or the curve is undefined (NaN rates).

    Examples:
        >>> from trackeval.metrics.readers import sensitivity_at_fpr
        >>> fpr, tpr = [0.0, 0.0, 0.5, 1.0], [0.0, 0.5, 1.0, 1.0]
        >>> sensitivity_at_fpr(fpr, tpr, 0.0), sensitivity_at_fpr(fpr, tpr, 0.25)  # vertical at 0; halfway
        (0.5, 0.75)
    """
    f = np.asarray(fpr, dtype=np.float64)
    t = np.asarray(tpr, dtype=np.float64)
    if f.shape != t.shape or f.ndim not in (1, 2) or f.shape[-1] == 0:
        raise ValueError(f"fpr and tpr must be non-empty 1D or (B, V) of one shape, got {f.shape} and {t.shape}")
    if f.ndim == 1:
        return float(_sensitivity_rows(f[None], t[None], np.array([float(x)]))[0])
    return _sensitivity_rows(f, t, np.asarray(x, dtype=np.float64).reshape(f.shape[0]))


def reader_rates(
    labels: np.ndarray, decisions: np.ndarray, weights: np.ndarray | None = None
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """The reader's operating point ``(1 - specificity, sensitivity)`` on the images it decided.

    ``1 - specificity`` is the fraction of the decided negatives called positive, ``sensitivity`` that of the
    decided positives (NaN without a decided negative, resp. positive). With ``weights`` ``(B, n)``: ``(B,)``
    arrays, one point per resample. Computed as the curve's rates are (weighted count over weighted total), so
    a reader that calls exactly the images of a vertex has that vertex's rates, bit for bit.

    Examples:
        >>> from trackeval.metrics.readers import reader_rates
        >>> reader_rates([1, 1, 0, 0, 0], [1, float("nan"), 0, 1, 0])  # 1 of 3 negatives, 1 of 1 decided positive
        (0.3333333333333333, 1.0)
    """
    y, _, d = _check(labels, np.zeros(np.shape(labels)), decisions)
    w = _rows(y.size, weights)
    decided = ~np.isnan(d)
    called = np.where(decided, d, 0.0)
    pos, neg = decided & (y == 1), decided & (y == 0)
    fpr = _rates(w @ (called * neg), w @ neg.astype(np.float64))
    tpr = _rates(w @ (called * pos), w @ pos.astype(np.float64))
    return (float(fpr[0]), float(tpr[0])) if weights is None else (fpr, tpr)


def sensitivity_at_reader(
    labels: np.ndarray, scores: np.ndarray, decisions: np.ndarray, weights: np.ndarray | None = None
) -> float | np.ndarray:
    """The model's sensitivity at the reader's specificity: the curve of the images the reader decided, read at
    the reader's false positive rate (:func:`sensitivity_at_fpr`; the threshold is the one that matches the
    reader's specificity in the data given, so with ``weights`` it is re-chosen in every resample). NaN when
    the reader or the curve has no operating point (no decided positive or negative).

    Examples:
        >>> from trackeval.metrics.readers import sensitivity_at_reader
        >>> y, s = [0, 0, 1, 1], [0.1, 0.6, 0.4, 0.9]
        >>> sensitivity_at_reader(y, s, [0, 1, 1, 1])  # the reader: FPR 1/2, the model reaches 1 there
        1.0
    """
    y, s, d = _check(labels, scores, decisions)
    w = _rows(y.size, weights) * ~np.isnan(d)  # the undecided images weigh nothing in both points
    fpr, tpr, _ = roc_vertices(y, s, w)
    x, _ = reader_rates(y, d, w)
    out = _sensitivity_rows(fpr, tpr, np.asarray(x))
    return float(out[0]) if weights is None else out


def reader_below_curve(labels: np.ndarray, scores: np.ndarray, decisions: np.ndarray) -> bool | None:
    """Whether the reader's ``(1 - specificity, sensitivity)`` lies strictly below the model's ROC curve on the
    images the reader decided (module docstring); None when either has no operating point there (no decided
    positive, no decided negative, or no decision at all).

    Exact: with ``P`` positives and ``N`` negatives, the reader at ``(fp / N, tp / P)`` and the curve's vertices
    ``(fp_k / N, tp_k / P)``, the comparison with the segment ``i``-``j`` around ``fp`` is made on integers.

    Examples:
        >>> from trackeval.metrics.readers import reader_below_curve
        >>> y, s = [0, 0, 1, 1], [0.1, 0.6, 0.4, 0.9]
        >>> reader_below_curve(y, s, [0, 1, 0, 1]), reader_below_curve(y, s, [0, 0, 0, 1])  # below; on a vertex
        (True, False)
    """
    y, s, d = _check(labels, scores, decisions)
    keep = ~np.isnan(d)
    y, s, d = y[keep], s[keep], d[keep]
    fp_k, tp_k, _ = _cumulative(y, s, np.ones((1, y.size)))
    fp_k, tp_k = fp_k[0].astype(np.int64), tp_k[0].astype(np.int64)
    if fp_k[-1] == 0 or tp_k[-1] == 0:
        return None
    fp, tp = int(d[y == 0].sum()), int(d[y == 1].sum())
    i = int(np.searchsorted(fp_k, fp, side="right")) - 1  # the last vertex at or left of fp: the highest there
    if fp_k[i] == fp:
        return tp < int(tp_k[i])
    j = i + 1
    width = int(fp_k[j] - fp_k[i])
    return tp * width < int(tp_k[i]) * width + int(tp_k[j] - tp_k[i]) * (fp - int(fp_k[i]))
