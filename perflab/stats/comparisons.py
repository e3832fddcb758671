"""Two samples compared (Welch's t-test, Mann-Whitney U, effect sizes), and a power law fitted to sizes and times."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import PerflabError
from . import ranks
from .checks import check_confidence, positive, samples
from .descriptive import mean, stdev
from .intervals import t_cdf, t_quantile


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test: (t, df, two-sided p), t > 0 when mean(a) > mean(b)."""
    xa = samples(a, 2, "a t-test")
    xb = samples(b, 2, "a t-test")
    if stdev(xa) == 0 and stdev(xb) == 0:
        raise PerflabError("both samples are constant, so a t-test is undefined: check that the benchmark really ran")
    error, df = welch_error_and_df(xa, xb)
    t = (mean(xa) - mean(xb)) / error
    return t, df, _two_sided_t_p(t, df)


def welch_error_and_df(a: list[float], b: list[float]) -> tuple[float, float]:
    """The standard error of mean(b) - mean(a) and its Welch-Satterthwaite degrees of freedom."""
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    return math.sqrt(va + vb), (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))


def _two_sided_t_p(t: float, df: float) -> float:
    return 2 * t_cdf(-abs(t), df)


def mean_difference(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """mean(b) - mean(a) with Welch's CI and two-sided p: (difference, low, high, p).

    For counts per operation, where a ratio is useless because the control is near 0. Two constant
    samples (every round counted exactly the same) have an exact difference: its CI is the point, and
    p is 0 unless the difference is 0.
    """
    check_confidence(confidence)
    xa = samples(a, 2, "a difference of means")
    xb = samples(b, 2, "a difference of means")
    difference = mean(xb) - mean(xa)
    if stdev(xa) == 0 and stdev(xb) == 0:
        return difference, difference, difference, 0.0 if difference else 1.0
    error, df = welch_error_and_df(xa, xb)
    half_width = t_quantile((1 + confidence) / 2, df) * error
    return difference, difference - half_width, difference + half_width, _two_sided_t_p(difference / error, df)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mann-Whitney U of a and its two-sided p (normal approximation, tie and continuity corrected).

    It compares ranks, so it assumes nothing about the shape of the timings (they are rarely normal).
    """
    xa = samples(a, 1, "a Mann-Whitney test")
    xb = samples(b, 1, "a Mann-Whitney test")
    if len(set(xa + xb)) == 1:
        return len(xa) * len(xb) / 2, 1.0  # every value identical: no evidence of any difference
    return ranks.mann_whitney(xa, xb)


def hedges_g(a: Sequence[float], b: Sequence[float]) -> float:
    """Standardized mean difference (b - a) / pooled stdev, times Hedges' small-sample correction."""
    xa = samples(a, 2, "an effect size")
    xb = samples(b, 2, "an effect size")
    df = len(xa) + len(xb) - 2
    pooled = math.sqrt(((len(xa) - 1) * stdev(xa) ** 2 + (len(xb) - 1) * stdev(xb) ** 2) / df)
    if pooled == 0:
        raise PerflabError("both samples are constant, so the effect size is undefined: check the benchmark ran")
    return (mean(xb) - mean(xa)) / pooled * (1 - 3 / (4 * df - 1))


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """P(b > a) - P(b < a) over all pairs, in [-1, 1]: a rank effect size immune to outliers."""
    xa = sorted(samples(a, 1, "an effect size"))
    xb = samples(b, 1, "an effect size")
    greater = sum(bisect_left(xa, y) for y in xb)
    less = sum(len(xa) - bisect_right(xa, y) for y in xb)
    return (greater - less) / (len(xa) * len(xb))


@dataclass(frozen=True)
class PowerLaw:
    """time = prefactor * n ** exponent, fitted on log-log axes, with the exponent's confidence interval."""

    exponent: float
    low: float
    high: float
    prefactor: float
    stderr: float  # of the exponent
    df: int  # the residuals' degrees of freedom: points - 2
    confidence: float

    def p_above(self, exponent: float) -> float:
        """One-sided p-value that the true exponent is not above `exponent` (t test on the slope)."""
        if self.stderr == 0:
            return 0.0 if self.exponent > exponent else 1.0
        # P(T > t) as P(T < -t): 1 - cdf would round a tiny p to 0
        return t_cdf((exponent - self.exponent) / self.stderr, self.df)


# ANCHOR: power_law_fit
def power_law_fit(sizes: Sequence[float], times: Sequence[float], confidence: float = 0.95) -> PowerLaw:
    """Fit times = a * sizes ** k by least squares on log(time) against log(size).

    The slope of the log-log line is the scaling exponent k: 1 for linear work, 2 for quadratic. Its
    interval is Student's t on the slope's standard error. Pass every measurement (several per size), not
    one mean per size, so the spread within a size counts.
    """
    check_confidence(confidence)
    x = [math.log(v) for v in positive(sizes, 3, "a power-law fit")]
    y = [math.log(v) for v in positive(times, 3, "a power-law fit")]
    if len(x) != len(y):
        raise PerflabError(f"a power-law fit needs one time per size, got {len(x)} sizes and {len(y)} times")
    mx, my = mean(x), mean(y)
    sxx = math.fsum((a - mx) ** 2 for a in x)
    if sxx == 0:
        raise PerflabError("every size is the same, so no exponent can be fitted: measure at two sizes or more")
    slope = math.fsum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx
    residual = math.fsum((b - my - slope * (a - mx)) ** 2 for a, b in zip(x, y))
    df = len(x) - 2
    stderr = math.sqrt(residual / df / sxx)
    half = t_quantile((1 + confidence) / 2, df) * stderr
    return PowerLaw(slope, slope - half, slope + half, math.exp(my - slope * mx), stderr, df, confidence)
# ANCHOR_END: power_law_fit


