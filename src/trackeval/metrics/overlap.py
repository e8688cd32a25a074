"""Multi-label overlap metrics (Dice, IoU) from one confusion pass over two label maps.

Every per-label and per-region count derives from a single ``K x K`` confusion matrix over the ``K`` distinct
values of the two maps, built in one chunked pass: each voxel is encoded as ``truth * L + pred`` in the
narrowest integer dtype (numpy, in place) and the codes are counted with ``np.bincount``. Everything runs in
numpy on the calling thread (no torch: importing it costs a worker ~1.5 CPU-s and ~100 MB; numpy 2's bincount
is as fast as torch's single-threaded one here), so the kernel does not slow down when other workers keep the
cores busy. No per-label boolean masks are built, so the cost does not grow with the number of labels, and the
peak extra memory is one chunk plus the histograms (plus one copy of an input whose memory order differs from the
other's, see :func:`confusion_matrix`).

Empty policy (nnU-Net convention), with ``TP``/``FP``/``FN`` the voxel counts of one label or region:

* ``TP + FP + FN == 0`` (label absent from both maps): Dice and IoU are **NaN** ("not applicable"; aggregate
  with ``nanmean``);
* prediction non-empty on empty truth (false positive organ): **0.0**;
* truth non-empty, prediction empty (missed organ): **0.0**.

MONAI's ``DiceMetric``/``MeanIoU`` with ``ignore_empty=True`` differ in the second case: they return NaN
whenever the truth is empty, so a hallucinated organ goes unpunished there; here it scores 0.0.

A label is an ``int`` or a tuple of ints (an nnU-Net style region: the union of those ids, e.g. ``(1, 2)``
for "kidney incl. tumour"). Label ``0`` is the background; it is never reported unless asked for explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

Label = int | tuple[int, ...]

#: Voxels per chunk of the confusion pass (2**19 measured fastest on CPU: the chunk stays in cache).
CHUNK = 1 << 19
# uint8 codes per chunk from which they are counted in pairs (see _histogram).
_PAIRED_MIN = 1 << 17
#: Above this label value, compaction maps values with ``searchsorted`` instead of a lookup table.
_MAX_LUT = 1 << 22


@dataclass(frozen=True)
class LabelCounts:
    """Voxel counts of one label or region.

    Attributes:
        tp: voxels in both the truth and the prediction.
        fp: voxels in the prediction only.
        fn: voxels in the truth only.
        n_pred: voxels in the prediction (``tp + fp``).
        n_ref: voxels in the truth (``tp + fn``).
    """

    tp: int
    fp: int
    fn: int
    n_pred: int
    n_ref: int

    @property
    def dice(self) -> float:
        """Dice coefficient; see :func:`dice_from_counts` for the empty policy."""
        return dice_from_counts(self)

    @property
    def iou(self) -> float:
        """Intersection over union (Jaccard); see :func:`iou_from_counts` for the empty policy."""
        return iou_from_counts(self)


def dice_from_counts(c: LabelCounts) -> float:
    """Dice ``2 TP / (2 TP + FP + FN)``.

    Returns NaN when ``TP + FP + FN == 0`` (absent from both maps) and 0.0 when exactly one side is empty.

    Examples:
        >>> from trackeval.metrics.overlap import LabelCounts, dice_from_counts
        >>> dice_from_counts(LabelCounts(tp=2, fp=1, fn=0, n_pred=3, n_ref=2))  # 2 * 2 / (2 * 2 + 1 + 0)
        0.8
        >>> dice_from_counts(LabelCounts(tp=0, fp=0, fn=0, n_pred=0, n_ref=0))
        nan
    """
    if c.tp + c.fp + c.fn == 0:
        return math.nan
    return 2.0 * c.tp / (2 * c.tp + c.fp + c.fn)


def iou_from_counts(c: LabelCounts) -> float:
    """IoU ``TP / (TP + FP + FN)``.

    Returns NaN when ``TP + FP + FN == 0`` (absent from both maps) and 0.0 when exactly one side is empty.

    Examples:
        >>> from trackeval.metrics.overlap import LabelCounts, iou_from_counts
        >>> round(iou_from_counts(LabelCounts(tp=2, fp=1, fn=0, n_pred=3, n_ref=2)), 4)  # 2 / (2 + 1 + 0)
        0.6667
        >>> iou_from_counts(LabelCounts(tp=0, fp=0, fn=3, n_pred=0, n_ref=3))  # missed label
        0.0
    """
    union = c.tp + c.fp + c.fn
    return math.nan if union == 0 else c.tp / union


def _check_map(name: str, a: np.ndarray) -> None:
    if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(
            f"{name} has dtype {a.dtype}; overlap metrics need integer or bool label maps. Convert it first, "
            f"e.g. np.rint({name}).astype(np.int32) after checking the values are whole numbers."
        )
    if a.size == 0:
        return
    if a.dtype.kind == "i" and a.min() < 0:
        raise ValueError(f"{name} contains negative label values (min {a.min()}); labels must be >= 0.")
    if a.dtype == np.uint64 and a.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} contains label values above the int64 maximum ({np.iinfo(np.int64).max}).")


def _validate(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred, truth = np.asarray(pred), np.asarray(truth)
    if pred.shape != truth.shape:
        raise ValueError(f"pred and truth must have identical shapes, got pred {pred.shape} and truth {truth.shape}.")
    _check_map("pred", pred)
    _check_map("truth", truth)
    return pred, truth


def _flat_pair(truth: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ravel both maps in the same element order: views when both are C- or both Fortran-contiguous."""
    if truth.flags.c_contiguous and pred.flags.c_contiguous:
        order = "C"
    elif truth.flags.f_contiguous and pred.flags.f_contiguous:
        order = "F"  # typical for nibabel
    else:  # copy the smaller map (or both if neither is contiguous) into the bigger one's order
        big = truth if truth.nbytes >= pred.nbytes else pred
        order = "F" if big.flags.f_contiguous and not big.flags.c_contiguous else "C"
    return truth.ravel(order=order), pred.ravel(order=order)


