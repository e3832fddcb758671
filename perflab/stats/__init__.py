"""Statistics for microbenchmarks: small pure functions over sequences of float samples.

The names here are the course's vocabulary (harmonic_mean_ci, welch_t_test,
instability_warnings); the special functions behind them are scipy.special's, and numpy draws the bootstrap
resamples. Nothing here imports scipy.stats, which takes 1.2 s on a laptop and about 16 s in a guest under TCG:
the tests hold every function to its numbers. Invalid input raises PerflabError with a one-line message that says
how to fix it.

The modules, one concern each: checks (input checks, scipy.special on first use), descriptive (one sample),
intervals (distributions and confidence intervals), comparisons (two samples, power-law fits), ranks (the rank
tests) and stability (is a series trustworthy). Import the names from here: `perflab.stats.harmonic_mean`.
"""

from __future__ import annotations

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
from .ranks import wilcoxon_signed_rank
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
    "MIN_SAMPLES", "MAX_CV", "MAX_OUTLIER_FRACTION", "DRIFT_P", "DRIFT_MIN_CHANGE", "STEP_ALPHA",
    "STEP_MIN_CHANGE", "STEP_MIN_SEGMENT", "mean", "harmonic_mean", "geometric_mean", "percentile", "median",
    "stdev", "coefficient_of_variation", "normal_cdf", "normal_quantile", "t_cdf", "t_quantile", "mean_ci",
    "harmonic_mean_ci", "bootstrap_ci", "bootstrap_ratio_ci", "welch_t_test", "welch_error_and_df",
    "mean_difference", "mann_whitney_u", "hedges_g", "cliffs_delta", "PowerLaw", "power_law_fit",
    "tukey_outliers", "step_change", "instability_warnings", "summarize", "plot_range", "wilcoxon_signed_rank",
]
