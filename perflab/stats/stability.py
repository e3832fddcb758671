"""Is a run's series of samples trustworthy? Few samples, a wide spread, outliers, drift and step changes, said in
words with what to do; and a sample summarised with them."""

from __future__ import annotations

from collections.abc import Sequence

from .checks import samples
from .comparisons import mann_whitney_u
from .descriptive import coefficient_of_variation, mean, median, percentile, stdev, tukey_outliers
from .intervals import mean_ci

# Thresholds for instability_warnings.
MIN_SAMPLES = 10  # fewer samples than this and a median or CI is mostly noise
MAX_CV = 0.10  # a coefficient of variation above 10% means the machine was not quiet
MAX_OUTLIER_FRACTION = 0.05  # more than 5% of samples beyond the Tukey fences is not "a few hiccups"
DRIFT_P = 0.01  # Mann-Whitney p below this between the run's halves: the halves really differ
DRIFT_MIN_CHANGE = 0.05  # ...and their medians differ by more than 5%: large enough to matter
STEP_ALPHA = 0.01  # a step change must be this significant, after Bonferroni over the splits tried
STEP_MIN_CHANGE = 0.10  # ...and move the median by 10% or more
STEP_MIN_SEGMENT = 4  # samples on each side of a step, at the least


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
    values = samples(xs, 1, "a step-change search")
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
    values = samples(xs, 1, "stability checks")
    checks = [_few_samples_warning, _spread_warning]
    if len(values) >= MIN_SAMPLES:
        checks += [_outlier_warning, _drift_warning]
    return [w for check in checks if (w := check(values, what)) is not None]


def summarize(xs: Sequence[float], confidence: float = 0.95) -> dict:
    """n, mean, median, stdev, min, max, p5, p95 and the mean's t CI (stdev and CI None when n < 2)."""
    values = samples(xs, 1, "a summary")
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