def _histogram(ft: np.ndarray, fp: np.ndarray, n_bins: int, encode: Callable) -> np.ndarray:
    """Histogram of ``encode(truth_chunk, pred_chunk)`` codes over all chunks, int64 of length ``n_bins``.

    uint8 codes of a chunk of at least ``_PAIRED_MIN`` codes are counted as 8-byte words first: a word of code 0
    (background in both maps, most of a volume) adds 8 to bin 0 at the cost of one comparison; the other words'
    codes are counted two at a time, as the uint16 of a pair (a 65536-bin histogram folded once at the end): a
    label map is mostly runs of one code, and counting the same bin over and over waits on each increment, so
    half as many increments take about half the time. A 512 x 512 x 133 CT pair: 0.099 CPU-s one code at a time,
    0.053 in pairs (an older machine); on this release's, 0.029 in pairs and 0.018 with the zero words skipped
    (the whole ``confusion_matrix`` 0.034 -> 0.024; the counts are the same integers). Smaller chunks are
    counted one code at a time: there the 65536 bins would cost more than the codes (a 40 x 40 mask: 21 -> 397
    us).
    """
    hist = np.zeros(n_bins, dtype=np.int64)
    pairs: np.ndarray | None = None
    for s in range(0, ft.size, CHUNK):
        code = encode(ft[s : s + CHUNK], fp[s : s + CHUNK])
        if code.dtype == np.uint8 and code.size >= _PAIRED_MIN:
            whole = code.size - code.size % 8
            words = code[:whole].view(np.uint64)
            nonzero = words != 0
            hist[0] += (words.size - np.count_nonzero(nonzero)) * 8  # code 0 eight at a time
            rest = code[:whole].reshape(-1, 8)[nonzero].reshape(-1)  # the words with another code
            counted = np.bincount(rest.view(np.uint16), minlength=1 << 16)
            pairs = counted if pairs is None else pairs + counted
            code = code[whole:]
        if n_bins <= CHUNK:  # the common case
            hist += np.bincount(code, minlength=n_bins)
        else:  # many bins: a dense per-chunk histogram would cost more than the chunk itself
            bins, counts = np.unique(code, return_counts=True)
            hist[bins] += counts
    if pairs is not None:  # uint8 codes, so n_bins <= 256
        by_byte = pairs.reshape(256, 256)  # [second code, first code] on little-endian machines, the transpose on big
        hist += (by_byte.sum(axis=0) + by_byte.sum(axis=1))[:n_bins]
    return hist


