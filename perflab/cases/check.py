"""The cases' part of the author check: for a few seeds that together plant every cause, the generator's own fix
must pass (or be inconclusive on a busy machine, as exercises may) and the untouched case must fail."""

from __future__ import annotations

import tempfile

from ..grading import FAILED
from ..paths import environment
from .case import new_case
from .causes import CAUSES, draw, eligible
from .grade import grade_case
from .reveal import solve

AUTHOR_SEEDS = (7, 4)  # seed 7: atomic-totals, shifting-queue, one-cpu; seed 4: adjacent-totals, strcat-response


def author_problems(seeds: tuple[int, ...] = AUTHOR_SEEDS) -> list[str]:
    problems = []
    planted = {cause.name for seed in seeds for cause in draw(seed, eligible(2))}
    problems += [f"cases: no author seed plants {c.name}: add one to AUTHOR_SEEDS" for c in CAUSES
                 if c.name not in planted]
    with tempfile.TemporaryDirectory(prefix="perflab-case-check-") as folder, environment("PERFLAB_WORKSPACE", folder):
        for seed in seeds:
            case = new_case(seed, say=lambda _: None)
            untouched = grade_case(case, record=False, progress_bar=False)
            if untouched.status != FAILED:
                problems.append(f"{case.name}: the untouched case does not fail ({untouched.status})")
            solve(case)
            fixed = grade_case(case, record=False, progress_bar=False)
            if fixed.status == FAILED:
                problems.append(f"{case.name}: the generator's own fix does not pass:\n{fixed.render()}")
    return problems
