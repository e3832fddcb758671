"""Recorded data, replayed: the original case's counts, and an osnoise hunt recorded where it cannot run now.

perflab/data/first-core-ipi/original-case.json keeps each observation as the
report states it: the hot CPU's count exactly, the other CPUs' counts as the
range the report gives (min to max), or a few CPUs' exact counts.
osnoise-hunt-wide-tcg.json keeps one hunt of part 3 as measured, with where
and how (a machine without osnoise, or under TCG, shows it from there).
"""

from __future__ import annotations

import json
from typing import Any

from ...paths import REPO_ROOT

ORIGINAL_CASE = REPO_ROOT / "perflab" / "data" / "first-core-ipi" / "original-case.json"
RECORDED_HUNT = ORIGINAL_CASE.with_name("osnoise-hunt-wide-tcg.json")


def load() -> dict[str, Any]:
    return json.loads(ORIGINAL_CASE.read_text())


def load_hunt() -> dict[str, Any]:
    """{"source", "caveat", "plan", "hunt": as noise.hunt_on returned it}."""
    return json.loads(RECORDED_HUNT.read_text())


def observation(row: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first observation of a /proc row with a hot CPU and a range for the others (CAL, TLB)."""
    return next(o for o in (data or load())["observations"] if o["row"] == row and "hot_count" in o)


def hot_ratio(found: dict[str, Any]) -> tuple[float, float]:
    """How many times the hot CPU's count exceeds the other CPUs': (at least, at most).

    Against the busiest other CPU it is the least; against the quietest, the most. Any other CPU's
    count, and so the median's, lies between: the ratio to the median core is in this interval.
    """
    return found["hot_count"] / found["others_max"], found["hot_count"] / found["others_min"]