def _present_values(ft: np.ndarray, fp: np.ndarray, vmax: int) -> np.ndarray:
    """Sorted distinct values of both flat maps (int64)."""
    if vmax < _MAX_LUT:  # scatter into a presence table: O(n), no sort
        seen = np.zeros(vmax + 1, dtype=bool)
        for f in (ft, fp):
            for s in range(0, f.size, CHUNK):
                seen[f[s : s + CHUNK]] = True
        return np.flatnonzero(seen).astype(np.int64)
    # int64 per part: concatenating uint64 with int64 parts would go through float64 and merge large ids
    parts = [np.unique(f[s : s + CHUNK]).astype(np.int64) for f in (ft, fp) for s in range(0, f.size, CHUNK)]
    return np.unique(np.concatenate(parts))


def unlisted_values(label_map: np.ndarray, allowed: Iterable[int], *, first: int = 10) -> list[int]:
    """The ``first`` smallest distinct non-zero values of ``label_map`` that are not in ``allowed``, sorted
    (``[]`` when every value is 0 or allowed).

    The guard to run before :func:`confusion_matrix`, whose ``K x K`` int64 matrix is sized by the distinct
    values it finds: 20 000 stray ids in a 50 KB file would cost 3 GB there. Here nothing is sized by the values:
    one ``max`` pass (enough when ``allowed`` is ``1..max``, the usual label map); otherwise one chunked pass
    through a presence table of ``max(allowed) + 2`` booleans (a search in the sorted allowed ids when that
    maximum is beyond ``2**22``), keeping at most ``first`` values. Extra memory: one chunk of int64 codes, the
    table, and a copy of the map only when it is neither C- nor Fortran-contiguous.

    Raises:
        ValueError: the map has negative values or uint64 values beyond int64.
        TypeError: the map is not integer or bool.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.overlap import unlisted_values
        >>> unlisted_values(np.array([0, 1, 7, 3, 7, 9]), {1, 2, 3})
        [7, 9]
        >>> unlisted_values(np.array([0, 255, 255]), {255})
        []
    """
    a = np.asarray(label_map)
    _check_map("label map", a)
    if a.size == 0:
        return []
    if a.dtype == np.bool_:
        a = a.view(np.uint8)
    elif a.dtype == np.uint64:
        a = a.view(np.int64)  # every value fits: _check_map refused the others
    int64_max = int(np.iinfo(np.int64).max)
    ids = sorted({int(i) for i in allowed if 0 < int(i) <= int64_max})  # larger ids can never occur
    flat = a.ravel(order="K")  # a view for C- or Fortran-contiguous maps (nibabel's)
    vmax = int(flat.max())
    top = ids[-1] if ids else 0
    if vmax == 0 or (vmax <= top and len(ids) == top):  # ids are exactly 1..top: every value is listed
        return []
    listed_ids = np.asarray(ids, dtype=np.int64)
    if top < _MAX_LUT:
        table = np.zeros(top + 2, dtype=bool)  # the last slot stands for every value above top
        table[0] = True
        table[listed_ids] = True
        cap = np.int64(top + 1)

        def listed(chunk: np.ndarray) -> np.ndarray:
            return table[np.minimum(chunk, cap)]
    else:

        def listed(chunk: np.ndarray) -> np.ndarray:
            values = chunk.astype(np.int64, copy=False)
            pos = np.minimum(np.searchsorted(listed_ids, values), listed_ids.size - 1)
            return (values == 0) | (listed_ids[pos] == values)

    found = np.zeros(0, dtype=np.int64)
    for s in range(0, flat.size, CHUNK):
        chunk = flat[s : s + CHUNK]
        stray = chunk[~listed(chunk)]
        if stray.size:
            found = np.union1d(found, np.unique(stray)[:first].astype(np.int64))[:first]
    return [int(v) for v in found]


