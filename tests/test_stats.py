"""perflab.stats against scipy/numpy as references, plus hand-worked cases and the error paths."""

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from conftest import REPO
from perflab import stats
from perflab.errors import PerflabError

DFS = [0.7, 1, 2.5, 7.3, 30, 200, 1e4]
PROBS = [1e-9, 0.001, 0.025, 0.2, 0.5, 0.8, 0.975, 0.999]


def rng(seed=0):
    return np.random.default_rng(seed)


def random_pairs(count=8):
    """Seeded sample pairs with different sizes, locations and spreads."""
    r = rng(42)
    for _ in range(count):
        na, nb = r.integers(3, 40, size=2)
        yield r.normal(100, r.uniform(0.5, 10), na), r.normal(r.uniform(95, 110), r.uniform(0.5, 10), nb)


# ---------------------------------------------------------------- distributions


@pytest.mark.parametrize("df", DFS)
def test_t_cdf_matches_scipy(df):
    for p in PROBS:
        t = sps.t.ppf(p, df)
        assert stats.t_cdf(t, df) == pytest.approx(sps.t.cdf(t, df), rel=1e-10, abs=1e-15)
    for t in [-50.0, -3.0, -0.1, 0.0, 0.4, 2.0, 12.0]:
        assert stats.t_cdf(t, df) == pytest.approx(sps.t.cdf(t, df), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("df", DFS)
def test_t_quantile_matches_scipy(df):
    for p in PROBS:
        assert stats.t_quantile(p, df) == pytest.approx(sps.t.ppf(p, df), rel=1e-9, abs=1e-12)


def test_t_cdf_and_quantile_edges():
    assert stats.t_quantile(0.5, 3.3) == 0.0
    assert stats.t_quantile(0.0, 3) == -math.inf
    assert stats.t_quantile(1.0, 3) == math.inf
    assert stats.t_cdf(math.inf, 4) == 1.0
    assert stats.t_cdf(-math.inf, 4) == 0.0
    assert stats.t_cdf(1.3, math.inf) == pytest.approx(sps.norm.cdf(1.3), rel=1e-14)
    assert stats.t_quantile(0.975, math.inf) == pytest.approx(sps.norm.ppf(0.975), rel=1e-14)


def test_normal_quantile_matches_scipy():
    for p in [1e-300, 1e-12, 1e-5, 0.001, 0.02, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.975, 0.99, 1 - 1e-12]:
        assert stats.normal_quantile(p) == pytest.approx(sps.norm.ppf(p), rel=1e-12, abs=1e-14)
    for x in [-30.0, -5.0, -1.0, 0.0, 2.0, 8.0]:
        assert stats.normal_cdf(x) == pytest.approx(sps.norm.cdf(x), rel=1e-13, abs=1e-16)


# ---------------------------------------------------------------- descriptive


def test_means_match_scipy():
    xs = rng(1).lognormal(3, 1, 200)
    assert stats.mean(xs) == pytest.approx(np.mean(xs), rel=1e-14)
    assert stats.harmonic_mean(xs) == pytest.approx(sps.hmean(xs), rel=1e-13)
    assert stats.geometric_mean(xs) == pytest.approx(sps.gmean(xs), rel=1e-13)
    assert stats.harmonic_mean([1.0, 4.0, 4.0]) == pytest.approx(2.0)
    assert stats.geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)


def test_percentile_and_median_match_numpy():
    for n in [1, 2, 5, 10, 101]:
        xs = rng(n).normal(0, 1, n)
        for q in [0, 1, 5, 25, 33.3, 50, 75, 95, 99, 100]:
            assert stats.percentile(xs, q) == pytest.approx(np.percentile(xs, q), rel=1e-15, abs=1e-15)
        assert stats.median(xs) == np.median(xs)
    assert stats.median([3.0, 1.0, 2.0, 10.0]) == 2.5


