"""A case's hints: the method first (which resource, where the time goes, which lab's hunt), then, one failed
grade at a time, the part of the release that still holds a cause the diagnosis has not named."""

from __future__ import annotations

from .case import Case
from .causes import KINDS
from .diagnosis import Named

METHOD = (
    "Which resource is saturated, and which sits idle? Run `./start.sh --requests 50000000` in one terminal and "
    "`mpstat -P ALL 1` in another (the USE method: utilization, saturation, errors, for each resource).",
    "Where does the time go? `perf record --call-graph dwarf ./start.sh --requests 4000000`, then `perf report "
    "--no-children`: which functions lead, and which of service.c's call them? `./start.sh --json` gives each "
    "stage's time per request too.",
    "Which lab's hunt fits each clue: a function whose time grows with the data it holds, memory that every "
    "thread writes, CPUs left idle? `perflab probe` says what this machine can show.",
)


def hint_for(case: Case, named: list[Named], failures: int) -> tuple[int, str]:
    """(number, hint) after `failures` failed grades: the first hint from the start, one more per failure (an
    exercise's hints, fewer and narrower, stay at the first until a second failure)."""
    opened = all_hints(case, named, failures)
    return len(opened), opened[-1]


def all_hints(case: Case, named: list[Named], failures: int) -> list[str]:
    """Every hint opened after `failures` failed grades, in order."""
    causes = [] if case.sealed else case.causes  # a sealed case's hints stay with the method
    unfound = [c for c in causes if not any(n.kind == c.kind and n.where in c.where for n in named)]
    narrowing = []
    for cause in unfound[:1]:
        where = "how sessiond is started (start.sh)" if cause.in_start else f"{cause.where[0]} in service.c"
        narrowing += [f"One cause not named yet is in {where}: {cause.question}",
                      f"That cause is the kind the course calls {cause.kind}: {KINDS[cause.kind]}. What did that "
                      "lab measure, and what fixed it?"]
    hints = [*METHOD, *narrowing]
    return hints[:min(failures + 1, len(hints))]
