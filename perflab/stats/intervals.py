"""The distributions behind the intervals, and confidence intervals: Student's t, and the bootstrap's."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import PerflabError
from .checks import check_confidence, check_df, check_probability, positive, samples, scipy_special
from .descriptive import harmonic_mean, mean, median, percentile_of_sorted, stdev

_BOOTSTRAP_CHUNK = 1_000_000  # resampled values drawn per numpy call (bounds memory)


def normal_cdf(x: float) -> float:
    """P(Z <= x) for a standard normal Z."""
    return float(scipy_special().ndtr(x))


def normal_quantile(p: float) -> float:
    """x with normal_cdf(x) = p."""
    check_probability(p)
    return float(scipy_special().ndtri(p))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (possibly fractional, or infinite) degrees of freedom."""
    check_df(df)
    if math.isnan(t):
        raise PerflabError("t_cdf got t = nan: check the samples it was computed from")
    return float(scipy_special().stdtr(df, t))


def t_quantile(p: float, df: float) -> float:
    """t with t_cdf(t, df) = p."""
    check_probability(p)
    check_df(df)
    if p in (0.0, 1.0):  # the ends, which scipy.stats's t.ppf handles before calling stdtrit (+inf at both)
        return -math.inf if p == 0.0 else math.inf
    return float(scipy_special().stdtrit(df, p))


def mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval for the mean: mean +- t * stdev / sqrt(n)."""
    check_confidence(confidence)
    values = samples(xs, 2, "a confidence interval")
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * stdev(values) / math.sqrt(len(values))
    m = mean(values)
    return m - half, m + half


def harmonic_mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """CI for the harmonic mean of positive rates: a t interval on 1/x (time per op), inverted.

    The harmonic mean of rates is the reciprocal of the mean time per operation, and that
    mean is what the t interval is valid for. An interval on times reaching 0 means the
    rate is unbounded above, so the upper end is then inf.
    """
    values = positive(xs, 2, "a confidence interval")
    low, high = mean_ci([1.0 / x for x in values], confidence)
    return 1.0 / high, (1.0 / low if low > 0 else math.inf)


def _resampled(rng: np.random.Generator, x: np.ndarray, statistic: Callable, count: int) -> np.ndarray:
    """statistic of `count` resamples (with replacement) of x, drawn in memory-bounded chunks."""
    rowwise = _ROWWISE.get(statistic)
    if rowwise:
        statistic(x.tolist())  # its input checks (a harmonic mean refuses values <= 0), which rowwise skips
    rows = max(1, _BOOTSTRAP_CHUNK // len(x))
    out = []
    for start in range(0, count, rows):
        sample = x[rng.integers(0, len(x), size=(min(rows, count - start), len(x)))]
        out.append(rowwise(sample, axis=1) if rowwise else np.array([statistic(row) for row in sample]))
    return np.concatenate(out)


def _check_resamples(resamples: int) -> None:
    """The bootstrap needs a positive whole number of resamples."""
    if not (isinstance(resamples, int) and resamples >= 1):
        raise PerflabError(f"resamples must be a positive integer (e.g. 5000), got {resamples!r}")


def _percentile_interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central `confidence` fraction of a bootstrap distribution (percentile's numbers, sorted once)."""
    values = np.sort(stats)
    if not np.isfinite(values).all():
        samples(stats.tolist(), 1, "a percentile")  # raises, naming the first resample that is not finite
    return percentile_of_sorted(values, 50 * (1 - confidence)), percentile_of_sorted(values, 50 * (1 + confidence))


def bootstrap_ci(xs: Sequence[float], statistic: Callable[[Sequence[float]], float] = median, confidence: float = 0.95,
                 resamples: int = 5000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap CI for any statistic (default median); same seed, same interval."""
    check_confidence(confidence)
    _check_resamples(resamples)
    x = np.asarray(samples(xs, 2, "a confidence interval"))
    return _percentile_interval(_resampled(np.random.default_rng(seed), x, statistic, resamples), confidence)


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], statistic: Callable[[Sequence[float]], float] = median,
                       confidence: float = 0.95, resamples: int = 5000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap CI for statistic(b) / statistic(a), resampling a and b independently."""
    check_confidence(confidence)
    _check_resamples(resamples)
    xa = np.asarray(samples(a, 2, "a confidence interval"))
    xb = np.asarray(samples(b, 2, "a confidence interval"))
    rng = np.random.default_rng(seed)
    denominators = _resampled(rng, xa, statistic, resamples)
    numerators = _resampled(rng, xb, statistic, resamples)
    if np.any(denominators == 0):
        raise PerflabError("statistic of the baseline samples is 0 in some resample: the ratio is undefined")
    return _percentile_interval(numerators / denominators, confidence)


# Row-wise numpy and scipy equivalents of the statistics of descriptive.py: same numbers, much faster bootstraps.
# (_resampled runs the statistic itself once on the whole sample first, so that its input checks still apply.)
_ROWWISE: dict[Callable, Callable] = {
    mean: np.mean,
    median: np.median,
    harmonic_mean: lambda sample, axis: sample.shape[axis] / np.sum(1.0 / sample, axis=axis),
}
