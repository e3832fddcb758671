"""Statistics for microbenchmarks: small pure functions over sequences of float samples.

The names here are the course's vocabulary (harmonic_mean_ci, welch_t_test,
instability_warnings); the special functions behind them are scipy.stats's,
and numpy draws the bootstrap resamples. Invalid input raises PerflabError
with a one-line message that says how to fix it.
"""

from __future__ import annotations

import math
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import PerflabError


def scipy_stats():
    """scipy.stats, imported on first use: the import takes about 2 s, which every notebook kernel, grading and
    `perflab run` that imports the labs would otherwise pay before computing anything."""
    from scipy import stats

    return stats

# Thresholds for instability_warnings.
MIN_SAMPLES = 10  # fewer samples than this and a median or CI is mostly noise
MAX_CV = 0.10  # a coefficient of variation above 10% means the machine was not quiet
MAX_OUTLIER_FRACTION = 0.05  # more than 5% of samples beyond the Tukey fences is not "a few hiccups"
DRIFT_P = 0.01  # Mann-Whitney p below this between the run's halves: the halves really differ
DRIFT_MIN_CHANGE = 0.05  # ...and their medians differ by more than 5%: large enough to matter
STEP_ALPHA = 0.01  # a step change must be this significant, after Bonferroni over the splits tried
STEP_MIN_CHANGE = 0.10  # ...and move the median by 10% or more
STEP_MIN_SEGMENT = 4  # samples on each side of a step, at the least

_BOOTSTRAP_CHUNK = 1_000_000  # resampled values drawn per numpy call (bounds memory)


# ---------------------------------------------------------------- input checks


def _samples(xs: Sequence[float], need: int, purpose: str) -> list[float]:
    """xs as a list of finite floats with at least `need` items, else a PerflabError saying why."""
    if isinstance(xs, (str, bytes)):
        raise PerflabError(f"samples must be a sequence of numbers, got the text {xs!r:.60}")
    try:
        values = xs.tolist() if isinstance(xs, np.ndarray) else list(xs)
        values = [float(x) for x in values]
    except (TypeError, ValueError):
        raise PerflabError(f"samples must be a sequence of numbers, got {xs!r:.60}") from None
    if len(values) < need:
        raise PerflabError(
            f"need at least {need} sample{'s' if need > 1 else ''} to compute {purpose}, "
            f"got {len(values)}: run with more repetitions"
        )
    for i, x in enumerate(values):
        if not math.isfinite(x):
            raise PerflabError(f"sample {i} is {x}: drop failed runs before computing {purpose}")
    return values


def _positive(xs: Sequence[float], need: int, purpose: str) -> list[float]:
    """Like _samples, but every value must be > 0 (rates, times)."""
    values = _samples(xs, need, purpose)
    for i, x in enumerate(values):
        if x <= 0:
            raise PerflabError(f"{purpose} needs positive values, but sample {i} is {x}: check the measurement")
    return values


def _check_confidence(confidence: float) -> None:
    """A confidence level is a probability strictly between 0 and 1 (0.95, not 95)."""
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")


def _check_probability(p: float) -> None:
    """Quantile functions take p in [0, 1]."""
    if not 0 <= p <= 1:
        raise PerflabError(f"probability must be between 0 and 1, got {p}")


def _check_df(df: float) -> None:
    """Student-t degrees of freedom: any positive float (Welch's df is fractional), or inf."""
    if not df > 0:
        raise PerflabError(f"degrees of freedom must be positive, got {df}")


