"""The cases' part of the author check: for a few seeds that together plant every cause, the generator's own fix
must pass (or be inconclusive on a busy machine, as exercises may) and the untouched case must fail. trial() is
also benchmarks/case_stability.py's, over many seeds."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..grading import FAILED, Report
from ..paths import environment, scratch
from .case import Case, new_case
from .causes import CAUSES, draw, eligible
from .grade import grade_case
from .reveal import solve

AUTHOR_SEEDS = (7, 4)  # seed 7: atomic-totals, shifting-queue, one-cpu; seed 4: adjacent-totals, strcat-response
BUSY = "the machine was busy"


@dataclass(frozen=True)
class Trial:
    case: Case
    made_s: float  # to write and build the case, measuring its symptom
    untouched: Report
    fixed: list[Report]  # the fixed case's grades: again while one said the machine was busy
    grade_s: list[float]


def trial(seed: int, grades: int = 1) -> Trial:
    """In a workspace of its own: make the case of `seed`, grade it untouched, apply the generator's own fix and
    grade that, again while the grade says the machine was busy (as it tells a learner to), `grades` at most."""
    with scratch("case-check") as folder, environment("PERFLAB_WORKSPACE", folder):
        start = time.monotonic()
        case = new_case(seed, say=lambda _: None)
        made_s = time.monotonic() - start
        untouched = grade_case(case, record=False, progress_bar=False)
        solve(case)
        fixed, seconds = [], []
        while len(fixed) < grades and (not fixed or was_busy(fixed[-1])):
            start = time.monotonic()
            fixed.append(grade_case(case, record=False, progress_bar=False))
            seconds.append(time.monotonic() - start)
    return Trial(case, made_s, untouched, fixed, seconds)


def was_busy(report: Report) -> bool:
    return any(BUSY in check.got for check in report.checks)


def author_trials() -> dict[int, Trial]:
    """The trial of every author seed, by seed."""
    return {seed: trial(seed) for seed in AUTHOR_SEEDS}


def author_problems(trials: dict[int, Trial] | None = None) -> list[str]:
    """Every problem of the author seeds, one line each; `trials` are author_trials(), when a caller has them."""
    trials = trials if trials is not None else author_trials()
    problems = []
    planted = {cause.name for seed in trials for cause in draw(seed, eligible(2))}
    problems += [f"cases: no author seed plants {c.name}: add one to AUTHOR_SEEDS" for c in CAUSES
                 if c.name not in planted]
    for done in trials.values():
        if done.untouched.status != FAILED:
            problems.append(f"{done.case.name}: the untouched case does not fail ({done.untouched.status})")
        if done.fixed[-1].status == FAILED:
            problems.append(f"{done.case.name}: the generator's own fix does not pass:\n{done.fixed[-1].render()}")
    return problems
