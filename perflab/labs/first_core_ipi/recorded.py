"""The original case, replayed: the counts the report gives, with their source, and nothing made up.

perflab/data/first-core-ipi/original-case.json keeps each observation as the
report states it: the hot CPU's count exactly, the other CPUs' counts as the
range the report gives (min to max), or a few CPUs' exact counts.
"""

from __future__ import annotations

import json
from typing import Any

from ...paths import REPO_ROOT

ORIGINAL_CASE = REPO_ROOT / "perflab" / "data" / "first-core-ipi" / "original-case.json"


def load() -> dict[str, Any]:
    return json.loads(ORIGINAL_CASE.read_text())


def observation(row: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first observation of a /proc row with a hot CPU and a range for the others (CAL, TLB)."""
    return next(o for o in (data or load())["observations"] if o["row"] == row and "hot_count" in o)


# ANCHOR: ratio
def hot_ratio(found: dict[str, Any]) -> tuple[float, float]:
    """How many times the hot CPU's count exceeds the other CPUs': (at least, at most).

    Against the busiest other CPU it is the least; against the quietest, the most. Any other CPU's
    count, and so the median's, lies between: the ratio to the median core is in this interval.
    """
    return found["hot_count"] / found["others_max"], found["hot_count"] / found["others_min"]
# ANCHOR_END: ratio
