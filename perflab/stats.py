"""Statistics for microbenchmarks: small pure functions over sequences of float samples.

Everything here is plain Python + math (numpy only to draw bootstrap resamples quickly);
scipy is used by the tests as the reference, never at run time.
Invalid input raises PerflabError with a one-line message that says how to fix it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from .errors import PerflabError

# Thresholds for instability_warnings.
MIN_SAMPLES = 10  # fewer samples than this and a median or CI is mostly noise
MAX_CV = 0.10  # a coefficient of variation above 10% means the machine was not quiet
MAX_OUTLIER_FRACTION = 0.05  # more than 5% of samples beyond the Tukey fences is not "a few hiccups"
DRIFT_P = 0.01  # Mann-Whitney p below this between the run's halves: the halves really differ
DRIFT_MIN_CHANGE = 0.05  # ...and their medians differ by more than 5%: large enough to matter

_BETACF_EPS = 1e-15  # relative convergence of the incomplete-beta continued fraction
_BETACF_MAXIT = 100_000  # needs O(sqrt(df)) terms; this covers df far beyond any benchmark
_TINY = 1e-300  # keeps Lentz's continued-fraction denominators away from zero
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


# ANCHOR: harmonic_mean
def harmonic_mean(xs: Sequence[float]) -> float:
    """Harmonic mean of positive values: the right average for rates (ops/s) over equal work."""
    values = _positive(xs, 1, "a harmonic mean")
    return len(values) / math.fsum(1.0 / x for x in values)
# ANCHOR_END: harmonic_mean


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
    """P(Z <= x) for a standard normal Z, via erfc so the lower tail keeps full relative precision."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _normal_sf(x: float) -> float:
    """P(Z > x), precise in the upper tail (where 1 - normal_cdf(x) would round to 0)."""
    return 0.5 * math.erfc(x / math.sqrt(2))


# Acklam's rational approximation of the normal quantile (relative error < 1.15e-9).
_ACKLAM_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
             1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
_ACKLAM_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
             6.680131188771972e01, -1.328068155288572e01)  # fmt: skip
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
             -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_ACKLAM_P_LOW = 0.02425  # below this p Acklam switches to the tail formula


def _polyval(coeffs: Sequence[float], x: float) -> float:
    """Horner evaluation, highest-degree coefficient first."""
    acc = 0.0
    for c in coeffs:
        acc = acc * x + c
    return acc


def _acklam_lower(p: float) -> float:
    """Acklam's initial guess for the normal quantile, for 0 < p <= 0.5."""
    if p < _ACKLAM_P_LOW:
        q = math.sqrt(-2 * math.log(p))
        return _polyval(_ACKLAM_C, q) / (_polyval(_ACKLAM_D, q) * q + 1)
    q = p - 0.5
    r = q * q
    return _polyval(_ACKLAM_A, r) * q / (_polyval(_ACKLAM_B, r) * r + 1)


def normal_quantile(p: float) -> float:
    """x with normal_cdf(x) = p: Acklam's approximation plus one Halley step (error ~1e-15)."""
    _check_probability(p)
    if p == 0 or p == 1:
        return -math.inf if p == 0 else math.inf
    if p > 0.5:
        return -normal_quantile(1.0 - p)  # 1 - p is exact here; the lower half has the precision
    x = _acklam_lower(p)
    u = (normal_cdf(x) - p) * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - u / (1 + x * u / 2)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta (Numerical Recipes betacf, modified Lentz)."""
    qab, qap, qam = a + b, a + 1, a - 1
    c = 1.0
    d = 1 - qab * x / qap
    d = 1 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _BETACF_MAXIT + 1):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > _TINY else _TINY)
            c = 1 + aa / c
            c = c if abs(c) > _TINY else _TINY
            delta = d * c
            h *= delta
        if abs(delta - 1) < _BETACF_EPS:
            return h
    raise PerflabError(f"incomplete beta did not converge for a={a}, b={b}, x={x}: degrees of freedom too large")


def _stirling_tail(x: float) -> float:
    """lgamma(x) minus its Stirling approximation (x - 1/2) log x - x + log(2 pi) / 2, for x >= 10."""
    return 1 / (12 * x) - 1 / (360 * x**3) + 1 / (1260 * x**5)


def _log_beta(a: float, b: float) -> float:
    """log B(a, b); for a large argument the lgamma terms nearly cancel, so use Stirling's series."""
    small, big = min(a, b), max(a, b)
    if big < 100:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    # lgamma(big + small) - lgamma(big), written so that nothing large cancels:
    ratio = (big - 0.5) * math.log1p(small / big) + small * math.log(big + small) - small
    return math.lgamma(small) - ratio - (_stirling_tail(big + small) - _stirling_tail(big))


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta I_x(a, b); y = 1 - x is passed in so neither end loses digits."""
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    log_x = math.log1p(-y) if x > 0.5 else math.log(x)
    log_y = math.log1p(-x) if y > 0.5 else math.log(y)
    front = math.exp(a * log_x + b * log_y - _log_beta(a, b))
    if x < (a + 1) / (a + b + 2):  # the fraction converges fast on this side; use symmetry otherwise
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, y) / b


def _t_sf(t: float, df: float) -> float:
    """P(T > t) for t >= 0: I_x(df/2, 1/2) / 2 with x = df / (df + t^2), precise far into the tail."""
    if t == math.inf:
        return 0.0
    if t < math.sqrt(df):  # compute x and 1 - x from whichever ratio cannot overflow
        z = t * t / df
        x, y = 1 / (1 + z), z / (1 + z)
    else:
        w = df / (t * t)
        x, y = w / (1 + w), 1 / (1 + w)
    return 0.5 * _betainc(df / 2, 0.5, x, y)


def _t_pdf(t: float, df: float) -> float:
    """Student-t density, used for the Newton steps in t_quantile."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (possibly fractional) degrees of freedom; rel. error < 1e-9 to df = 1e7."""
    _check_df(df)
    if math.isnan(t):
        raise PerflabError("t_cdf got t = nan: check the samples it was computed from")
    if df == math.inf:
        return normal_cdf(t)
    return _t_sf(-t, df) if t < 0 else 1 - _t_sf(t, df)


