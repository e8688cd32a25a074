"""Report-generation metrics with pycocoevalcap semantics: corpus BLEU-1..4, ROUGE-L, CIDEr-D.

Inputs are already tokenised: one hypothesis (a list of tokens) per item and one or more references (lists of
tokens) per item. :func:`tokenize` is the documented tokenisation of the X-ray benchmark (lower-case,
punctuation and symbols deleted, split on whitespace; R2Gen-style, so ``"x-ray"`` becomes ``"xray"``). Feeding
``" ".join(tokens)`` to pycocoevalcap's ``Bleu(4)``, ``Rouge()`` and ``Cider()`` gives the same numbers
(tested to 1e-9); the difference is speed: every n-gram is coded as an integer once for the whole corpus, and
counting, clipping, idf and cosine similarities are array operations instead of per-sentence dictionaries.

* **BLEU** (``bleu/bleu_scorer.py``, option ``closest``): clipped n-gram matches and candidate n-gram counts
  are summed over the corpus; ``BLEU_k = (prod_{j<=k} (correct_j + 1e-15) / (guess_j + 1e-9)) ** (1/k)`` times
  the brevity penalty ``exp(1 - reflen / testlen)`` when ``testlen < reflen``, with ``reflen`` the sum over
  items of the reference length closest to the hypothesis length (ties: the shorter reference).
* **ROUGE-L** (``rouge/rouge.py``): per item, LCS length against each reference; ``P = max_r LCS / |hyp|``,
  ``R = max_r LCS / |ref|`` (maxima taken separately), ``F = (1 + b^2) P R / (R + b^2 P)`` with ``b = 1.2``,
  0 when P or R is 0; corpus score = mean over items. An empty token list counts as pycocoevalcap's
  ``"".split(" ") == [""]``: length 1, matching only another empty list.
* **CIDEr-D** (``cider/cider_scorer.py``): n = 1..4 tf-idf vectors with ``idf = log(N_items) - log(max(1,
  df))``, df counted over the items' reference sets (so scores depend on the evaluated set); per reference and
  n the clipped cosine ``sum min(h, r) r / (|h| |r|)`` times ``exp(-delta^2 / (2 sigma^2))`` with ``delta`` the
  difference of the **bigram** counts of hypothesis and reference (pycocoevalcap's ``length``); the item score
  is the mean over n, averaged over references, times 10; corpus score = mean over items.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Tokens = Sequence[str]

_PUNCT = re.compile(r"[^\w\s]|_")


def tokenize(text: str) -> list[str]:
    """Lower-case, delete punctuation and symbols (anything but letters, digits and whitespace), split.

    Examples:
        >>> from trackeval.metrics.text import tokenize
        >>> tokenize("The X-ray is clear.")
        ['the', 'xray', 'is', 'clear']
    """
    return _PUNCT.sub("", text.lower()).split()


def _gram_ids(
    tok: np.ndarray, seq_of: np.ndarray, remaining: np.ndarray, v: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every 1..n-gram occurrence as ``(sequence, gram id)``, and the order of each gram id.

    ``tok``: token ids (``< v``) of all sequences back to back; ``seq_of``: the sequence of each token;
    ``remaining``: tokens from each position to its sequence's end. Ids are dense and unique across orders
    (the unigrams first: ids ``0..v-1``)."""
    code = tok.copy()
    n_grams = 0
    keys, orders = [], []
    for k in range(1, n + 1):
        at = np.flatnonzero(remaining >= k)
        if k > 1:  # (k-1)-gram id at i, then the token at i + k - 1: a unique pair -> a dense k-gram id
            uniq, inv = np.unique(code[at] * v + tok[at + k - 1], return_inverse=True)
            code[at] = inv
        else:
            uniq = np.arange(v)
        keys.append((seq_of[at], code[at] + n_grams))
        orders.append(np.full(uniq.size, k, dtype=np.int8))
        n_grams += uniq.size
    seq = np.concatenate([s for s, _ in keys]) if keys else np.zeros(0, np.int64)
    gram = np.concatenate([g for _, g in keys]) if keys else np.zeros(0, np.int64)
    return seq, gram, np.concatenate(orders) if orders else np.zeros(0, np.int8)