def confusion_matrix(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Multi-class confusion matrix of two label maps in one pass.

    Args:
        pred: predicted label map, any shape, integer or bool dtype, values >= 0.
        truth: reference label map of the same shape, integer or bool dtype, values >= 0.

    Returns:
        ``(values, matrix)``: ``values`` is the sorted int64 array of the ``K`` distinct values present
        in either map (including 0 when present); ``matrix`` is ``(K, K)`` int64 with ``matrix[i, j]`` =
        number of voxels where ``truth == values[i]`` and ``pred == values[j]`` (rows truth, columns
        prediction, as in ``sklearn.metrics.confusion_matrix(truth, pred)``). Empty maps give ``K == 0``.

    Raises:
        ValueError: shapes differ, a map has negative values, or uint64 values exceed the int64 range.
        TypeError: a map is not integer or bool (float maps must be rounded and cast by the caller).

    Notes:
        Small labels (``(max + 1) ** 2 <= CHUNK = 2**19``, i.e. ids up to 723) are encoded directly as
        ``truth * L + pred`` (uint8, int16 or int32, the narrowest that holds the codes) and counted with
        ``np.bincount``; larger ids are first compacted to their rank among the present values, so any
        non-negative integer labels work, at about 10-30x the cost. The matrix is
        dense, ``K * K`` int64: fine for anatomy label maps, not for instance maps with 10^5 objects; callers
        that hold a label map refuse values outside it first (:func:`unlisted_values`), so ``K`` is bounded by
        the label map, not by what a file holds.
        Both maps are read as flat views when they share a contiguous memory order (both C or both Fortran,
        as nibabel returns); otherwise one of them is copied once.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.overlap import confusion_matrix
        >>> values, matrix = confusion_matrix(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2]))
        >>> values.tolist()
        [0, 1, 2]
        >>> matrix.tolist()  # rows truth, columns prediction: one truth-2 voxel was predicted as 1
        [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
    """
    pred, truth = _validate(pred, truth)
    ft, fp = _flat_pair(truth, pred)
    if ft.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64)
    vmax = max(int(ft.max()), int(fp.max()))
    n = vmax + 1
    if n * n <= CHUNK:  # direct: code = truth * n + pred, in the narrowest dtype that holds n * n - 1
        values = np.arange(n, dtype=np.int64)
        buf = np.empty(CHUNK, dtype=next(t for t in (np.uint8, np.int16, np.int32) if n * n - 1 <= np.iinfo(t).max))

        def encode(t: np.ndarray, p: np.ndarray) -> np.ndarray:
            code = buf[: t.size]
            np.copyto(code, t, casting="unsafe")  # values < n: every cast here is exact
            code *= n
            return np.add(code, p, out=code, casting="unsafe")

    else:  # compact: code = rank(truth) * K + rank(pred), ranks among the K present values
        values = _present_values(ft, fp, vmax)
        n = values.size
        if vmax < _MAX_LUT:
            lut = np.zeros(vmax + 1, dtype=np.int64)
            lut[values] = np.arange(n)

            def rank(x: np.ndarray) -> np.ndarray:
                return lut[x]
        else:

            def rank(x: np.ndarray) -> np.ndarray:
                return np.searchsorted(values, x.astype(np.int64, copy=False))  # uint64: never via float

        def encode(t: np.ndarray, p: np.ndarray) -> np.ndarray:
            code = rank(t) * n
            code += rank(p)
            return code

    matrix = _histogram(ft, fp, n * n, encode).reshape(n, n)
    present = (matrix.sum(axis=0) > 0) | (matrix.sum(axis=1) > 0)
    return values[present], matrix[np.ix_(present, present)]


def _label_id(i: object) -> int:
    if isinstance(i, bool) or not isinstance(i, int | np.integer):
        raise TypeError(f"labels must be ints or tuples of ints, got {i!r}.")
    if i < 0:
        raise ValueError(f"labels must be >= 0, got {i}.")
    return int(i)


def _normalise_label(label: object) -> Label:
    if isinstance(label, tuple | list):
        if not label:
            raise ValueError("a region label must contain at least one label id.")
        return tuple(_label_id(i) for i in label)
    return _label_id(label)


def drop_reference(values: np.ndarray, matrix: np.ndarray, label: int) -> tuple[np.ndarray, np.ndarray]:
    """The confusion matrix without the voxels whose truth is ``label`` (its row set to 0; a copy).

    Every count :func:`counts_from_matrix` derives from the result leaves those voxels out, whatever the
    prediction holds there: nnU-Net's ``ignore`` label (``compute_tp_fp_fn_tn`` counts only where the reference
    is not the ignore label). A prediction voxel holding ``label`` elsewhere stays in its column, which no
    other label selects: it is background to every other label. ``matrix.sum()`` of the result is the number of
    voxels kept (the total less the ignored ones). ``label`` absent from ``values``: an unchanged copy.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.overlap import confusion_matrix, counts_from_matrix, drop_reference
        >>> truth, pred = np.array([1, 1, 3, 3, 0]), np.array([1, 0, 1, 0, 3])  # 3 = ignore
        >>> values, matrix = drop_reference(*confusion_matrix(pred, truth), 3)
        >>> counts_from_matrix(values, matrix, [1])[1], int(matrix.sum())  # the pred 1 on an ignore voxel is gone
        (LabelCounts(tp=1, fp=0, fn=1, n_pred=1, n_ref=2), 3)
    """
    out = np.array(matrix, dtype=np.int64, copy=True)
    out[np.asarray(values) == label, :] = 0
    return np.asarray(values), out


def counts_from_matrix(
    values: np.ndarray, matrix: np.ndarray, labels: Iterable[Label] | None = None
) -> dict[Label, LabelCounts]:
    """Per-label and per-region counts from a confusion matrix, without touching the volumes again.

    Args:
        values: sorted distinct values, as returned by :func:`confusion_matrix`.
        matrix: ``(K, K)`` confusion matrix, rows truth, columns prediction.
        labels: ints and/or tuples of ints (regions: union of the ids). ``None`` = every non-zero value
            present in either map, sorted. A requested label absent from both maps is still returned, with
            all counts 0 (so Dice/IoU NaN).

    Returns:
        ``{label: LabelCounts}`` in the order of ``labels``; keys are Python ints, regions tuples of Python
        ints in the order given (a list region ``[1, 2]`` becomes the key ``(1, 2)``).

    Raises:
        ValueError: a label is negative or a region is empty.
        TypeError: a label is neither an int nor a tuple of ints.

    Examples:
        For a region ``R``: ``tp = matrix[R, R].sum()``, ``n_ref = matrix[R, :].sum()``,
        ``n_pred = matrix[:, R].sum()``, ``fp = n_pred - tp``, ``fn = n_ref - tp``.

        >>> import numpy as np
        >>> from trackeval.metrics.overlap import confusion_matrix, counts_from_matrix
        >>> values, matrix = confusion_matrix(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2]))
        >>> counts = counts_from_matrix(values, matrix, labels=[2, (1, 2)])
        >>> counts[2]
        LabelCounts(tp=1, fp=0, fn=1, n_pred=1, n_ref=2)
        >>> counts[(1, 2)]  # as a region, the 1/2 confusion is no error
        LabelCounts(tp=3, fp=0, fn=0, n_pred=3, n_ref=3)
    """
    values = np.asarray(values)
    matrix = np.asarray(matrix, dtype=np.int64)
    if labels is None:
        present = (matrix.sum(axis=0) > 0) | (matrix.sum(axis=1) > 0)
        labels = [int(v) for v in values[present] if v != 0]
    n_ref, n_pred, diag = matrix.sum(axis=1), matrix.sum(axis=0), np.diagonal(matrix)
    out: dict[Label, LabelCounts] = {}
    for label in labels:
        key = _normalise_label(label)
        sel = np.isin(values, key)
        tp = int(diag[sel].sum() if isinstance(key, int) else matrix[np.ix_(sel, sel)].sum())
        ref, pr = int(n_ref[sel].sum()), int(n_pred[sel].sum())
        out[key] = LabelCounts(tp=tp, fp=pr - tp, fn=ref - tp, n_pred=pr, n_ref=ref)
    return out


def confusion(pred: np.ndarray, truth: np.ndarray, labels: Iterable[Label] | None = None) -> dict[Label, LabelCounts]:
    """Voxel counts per label/region in one pass: :func:`confusion_matrix` then :func:`counts_from_matrix`.

    Args:
        pred: predicted label map (integer or bool, values >= 0).
        truth: reference label map, same shape.
        labels: ints and/or tuples of ints; ``None`` = every non-zero value present in either map, sorted.

    Returns:
        ``{label: LabelCounts}``; labels absent from both maps have all counts 0.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.overlap import confusion
        >>> pred = np.array([[0, 1], [1, 1]])
        >>> truth = np.array([[0, 1], [0, 1]])
        >>> counts = confusion(pred, truth)
        >>> counts
        {1: LabelCounts(tp=2, fp=1, fn=0, n_pred=3, n_ref=2)}
        >>> counts[1].dice, round(counts[1].iou, 4)
        (0.8, 0.6667)
    """
    values, matrix = confusion_matrix(pred, truth)
    return counts_from_matrix(values, matrix, labels)


def dice(pred: np.ndarray, truth: np.ndarray, labels: Iterable[Label] | None = None) -> dict[Label, float]:
    """Dice per label/region: NaN when absent from both maps, 0.0 when absent from exactly one.

    Args:
        pred: predicted label map (integer or bool, values >= 0).
        truth: reference label map, same shape.
        labels: ints and/or tuples of ints; ``None`` = every non-zero value present in either map, sorted.

    Returns:
        ``{label: dice}``. To get Dice and IoU together, call :func:`confusion` once and read
        ``counts.dice`` and ``counts.iou``.

    Examples:
        Label 1 covers voxels {0, 1} in ``pred`` and {0, 1, 2} in ``truth``: Dice = 2 * 2 / (2 + 3) = 0.8.

        >>> import numpy as np
        >>> from trackeval.metrics.overlap import dice
        >>> pred = np.array([1, 1, 0, 0, 2, 2])
        >>> truth = np.array([1, 1, 1, 0, 2, 0])
        >>> {k: round(v, 4) for k, v in dice(pred, truth).items()}
        {1: 0.8, 2: 0.6667}
        >>> dice(pred, truth, labels=[(1, 2), 3])  # region {1, 2}: 2 * 3 / (4 + 4); label 3 absent: NaN
        {(1, 2): 0.75, 3: nan}
    """
    return {k: c.dice for k, c in confusion(pred, truth, labels).items()}


def iou(pred: np.ndarray, truth: np.ndarray, labels: Iterable[Label] | None = None) -> dict[Label, float]:
    """IoU (Jaccard) per label/region: NaN when absent from both maps, 0.0 when absent from exactly one.

    Args and returns as in :func:`dice`.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.overlap import iou
        >>> pred = np.array([1, 1, 0, 0, 2, 2])
        >>> truth = np.array([1, 1, 1, 0, 2, 0])
        >>> {k: round(v, 4) for k, v in iou(pred, truth, labels=[1, 2, (1, 2)]).items()}
        {1: 0.6667, 2: 0.5, (1, 2): 0.6}
    """
    return {k: c.iou for k, c in confusion(pred, truth, labels).items()}
