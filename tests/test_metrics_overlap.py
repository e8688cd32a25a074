"""Tests for the one-pass overlap kernel, checked against MONAI, scikit-learn and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from monai.metrics import DiceMetric, MeanIoU
from monai.networks.utils import one_hot
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from trackeval.metrics import overlap
from trackeval.metrics.overlap import (
    LabelCounts,
    confusion,
    confusion_matrix,
    counts_from_matrix,
    dice,
    dice_from_counts,
    iou,
    iou_from_counts,
)


def _monai_dice_iou(pred: np.ndarray, truth: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """MONAI per-class Dice (label-map input) and IoU (one-hot input), background included, empty -> NaN."""
    p = torch.from_numpy(pred.astype(np.int64))[None, None]
    t = torch.from_numpy(truth.astype(np.int64))[None, None]
    d = DiceMetric(include_background=True, reduction="none", ignore_empty=True, num_classes=n_classes)(p, t)
    j = MeanIoU(include_background=True, reduction="none", ignore_empty=True)(
        one_hot(p, n_classes), one_hot(t, n_classes)
    )
    return d[0].numpy().astype(np.float64), j[0].numpy().astype(np.float64)


def _random_maps(rng: np.random.Generator, shape: tuple[int, ...], n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Truth uses labels [0, n_labels - 2] except one; pred is truth with 30 % of voxels relabelled at random
    in [0, n_labels - 1]: some labels are then prediction-only, one truth-only label may appear, and for many
    labels both sides are non-empty with partial overlap."""
    truth = rng.integers(0, max(n_labels - 1, 1), size=shape)
    if n_labels > 3:
        truth[truth == n_labels // 2] = 0  # label n_labels // 2: absent from truth (maybe present in pred)
    pred = truth.copy()
    flip = rng.random(shape) < 0.3
    pred[flip] = rng.integers(0, n_labels, size=int(flip.sum()))
    return pred, truth


def _assert_matches_monai(ours: dict, monai: np.ndarray, pred: np.ndarray, truth: np.ndarray, ids) -> None:
    """``ours[ids[c]]`` vs MONAI channel ``c``; encodes the one documented difference (empty truth)."""
    for c, label in enumerate(ids):
        in_truth, in_pred = bool((truth == c).any()), bool((pred == c).any())
        if in_truth:
            assert ours[label] == pytest.approx(monai[c], abs=1e-6), (label, ours[label], monai[c])
        else:
            assert math.isnan(monai[c])  # MONAI ignore_empty: NaN whenever truth is empty ...
            if in_pred:
                assert ours[label] == 0.0  # ... we score a prediction on empty truth as 0.0
            else:
                assert math.isnan(ours[label])


@pytest.mark.parametrize("shape", [(48, 40), (14, 12, 10)], ids=["2d", "3d"])
@pytest.mark.parametrize("n_labels", [2, 5, 20, 150, 300])
def test_dice_iou_match_monai(shape: tuple[int, ...], n_labels: int) -> None:
    rng = np.random.default_rng(n_labels + len(shape))
    pred, truth = _random_maps(rng, shape, n_labels)
    dtype = np.uint8 if n_labels <= 256 else np.int16
    ids = list(range(n_labels))
    counts = confusion(pred.astype(dtype), truth.astype(dtype), labels=ids)
    m_dice, m_iou = _monai_dice_iou(pred, truth, n_labels)
    _assert_matches_monai({k: c.dice for k, c in counts.items()}, m_dice, pred, truth, ids)
    _assert_matches_monai({k: c.iou for k, c in counts.items()}, m_iou, pred, truth, ids)
    assert dice(pred, truth, ids) == pytest.approx({k: c.dice for k, c in counts.items()}, nan_ok=True)
    assert iou(pred, truth, ids) == pytest.approx({k: c.iou for k, c in counts.items()}, nan_ok=True)


@pytest.mark.parametrize("max_id", [10**6, 2**40], ids=["lookup-table", "searchsorted"])
def test_large_label_ids_compaction_matches_monai(max_id: int) -> None:
    """300 labels with ids up to 10**6 / 2**40: (max+1)**2 bins is impossible, values must be compacted."""
    rng = np.random.default_rng(7)
    pred, truth = _random_maps(rng, (14, 12, 10), 300)
    big = np.sort(rng.choice(max_id, size=300, replace=False)).astype(np.int64)
    big[0] = 0  # keep background 0
    big[-1] = max_id - 1
    ours = dice(big[pred], big[truth], labels=[int(b) for b in big])
    ours_iou = iou(big[pred], big[truth], labels=[int(b) for b in big])
    m_dice, m_iou = _monai_dice_iou(pred, truth, 300)
    _assert_matches_monai(ours, m_dice, pred, truth, [int(b) for b in big])
    _assert_matches_monai(ours_iou, m_iou, pred, truth, [int(b) for b in big])
    values, matrix = confusion_matrix(big[pred], big[truth])
    present = np.union1d(np.unique(truth), np.unique(pred))
    np.testing.assert_array_equal(values, big[present])
    np.testing.assert_array_equal(matrix, sk_confusion_matrix(truth.ravel(), pred.ravel(), labels=present))


def test_monai_published_example() -> None:
    """MONAI docs: y_pred [[1,0],[0,1]] vs y [[1,0],[1,1]]: foreground Dice 0.8, IoU 2/3."""
    y_pred, y = np.array([[1, 0], [0, 1]]), np.array([[1, 0], [1, 1]])
    assert dice(y_pred, y) == {1: pytest.approx(0.8)}
    assert iou(y_pred, y) == {1: pytest.approx(2 / 3)}
    assert confusion(y_pred, y)[1] == LabelCounts(tp=2, fp=0, fn=1, n_pred=2, n_ref=3)
    m_dice, m_iou = _monai_dice_iou(y_pred, y, 2)
    assert m_dice[1] == pytest.approx(0.8) and m_iou[1] == pytest.approx(2 / 3, abs=1e-6)
    # background: truth 1 voxel, pred 2 voxels, overlap 1 -> 2/3 and 1/2
    assert dice(y_pred, y, [0]) == {0: pytest.approx(2 / 3)}
    assert iou(y_pred, y, [0]) == {0: pytest.approx(0.5)}


def test_empty_policy() -> None:
    z = np.zeros((3, 4), dtype=np.uint8)
    one = z.copy()
    one[1, 1] = 1
    both_empty = dice(z, z, [1])[1]
    assert math.isnan(both_empty) and math.isnan(iou(z, z, [1])[1])
    assert dice(one, z, [1]) == {1: 0.0} and iou(one, z, [1]) == {1: 0.0}  # prediction on empty truth
    assert dice(z, one, [1]) == {1: 0.0} and iou(z, one, [1]) == {1: 0.0}  # missed truth
    assert dice(one, one, [1]) == {1: 1.0}
    assert math.isnan(dice_from_counts(LabelCounts(0, 0, 0, 0, 0)))
    assert math.isnan(iou_from_counts(LabelCounts(0, 0, 0, 0, 0)))
    # the documented difference from MONAI (ignore_empty=True): NaN there, 0.0 here
    m_dice, m_iou = _monai_dice_iou(one, z, 2)
    assert math.isnan(m_dice[1]) and math.isnan(m_iou[1])


def test_labels_default_and_absent() -> None:
    truth = np.array([[0, 3, 3], [7, 7, 0]], dtype=np.uint8)
    pred = np.array([[0, 3, 5], [7, 0, 0]], dtype=np.uint8)
    d = dice(pred, truth)
    assert list(d) == [3, 5, 7]  # every non-zero value of either map, sorted; no background
    assert d == {3: pytest.approx(2 / 3), 5: 0.0, 7: pytest.approx(2 / 3)}
    d = dice(pred, truth, labels=[9, 3, np.int64(0)])
    assert list(d) == [9, 3, 0] and all(type(k) is int for k in d)
    assert math.isnan(d[9]) and d[0] == pytest.approx(2 * 2 / (2 + 3))
    assert dice(np.zeros((0, 3), np.uint8), np.zeros((0, 3), np.uint8)) == {}


def test_regions_equal_dice_of_unioned_masks() -> None:
    rng = np.random.default_rng(3)
    pred, truth = _random_maps(rng, (20, 18, 9), 6)
    regions = [(1, 2), (2, 3, 4), (1, 5), (0, 1), [4, 2]]
    d = dice(pred, truth, regions)
    j = iou(pred, truth, regions)
    for region in regions:
        pm, tm = np.isin(pred, region), np.isin(truth, region)
        inter, s = int((pm & tm).sum()), int(pm.sum() + tm.sum())
        key = tuple(region)
        assert d[key] == pytest.approx(2 * inter / s)
        assert j[key] == pytest.approx(inter / (s - inter))
        assert dice(pm, tm)[1] == pytest.approx(d[key])  # the same as the binary masks through the kernel
    assert math.isnan(dice(pred, truth, [(40, 41)])[(40, 41)])


def test_counts_from_matrix_no_second_pass() -> None:
    rng = np.random.default_rng(5)
    pred, truth = _random_maps(rng, (30, 30), 8)
    values, matrix = confusion_matrix(pred, truth)
    labels = [1, 2, (1, 2), (3, 6, 7), 11]
    counts = counts_from_matrix(values, matrix, labels)
    assert counts == confusion(pred, truth, labels)
    for key, c in counts.items():
        ids = key if isinstance(key, tuple) else (key,)
        pm, tm = np.isin(pred, ids), np.isin(truth, ids)
        assert c == LabelCounts(
            tp=int((pm & tm).sum()),
            fp=int((pm & ~tm).sum()),
            fn=int((~pm & tm).sum()),
            n_pred=int(pm.sum()),
            n_ref=int(tm.sum()),
        )
    assert counts_from_matrix(values, matrix) == confusion(pred, truth)


@pytest.mark.parametrize(
    ("dtype", "high"),
    [(np.uint8, 4), (np.uint8, 16), (np.uint8, 256), (np.int8, 100), (np.uint16, 700), (np.int16, 181),
     (np.int16, 2000), (np.uint32, 70_000), (np.int32, 30), (np.uint64, 2**62), (np.int64, 2**62)],
)  # fmt: skip
def test_confusion_matrix_matches_sklearn(dtype: type, high: int) -> None:
    rng = np.random.default_rng(high % 1000)
    pool = rng.choice(high, size=min(high, 40), replace=False).astype(dtype)  # ~40 ids spread up to `high`
    truth = pool[rng.integers(0, pool.size, (17, 23, 11))].astype(dtype)
    pred = np.where(rng.random(truth.shape) < 0.4, pool[rng.integers(0, pool.size, truth.shape)], truth)
    pred = pred.astype(dtype)
    values, matrix = confusion_matrix(pred, truth)
    present = np.union1d(truth, pred)
    np.testing.assert_array_equal(values, present.astype(np.int64))
    assert matrix.dtype == np.int64 and values.dtype == np.int64
    np.testing.assert_array_equal(matrix, sk_confusion_matrix(truth.ravel(), pred.ravel(), labels=present))


@pytest.mark.parametrize("n_labels", [3, 30, 300])
def test_many_chunks_and_sparse_histogram(monkeypatch: pytest.MonkeyPatch, n_labels: int) -> None:
    """Tiny chunks: many chunks (the last one partial, of odd size); 3 labels use uint8 codes (counted in pairs,
    the odd one alone), 30 int16 codes (900 bins),
    both counted by np.bincount; 300 the sparse histogram (90000 bins > CHUNK)."""
    monkeypatch.setattr(overlap, "CHUNK", 1000)
    monkeypatch.setattr(overlap, "_PAIRED_MIN", 2)  # the pair counting of large chunks, on tiny ones
    rng = np.random.default_rng(n_labels)
    pred, truth = _random_maps(rng, (33, 31, 7), n_labels)
    values, matrix = confusion_matrix(pred.astype(np.int16), truth.astype(np.int16))
    present = np.union1d(truth, pred)
    np.testing.assert_array_equal(values, present)
    np.testing.assert_array_equal(matrix, sk_confusion_matrix(truth.ravel(), pred.ravel(), labels=present))


def test_zero_words_are_counted_eight_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mostly-background pair: the 8-byte words of code 0 are counted without their bytes, the others (a word
    straddling an organ's edge, the partial tail) byte by byte; sklearn's counts, with and without small chunks."""
    rng = np.random.default_rng(8)
    truth = np.zeros((41, 37, 13), dtype=np.uint8)
    truth[5:30, 3:20, 2:11] = rng.integers(1, 4, size=(25, 17, 9))
    pred = np.where(rng.random(truth.shape) < 0.02, rng.integers(0, 4, size=truth.shape), truth).astype(np.uint8)
    present = np.union1d(truth, pred)
    expected = sk_confusion_matrix(truth.ravel(), pred.ravel(), labels=present)
    np.testing.assert_array_equal(confusion_matrix(pred, truth)[1], expected)  # one chunk, below _PAIRED_MIN
    monkeypatch.setattr(overlap, "CHUNK", 1003)  # chunks not a multiple of 8: each has a byte tail
    monkeypatch.setattr(overlap, "_PAIRED_MIN", 2)
    np.testing.assert_array_equal(confusion_matrix(pred, truth)[1], expected)
    assert (truth.ravel()[:1000].reshape(-1, 8) == 0).all(axis=1).any()  # zero words were there to skip


def test_huge_adjacent_ids_are_not_merged() -> None:
    """Ids 2**62 + k differ below float64 resolution: any float round trip would merge them."""
    base = np.uint64(2**62)
    truth = (base + np.array([0, 1, 2, 3, 3, 0], dtype=np.uint64)).reshape(2, 3)
    pred = np.array([2**62, 2**62 + 1, 2**62 + 3, 2**62 + 3, 0, 2**62], dtype=np.int64).reshape(2, 3)
    values, matrix = confusion_matrix(pred, truth)
    want = np.union1d(truth.astype(np.int64), pred)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(
        matrix, sk_confusion_matrix(truth.ravel().astype(np.int64), pred.ravel(), labels=want)
    )
    assert dice(pred, truth, [2**62 + 3]) == {2**62 + 3: pytest.approx(2 * 1 / (2 + 2))}


def test_bool_inputs() -> None:
    rng = np.random.default_rng(11)
    t, p = rng.random((25, 26)) < 0.4, rng.random((25, 26)) < 0.5
    inter = int((t & p).sum())
    assert dice(p, t) == {1: pytest.approx(2 * inter / (t.sum() + p.sum()))}
    values, matrix = confusion_matrix(p, t)
    np.testing.assert_array_equal(values, [0, 1])
    np.testing.assert_array_equal(matrix, sk_confusion_matrix(t.ravel(), p.ravel()))
    assert confusion(p.astype(np.uint8), t) == confusion(p, t)  # bool and uint8 may be mixed


def test_memory_layouts_give_identical_results() -> None:
    rng = np.random.default_rng(13)
    pred, truth = _random_maps(rng, (21, 16, 9), 12)
    pred, truth = pred.astype(np.uint8), truth.astype(np.int16)
    ref = confusion_matrix(pred, truth)
    assert pred.flags.c_contiguous and truth.flags.c_contiguous
    F = np.asfortranarray
    variants = {
        "both F": (F(pred), F(truth)),
        "pred F, truth C": (F(pred), truth),
        "pred C, truth F": (pred, F(truth)),
        "transposed views": (pred.T.copy().T, truth.T.copy().T),
        "reversed": (pred[::-1].copy()[::-1], truth[::-1].copy()[::-1]),
    }
    for name, (p, t) in variants.items():
        got = confusion_matrix(p, t)
        np.testing.assert_array_equal(got[0], ref[0], err_msg=name)
        np.testing.assert_array_equal(got[1], ref[1], err_msg=name)
    # non-contiguous (strided) views: compare with contiguous copies of the same views
    big_p, big_t = np.tile(pred, (2, 1, 2)), F(np.tile(truth, (2, 1, 2)))
    sp, st = big_p[::2, :, 1::2], big_t[::2, :, 1::2]
    assert not sp.flags.c_contiguous and not st.flags.f_contiguous
    got, want = confusion_matrix(sp, st), confusion_matrix(sp.copy(), st.copy())
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(confusion_matrix(pred.T, truth.T)[1], ref[1])  # both transposed: same voxels


def test_inputs_are_not_modified_or_copied_needlessly() -> None:
    pred = np.asfortranarray(np.arange(60, dtype=np.uint8).reshape(3, 4, 5) % 7)
    truth = np.asfortranarray(np.arange(60, dtype=np.uint8).reshape(3, 4, 5) % 5)
    before = pred.copy(), truth.copy()
    ft, fp = overlap._flat_pair(truth, pred)
    assert np.shares_memory(ft, truth) and np.shares_memory(fp, pred)
    confusion_matrix(pred, truth)
    np.testing.assert_array_equal(pred, before[0])
    np.testing.assert_array_equal(truth, before[1])


def test_validation_errors() -> None:
    a = np.zeros((4, 5), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"identical shapes.*pred \(4, 5\).*truth \(5, 4\)"):
        confusion_matrix(a, a.T.copy())
    with pytest.raises(TypeError, match=r"pred has dtype float32.*[Cc]onvert"):
        dice(a.astype(np.float32), a)
    with pytest.raises(TypeError, match=r"truth has dtype float64"):
        iou(a, a.astype(np.float64))
    neg = a.astype(np.int16)
    neg[0, 0] = -1
    with pytest.raises(ValueError, match=r"truth contains negative label values"):
        confusion(a, neg)
    with pytest.raises(ValueError, match=r"pred contains negative"):
        confusion(neg, a)
    with pytest.raises(ValueError, match=r"int64"):
        confusion(np.full(3, 2**63, dtype=np.uint64), np.zeros(3, dtype=np.uint64))
    with pytest.raises(ValueError, match=r">= 0"):
        dice(a, a, labels=[-1])
    with pytest.raises(ValueError, match=r"region"):
        dice(a, a, labels=[()])
    with pytest.raises(TypeError, match=r"ints or tuples"):
        dice(a, a, labels=[1.0])


def _torch_confusion(pred: np.ndarray, truth: np.ndarray, n: int) -> np.ndarray:
    """The previous kernel's counting: ``torch.bincount`` of ``truth * n + pred`` (int64 codes)."""
    code = torch.from_numpy(truth.astype(np.int64).ravel() * n + pred.astype(np.int64).ravel())
    return torch.bincount(code, minlength=n * n).numpy().reshape(n, n)


@pytest.mark.parametrize(("n_labels", "dtype"), [(2, np.uint8), (14, np.uint8), (16, np.uint8), (17, np.int16)])
def test_numpy_counts_equal_the_torch_path(n_labels: int, dtype: type) -> None:
    """uint8 codes up to 16 labels (256 bins), int16 above: the matrix equals torch.bincount's exactly, and so do
    Dice and IoU computed from it (in either memory order)."""
    rng = np.random.default_rng(n_labels)
    pred, truth = _random_maps(rng, (37, 29, 23), n_labels)
    pred[0, 0, 0], truth[0, 0, 1] = n_labels - 1, n_labels - 1  # the largest id is present
    pred, truth = pred.astype(dtype), truth.astype(dtype)
    values, matrix = confusion_matrix(np.asfortranarray(pred), np.asfortranarray(truth))
    reference = _torch_confusion(pred, truth, n_labels)
    present = (reference.sum(axis=0) > 0) | (reference.sum(axis=1) > 0)
    np.testing.assert_array_equal(values, np.flatnonzero(present))
    np.testing.assert_array_equal(matrix, reference[np.ix_(present, present)])
    ours = confusion(pred, truth)
    for label, counts in ours.items():
        tp = int(reference[label, label])
        n_ref, n_pred = int(reference[label].sum()), int(reference[:, label].sum())
        assert counts == LabelCounts(tp=tp, fp=n_pred - tp, fn=n_ref - tp, n_pred=n_pred, n_ref=n_ref)