class NgramCorpus:
    """Integer-coded n-gram counts of hypotheses and their references (shared by BLEU and CIDEr).

    Sequences are numbered hypotheses first (``0 .. n_items - 1``), then references in item order.
    Attributes (all numpy arrays): ``ref_item`` (item of each reference), ``lengths`` (tokens per sequence),
    and the sparse counts ``entry_seq``, ``entry_gram``, ``entry_order`` (1..n), ``entry_count`` sorted by
    (sequence, gram id); gram ids are unique across orders.

    Raises:
        ValueError: hypotheses and references differ in number, or an item has no reference.
    """

    def __init__(self, hyps: Sequence[Tokens], refs: Sequence[Sequence[Tokens]], n: int = 4) -> None:
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference sets")
        if any(len(r) == 0 for r in refs):
            raise ValueError("every item needs at least one reference")
        self.n = n
        self.n_items = len(hyps)
        self.ref_item = np.repeat(np.arange(self.n_items), [len(r) for r in refs])
        seqs: list[Tokens] = [*hyps, *(r for rs in refs for r in rs)]
        self.lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        flat = list(itertools.chain.from_iterable(seqs))
        vocab = {t: i for i, t in enumerate(dict.fromkeys(flat))}  # C-level interning, first-seen order
        tok = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        seq_of = np.repeat(np.arange(len(seqs)), self.lengths)
        offsets = np.r_[0, np.cumsum(self.lengths)[:-1]]
        remaining = self.lengths[seq_of] - (np.arange(tok.size) - offsets[seq_of])  # tokens from here to the end
        seq, gram, self.gram_order = _gram_ids(tok, seq_of, remaining, max(len(vocab), 1), n)
        n_grams = self.n_grams = self.gram_order.size
        uk, counts = np.unique(seq * max(n_grams, 1) + gram, return_counts=True)
        self.entry_seq = uk // max(n_grams, 1)
        self.entry_gram = uk % max(n_grams, 1)
        self.entry_order = self.gram_order[self.entry_gram].astype(np.int64)
        self.entry_count = counts.astype(np.int64)

    def hyp_entries(self) -> np.ndarray:
        """Boolean mask of the entries that belong to hypotheses."""
        return self.entry_seq < self.n_items

    def item_of(self, seq: np.ndarray) -> np.ndarray:
        """Item index of sequence numbers (hypotheses and references)."""
        return np.where(seq < self.n_items, seq, self.ref_item[np.maximum(seq - self.n_items, 0)])


