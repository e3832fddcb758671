"""One sample described: its means, percentiles, spread, outliers and the range a plot should show."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import PerflabError
from .checks import positive, samples


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean, summed with math.fsum so long runs do not lose precision."""
    values = samples(xs, 1, "a mean")
    return math.fsum(values) / len(values)


def harmonic_mean(xs: Sequence[float]) -> float:
    """Harmonic mean of positive values: the right average for rates (ops/s) over equal work."""
    values = positive(xs, 1, "a harmonic mean")
    return len(values) / math.fsum(1.0 / x for x in values)


def geometric_mean(xs: Sequence[float]) -> float:
    """Geometric mean of positive values: the right average for ratios (speedups)."""
    values = positive(xs, 1, "a geometric mean")
    return math.exp(math.fsum(math.log(x) for x in values) / len(values))


def percentile(xs: Sequence[float], q: float) -> float:
    """q-th percentile (q in 0..100) by linear interpolation, exactly like numpy.percentile's default."""
    if not 0 <= q <= 100:
        raise PerflabError(f"percentile must be between 0 and 100, got {q}")
    return percentile_of_sorted(sorted(samples(xs, 1, "a percentile")), q)


def percentile_of_sorted(values: Sequence[float], q: float) -> float:
    """percentile's interpolation on values already checked and sorted: a bootstrap's two ends need one sort of
    its thousands of resampled statistics, not one each."""
    pos = q / 100 * (len(values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    frac = pos - lo
    a, b = float(values[lo]), float(values[hi])
    # numpy's lerp: interpolate from the nearer end so the result stays inside [a, b].
    return a + (b - a) * frac if frac < 0.5 else b - (b - a) * (1 - frac)


def median(xs: Sequence[float]) -> float:
    """Middle value (mean of the two middle ones for even n): robust to a few slow outliers."""
    values = sorted(samples(xs, 1, "a median"))
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def stdev(xs: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1), two-pass so large offsets do not cancel digits."""
    values = samples(xs, 2, "a standard deviation")
    m = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((x - m) ** 2 for x in values) / (len(values) - 1))


def coefficient_of_variation(xs: Sequence[float]) -> float:
    """stdev / |mean| as a fraction (0.05 = 5%): spread relative to size, comparable across benchmarks."""
    m = mean(xs)
    if m == 0:
        raise PerflabError("coefficient of variation is undefined for samples with mean 0")
    return stdev(xs) / abs(m)


def tukey_outliers(xs: Sequence[float]) -> list[int]:
    """Indices of samples outside Tukey's fences [Q1 - 1.5 IQR, Q3 + 1.5 IQR]."""
    values = samples(xs, 1, "outliers")
    q1, q3 = percentile(values, 25), percentile(values, 75)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [i for i, x in enumerate(values) if x < low or x > high]


def plot_range(values: Sequence[float], fence: float = 3.0) -> tuple[float, float]:
    """An axis range for a strip plot: every point inside Tukey's far fences (quartiles -/+ 3 IQR), padded 5%.

    One outlier at 50x the rest must not squeeze every other point into one pixel; the plot marks it at the edge.
    """
    q1, q3 = np.percentile(values, [25, 75])
    spread = (q3 - q1) or abs(q3) * 0.05 or 1.0
    inside = [v for v in values if q1 - fence * spread <= v <= q3 + fence * spread]
    low, high = min(inside), max(inside)
    pad = (high - low) * 0.05 or abs(high) * 0.05 or 1.0
    return float(low - pad), float(high + pad)
