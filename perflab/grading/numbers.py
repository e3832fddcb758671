"""How a check shows a value: one formatter for every number the grader prints, expected and got alike.

A float's repr carries its binary noise (499999.99999999994) and a number formatted by hand has whatever
digits its author chose, so a learner read `got: 499999.99999999994` against `expected: 500,000 queries
per second`. `shown` writes every number the same way: thousands grouped, a few significant digits (more where
a check's tolerance is tighter: `digits_for`), no trailing zeros; lists, tuples, sets and dicts show each
number so; anything else as its repr, so a text answer keeps its quotes.
"""

from __future__ import annotations

import math
from typing import Any

SIGNIFICANT = 4  # enough to read a measurement, few enough to read at a glance


def digits_for(rel: float) -> int:
    """Significant digits that show two numbers apart by more than a relative tolerance `rel` as different; an
    exact check (rel 0) shows all 17 a float has."""
    if rel <= 0:
        return 17
    return max(SIGNIFICANT, math.ceil(-math.log10(rel)) + 1)


def shown(value: Any, digits: int = SIGNIFICANT) -> str:
    """The value as a check shows it: 499999.99999999994 -> '500,000', 0.00230 -> '0.0023', [1.0, 'a'] -> "[1, 'a']"."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return _float(value, digits)
    if isinstance(value, (list, tuple, set, frozenset)):
        inner = ", ".join(shown(v, digits) for v in (sorted(value, key=repr) if isinstance(value, (set, frozenset))
                                                     else value))
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]" if isinstance(value, list) else f"{{{inner}}}" if value else "set()"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(k, digits)}: {shown(v, digits)}" for k, v in value.items()) + "}"
    return repr(value)


def _float(value: float, digits: int) -> str:
    if not math.isfinite(value):
        return repr(value)
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text
