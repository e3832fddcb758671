"""A small cache-hierarchy simulator: two cores, private L1s, one shared LLC.

It models capacity and replacement only, which is all back-invalidation
needs: set-associative caches with LRU replacement, reads only, no
coherence states, no prefetching, no timing. Lines are integers (line
numbers, not byte addresses); a line's set is `line % sets`.

Three LLC policies:
- inclusive: a miss fills the LLC and the L1; when the LLC evicts a line it
  also removes it from every L1 that holds it (a back-invalidation). The LLC
  sees only L1 misses, so a line that hits in an L1 all day grows old in the
  LLC and becomes its victim.
- non-inclusive: fills both, but an LLC eviction leaves the L1s alone.
- exclusive: a miss fills only the L1; the LLC holds what the L1s evicted (a
  victim cache), and an LLC hit moves the line back to the L1.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterable

from ...formatting import table

POLICIES = ("inclusive", "non-inclusive", "exclusive")


class Cache:
    """A set-associative cache with LRU replacement; each set is a list from least to most recently used."""

    def __init__(self, sets: int, ways: int):
        if sets < 1 or ways < 1:
            raise ValueError(f"a cache needs at least one set and one way, not {sets} sets x {ways} ways")
        self.sets, self.ways = sets, ways
        self.lines: list[list[int]] = [[] for _ in range(sets)]

    @property
    def capacity(self) -> int:
        return self.sets * self.ways

    def holds(self, line: int) -> bool:
        return line in self.lines[line % self.sets]

    def touch(self, line: int) -> bool:
        """Look the line up; a hit makes it the most recently used of its set."""
        entries = self.lines[line % self.sets]
        if line not in entries:
            return False
        entries.remove(line)
        entries.append(line)
        return True

    def insert(self, line: int) -> int | None:
        """Put the line in as most recently used; return the line it evicted, if any."""
        entries = self.lines[line % self.sets]
        evicted = entries.pop(0) if len(entries) == self.ways else None
        entries.append(line)
        return evicted

    def remove(self, line: int) -> bool:
        entries = self.lines[line % self.sets]
        if line in entries:
            entries.remove(line)
            return True
        return False

    def contents(self) -> list[int]:
        """Every line held, set by set, each set from least to most recently used."""
        return [line for entries in self.lines for line in entries]


@dataclass
class Access:
    """What one access did: where it hit, and which lines the LLC evicted from which L1 because of it."""

    core: int
    line: int
    level: str  # "L1", "LLC" or "memory"
    back_invalidated: list[tuple[int, int]] = field(default_factory=list)  # (core, line)


@dataclass
class Counts:
    """Per-core tallies."""

    l1_hits: int = 0
    llc_hits: int = 0
    memory: int = 0
    back_invalidated: int = 0  # lines this core lost from its L1 to LLC evictions

    @property
    def accesses(self) -> int:
        return self.l1_hits + self.llc_hits + self.memory

    @property
    def l1_misses(self) -> int:
        return self.llc_hits + self.memory


class Hierarchy:
    """`cores` private L1s and one shared LLC under one of POLICIES."""

    def __init__(self, l1: tuple[int, int], llc: tuple[int, int], policy: str, cores: int = 2):
        if policy not in POLICIES:
            raise ValueError(f"unknown LLC policy {policy!r}: choose one of {', '.join(POLICIES)}")
        self.policy = policy
        self.l1s = [Cache(*l1) for _ in range(cores)]
        self.llc = Cache(*llc)
        self.counts = [Counts() for _ in range(cores)]

    # ANCHOR: access
    def access(self, core: int, line: int) -> Access:
        """One read by `core`. The LLC is consulted only when the L1 misses."""
        l1, counts = self.l1s[core], self.counts[core]
        if l1.touch(line):
            counts.l1_hits += 1
            return Access(core, line, "L1")
        result = Access(core, line, "LLC" if self.llc.touch(line) else "memory")
        if self.policy == "exclusive":
            if result.level == "LLC":
                self.llc.remove(line)  # it moves up: never in both
            evicted = l1.insert(line)
            if evicted is not None:
                self.llc.insert(evicted)  # the LLC is filled by L1 evictions only
        else:
            if result.level == "memory":
                evicted = self.llc.insert(line)
                if evicted is not None and self.policy == "inclusive":
                    result.back_invalidated = self._back_invalidate(evicted)
            l1.insert(line)
        if result.level == "LLC":
            counts.llc_hits += 1
        else:
            counts.memory += 1
        return result

    def _back_invalidate(self, line: int) -> list[tuple[int, int]]:
        """Inclusion: a line the LLC no longer holds may not stay in any L1."""
        lost = []
        for core, l1 in enumerate(self.l1s):
            if l1.remove(line):
                self.counts[core].back_invalidated += 1
                lost.append((core, line))
        return lost
    # ANCHOR_END: access

    def reset_counts(self) -> None:
        self.counts = [Counts() for _ in self.counts]


# --- the textbook case ---------------------------------------------------------------------------------

TEXTBOOK_TRACE = "abacade"


@dataclass
class Step:
    """One access of a replayed trace and the cache contents after it (least to most recently used)."""

    name: str
    level: str
    l1: list[str]
    llc: list[str]
    back_invalidated: list[str]


def replay(trace: str, policy: str, l1_lines: int = 2, llc_lines: int = 4) -> list[Step]:
    """Replay a trace of one-letter lines on core 0 with fully associative caches (one set each)."""
    if not trace or not all(c.isalpha() for c in trace):
        raise ValueError(f"a trace is letters, one per access, like {TEXTBOOK_TRACE!r}; got {trace!r}")
    hierarchy = Hierarchy((1, l1_lines), (1, llc_lines), policy, cores=1)
    steps = []
    for name in trace:  # lines are the letters' code points, so chr() prints them back as letters
        access = hierarchy.access(0, ord(name))
        steps.append(Step(name, access.level, [chr(x) for x in hierarchy.l1s[0].contents()],
                          [chr(x) for x in hierarchy.llc.contents()], [chr(x) for _, x in access.back_invalidated]))
    return steps


def render_steps(steps: list[Step]) -> str:
    """The replay as a table, one access per row."""
    rows = [("access", "served by", "L1 (old -> new)", "LLC (old -> new)", "back-invalidated")]
    rows += [(s.name, s.level, " ".join(s.l1), " ".join(s.llc), " ".join(s.back_invalidated)) for s in steps]
    return table(rows)


# --- the victim and the aggressor ----------------------------------------------------------------------

@dataclass(frozen=True)
class Geometry:
    """A scaled-down machine: L1 and LLC as (sets, ways), the victim's working set in lines."""

    l1: tuple[int, int] = (8, 8)
    llc: tuple[int, int] = (64, 16)
    victim_lines: int = 32
    victim_accesses_per_line: int = 2  # victim loads per aggressor line (about 1.7 ns vs 3 ns on the dev machine)