def test_stdev_and_cv():
    xs = rng(2).normal(1e9, 3.0, 50)  # large offset: a one-pass formula would lose the digits
    assert stats.stdev(xs) == pytest.approx(np.std(xs, ddof=1), rel=1e-9)
    assert stats.stdev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(math.sqrt(32 / 7))
    assert stats.coefficient_of_variation([9.0, 10.0, 11.0]) == pytest.approx(0.1)


def test_summarize():
    xs = rng(3).normal(50, 2, 40)
    s = stats.summarize(xs)
    assert s["n"] == 40
    assert s["mean"] == pytest.approx(np.mean(xs))
    assert s["median"] == pytest.approx(np.median(xs))
    assert s["stdev"] == pytest.approx(np.std(xs, ddof=1))
    assert (s["min"], s["max"]) == (xs.min(), xs.max())
    assert s["p5"] == pytest.approx(np.percentile(xs, 5))
    assert s["p95"] == pytest.approx(np.percentile(xs, 95))
    assert (s["ci_low"], s["ci_high"]) == pytest.approx(stats.mean_ci(xs))
    one = stats.summarize([7.0])
    assert one["n"] == 1 and one["mean"] == 7.0 and one["ci_low"] is None and one["ci_high"] is None


# ---------------------------------------------------------------- confidence intervals


def test_mean_ci_matches_scipy():
    for n, confidence in [(2, 0.95), (5, 0.9), (30, 0.95), (200, 0.99)]:
        xs = rng(n).normal(10, 2, n)
        expected = sps.t.interval(confidence, n - 1, loc=np.mean(xs), scale=sps.sem(xs))
        assert stats.mean_ci(xs, confidence) == pytest.approx(expected, rel=1e-10)


def test_harmonic_mean_ci_inverts_the_interval_on_reciprocals():
    rates = rng(4).normal(1000, 50, 30)
    low, high = stats.harmonic_mean_ci(rates)
    times = 1 / rates
    t_low, t_high = sps.t.interval(0.95, len(times) - 1, loc=np.mean(times), scale=sps.sem(times))
    assert (low, high) == pytest.approx((1 / t_high, 1 / t_low), rel=1e-10)
    assert low < sps.hmean(rates) < high


def test_harmonic_mean_ci_unbounded_when_time_interval_reaches_zero():
    low, high = stats.harmonic_mean_ci([1.0, 1000.0])  # times 1 and 0.001: the t interval crosses 0
    assert high == math.inf
    assert 0 < low < stats.harmonic_mean([1.0, 1000.0])


def test_bootstrap_ci_is_deterministic_for_a_seed():
    xs = rng(5).exponential(1.0, 60)
    assert stats.bootstrap_ci(xs, seed=3) == stats.bootstrap_ci(xs, seed=3)
    assert stats.bootstrap_ci(xs, seed=3) != stats.bootstrap_ci(xs, seed=4)


def test_bootstrap_ci_contains_the_median_and_narrows_with_more_data():
    big = rng(6).normal(100, 5, 4000)
    small = big[:100]
    low, high = stats.bootstrap_ci(big)
    assert low < np.median(big) < high
    s_low, s_high = stats.bootstrap_ci(small)
    assert s_low < np.median(small) < s_high
    assert high - low < (s_high - s_low) / 3  # width shrinks ~ 1/sqrt(n): 40x data, ~6x narrower


def test_bootstrap_ci_with_a_custom_statistic():
    xs = rng(7).normal(0, 2, 80)
    low, high = stats.bootstrap_ci(xs, statistic=stats.stdev, resamples=1000)
    assert low < np.std(xs, ddof=1) < high
    assert 1.0 < low and high < 3.0


def test_bootstrap_ratio_ci():
    r = rng(8)
    a, b = r.normal(100, 3, 200), r.normal(150, 3, 200)
    low, high = stats.bootstrap_ratio_ci(a, b)
    assert low < np.median(b) / np.median(a) < high
    assert 1.45 < low and high < 1.55
    assert stats.bootstrap_ratio_ci(a, b, seed=1) == stats.bootstrap_ratio_ci(a, b, seed=1)
    m_low, m_high = stats.bootstrap_ratio_ci(a, b, statistic=stats.mean, resamples=500)
    assert m_low < np.mean(b) / np.mean(a) < m_high


