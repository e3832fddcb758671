"""Read /proc/interrupts and /proc/softirqs: per-CPU counters, one row per interrupt or softirq.

Both files have the same shape: a header naming the online CPUs ("CPU0 CPU2"
when CPU 1 is offline: columns are CPU numbers, not positions), then one row
per counter, "LABEL:" followed by one count per CPU and, in
/proc/interrupts, a description ("Function call interrupts", or the chip and
device of a numbered IRQ). A few rows (ERR, MIS) hold one machine-wide count:
they are kept as totals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import PerflabError

HEADER = re.compile(r"^\s*(CPU\d+\s*)+$")


@dataclass(frozen=True)
class CounterTable:
    """One snapshot: for each row, its counts in the order of `cpus`."""

    cpus: tuple[int, ...]
    rows: dict[str, tuple[int, ...]]
    descriptions: dict[str, str] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # machine-wide rows such as ERR and MIS

    def row(self, name: str) -> dict[int, int]:
        """{cpu: count} of one row; an unknown row is an error naming the rows there are."""
        if name not in self.rows:
            raise PerflabError(f"no row {name!r} here; rows: {', '.join(sorted(self.rows))}")
        return dict(zip(self.cpus, self.rows[name]))

    def get(self, name: str) -> dict[int, int]:
        """{cpu: count} of one row, zeros if this kernel has no such row (TLB is x86 only)."""
        return self.row(name) if name in self.rows else dict.fromkeys(self.cpus, 0)

    def since(self, earlier: CounterTable) -> CounterTable:
        """The counts accumulated between `earlier` and this snapshot, row by row."""
        if earlier.cpus != self.cpus:
            raise PerflabError(f"the online CPUs changed between two snapshots ({_cpus(earlier.cpus)} -> "
                               f"{_cpus(self.cpus)}): keep every CPU online while measuring and run again")
        rows = {name: tuple(b - a for a, b in zip(earlier.rows[name], counts))
                for name, counts in self.rows.items() if name in earlier.rows}
        return CounterTable(self.cpus, rows, self.descriptions,
                            {name: total - earlier.totals.get(name, 0) for name, total in self.totals.items()})

    def irq_rows(self) -> list[str]:
        """The numbered device interrupts ("36"), in number order."""
        return sorted((name for name in self.rows if name.isdigit()), key=int)


def _cpus(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


# ANCHOR: parse
def parse_table(text: str, source: str = "the table") -> CounterTable:
    """Parse /proc/interrupts or /proc/softirqs text."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not HEADER.match(lines[0]):
        raise PerflabError(f"{source} does not start with a CPU header line (CPU0 CPU1 ...): is it /proc/interrupts "
                           "or /proc/softirqs?")
    cpus = tuple(int(word[3:]) for word in lines[0].split())
    rows: dict[str, tuple[int, ...]] = {}
    descriptions: dict[str, str] = {}
    totals: dict[str, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        label, colon, rest = line.partition(":")
        words = rest.split()
        if not colon or not label.strip():
            raise PerflabError(f"{source}, line {number}: no 'LABEL:' at the start: {line.strip()[:60]!r}")
        counts = []
        for word in words[:len(cpus)]:
            if not word.isdigit():
                break
            counts.append(int(word))
        name = label.strip()
        if len(counts) == len(cpus):
            rows[name] = tuple(counts)
            descriptions[name] = " ".join(words[len(cpus):])
        elif len(counts) == len(words) == 1:  # ERR, MIS: one count, no description
            totals[name] = counts[0]
        else:
            raise PerflabError(f"{source}, line {number}: {len(counts)} counts for {len(cpus)} CPUs: "
                               f"{line.strip()[:60]!r}")
    return CounterTable(cpus, rows, descriptions, totals)
# ANCHOR_END: parse


def read_table(path: str) -> CounterTable:
    try:
        with open(path) as file:
            return parse_table(file.read(), path)
    except OSError as err:
        raise PerflabError(f"cannot read {path}: {err.strerror}") from None
