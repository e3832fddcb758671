"""The rule of a grader's race, on made-up rounds: it passes a learner's version only when a known wrong fix,
raced beside it, is ruled out; a machine that cannot tell fixes apart gives inconclusive, never a pass."""

from __future__ import annotations

import random

import pytest

from perflab.grading import FAILED, INCONCLUSIVE, PASSED
from perflab.grading.races import BASELINE, RIGHT, WRONG, YOURS, grade_of

MIN_EFFECT = 0.05


def rounds(**speedups: float) -> dict[str, list[float]]:
    rng = random.Random(3)
    return {arm: [100 * (1 + speedups.get(arm, 0.0)) * rng.gauss(1, 0.01) for _ in range(40)]
            for arm in (BASELINE, YOURS, RIGHT, WRONG)}


@pytest.mark.parametrize("speedups, status", [
    ({YOURS: 0.20, RIGHT: 0.20}, PASSED),
    ({RIGHT: 0.20}, FAILED),  # yours no faster, the known fix is: this machine shows it, yours misses it
    ({YOURS: 0.20, RIGHT: 0.20, WRONG: 0.20}, INCONCLUSIVE),  # the wrong fix is faster too: cannot tell them apart
    ({YOURS: 0.20, WRONG: 0.20}, INCONCLUSIVE),  # a learner who submits the wrong fix, on a machine that rewards it
    ({}, INCONCLUSIVE),  # nothing is faster, not even the known fix: the machine does not show it
])
def test_the_grade_of_a_race(speedups, status):
    assert grade_of(rounds(**speedups), 0.01, MIN_EFFECT)[0] == status


def test_too_few_rounds_stay_undecided():
    few = {arm: values[:3] for arm, values in rounds(**{YOURS: 0.2, RIGHT: 0.2}).items()}
    assert grade_of(few, 0.01, MIN_EFFECT)[0] is None


def test_an_undecided_race_says_which_comparison_it_waits_for():
    """nsd-fix's reason read "yours vs baseline: +138.9% (CI +116.9% to +151.8%) ... not decided" and named nothing
    else: the known wrong fix, whose comparison was still open, went unsaid."""
    # The wrong fix sits on the threshold, and yours is not far enough above it to tell them apart directly.
    waiting = rounds(**{YOURS: MIN_EFFECT + 0.03, RIGHT: 0.5, WRONG: MIN_EFFECT})
    status, why = grade_of(waiting, 0.01, MIN_EFFECT)
    assert status is None and "not yet decided whether a known wrong fix is faster too (known wrong fix vs" in why
    slow = rounds(**{RIGHT: MIN_EFFECT})  # yours is not faster; the known fix sits on the threshold
    status, why = grade_of(slow, 0.01, MIN_EFFECT)
    assert status is None and "not yet decided whether the known fix is faster (known fix vs" in why


def test_a_fix_that_beats_the_known_wrong_fix_passes_while_the_wrong_fix_stays_open():
    """nsd-fix after 40 rounds, and alignment-slow-build after 60: yours +139% and +51%, the known wrong fix's own
    small effect still straddling the threshold, so the grade stayed undecided though the run plainly told the
    two apart. Yours against the wrong fix decides it."""
    status, why = grade_of(rounds(**{YOURS: 0.5, RIGHT: 0.5, WRONG: MIN_EFFECT}), 0.01, MIN_EFFECT)
    assert status == PASSED and "yours vs known wrong fix: +" in why
    level = rounds(**{YOURS: 0.5, RIGHT: 0.5, WRONG: 0.5})  # the wrong fix as fast as yours: still not a pass
    assert grade_of(level, 0.01, MIN_EFFECT)[0] == INCONCLUSIVE


def test_beside_a_neighbour_a_grade_stands_only_if_the_slowdown_it_allows_could_not_have_made_it():
    """A neighbour that could have slowed any version by 10% leaves a 20% fix a pass; one that could have slowed
    it by 30% could have made the whole difference, and the grade is no longer decided."""
    clear = rounds(**{YOURS: 0.20, RIGHT: 0.20})
    status, why = grade_of(clear, 0.01, MIN_EFFECT, slowdown=0.10)
    assert status == PASSED and "allowing for an arm slowed by up to 10% by other programs on its CPU" in why
    assert grade_of(clear, 0.01, MIN_EFFECT, slowdown=0.30)[0] is None
    missed = rounds(**{RIGHT: 0.20})  # yours no faster: a fail stands only if even a hidden 10% would be too little
    assert grade_of(missed, 0.01, MIN_EFFECT, slowdown=0.02)[0] == FAILED
    assert grade_of(missed, 0.01, MIN_EFFECT, slowdown=0.10)[0] is None
