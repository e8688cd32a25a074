"""The normal and Student t distributions the interval corrections need, without importing scipy.

Every evaluation reads its bootstrap intervals at levels from :func:`t_ppf` and :func:`normal_cdf`
(:mod:`trackeval.stats.bootstrap`); ``scipy.stats`` costs about 0.3 s to import, more than a Dice-only run of a
small dataset, so these few functions are written out. The t distribution is needed at integer degrees of
freedom only (clusters - 1), where its CDF has an exact finite series (Abramowitz & Stegun 26.7.3/26.7.4); the
tests compare every function with ``scipy.stats``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

#: beyond this many degrees of freedom the t quantile is the normal one with the Cornish-Fisher terms up to
#: 1/df^3 (Abramowitz & Stegun 26.7.5; error far below 1e-9 there) instead of a series with df/2 terms
_SERIES_MAX_DF = 2000


def _cornish_fisher(z: float, df: int) -> float:
    """The t quantile at the normal quantile ``z`` for large ``df`` (A&S 26.7.5, terms to 1/df^3)."""
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def normal_cdf(x: float) -> float:
    """Standard normal CDF ``Phi(x)``."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _bisect(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The ``x`` in ``[lo, hi]`` with ``f(x) = target`` for an increasing ``f`` (to float precision)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def normal_ppf(p: float) -> float:
    """Standard normal quantile ``Phi^-1(p)`` for ``0 < p < 1`` (``-inf``/``inf`` at 0/1)."""
    if p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return math.inf
    return _bisect(normal_cdf, p, -40.0, 40.0)


def t_cdf(x: float, df: int) -> float:
    """Student t CDF with ``df >= 1`` integer degrees of freedom (exact series; beyond
    :data:`_SERIES_MAX_DF` the inverse of the Cornish-Fisher quantile)."""
    if df < 1 or df != int(df):
        raise ValueError(f"degrees of freedom must be a positive integer, got {df}")
    if df > _SERIES_MAX_DF:
        if abs(x) > 30.0:  # the expansion is monotone in z well beyond |z| = 30 at these df
            return 0.0 if x < 0 else 1.0
        return normal_cdf(_bisect(lambda z: _cornish_fisher(z, df), x, -30.0, 30.0))
    theta = math.atan2(x, math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: 1/2 + (theta + sin cos (1 + 2/3 c^2 + 2.4/3.5 c^4 + ...)) / pi
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 0.5 + (theta + (s * math.cos(theta) * total if df > 1 else 0.0)) / math.pi
    total, term = 0.0, 1.0  # even: 1/2 + sin/2 (1 + 1/2 c^2 + 1.3/2.4 c^4 + ...)
    for k in range(1, df // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return 0.5 + 0.5 * s * total


@functools.lru_cache(maxsize=256)
def t_ppf(p: float, df: int) -> float:
    """Student t quantile with ``df`` integer degrees of freedom, for ``0 < p < 1`` (cached: an evaluation asks
    for the same few levels many times)."""
    if p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return math.inf
    if df > _SERIES_MAX_DF:
        return _cornish_fisher(normal_ppf(p), df)
    return _bisect(lambda x: t_cdf(x, df), p, -1e8, 1e8)
