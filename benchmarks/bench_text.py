"""Benchmark corpus BLEU-1..4 + ROUGE-L + CIDEr-D on 10,000 real report pairs against pycocoevalcap.

Run: ``.venv/bin/python benchmarks/bench_text.py``

Reports: the Indiana University chest X-ray reports shipped in ``torchxrayvision==1.5.7`` (findings +
impression, 3,425 with findings). Pair ``i`` has reference report ``i mod N`` and, as the "prediction", report
``(7 i + 1) mod N`` (real radiology text of realistic length and vocabulary, mostly normal studies). Both sides
use the same tokens (:func:`trackeval.metrics.text.tokenize`). Measured in one run, one repeat each (the
reference takes seconds): (a) trackeval ``NgramCorpus`` + ``corpus_bleu`` + ``rouge_l`` + ``cider_d``;
(b) pycocoevalcap ``Bleu(4)``, ``Rouge()``, ``Cider()`` ``compute_score`` on the same data. Target: (b)/(a) >= 3
with values equal to 1e-9.
"""

from __future__ import annotations

import time

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge

from trackeval.demo.xray_data import iu_xray_reports
from trackeval.metrics.text import NgramCorpus, cider_d, corpus_bleu, rouge_l, tokenize

PAIRS = 10_000


def main() -> None:
    reports = [tokenize(t) for t in iu_xray_reports().values()]
    n = len(reports)
    hyps = [reports[(7 * i + 1) % n] for i in range(PAIRS)]
    refs = [[reports[i % n]] for i in range(PAIRS)]
    t = time.perf_counter()
    corpus = NgramCorpus(hyps, refs)
    ours = [*corpus_bleu(corpus), rouge_l(hyps, refs).mean(), cider_d(corpus).mean()]
    t_ours = time.perf_counter() - t
    gts = {i: [" ".join(r) for r in rs] for i, rs in enumerate(refs)}
    res = {i: [" ".join(h)] for i, h in enumerate(hyps)}
    t = time.perf_counter()
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = Rouge().compute_score(gts, res)
    cider, _ = Cider().compute_score(gts, res)
    t_ref = time.perf_counter() - t
    theirs = [*bleu, rouge, cider]
    names = ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "rouge_l", "cider"]
    print(f"{PAIRS} report pairs from {n} IU X-ray reports, mean {np.mean([len(h) for h in hyps]):.1f} tokens")
    for name, a, b in zip(names, ours, theirs, strict=True):
        print(f"{name:8s} trackeval {a:.12f}  pycocoevalcap {b:.12f}  |diff| {abs(a - b):.1e}")
    print(f"max |diff| {max(abs(a - b) for a, b in zip(ours, theirs, strict=True)):.1e} (target <= 1e-9)")
    print(f"trackeval BLEU+ROUGE-L+CIDEr: {t_ours:7.2f} s")
    print(f"pycocoevalcap scorers:        {t_ref:7.2f} s")
    print(f"ratio pycocoevalcap / trackeval: {t_ref / t_ours:6.1f}x (target >= 3)")


if __name__ == "__main__":
    main()
