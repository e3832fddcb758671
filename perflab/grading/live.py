"""The grader's own fresh measurements, watched for neighbours as the labs' runs are (perflab.interference).

A measurement taken while other programs, or a VM's host, took a share of the CPUs it measures on is about
another machine than the learner's quiet one: a check built on it neither passes nor fails, it says
"the machine was busy (...): grade again when it is quiet", naming the CPU, the share and the programs,
unless it compares times whose intervals, widened by what the neighbours could have slowed an arm
(`Watched.slowdown`), still decide it (perflab.grading.races).
Only measurements a neighbour can move are watched: times, and counts that depend on a thread being on its
CPU; counts that no neighbour changes (pages per fault, the node of a page, instructions under icount) are not.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ..interference import busy_cpus, slowdown, watch
from . import INCONCLUSIVE, Check


@dataclass
class Watched:
    """What the watch saw: one phrase per CPU that neighbours took a share of (none when the CPUs were quiet), and
    how much longer they can have made an arm's time (perflab.interference.slowdown; None: no bound)."""

    busy: list[str] = field(default_factory=list)
    slowdown: float | None = None

    def why(self) -> str:
        return f"the machine was busy ({'; '.join(self.busy)}): grade again when it is quiet"


@contextmanager
def watched(cpus: Iterable[int]) -> Iterator[Watched]:
    """`with watched([0, 1]) as seen: measure()`; then seen.busy names the neighbours, if any."""
    seen = Watched()
    with watch(sorted(set(cpus))) as monitor:
        yield seen
    if monitor is not None and monitor.summary is not None:
        seen.busy, seen.slowdown = busy_cpus(monitor.summary), slowdown(monitor.summary)


def busy_check(name: str, expected: str, seen: Watched, measured: str = "") -> Check:
    """The check a busy measurement gives: inconclusive, naming the neighbours, with what was measured beside them."""
    return Check(name, INCONCLUSIVE, expected, (f"{measured}, but " if measured else "") + seen.why())
