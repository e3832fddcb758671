"""What a case can plant: each cause is a phenomenon of one of the course's labs, put in one stage of sessiond
or in how it is started, with the release's version (planted) and a version without it (the generator's own
fix). A seed draws two or three causes, from those this machine can show."""

from __future__ import annotations

import random
from dataclasses import dataclass

# What a learner may name as a cause's kind: every phenomenon of the course, drawn here or not, so that the
# list says nothing about the case.
KINDS = {
    "pinning": "core-to-core (lab 1): threads placed on CPUs that make them wait or share",
    "inclusive-llc": "inclusive-llc (lab 2): another core's misses evicting this core's lines",
    "interrupts": "first-core-ipi (lab 3): interrupts taking the service's CPU",
    "page-faults": "page-table-levels (lab 4): the cost of faulting memory in",
    "shared-cache-line": "numa-static-data (lab 5): a cache line written by every thread",
    "loop-alignment": "loop-alignment (lab 6): a hot loop's placement in memory",
    "off-critical-path": "causal-profiling (lab 7): optimising what does not limit throughput",
    "4k-aliasing": "4k-aliasing (lab 8): loads and stores 4 KiB apart",
    "quadratic": "hidden-quadratic (lab 9): work that grows with the square of the data",
    "memory-neighbour": "memory-neighbour (lab 10): another process saturating the memory controller",
    "memcpy-variant": "memcpy-variant (lab 11): the copy routine glibc picked",
    "profiler-overhead": "profiler-overhead (lab 12): the measuring tool's own cost",
}


@dataclass(frozen=True)
class Cause:
    name: str
    kind: str  # one of KINDS: what the learner must name
    where: tuple[str, ...]  # the functions of service.c it lives in (any one names it), or ("start.sh",)
    stage: str | None  # the harness's stage whose time it adds to; None for a cause in how it is started
    slot: str  # the part of the release it replaces: a stage file's name, or "start"
    planted: str  # that part as the release has it
    fixed: str  # that part without the cause
    needs_cpus: int = 1  # online CPUs the machine needs to show it
    question: str = ""  # asked when a learner names this kind where it is not

    @property
    def in_start(self) -> bool:
        return self.stage is None


CAUSES = (
    Cause("atomic-totals", "shared-cache-line", ("account",), "account", "account", "atomic", "local", 2,
          "does account's time per request fall when one worker runs alone (./start.sh --threads 1 --json)?"),
    Cause("adjacent-totals", "shared-cache-line", ("account",), "account", "account", "array", "local", 2,
          "does account's time per request fall when one worker runs alone (./start.sh --threads 1 --json)?"),
    Cause("shifting-queue", "quadratic", ("expire_sessions", "remember"), "expire", "expire", "shift", "ring",
          question="does the function's time per call grow with the number of sessions it holds?"),
    Cause("strcat-response", "quadratic", ("build_response",), "respond", "respond", "strcat", "append",
          question="how many bytes does each call read, for a response of n tags?"),
    Cause("one-cpu", "pinning", ("start.sh",), None, "start", "one-cpu", "spread", 2,
          "while it serves, are all CPUs busy (mpstat -P ALL 1)?"),
)
SLOTS = ("account", "expire", "respond", "start")


def eligible(online_cpus: int) -> list[str]:
    """The causes a machine with this many online CPUs can show."""
    return [cause.name for cause in CAUSES if online_cpus >= cause.needs_cpus]


def by_name(name: str) -> Cause:
    return next(cause for cause in CAUSES if cause.name == name)


def draw(seed: int, names: list[str]) -> list[Cause]:
    """Two or three causes, in different parts of the release, from the eligible `names`; the same for a seed."""
    rng = random.Random(seed)
    slots = sorted({by_name(name).slot for name in names}, key=SLOTS.index)
    count = min(len(slots), rng.choice((2, 3)))
    chosen = sorted(rng.sample(slots, count), key=SLOTS.index)
    return [rng.choice([by_name(n) for n in names if by_name(n).slot == slot]) for slot in chosen]


def parameters(seed: int) -> dict[str, int]:
    """The sizes that vary between cases (the release's own, not causes): sessions' lifetime, tags per answer."""
    rng = random.Random(seed * 7919 + 1)
    return {"session_age": rng.choice((768, 1024, 1280)), "tags": rng.choice((14, 16, 18))}