# ---------------------------------------------------------------- comparing two samples


def test_welch_t_test_matches_scipy():
    for a, b in random_pairs():
        t, df, p = stats.welch_t_test(a, b)
        ref = sps.ttest_ind(a, b, equal_var=False)
        va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
        ref_df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        assert t == pytest.approx(ref.statistic, rel=1e-10)
        assert df == pytest.approx(ref_df, rel=1e-10)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


def test_mean_difference_matches_scipys_welch_interval():
    """The interval is computed by hand (the guests' scipy 1.10 has none); the host's scipy has it to compare."""
    for a, b in random_pairs():
        ref = sps.ttest_ind(b, a, equal_var=False)
        for confidence in (0.9, 0.95, 0.99):
            difference, low, high, p = stats.mean_difference(a, b, confidence)
            interval = ref.confidence_interval(confidence)
            assert difference == pytest.approx(np.mean(b) - np.mean(a), rel=1e-10)
            assert (low, high) == (pytest.approx(interval.low, rel=1e-9), pytest.approx(interval.high, rel=1e-9))
            assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


def test_wilcoxon_signed_rank_matches_scipy_on_each_of_its_paths():
    """Exact up to 50 differences without ties or zeros, every sign flip up to 13 with them, the normal
    approximation beyond: scipy.stats.wilcoxon's own choices, with its defaults (zeros dropped, no continuity
    correction)."""
    r = rng(11)
    cases = [r.normal(0.02, 0.05, n) for n in (1, 2, 5, 12, 25, 50, 51, 120)]  # exact to 50, then approximated
    cases += [np.round(r.normal(0.01, 0.03, n), 2) for n in (6, 13, 14, 40)]  # ties: flips to 13, then approximated
    cases += [np.append(r.normal(0.01, 0.03, n), [0.0, 0.0]) for n in (4, 11, 30)]  # zeros
    cases += [np.array([1.0, 2.0, 3.0]), np.array([-1.0, 1.0]), np.array([0.0, 0.0, 0.5])]  # the ends, a tie of +-1
    for d in cases:
        ref = sps.wilcoxon(d).pvalue
        assert stats.wilcoxon_signed_rank(d.tolist()) == pytest.approx(ref, rel=1e-12, abs=1e-300), d


def test_a_verdict_imports_no_scipy_stats():
    """scipy.stats takes 1.2 s to import here and about 16 s in a guest under TCG: no verdict needs it."""
    code = ("import sys\nfrom perflab.verdict import judge_change, judge_paired_change\nfrom perflab import stats\n"
            "a, b = [1.0, 1.1, 0.9, 1.05, 0.95] * 4, [1.3, 1.2, 1.4, 1.25, 1.35] * 4\n"
            "judge_change('x', a, b, 0.1)\njudge_paired_change('x', b, a, 0.1)\nstats.power_law_fit([1, 2, 4], a[:3])"
            ".p_above(1)\nstats.bootstrap_ci(a, stats.harmonic_mean)\nstats.mann_whitney_u(a, b)\n"
            "stats.mean_difference(a, b)\nprint('scipy.stats' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_mann_whitney_u_matches_scipy():
    r = rng(9)
    tied = (r.integers(0, 5, 12).astype(float), r.integers(1, 6, 15).astype(float))
    constant = ([3.0, 3.0, 3.0], [3.0, 3.0])
    for a, b in [*random_pairs(), tied, constant, ([1.0], [2.0, 3.0])]:
        u, p = stats.mann_whitney_u(a, b)
        ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True)
        assert u == ref.statistic
        assert p == pytest.approx(ref.pvalue, rel=1e-10)