# ---------------------------------------------------------------- descriptive


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean, summed with math.fsum so long runs do not lose precision."""
    values = _samples(xs, 1, "a mean")
    return math.fsum(values) / len(values)


def harmonic_mean(xs: Sequence[float]) -> float:
    """Harmonic mean of positive values: the right average for rates (ops/s) over equal work."""
    values = _positive(xs, 1, "a harmonic mean")
    return len(values) / math.fsum(1.0 / x for x in values)


def geometric_mean(xs: Sequence[float]) -> float:
    """Geometric mean of positive values: the right average for ratios (speedups)."""
    values = _positive(xs, 1, "a geometric mean")
    return math.exp(math.fsum(math.log(x) for x in values) / len(values))


def percentile(xs: Sequence[float], q: float) -> float:
    """q-th percentile (q in 0..100) by linear interpolation, exactly like numpy.percentile's default."""
    if not 0 <= q <= 100:
        raise PerflabError(f"percentile must be between 0 and 100, got {q}")
    values = sorted(_samples(xs, 1, "a percentile"))
    pos = q / 100 * (len(values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    frac = pos - lo
    a, b = values[lo], values[hi]
    # numpy's lerp: interpolate from the nearer end so the result stays inside [a, b].
    return a + (b - a) * frac if frac < 0.5 else b - (b - a) * (1 - frac)


def median(xs: Sequence[float]) -> float:
    """Middle value (mean of the two middle ones for even n): robust to a few slow outliers."""
    values = sorted(_samples(xs, 1, "a median"))
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def stdev(xs: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1), two-pass so large offsets do not cancel digits."""
    values = _samples(xs, 2, "a standard deviation")
    m = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((x - m) ** 2 for x in values) / (len(values) - 1))


def coefficient_of_variation(xs: Sequence[float]) -> float:
    """stdev / |mean| as a fraction (0.05 = 5%): spread relative to size, comparable across benchmarks."""
    m = mean(xs)
    if m == 0:
        raise PerflabError("coefficient of variation is undefined for samples with mean 0")
    return stdev(xs) / abs(m)


# ---------------------------------------------------------------- distributions


def normal_cdf(x: float) -> float:
    """P(Z <= x) for a standard normal Z."""
    return float(scipy_stats().norm.cdf(x))


def normal_quantile(p: float) -> float:
    """x with normal_cdf(x) = p."""
    _check_probability(p)
    return float(scipy_stats().norm.ppf(p))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (possibly fractional, or infinite) degrees of freedom."""
    _check_df(df)
    if math.isnan(t):
        raise PerflabError("t_cdf got t = nan: check the samples it was computed from")
    return float(scipy_stats().t.cdf(t, df))


def t_quantile(p: float, df: float) -> float:
    """t with t_cdf(t, df) = p."""
    _check_probability(p)
    _check_df(df)
    return float(scipy_stats().t.ppf(p, df))


# ---------------------------------------------------------------- confidence intervals


def mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval for the mean: mean +- t * stdev / sqrt(n)."""
    _check_confidence(confidence)
    values = _samples(xs, 2, "a confidence interval")
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * stdev(values) / math.sqrt(len(values))
    m = mean(values)
    return m - half, m + half


def harmonic_mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """CI for the harmonic mean of positive rates: a t interval on 1/x (time per op), inverted.

    The harmonic mean of rates is the reciprocal of the mean time per operation, and that
    mean is what the t interval is valid for. An interval on times reaching 0 means the
    rate is unbounded above, so the upper end is then inf.
    """
    values = _positive(xs, 2, "a confidence interval")
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
    """The central `confidence` fraction of a bootstrap distribution."""
    values = stats.tolist()
    return percentile(values, 50 * (1 - confidence)), percentile(values, 50 * (1 + confidence))


def bootstrap_ci(
    xs: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = median,
    confidence: float = 0.95,
    resamples: int = 5000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap CI for any statistic (default median); same seed, same interval."""
    _check_confidence(confidence)
    _check_resamples(resamples)
    x = np.asarray(_samples(xs, 2, "a confidence interval"))
    return _percentile_interval(_resampled(np.random.default_rng(seed), x, statistic, resamples), confidence)


def bootstrap_ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = median,
    confidence: float = 0.95,
    resamples: int = 5000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap CI for statistic(b) / statistic(a), resampling a and b independently."""
    _check_confidence(confidence)
    _check_resamples(resamples)
    xa = np.asarray(_samples(a, 2, "a confidence interval"))
    xb = np.asarray(_samples(b, 2, "a confidence interval"))
    rng = np.random.default_rng(seed)
    denominators = _resampled(rng, xa, statistic, resamples)
    numerators = _resampled(rng, xb, statistic, resamples)
    if np.any(denominators == 0):
        raise PerflabError("statistic of the baseline samples is 0 in some resample: the ratio is undefined")
    return _percentile_interval(numerators / denominators, confidence)


# ---------------------------------------------------------------- comparing two samples


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test: (t, df, two-sided p), t > 0 when mean(a) > mean(b)."""
    xa = _samples(a, 2, "a t-test")
    xb = _samples(b, 2, "a t-test")
    if stdev(xa) == 0 and stdev(xb) == 0:
        raise PerflabError("both samples are constant, so a t-test is undefined: check that the benchmark really ran")
    found = scipy_stats().ttest_ind(xa, xb, equal_var=False)
    return float(found.statistic), welch_error_and_df(xa, xb)[1], float(found.pvalue)


def welch_error_and_df(a: list[float], b: list[float]) -> tuple[float, float]:
    """The standard error of mean(b) - mean(a) and its Welch-Satterthwaite degrees of freedom. scipy's t-test
    reports the df and interval only from 1.11 on; Debian 12's scipy (1.10), which the VM guests run, has neither."""
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    return math.sqrt(va + vb), (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))


def mean_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, float]:
    """mean(b) - mean(a) with Welch's CI and two-sided p: (difference, low, high, p).

    For counts per operation, where a ratio is useless because the control is near 0. Two constant
    samples (every round counted exactly the same) have an exact difference: its CI is the point, and
    p is 0 unless the difference is 0.
    """
    _check_confidence(confidence)
    xa = _samples(a, 2, "a difference of means")
    xb = _samples(b, 2, "a difference of means")
    difference = mean(xb) - mean(xa)
    if stdev(xa) == 0 and stdev(xb) == 0:
        return difference, difference, difference, 0.0 if difference else 1.0
    with warnings.catch_warnings():  # nearly identical samples (instruction counts) are exact enough here
        warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
        found = scipy_stats().ttest_ind(xb, xa, equal_var=False)
    error, df = welch_error_and_df(xa, xb)
    half_width = t_quantile((1 + confidence) / 2, df) * error
    return difference, difference - half_width, difference + half_width, float(found.pvalue)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mann-Whitney U of a and its two-sided p (normal approximation, tie and continuity corrected).

    It compares ranks, so it assumes nothing about the shape of the timings (they are rarely normal).
    """
    xa = _samples(a, 1, "a Mann-Whitney test")
    xb = _samples(b, 1, "a Mann-Whitney test")
    if len(set(xa + xb)) == 1:
        return len(xa) * len(xb) / 2, 1.0  # every value identical: no evidence of any difference
    found = scipy_stats().mannwhitneyu(xa, xb, alternative="two-sided", method="asymptotic", use_continuity=True)
    return float(found.statistic), float(found.pvalue)


def hedges_g(a: Sequence[float], b: Sequence[float]) -> float:
    """Standardized mean difference (b - a) / pooled stdev, times Hedges' small-sample correction."""
    xa = _samples(a, 2, "an effect size")
    xb = _samples(b, 2, "an effect size")
    df = len(xa) + len(xb) - 2
    pooled = math.sqrt(((len(xa) - 1) * stdev(xa) ** 2 + (len(xb) - 1) * stdev(xb) ** 2) / df)
    if pooled == 0:
        raise PerflabError("both samples are constant, so the effect size is undefined: check the benchmark ran")
    return (mean(xb) - mean(xa)) / pooled * (1 - 3 / (4 * df - 1))


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """P(b > a) - P(b < a) over all pairs, in [-1, 1]: a rank effect size immune to outliers."""
    xa = sorted(_samples(a, 1, "an effect size"))
    xb = _samples(b, 1, "an effect size")
    greater = sum(bisect_left(xa, y) for y in xb)
    less = sum(len(xa) - bisect_right(xa, y) for y in xb)
    return (greater - less) / (len(xa) * len(xb))


