"""Caption metrics against pycocoevalcap's scorers (same tokens, 1e-9) and the coco-caption demo counts."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge

from trackeval.demo.xray_data import iu_xray_reports
from trackeval.metrics.text import NgramCorpus, bleu_from_stats, bleu_stats, cider_d, corpus_bleu, rouge_l, tokenize


def _reference(hyps, refs):
    gts = {i: [" ".join(r) for r in rs] for i, rs in enumerate(refs)}
    res = {i: [" ".join(h)] for i, h in enumerate(hyps)}
    bleu, bleu_items = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, rouge_items = Rouge().compute_score(gts, res)
    cider, cider_items = Cider().compute_score(gts, res)
    return np.array(bleu), np.array(bleu_items).T, rouge_items, cider_items


def _check(hyps, refs):
    bleu, bleu_items, rouge, cider = _reference(hyps, refs)
    corpus = NgramCorpus(hyps, refs)
    np.testing.assert_allclose(corpus_bleu(corpus), bleu, rtol=0, atol=1e-9)
    s = bleu_stats(corpus)
    np.testing.assert_allclose(bleu_from_stats(s.correct, s.guess, s.testlen, s.reflen), bleu_items, atol=1e-9)
    np.testing.assert_allclose(rouge_l(hyps, refs), rouge, atol=1e-9)
    np.testing.assert_allclose(cider_d(corpus), cider, atol=1e-9)


def test_coco_caption_demo_counts():
    """coco-caption demo (fakecap on val2014): B1..B4 0.579 / 0.404 / 0.279 / 0.191 from the published counts."""
    b = bleu_from_stats(np.array([5732, 2510, 1043, 423]), np.array([9893, 8893, 7893, 6893]), 9893, 9855)
    np.testing.assert_allclose(b, [0.579, 0.404, 0.279, 0.191], atol=5e-4)


def test_brevity_penalty_and_torchmetrics_vector():
    hyp = tokenize("the cat is on the mat")
    refs = [tokenize("there is a cat on the mat"), tokenize("a cat is on the mat")]
    assert corpus_bleu(NgramCorpus([hyp], [refs]))[3] == pytest.approx(0.7598, abs=1e-4)  # torchmetrics docs
    short = NgramCorpus([["a", "b"]], [[["a", "b", "c", "d"]]])
    assert corpus_bleu(short)[0] == pytest.approx(np.exp(1 - 4 / 2), rel=1e-9)


def test_random_corpora_multi_reference_and_empty_hypotheses():
    rng = random.Random(0)
    words = "the a lung heart is normal no effusion pleural left right base opacity clear size mild".split()

    def sentence(lo):
        return [rng.choice(words) for _ in range(rng.randint(lo, 30))]

    hyps = [sentence(0) for _ in range(250)]
    refs = [[sentence(1) for _ in range(rng.randint(1, 4))] for _ in range(250)]
    assert any(not h for h in hyps)
    _check(hyps, refs)


def test_real_iu_xray_reports():
    reports = list(iu_xray_reports().values())[:400]
    hyps = [tokenize(reports[(7 * i + 1) % len(reports)]) for i in range(len(reports))]
    refs = [[tokenize(r)] for r in reports]
    _check(hyps, refs)
    _check([r[0] for r in refs], refs)  # perfect predictions
    assert corpus_bleu(NgramCorpus([r[0] for r in refs], refs))[3] == pytest.approx(1.0)


def test_tokenize():
    assert tokenize("No pleural effusion. Heart size NORMAL; x-ray 2/3 (stable)!") == [
        "no", "pleural", "effusion", "heart", "size", "normal", "xray", "23", "stable",
    ]  # fmt: skip
    assert tokenize("  ...  ") == []
