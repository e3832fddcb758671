"""The source's measurements (perflab/data/page-table-levels/source.json), as its article reports them.

Only summaries were published (means, 95% CIs, the t-test), not the 30 runs
per mode; the test is recomputed from those summaries, so a learner can see
that the reported numbers hold together.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

import scipy.stats as sps

from ...paths import DATA_DIR

SOURCE = DATA_DIR / "page-table-levels" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


def stdev_from_ci(summary: dict[str, float], n: int, confidence: float = 0.95) -> float:
    """The sample standard deviation behind a Student CI of the mean of n runs."""
    half = (summary["ci_high"] - summary["ci_low"]) / 2
    return half * math.sqrt(n) / sps.t.ppf(0.5 + confidence / 2, n - 1)


# ANCHOR: t_test
def t_test_from_summaries(data: dict[str, Any] | None = None) -> tuple[float, int, float]:
    """Student's t-test of 4-level against 5-level lat_pagefault, from the published means and CIs: (t, df, p)."""
    pf = (data or load())["lat_pagefault"]
    n = pf["runs_per_mode"]
    four, five = pf["4-level"], pf["5-level"]
    found = sps.ttest_ind_from_stats(four["mean"], stdev_from_ci(four, n), n,
                                     five["mean"], stdev_from_ci(five, n), n, equal_var=True)
    return float(found.statistic), 2 * n - 2, float(found.pvalue)
# ANCHOR_END: t_test


def relative_ci_from_summaries(data: dict[str, Any] | None = None, confidence: float = 0.95) -> tuple[float, float]:
    """Student's CI of 5-level minus 4-level lat_pagefault, over the 4-level mean, from the published summaries."""
    pf = (data or load())["lat_pagefault"]
    n = pf["runs_per_mode"]
    four, five = pf["4-level"], pf["5-level"]
    pooled = math.sqrt((stdev_from_ci(four, n) ** 2 + stdev_from_ci(five, n) ** 2) / 2)
    half = sps.t.ppf(0.5 + confidence / 2, 2 * n - 2) * pooled * math.sqrt(2 / n)
    difference = five["mean"] - four["mean"]
    return float((difference - half) / four["mean"]), float((difference + half) / four["mean"])


def relative_difference(data: dict[str, Any] | None = None) -> float:
    """5-level over 4-level, minus one, per page (lat_pagefault)."""
    pf = (data or load())["lat_pagefault"]
    return pf["5-level"]["mean"] / pf["4-level"]["mean"] - 1


def per_fault_over_per_page(data: dict[str, Any] | None = None) -> float:
    """funclatency's ns per fault over lat_pagefault's ns per page, 4-level: how many pages one fault served."""
    data = data or load()
    return data["funclatency"]["4-level"]["mean"] / data["lat_pagefault"]["4-level"]["mean"]


EXAMPLE_BOOTS = DATA_DIR / "page-table-levels" / "example-boots.json"


def boots_to_study() -> tuple[list[dict[str, Any]], str]:
    """The boots of your newest VM run of this lab, or, before you have one, the example run shipped with the course."""
    from ... import results

    path = results.latest("page-table-levels", "vm")
    if path is not None:
        return results.load(path)["vms"]["boots"], f"your run {path}"
    return json.loads(EXAMPLE_BOOTS.read_text())["boots"], f"the course's example run ({EXAMPLE_BOOTS.name})"