# ---------------------------------------------------------------- fitting


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
        return float(scipy_stats().t.sf((self.exponent - exponent) / self.stderr, self.df))  # 1 - cdf, not rounded to 0


# ANCHOR: power_law_fit
def power_law_fit(sizes: Sequence[float], times: Sequence[float], confidence: float = 0.95) -> PowerLaw:
    """Fit times = a * sizes ** k by least squares on log(time) against log(size).

    The slope of the log-log line is the scaling exponent k: 1 for linear work, 2 for quadratic. Its
    interval is Student's t on the slope's standard error. Pass every measurement (several per size), not
    one mean per size, so the spread within a size counts.
    """
    _check_confidence(confidence)
    x = [math.log(v) for v in _positive(sizes, 3, "a power-law fit")]
    y = [math.log(v) for v in _positive(times, 3, "a power-law fit")]
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


# ---------------------------------------------------------------- diagnostics


def tukey_outliers(xs: Sequence[float]) -> list[int]:
    """Indices of samples outside Tukey's fences [Q1 - 1.5 IQR, Q3 + 1.5 IQR]."""
    values = _samples(xs, 1, "outliers")
    q1, q3 = percentile(values, 25), percentile(values, 75)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [i for i, x in enumerate(values) if x < low or x > high]


def _few_samples_warning(values: list[float], what: str) -> str | None:
    """Too few samples for a median or CI to be trusted."""
    if len(values) < MIN_SAMPLES:
        return f"only {len(values)} {what}: rerun with more repetitions (--runs 20 or more)"
    return None


