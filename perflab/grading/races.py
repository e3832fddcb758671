"""Graders that race programs: the learner's version against the baseline, with a known fix and a known wrong
fix in the same interleaved rounds, until the grade is decided.

- passed: the learner's version is faster by the threshold, significantly, and either the known wrong fix is not,
  or the learner's version beats the known wrong fix by the threshold too (so this run tells a fix from a wrong
  one, though the wrong fix's own small effect may stay open: nsd-fix's did after 40 rounds of a +139% fix);
- failed: the learner's version is not faster, and the known fix is (so this machine shows the effect);
- inconclusive: the known wrong fix is faster too (this run cannot tell a fix from a wrong one), or the known
  fix is not faster either (this machine did not show the effect), or the budget ran out undecided, or other
  programs shared the race's CPUs (whatever it decided: the machine was busy).

Four comparisons make the grade, so each look judges each at a quarter of the look's error rate.
"""

from __future__ import annotations

from typing import Callable, Iterable

from .. import stats
from ..lock import measurement_lock
from ..runner import run_once
from ..sequential import Plan, race
from ..verdict import judge_change
from . import FAILED, INCONCLUSIVE, PASSED, Check
from .live import busy_check, watched

BASELINE, YOURS, RIGHT, WRONG = "baseline", "yours", "known fix", "known wrong fix"


def grade_of(values: dict[str, list[float]], alpha: float, min_effect: float,
             statistic: Callable = stats.median, slowdown: float = 0.0) -> tuple[str | None, str]:
    """(status, why) from the rounds so far; status None while undecided. `slowdown`: how much a neighbour can
    have slowed any version (perflab.interference.slowdown), which widens every comparison."""
    def faster(arm: str, than: str = BASELINE) -> tuple[str, str]:
        verdict, reason, _ = judge_change(f"{arm} vs {than}", values[than], values[arm], min_effect, statistic,
                                          alpha=alpha / 4, slowdown=slowdown)
        return verdict, reason

    (mine, mine_why), (right, right_why), (wrong, wrong_why) = faster(YOURS), faster(RIGHT), faster(WRONG)
    if wrong == "reproduced":
        return INCONCLUSIVE, (f"{mine_why}; but a known wrong fix was faster too ({wrong_why}): this run cannot "
                              "tell a fix from a wrong one; grade again on a quieter machine")
    if mine == "reproduced" and wrong == "not-reproduced":
        return PASSED, mine_why
    beats_wrong, beats_wrong_why = faster(YOURS, than=WRONG) if mine == "reproduced" else (None, "")
    if beats_wrong == "reproduced":
        return PASSED, f"{mine_why}; and {beats_wrong_why}"
    if mine == "not-reproduced" and right == "reproduced":
        return FAILED, f"{mine_why} (a known fix was faster: {right_why})"
    if mine == "not-reproduced" and right == "not-reproduced":
        return INCONCLUSIVE, (f"{mine_why}; but the known fix was not faster either ({right_why}): this machine "
                              "did not show the effect in this run; grade again, or on a machine that shows it")
    if mine == "reproduced":  # yours is faster; the known wrong fix may be too: more rounds tell
        return None, f"{mine_why}; not yet decided whether a known wrong fix is faster too ({wrong_why})"
    if mine == "not-reproduced":  # yours is not faster; whether this machine shows the effect is not decided yet
        return None, f"{mine_why}; not yet decided whether the known fix is faster ({right_why})"
    return None, mine_why


def race_fixes(argv: dict[str, list[str]], value: Callable[[list[dict]], float], plan: Plan, min_effect: float,
               name: str, expected: str, cpus: Iterable[int], statistic: Callable = stats.median) -> Check:
    """Race the four programs of `argv` (keys BASELINE, YOURS, RIGHT, WRONG), which run on `cpus`, until the grade
    is decided; a race that neighbours shared those CPUs with decides only what they could not have made
    (perflab.grading.live)."""
    def one_round(_r: int, order: list[str]) -> dict[str, float]:
        return {arm: value([s for s in run_once(argv[arm])[1] if not s.get("warmup")]) for arm in order}

    with measurement_lock(f"perflab grade: {name}"), watched(cpus) as seen:
        raced = race(list(argv), one_round,
                     lambda values, alpha: grade_of(values, alpha, min_effect, statistic)[0] is not None,
                     plan, control=BASELINE, desc="grading: racing the versions", progress=False)
    status, why = grade_of(raced.kept_values(), raced.alpha_per_look, min_effect, statistic)
    if seen.busy:  # the versions' times are what a neighbour slows: decided if still decided allowing for it
        if seen.slowdown is not None:
            beside, beside_why = grade_of(raced.kept_values(), raced.alpha_per_look, min_effect, statistic,
                                          seen.slowdown)
            if beside in (PASSED, FAILED):
                return Check(name, beside, expected,
                             f"{beside_why}; decided beside neighbours ({'; '.join(seen.busy)})")
        return busy_check(name, expected, seen, f"{status or 'undecided'} ({why})")
    if status is None:
        return Check(name, INCONCLUSIVE, expected, f"{why}; {raced.undecided('grade again, on a quieter machine')}")
    return Check(name, status, expected, why)
