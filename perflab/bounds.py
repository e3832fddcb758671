"""Physical bounds on a lab's raw samples: what no machine can measure, so a result beyond them was made up.

Every lab declares its bounds (Lab.BOUNDS), one per raw quantity it measures, each with the physics that
sets it. A grader that reads a learner's saved result refuses one with a sample outside them
(perflab.grading.answers.saved_result), naming the bound: a result's digest shows it is the file perflab
wrote, not that perflab measured what is in it, since `perflab.results.save()` is public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

NO_LIMIT = math.inf  # a quantity that physics bounds on one side only


@dataclass(frozen=True)
class Bound:
    """The values one raw quantity can take on any machine: from `low` to `high`, both included."""

    quantity: str  # with its unit, as a learner reads it: "time per round trip (ns)"
    low: float
    high: float
    why: str  # the physics, in a few words, shown beside a refusal
    values: Callable[[dict[str, Any]], Iterable[float]]  # the quantity in a result, one value per raw sample

    def problem(self, result: dict[str, Any]) -> str | None:
        """Why the result's samples cannot have been measured, or None when every one is within the bound."""
        for value in self.values(result):
            if value < self.low:
                return f"a sample's {self.quantity} is {value:.3g}, below {self.low:g}: {self.why}"
            if value > self.high:
                return f"a sample's {self.quantity} is {value:.3g}, above {self.high:g}: {self.why}"
            if math.isnan(value):
                return f"a sample's {self.quantity} is not a number"
        return None


def bound_problems(bounds: Iterable[Bound], result: dict[str, Any]) -> list[str]:
    """Every bound the result's samples break; a result whose samples are not where its lab keeps them breaks
    them all (a made-up file need not have the lab's shape)."""
    problems = []
    for bound in bounds:
        try:
            problem = bound.problem(result)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError):
            problem = f"its {bound.quantity} is not where a {result.get('lab')} result keeps it"
        if problem:
            problems.append(problem)
    return problems