def test_hedges_g_hand_computed():
    # means 2.5 and 4.5, both variances 5/3 so pooled sd sqrt(5/3); df 6, J = 1 - 3/(4*6 - 1).
    expected = 2 / math.sqrt(5 / 3) * (1 - 3 / 23)
    assert stats.hedges_g([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(expected, rel=1e-12)
    assert stats.hedges_g([3, 4, 5, 6], [1, 2, 3, 4]) == pytest.approx(-expected, rel=1e-12)


def test_cliffs_delta_hand_worked():
    assert stats.cliffs_delta([1, 2], [3, 4]) == 1.0
    assert stats.cliffs_delta([3, 4], [1, 2]) == -1.0
    assert stats.cliffs_delta([1, 2, 3], [2]) == 0.0  # 2 > 1, 2 < 3, 2 == 2
    # b=2 beats 1, loses to 3 (twice); b=4 beats both: greater 4, less 2 over 6 pairs.
    assert stats.cliffs_delta([1, 3], [2, 2, 4]) == pytest.approx(1 / 3)


def test_tukey_outliers():
    xs = [10.0, 11, 10, 12, 11, 10, 11, 50, 10, 11, -20]
    assert stats.tukey_outliers(xs) == [7, 10]
    assert stats.tukey_outliers([1.0, 2, 3, 4, 5]) == []
    # Q1 = 10, Q3 = 11: 13.5 is beyond the 1.5 IQR fence (12.5) though inside a 3 IQR one (14).
    assert stats.tukey_outliers([10.0, 11, 10, 12, 11, 10, 11, 10, 11, 13.5]) == [9]


# ---------------------------------------------------------------- instability warnings


def clean(n=40, seed=10):
    return list(rng(seed).normal(100, 1, n))


def test_instability_clean_data_gives_no_warnings():
    assert stats.instability_warnings(clean()) == []


def test_instability_too_few_samples():
    (warning,) = stats.instability_warnings(clean(n=4), what="runs of matmul")
    assert "only 4 runs of matmul" in warning and "--runs 20" in warning


def test_instability_wide_spread():
    (warning,) = stats.instability_warnings(list(rng(11).normal(100, 20, 40)))
    assert "spread widely (CV 17%)" in warning
    assert "pin to an idle core" in warning and "rerun" in warning


def test_instability_outliers():
    xs = clean()
    for i in (3, 14, 25, 36):  # 4 of 40 = 10%, spread over the run so they do not look like drift
        xs[i] = 115.0
    (warning,) = stats.instability_warnings(xs)
    assert "4 of 40 samples are outliers" in warning and "rerun" in warning


def test_instability_drift():
    xs = clean(n=20, seed=12) + list(rng(13).normal(110, 1, 20))
    (warning,) = stats.instability_warnings(xs, what="timings")
    assert "timings drifted from 100 to 110" in warning and "interleave configurations" in warning


def test_instability_small_drift_is_not_reported():
    xs = clean(n=20, seed=12) + list(rng(13).normal(102, 1, 20))  # significant but only 2%
    assert stats.instability_warnings(xs) == []


# ---------------------------------------------------------------- fitting


def test_power_law_fit_recovers_an_exact_power_law():
    sizes = [1024, 4096, 16384, 65536]
    fit = stats.power_law_fit(sizes, [3e-6 * n ** 2 for n in sizes])
    assert fit.exponent == pytest.approx(2) and fit.prefactor == pytest.approx(3e-6)
    assert fit.low == pytest.approx(2) and fit.high == pytest.approx(2), "no scatter, no width"
    assert fit.p_above(1.5) < 1e-12 and fit.p_above(2.5) > 1 - 1e-12


def test_power_law_fit_matches_scipys_linregress_on_log_log_data():
    r = rng(7)
    sizes = np.repeat([1000.0, 2000.0, 4000.0, 8000.0], 6)
    times = 5e-3 * sizes ** 1.3 * np.exp(r.normal(0, 0.1, sizes.size))
    fit = stats.power_law_fit(sizes, times, confidence=0.9)
    ref = sps.linregress(np.log(sizes), np.log(times))
    half = sps.t.ppf(0.95, sizes.size - 2) * ref.stderr
    assert fit.exponent == pytest.approx(ref.slope) and fit.stderr == pytest.approx(ref.stderr)
    assert (fit.low, fit.high) == pytest.approx((ref.slope - half, ref.slope + half))
    assert fit.prefactor == pytest.approx(math.exp(ref.intercept)) and fit.df == sizes.size - 2
    t = (ref.slope - 1.0) / ref.stderr
    assert fit.p_above(1.0) == pytest.approx(sps.t.sf(t, sizes.size - 2))


# ---------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: stats.mean([]), "need at least 1 sample to compute a mean, got 0"),
        (lambda: stats.mean_ci([1.0]), "need at least 2 samples to compute a confidence interval, got 1: run with"),
        (lambda: stats.stdev([1.0]), "need at least 2 samples"),
        (lambda: stats.welch_t_test([1.0, 2.0], [3.0]), "need at least 2 samples"),
        (lambda: stats.welch_t_test([1.0, 1.0], [3.0, 3.0]), "both samples are constant"),
        (lambda: stats.hedges_g([1.0, 1.0], [1.0, 1.0]), "both samples are constant"),
        (lambda: stats.mann_whitney_u([], [1.0]), "need at least 1 sample"),
        (lambda: stats.harmonic_mean([1.0, 0.0]), "needs positive values, but sample 1 is 0.0"),
        (lambda: stats.geometric_mean([-1.0]), "needs positive values"),
        (lambda: stats.harmonic_mean_ci([1.0, -2.0]), "needs positive values"),
        (lambda: stats.mean([1.0, float("nan")]), "sample 1 is nan"),
        (lambda: stats.mean(["fast"]), "must be a sequence of numbers"),
        (lambda: stats.mean(3.0), "must be a sequence of numbers"),
        (lambda: stats.mean("123"), "must be a sequence of numbers"),
        (lambda: stats.percentile([1.0], 101), "between 0 and 100"),
        (lambda: stats.coefficient_of_variation([-1.0, 1.0]), "mean 0"),
        (lambda: stats.mean_ci([1.0, 2.0], confidence=95), "between 0 and 1"),
        (lambda: stats.normal_quantile(1.5), "between 0 and 1"),
        (lambda: stats.t_quantile(0.5, -1), "degrees of freedom must be positive"),
        (lambda: stats.t_cdf(1.0, 0), "degrees of freedom must be positive"),
        (lambda: stats.t_cdf(float("nan"), 3), "nan"),
        (lambda: stats.bootstrap_ci([1.0], resamples=10), "need at least 2 samples"),
        (lambda: stats.bootstrap_ci([1.0, 2.0], resamples=0), "resamples must be a positive integer"),
        (lambda: stats.bootstrap_ratio_ci([0.0, 0.0], [1.0, 2.0], resamples=10), "ratio is undefined"),
        (lambda: stats.tukey_outliers([]), "need at least 1 sample"),
        (lambda: stats.instability_warnings([]), "need at least 1 sample"),
        (lambda: stats.summarize([]), "need at least 1 sample"),
        (lambda: stats.power_law_fit([1, 2], [1, 2]), "need at least 3 samples to compute a power-law fit"),
        (lambda: stats.power_law_fit([1, 2, 3], [1, 2, 3, 4]), "one time per size"),
        (lambda: stats.power_law_fit([5, 5, 5], [1, 2, 3]), "every size is the same"),
        (lambda: stats.power_law_fit([1, 2, 3], [1, 0, 3]), "needs positive values"),
    ],
)
def test_invalid_input_raises_perflab_error(call, message):
    with pytest.raises(PerflabError) as info:
        call()
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_measured_value_is_shown_with_its_spread():
    from perflab.formatting import median_with_spread

    runs = [49.1, 52.3, 92.0, 55.5, 60.2]
    assert median_with_spread(runs, "ns", counted="runs") == "55.5 ns (median of 5 runs; range 49.1 to 92.0)"
    samples = list(range(60, 100))
    low, high = stats.bootstrap_ci(samples, stats.median)
    assert (
        median_with_spread(samples, "ns", 0)
        == f"80 ns (median of 40 samples; 95% CI {low:.0f} to {high:.0f}, range 60 to 99)"
    )
    assert median_with_spread([82.0], "ns") == "82.0 ns (one value: no spread to show)"
