"""Statistics for microbenchmarks: small pure functions over sequences of float samples.

The names here are the course's vocabulary (harmonic_mean_ci, welch_t_test,
instability_warnings); the special functions behind them are scipy's (the
distributions' from scipy.special, which imports in a third of scipy.stats's
time; the tests' from scipy.stats), and numpy draws the bootstrap resamples. Invalid input raises PerflabError
with a one-line message that says how to fix it.

The modules, one concern each: checks (input checks, scipy on first use), descriptive (one sample), intervals
(distributions and confidence intervals), comparisons (two samples, power-law fits) and stability (is a series
trustworthy). Import the names from here: `perflab.stats.harmonic_mean`.
"""

from __future__ import annotations

from .checks import scipy_stats
from .comparisons import (
                          PowerLaw,
                          cliffs_delta,
                          hedges_g,
                          mann_whitney_u,
                          mean_difference,
                          power_law_fit,
                          welch_error_and_df,
                          welch_t_test,
)
from .descriptive import (
                          coefficient_of_variation,
                          geometric_mean,
                          harmonic_mean,
                          mean,
                          median,
                          percentile,
                          plot_range,
                          stdev,
                          tukey_outliers,
)
from .intervals import (
                          bootstrap_ci,
                          bootstrap_ratio_ci,
                          harmonic_mean_ci,
                          mean_ci,
                          normal_cdf,
                          normal_quantile,
                          t_cdf,
                          t_quantile,
)
from .stability import (
                          DRIFT_MIN_CHANGE,
                          DRIFT_P,
                          MAX_CV,
                          MAX_OUTLIER_FRACTION,
                          MIN_SAMPLES,
                          STEP_ALPHA,
                          STEP_MIN_CHANGE,
                          STEP_MIN_SEGMENT,
                          instability_warnings,
                          step_change,
                          summarize,
)

__all__ = [
    "scipy_stats", "MIN_SAMPLES", "MAX_CV", "MAX_OUTLIER_FRACTION", "DRIFT_P", "DRIFT_MIN_CHANGE", "STEP_ALPHA",
    "STEP_MIN_CHANGE", "STEP_MIN_SEGMENT", "mean", "harmonic_mean", "geometric_mean", "percentile", "median",
    "stdev", "coefficient_of_variation", "normal_cdf", "normal_quantile", "t_cdf", "t_quantile", "mean_ci",
    "harmonic_mean_ci", "bootstrap_ci", "bootstrap_ratio_ci", "welch_t_test", "welch_error_and_df",
    "mean_difference", "mann_whitney_u", "hedges_g", "cliffs_delta", "PowerLaw", "power_law_fit",
    "tukey_outliers", "step_change", "instability_warnings", "summarize", "plot_range"
]