def _spread_warning(values: list[float], what: str) -> str | None:
    """Samples spread widely relative to their size: the machine was not quiet."""
    if len(values) < 2 or mean(values) == 0:
        return None
    cv = coefficient_of_variation(values)
    if cv > MAX_CV:
        return (
            f"{what} spread widely (CV {cv:.0%}): close other programs, pin to an idle core, "
            "or disable frequency scaling, then rerun"
        )
    return None


def _outlier_warning(values: list[float], what: str) -> str | None:
    """More than a few samples beyond the Tukey fences: something kept interrupting the run."""
    count = len(tukey_outliers(values))
    if count > MAX_OUTLIER_FRACTION * len(values):
        return (
            f"{count} of {len(values)} {what} are outliers ({count / len(values):.0%}): something interrupted "
            "the run (other programs, interrupts, swapping); quiet the machine and rerun, and compare medians"
        )
    return None


def _drift_warning(values: list[float], what: str) -> str | None:
    """The run's first and second halves differ, significantly and by enough to matter."""
    first, second = values[: len(values) // 2], values[len(values) // 2 :]
    m1, m2 = median(first), median(second)
    _, p = mann_whitney_u(first, second)
    if p < DRIFT_P and abs(m2 - m1) > DRIFT_MIN_CHANGE * abs(m1):
        return (
            f"{what} drifted from {m1:.3g} to {m2:.3g} during the run: something changed "
            "(frequency, migration, another load); interleave configurations and rerun"
        )
    return None


def step_change(xs: Sequence[float], min_change: float = STEP_MIN_CHANGE,
                min_segment: int = STEP_MIN_SEGMENT) -> int | None:
    """Where a sequence steps to another level and stays (a VM's vCPU moved, a load arrived): the index of the
    first sample after the step, or None.

    Every split with `min_segment` samples on each side whose medians differ by `min_change` or more is
    tested with Mann-Whitney; the most significant one is a step when its p, times the number of splits
    tried, is below STEP_ALPHA. A single outlier is not a step; a large drift is reported as one, and
    either way the samples before it describe another state of the machine.
    """
    values = _samples(xs, 1, "a step-change search")
    splits = range(min_segment, len(values) - min_segment + 1)
    found: list[tuple[float, int]] = []
    for k in splits:
        before, after = median(values[:k]), median(values[k:])
        if before != 0 and abs(after / before - 1) >= min_change:
            found.append((mann_whitney_u(values[:k], values[k:])[1], k))
    if not found:
        return None
    p, k = min(found)
    return k if p * len(splits) < STEP_ALPHA else None


def instability_warnings(xs: Sequence[float], what: str = "samples") -> list[str]:
    """Sentences naming what looks unstable in a run and what to do about it; [] for clean data.

    Below MIN_SAMPLES, quartiles and half-vs-half comparisons mean little, so only the
    sample-count and spread checks run.
    """
    values = _samples(xs, 1, "stability checks")
    checks = [_few_samples_warning, _spread_warning]
    if len(values) >= MIN_SAMPLES:
        checks += [_outlier_warning, _drift_warning]
    return [w for check in checks if (w := check(values, what)) is not None]


def summarize(xs: Sequence[float], confidence: float = 0.95) -> dict:
    """n, mean, median, stdev, min, max, p5, p95 and the mean's t CI (stdev and CI None when n < 2)."""
    values = _samples(xs, 1, "a summary")
    ci_low, ci_high = mean_ci(values, confidence) if len(values) >= 2 else (None, None)
    return {
        "n": len(values),
        "mean": mean(values),
        "median": median(values),
        "stdev": stdev(values) if len(values) >= 2 else None,
        "min": min(values),
        "max": max(values),
        "p5": percentile(values, 5),
        "p95": percentile(values, 95),
        "ci_low": ci_low,
        "ci_high": ci_high,
    }


# Row-wise numpy and scipy equivalents of the statistics above: same numbers, much faster bootstraps.
# (_resampled runs the statistic itself once on the whole sample first, so that its input checks still apply.)
_ROWWISE: dict[Callable, Callable] = {
    mean: np.mean,
    median: np.median,
    harmonic_mean: lambda sample, axis: scipy_stats().hmean(sample, axis=axis),
}


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