SCALED = Geometry()  # the default: small enough to simulate in a blink, the same shape as a real machine
AGGRESSOR_BASE = 1 << 30  # the aggressor's lines are numbered from here: never the victim's


def victim_aggressor(policy: str, aggressor_lines: int, geometry: Geometry = SCALED, passes: int = 3) -> Counts:
    """Core 0 cycles over its small working set while core 1 streams `aggressor_lines` lines.

    One warm-up pass fills the caches; the victim's counts are then taken over
    `passes` passes of the aggressor.
    """
    hierarchy = Hierarchy(geometry.l1, geometry.llc, policy)
    victim = itertools.cycle(range(geometry.victim_lines))
    for _ in range(geometry.victim_lines):
        hierarchy.access(0, next(victim))
    for pass_number in range(passes + 1):
        if pass_number == 1:
            hierarchy.reset_counts()
        for line in range(AGGRESSOR_BASE, AGGRESSOR_BASE + aggressor_lines):
            hierarchy.access(1, line)
            for _ in range(geometry.victim_accesses_per_line):
                hierarchy.access(0, next(victim))
    return hierarchy.counts[0]


def sweep(policy: str, fractions: Iterable[float], geometry: Geometry = SCALED, passes: int = 3) -> dict[float, Counts]:
    """The victim's counts for aggressor buffers of each fraction of the LLC's capacity."""
    capacity = geometry.llc[0] * geometry.llc[1]
    return {f: victim_aggressor(policy, round(f * capacity), geometry, passes) for f in fractions}


def eviction_threshold(geometry: Geometry) -> float:
    """The aggressor size, as a fraction of the LLC, above which an inclusive LLC must evict the victim.

    A set holding v victim lines has ways - v ways left for the aggressor,
    whose lines spread evenly over the sets.
    """
    sets, ways = geometry.llc
    victim_per_set = -(-geometry.victim_lines // sets)
    return (ways - victim_per_set) / ways