def _sum_by(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Dense ``shape`` float64 matrix of ``values`` summed per (row, col) (``np.add.at``, 10x faster)."""
    flat = np.bincount(rows * shape[1] + cols, weights=values, minlength=shape[0] * shape[1])
    return flat.reshape(shape)


@dataclass(frozen=True)
class BleuStats:
    """Per-item BLEU sufficient statistics; sum them over items (or weight them) for corpus BLEU.

    ``correct`` and ``guess``: ``(n_items, n)`` clipped matches and candidate n-grams of each order;
    ``testlen``, ``reflen``: ``(n_items,)`` hypothesis length and closest reference length.
    """

    correct: np.ndarray
    guess: np.ndarray
    testlen: np.ndarray
    reflen: np.ndarray


def bleu_stats(corpus: NgramCorpus) -> BleuStats:
    """Clipped n-gram matches (clip = max count over the item's references), guesses and lengths per item.

    Examples:
        "a cat sat on the mat" against "the cat sat on the mat": 5 of 6 unigrams, 4 of 5 bigrams, 3 of 4
        trigrams and 2 of 3 four-grams match.

        >>> from trackeval.metrics.text import NgramCorpus, bleu_stats
        >>> hyp = "a cat sat on the mat".split()
        >>> ref = "the cat sat on the mat".split()
        >>> s = bleu_stats(NgramCorpus([hyp], [[ref]]))
        >>> s.correct.tolist(), s.guess.tolist(), s.testlen.tolist(), s.reflen.tolist()
        ([[5, 4, 3, 2]], [[6, 5, 4, 3]], [6], [6])
    """
    n, items = corpus.n, corpus.n_items
    hyp = corpus.hyp_entries()
    ref = ~hyp
    # max count of each (item, gram) over the item's references
    g = max(corpus.n_grams, 1)
    ref_key = corpus.item_of(corpus.entry_seq[ref]) * g + corpus.entry_gram[ref]
    order = np.argsort(ref_key, kind="stable")
    ref_key, ref_count = ref_key[order], corpus.entry_count[ref][order]
    first = np.flatnonzero(np.r_[True, ref_key[1:] != ref_key[:-1]]) if ref_key.size else np.zeros(0, np.int64)
    max_key = ref_key[first]
    max_count = np.maximum.reduceat(ref_count, first) if first.size else np.zeros(0, np.int64)
    hyp_key = corpus.entry_seq[hyp] * g + corpus.entry_gram[hyp]
    pos = np.searchsorted(max_key, hyp_key)
    found = pos < max_key.size
    found[found] = max_key[pos[found]] == hyp_key[found]
    clip = np.zeros(hyp_key.size, dtype=np.int64)
    clip[found] = np.minimum(corpus.entry_count[hyp][found], max_count[pos[found]])
    correct = _sum_by(corpus.entry_seq[hyp], corpus.entry_order[hyp] - 1, clip, (items, n)).astype(np.int64)
    testlen = corpus.lengths[:items]
    guess = np.maximum(0, testlen[:, None] - np.arange(n)[None, :])
    # closest reference length, ties to the shorter: minimise (|l - t|, l) lexicographically
    ref_len = corpus.lengths[items:]
    t = testlen[corpus.ref_item]
    rank = np.abs(ref_len - t) * (int(ref_len.max(initial=0)) + 1) + ref_len
    starts = np.r_[0, np.cumsum(np.bincount(corpus.ref_item, minlength=items))[:-1]]
    best = np.minimum.reduceat(rank, starts) if items else np.zeros(0, np.int64)
    reflen = best % (int(ref_len.max(initial=0)) + 1)
    return BleuStats(correct, guess, testlen, reflen)


def bleu_from_stats(correct: np.ndarray, guess: np.ndarray, testlen: np.ndarray, reflen: np.ndarray) -> np.ndarray:
    """BLEU-1..n from (summed) statistics, pycocoevalcap's arithmetic; leading axes broadcast.

    ``correct``/``guess``: ``(..., n)``; ``testlen``/``reflen``: ``(...)``. Returns ``(..., n)``. Pass the
    corpus sums for corpus BLEU, one item's row for its sentence BLEU, or weighted sums for a bootstrap.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.text import bleu_from_stats
        >>> np.round(bleu_from_stats([5, 4, 3, 2], [6, 5, 4, 3], 6, 6), 4).tolist()
        [0.8333, 0.8165, 0.7937, 0.7598]
        >>> np.round(bleu_from_stats([3], [3], 3, 6), 4).tolist()  # brevity penalty exp(1 - 6 / 3)
        [0.3679]
    """
    correct = np.asarray(correct, dtype=np.float64)
    guess = np.asarray(guess, dtype=np.float64)
    out = np.empty(correct.shape)
    acc = np.ones(correct.shape[:-1])
    for k in range(correct.shape[-1]):
        acc = acc * ((correct[..., k] + 1e-15) / (guess[..., k] + 1e-9))
        out[..., k] = acc ** (1.0 / (k + 1))
    ratio = (np.asarray(testlen, dtype=np.float64) + 1e-15) / (np.asarray(reflen, dtype=np.float64) + 1e-9)
    with np.errstate(divide="ignore"):
        penalty = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
    return out * penalty[..., None]


def corpus_bleu(corpus: NgramCorpus) -> np.ndarray:
    """Corpus BLEU-1..n, shape ``(n,)`` (``Bleu(n).compute_score(...)[0]``).

    Examples:
        Same lengths (no brevity penalty); BLEU-k is the geometric mean of the precisions 5/6, 4/5, 3/4, 2/3
        up to order k, e.g. ``BLEU-2 = sqrt(5/6 * 4/5)``:

        >>> import numpy as np
        >>> from trackeval.metrics.text import NgramCorpus, corpus_bleu
        >>> hyp = "a cat sat on the mat".split()
        >>> ref = "the cat sat on the mat".split()
        >>> np.round(corpus_bleu(NgramCorpus([hyp], [[ref]])), 4).tolist()
        [0.8333, 0.8165, 0.7937, 0.7598]
    """
    s = bleu_stats(corpus)
    return bleu_from_stats(s.correct.sum(0), s.guess.sum(0), s.testlen.sum(), s.reflen.sum())


def _lcs(a: Tokens, b: Tokens) -> int:
    """LCS length, bit-parallel (Allison-Dix / Hyyro): one big-integer step per token of ``b``."""
    masks: dict[str, int] = {}
    for i, t in enumerate(a):
        masks[t] = masks.get(t, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for t in b:
        u = v & masks.get(t, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(hyps: Sequence[Tokens], refs: Sequence[Sequence[Tokens]], beta: float = 1.2) -> np.ndarray:
    """ROUGE-L F-score per item, shape ``(n_items,)`` (``Rouge().compute_score(...)[1]``).

    Examples:
        Item 1: LCS "cat sat on the mat" (5), ``P = R = 5/6``. Item 2: LCS 3, ``P = 1``, ``R = 1/2``, so
        ``F = 2.44 * 0.5 / (0.5 + 1.44) = 0.6289``.

        >>> import numpy as np
        >>> from trackeval.metrics.text import rouge_l
        >>> ref = "the cat sat on the mat".split()
        >>> hyps = ["a cat sat on the mat".split(), "the cat sat".split()]
        >>> np.round(rouge_l(hyps, [[ref], [ref]]), 4).tolist()
        [0.8333, 0.6289]
    """
    out = np.zeros(len(hyps))
    b2 = beta * beta
    for i, (h, rs) in enumerate(zip(hyps, refs, strict=True)):
        p_max = r_max = 0.0
        for r in rs:
            if not h or not r:  # pycocoevalcap splits "" into [""]: length 1, matches only another ""
                lcs = int(not h and not r)
            else:
                lcs = _lcs(r, h) if len(r) >= len(h) else _lcs(h, r)  # iterate the shorter one
            p_max = max(p_max, lcs / max(len(h), 1))
            r_max = max(r_max, lcs / max(len(r), 1))
        if p_max and r_max:
            out[i] = (1 + b2) * p_max * r_max / (r_max + b2 * p_max)
    return out


def cider_d(corpus: NgramCorpus, sigma: float = 6.0) -> np.ndarray:
    """CIDEr-D per item, shape ``(n_items,)`` (``Cider().compute_score(...)[1]``); 0 for an empty corpus.

    Examples:
        Two items with disjoint vocabularies (every n-gram has idf ``log 2``): a hypothesis equal to its
        reference scores the maximum 10, one that shares no n-gram with its reference scores 0.

        >>> import numpy as np
        >>> from trackeval.metrics.text import NgramCorpus, cider_d
        >>> refs = [["the cat sat on the mat".split()], ["a dog ran in a park".split()]]
        >>> hyps = ["the cat sat on the mat".split(), "the cat sat on the mat".split()]
        >>> np.round(cider_d(NgramCorpus(hyps, refs)), 4).tolist()
        [10.0, 0.0]
    """
    n, items = corpus.n, corpus.n_items
    if items == 0:
        return np.zeros(0)
    hyp = corpus.hyp_entries()
    g = max(corpus.n_grams, 1)
    # document frequency: number of items whose reference set holds the gram
    ref_item_gram = np.sort(corpus.item_of(corpus.entry_seq[~hyp]) * g + corpus.entry_gram[~hyp])
    ref_item_gram = ref_item_gram[np.r_[True, ref_item_gram[1:] != ref_item_gram[:-1]]]  # np.unique, 30x faster
    df = np.bincount(ref_item_gram % g, minlength=g).astype(np.float64)
    idf = math.log(float(items)) - np.log(np.maximum(1.0, df))
    weight = corpus.entry_count * idf[corpus.entry_gram]
    n_seq = corpus.lengths.size
    norm = np.sqrt(_sum_by(corpus.entry_seq, corpus.entry_order - 1, weight**2, (n_seq, n)))
    # clipped dot products: hypothesis entries joined with the reference entries of the same item and gram
    hyp_key = corpus.entry_seq[hyp] * g + corpus.entry_gram[hyp]  # sorted: entries are sorted by (seq, gram)
    ref_idx = np.flatnonzero(~hyp)
    ref_key = corpus.item_of(corpus.entry_seq[ref_idx]) * g + corpus.entry_gram[ref_idx]
    pos = np.searchsorted(hyp_key, ref_key)
    ok = pos < hyp_key.size
    ok[ok] = hyp_key[pos[ok]] == ref_key[ok]
    w_hyp = weight[hyp][pos[ok]]
    w_ref = weight[ref_idx[ok]]
    n_refs = corpus.lengths.size - items
    matched = ref_idx[ok]
    dot = _sum_by(
        corpus.entry_seq[matched] - items,
        corpus.entry_order[matched] - 1,
        np.minimum(w_hyp, w_ref) * w_ref,
        (n_refs, n),
    )
    nh = norm[corpus.ref_item]
    nr = norm[items:]
    both = (nh != 0) & (nr != 0)
    val = np.where(both, dot / np.where(both, nh * nr, 1.0), dot)
    bigrams = np.maximum(corpus.lengths - 1, 0)  # pycocoevalcap's "length" counts bigrams
    delta = (bigrams[:items][corpus.ref_item] - bigrams[items:]).astype(np.float64)
    val = val * np.e ** (-(delta**2) / (2 * sigma**2))[:, None]
    per_ref = val.mean(axis=1)
    n_per_item = np.bincount(corpus.ref_item, minlength=items)
    return np.bincount(corpus.ref_item, weights=per_ref, minlength=items) / n_per_item * 10.0
