"""How perflab formats what it writes for people: aligned plain-text tables (the CLI's and the benchmarks'), `code`
spans of a verdict's text in HTML (the report and the notebooks), a measured value with its spread."""

from __future__ import annotations

import html
import re
from typing import Sequence

from . import stats


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells (the first row is the header) as left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def inline_html(text: str) -> str:
    """Plain text for an HTML page, with `command` spans (as verdicts and notes write them) shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def median_with_spread(values: Sequence[float], unit: str, digits: int = 1, counted: str = "samples") -> str:
    """One measured value as the notebooks show it, with the spread of what it was taken from: the median of the
    samples (or runs, rounds: `counted`), their range, and from stats.MIN_SAMPLES on the median's 95% bootstrap
    interval, e.g. "71 ns (median of 40 samples; 95% CI 69 to 73, range 49 to 92)"."""
    def shown(value: float) -> str:
        return f"{value:,.{digits}f}"

    middle = stats.median(values)
    if len(values) == 1:
        return f"{shown(middle)} {unit} (one value: no spread to show)"
    spread = f"range {shown(min(values))} to {shown(max(values))}"
    if len(values) >= stats.MIN_SAMPLES:  # fewer, and the interval is little narrower than the range
        low, high = stats.bootstrap_ci(values, stats.median)
        spread = f"95% CI {shown(low)} to {shown(high)}, {spread}"
    return f"{shown(middle)} {unit} (median of {len(values)} {counted}; {spread})"
