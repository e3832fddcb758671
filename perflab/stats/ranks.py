"""The rank tests, Mann-Whitney U and Wilcoxon's signed rank, computed as scipy.stats computes them, without it.

A verdict needs one of them, and scipy.stats takes 1.2 s to import on a laptop and about 16 s in a guest under TCG;
scipy.special, behind intervals.normal_cdf, a third of that. tests/test_stats.py holds them to scipy.stats's numbers.
"""

from __future__ import annotations

import math

import numpy as np

from .intervals import normal_cdf

WILCOXON_EXACT_MAX = 50  # up to this many differences without ties or zeros: the exact null distribution
WILCOXON_ENUMERATED_MAX = 13  # up to this many with ties or zeros: every one of the 2**n sign flips
PERMUTATION_TOLERANCE = 1e-14  # relative: a flip's statistic this near the observed one counts as equal


def average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks from 1 in the order of `values`, each group of ties sharing its mean rank; and each group's size."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, len(values)))
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(starts + 1 + (sizes - 1) / 2, sizes)
    return ranks, sizes


def mann_whitney(a: list[float], b: list[float]) -> tuple[float, float]:
    """U of a, and the two-sided p of the normal approximation with the tie and continuity corrections (scipy's
    method="asymptotic"). Not for samples whose values are all one: their spread is 0."""
    n1, n2 = len(a), len(b)
    ranks, sizes = average_ranks(np.asarray(a + b, dtype=float))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    larger = max(u1, n1 * n2 - u1)
    n = n1 + n2
    spread = math.sqrt(n1 * n2 / 12 * ((n + 1) - float((sizes**3 - sizes).sum()) / (n * (n - 1))))
    z = (larger - n1 * n2 / 2 - 0.5) / spread
    return u1, min(1.0, normal_cdf(-z) * 2)


def wilcoxon_signed_rank(differences: list[float]) -> float:
    """Two-sided p of Wilcoxon's signed-rank test, zeros dropped (scipy.stats.wilcoxon's defaults): the exact
    distribution for up to 50 differences without ties or zeros, every sign flip for up to 13 with them, the normal
    approximation with the tie correction otherwise. Not for differences that are all zero."""
    d = np.asarray(differences, dtype=float)
    nonzero = d[d != 0]
    ranks, sizes = average_ranks(np.abs(nonzero))
    positive = float(ranks[nonzero > 0].sum())
    exact = not (sizes > 1).any() and len(nonzero) == len(d)
    if exact and len(d) <= WILCOXON_EXACT_MAX:
        return _exact_p(positive, len(d))
    if len(d) <= WILCOXON_ENUMERATED_MAX:
        return _sign_flip_p(positive, ranks)
    count = len(nonzero)
    spread = math.sqrt((count * (count + 1.0) * (2.0 * count + 1.0) - float((sizes**3 - sizes).sum()) / 2) / 24)
    z = (positive - count * (count + 1.0) * 0.25) / spread
    return normal_cdf(-abs(z)) * 2


def _exact_p(positive: float, n: int) -> float:
    """2 * the smaller tail of the sum of positive ranks, from its exact distribution when no rank is shared."""
    pmf = np.ones(1)
    for k in range(1, n + 1):  # adding rank k, positive or not with probability 1/2 each
        previous, pmf = pmf, np.zeros(k * (k + 1) // 2 + 1)
        pmf[: len(previous)] = previous * 0.5
        pmf[-len(previous):] += previous * 0.5
    middle = n * (n + 1) / 4

    def at_most(k: int) -> float:
        return float(pmf[: k + 1].sum()) if k <= middle else 1 - float(pmf[k + 1:].sum())

    def at_least(k: int) -> float:
        return float(pmf[k:].sum()) if k <= middle else 1 - float(pmf[:k].sum())

    return min(1.0, 2 * min(at_least(math.floor(positive)), at_most(math.ceil(positive))))


def _sign_flip_p(positive: float, ranks: np.ndarray) -> float:
    """2 * the smaller tail of the observed sum of positive ranks among all 2**n sign flips of the nonzero
    differences (flipping a zero changes nothing, so each of these stands for as many flips of the zeros)."""
    n = len(ranks)
    flips = (np.arange(2**n)[:, None] >> np.arange(n)) & 1  # every sign pattern, one row each
    sums = (flips * ranks).sum(axis=1)
    tolerance = abs(PERMUTATION_TOLERANCE * positive)
    below = np.count_nonzero(sums <= positive + tolerance) / 2**n
    above = np.count_nonzero(sums >= positive - tolerance) / 2**n
    return min(1.0, 2 * min(below, above))