def _t_isf(q: float, df: float) -> float:
    """t >= 0 with P(T > t) = q (0 < q < 0.5): Newton from the left, safeguarded by a bracket.

    The upper tail is convex for t > 0, so Newton steps from below never overshoot the root.
    """
    lo, hi = 0.0, max(1.0, -normal_quantile(q))
    while _t_sf(hi, df) > q:  # the t tail is heavier than the normal one: widen until it brackets
        lo, hi = hi, 2 * hi
    t = lo
    for _ in range(200):
        f = _t_sf(t, df) - q
        if f == 0:
            return t
        if f > 0:
            lo = t
        else:
            hi = t
        pdf = _t_pdf(t, df)
        step = f / pdf if pdf > 0 else math.inf
        new = t + step
        if not lo < new < hi:
            new = 0.5 * (lo + hi)
        if abs(new - t) <= 1e-15 * max(1.0, abs(t)):
            return new
        t = new
    return t


def t_quantile(p: float, df: float) -> float:
    """t with t_cdf(t, df) = p, by inverting t_cdf with safeguarded Newton steps (as accurate as t_cdf)."""
    _check_probability(p)
    _check_df(df)
    if p == 0 or p == 1:
        return -math.inf if p == 0 else math.inf
    if p == 0.5:
        return 0.0
    if df == math.inf:
        return normal_quantile(p)
    t = _t_isf(min(p, 1.0 - p), df)  # 1 - p is exact for p > 0.5
    return t if p > 0.5 else -t


# ---------------------------------------------------------------- confidence intervals


def mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval for the mean: mean +- t * stdev / sqrt(n)."""
    _check_confidence(confidence)
    values = _samples(xs, 2, "a confidence interval")
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * stdev(values) / math.sqrt(len(values))
    m = mean(values)
    return m - half, m + half


# ANCHOR: harmonic_mean_ci
def harmonic_mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """CI for the harmonic mean of positive rates: a t interval on 1/x (time per op), inverted.

    The harmonic mean of rates is the reciprocal of the mean time per operation, and that
    mean is what the t interval is valid for. An interval on times reaching 0 means the
    rate is unbounded above, so the upper end is then inf.
    """
    values = _positive(xs, 2, "a confidence interval")
    low, high = mean_ci([1.0 / x for x in values], confidence)
    return 1.0 / high, (1.0 / low if low > 0 else math.inf)
# ANCHOR_END: harmonic_mean_ci


def _resampled(rng: np.random.Generator, x: np.ndarray, statistic: Callable, count: int) -> np.ndarray:
    """statistic of `count` resamples (with replacement) of x, drawn in memory-bounded chunks."""
    rowwise = _ROWWISE.get(statistic)
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
    va, vb = stdev(xa) ** 2 / len(xa), stdev(xb) ** 2 / len(xb)
    if va + vb == 0:
        raise PerflabError("both samples are constant, so a t-test is undefined: check that the benchmark really ran")
    t = (mean(xa) - mean(xb)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))  # Welch-Satterthwaite
    return t, df, min(1.0, 2 * _t_sf(abs(t), df))


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """1-based ranks with ties averaged, and the size of every tie group (for tie corrections)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    groups = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        groups.append(j - i + 1)
        i = j + 1
    return ranks, groups


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mann-Whitney U of a and its two-sided p (normal approximation, tie and continuity corrected)."""
    xa = _samples(a, 1, "a Mann-Whitney test")
    xb = _samples(b, 1, "a Mann-Whitney test")
    n1, n2 = len(xa), len(xb)
    n = n1 + n2
    ranks, groups = _ranks(xa + xb)
    u1 = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2
    tie_term = sum(g**3 - g for g in groups)
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))) if n > 1 else 0.0
    if sigma == 0:
        return u1, 1.0  # every value identical: no evidence of any difference
    z = (max(u1, n1 * n2 - u1) - n1 * n2 / 2 - 0.5) / sigma
    return u1, min(1.0, 2 * _normal_sf(z))


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


# Row-wise numpy equivalents of the statistics above: same numbers, much faster bootstraps.
_ROWWISE: dict[Callable, Callable] = {mean: np.mean, median: np.median}
