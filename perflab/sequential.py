"""Measure until decided: a race of interleaved rounds, looked at every few rounds, stopped when it is decided.

A fixed number of rounds is either too few (on a noisy machine the verdict
becomes a coin toss) or too many (minutes spent confirming the obvious). So
a race runs in looks: each look adds a few interleaved rounds, each round
measures every arm once in a rotated order, and then the verdict is judged
on everything so far. The race stops at the first decided verdict
(reproduced or not-reproduced), and is inconclusive when its rounds or its
time budget run out.

Looking many times must not raise the error rate. The design splits the
chosen error rate evenly over the looks it may make: each look judges at
alpha / max_looks (Bonferroni), so the chance that any look decides wrongly
stays below alpha, whenever the race stops. It is the simplest
group-sequential design, and a conservative one.

The machine can change under a race: a VM's vCPU moves to another core,
another load arrives. Every look checks the control arm (the unchanged
program, the fastest offset) for a step change (stats.step_change); the
rounds before a step are dropped from every arm, the race goes on with what
is left, and the notes say so. A race judged round by round (verdict.
judge_paired_change) names its two arms as the control instead: a step in
the machine's level moves both arms of a round alike and leaves their ratio,
so only a step in the rounds' ratio drops rounds.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from tqdm.auto import tqdm

from . import stats
from .errors import PerflabError
from .verdict import ALPHA

DECIDED = ("reproduced", "not-reproduced")
MAX_RUNS = 10_000  # `--runs` above this is a typo, not a plan
MIN_KEPT = 8  # no verdict from fewer rounds: a bootstrap interval of 3 values is far too narrow


@dataclass(frozen=True)
class Plan:
    """How a race may run: rounds per look, at most max_rounds and budget_s seconds, error rate alpha."""

    rounds_per_look: int
    max_rounds: int
    budget_s: float
    alpha: float = ALPHA

    def __post_init__(self):
        if not (1 <= self.max_rounds <= MAX_RUNS and self.rounds_per_look >= 1):
            raise PerflabError(f"a race needs between 1 and {MAX_RUNS} rounds, not {self.max_rounds}: "
                               f"pass --runs between 1 and {MAX_RUNS}")

    @property
    def per_look(self) -> int:
        return min(self.rounds_per_look, self.max_rounds)

    @property
    def max_looks(self) -> int:
        return math.ceil(self.max_rounds / self.per_look)

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / self.max_looks


@dataclass
class Race:
    """What a race measured (one value per arm per round, every round kept) and how it ended."""

    arms: list[str]
    values: dict[str, list[float]]
    alpha_per_look: float
    first_kept: int = 0  # rounds before this one were dropped: the machine stepped to another state
    looks: int = 0
    stopped: str = ""  # "decided", "rounds" or "budget"
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        return len(self.values[self.arms[0]])

    def kept(self, arm: str) -> list[float]:
        return self.values[arm][self.first_kept:]

    def kept_values(self) -> dict[str, list[float]]:
        return {arm: self.kept(arm) for arm in self.arms}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Race:
        return cls(**data)

    def undecided(self, advice: str | None = None) -> str:
        """Why an inconclusive race stopped, and what would decide it: a lab's run takes more rounds; a grader
        gives its own `advice`."""
        kept = self.rounds - self.first_kept
        why = (f"the time budget ran out after {self.rounds} rounds ({self.seconds:.0f} s)" if self.stopped == "budget"
               else f"all {self.rounds} rounds are measured")
        advice = advice or f"rerun with more rounds (--runs {2 * self.rounds}) or without --quick, on a quieter machine"
        return f"not decided: {why}, {kept} of them kept; {advice}"


# ANCHOR: race
def race(arms: list[str], measure_round: Callable[[int, list[str]], dict[str, float]],
         decided: Callable[[dict[str, list[float]], float], bool], plan: Plan, control: str | tuple[str, str],
         desc: str, progress: bool = True) -> Race:
    """Measure `arms` round by round (measure_round(r, order) measures each arm once, in that order) until
    decided(kept values, alpha_per_look) says so, or the rounds or the budget run out. `control` is the arm whose
    step drops the rounds before it, or (a, b) for a race judged on each round's ratio a / b."""
    result = Race(list(arms), {arm: [] for arm in arms}, plan.alpha_per_look)
    start = time.monotonic()
    bar = tqdm(total=plan.max_rounds, desc=desc, disable=not progress, file=sys.stderr, leave=False)
    with bar:
        while result.rounds < plan.max_rounds:
            for _ in range(min(plan.per_look, plan.max_rounds - result.rounds)):
                shift = result.rounds % len(arms)
                measured = measure_round(result.rounds, arms[shift:] + arms[:shift])
                for arm in arms:
                    result.values[arm].append(measured[arm])
                bar.update()
            result.looks += 1
            _drop_before_a_step(result, control)
            result.seconds = time.monotonic() - start
            enough = result.rounds - result.first_kept >= min(MIN_KEPT, plan.max_rounds)
            if enough and decided(result.kept_values(), plan.alpha_per_look):
                result.stopped = "decided"
                break
            if result.seconds * (result.looks + 1) / result.looks > plan.budget_s:
                result.stopped = "budget"  # one more look would overrun the budget
                break
        else:
            result.stopped = "rounds"
        # A race that stops early is finished, not failed: short of its total, a notebook's bar is left red,
        # with the ETA of rounds that will never run.
        bar.total = bar.n
    return result
# ANCHOR_END: race


def _drop_before_a_step(result: Race, control: str | tuple[str, str]) -> None:
    if isinstance(control, str):
        kept, name = result.kept(control), control
    else:
        kept = [a / b for a, b in zip(*map(result.kept, control))]
        name = f"the rounds' ratio {control[0]} / {control[1]}"
    step = stats.step_change(kept)
    if step is None:
        return
    before, after = stats.median(kept[:step]), stats.median(kept[step:])
    result.notes.append(f"{name} stepped from {before:.4g} to {after:.4g} at round {result.first_kept + step + 1}: "
                        "the machine changed (on a VM, the host may have moved the vCPU), so the rounds before "
                        "were dropped and the race went on")
    result.first_kept += step
