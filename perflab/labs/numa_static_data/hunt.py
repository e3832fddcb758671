"""The hunt, without a PMU: list a binary's globals (nm, readelf), then count the writes to each with a
debug-register breakpoint per global (`perf stat -e mem:ADDR:w`), four at a time.

The source hunted by moving pages (mbind), bisecting with padding and a gdb watchpoint; a breakpoint per
global is that watchpoint, automated. It watches the first 8 bytes of each object, so a hot field further
inside a big object is found by watching its address (nm's address plus the field's offset).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ... import processes
from ...errors import PerflabError

DATA_TYPES = "bBdD"  # nm's letters for .bss (b, B) and .data (d, D)
BREAKPOINTS = 4  # x86 has four debug registers; perf refuses a fifth breakpoint in one run
WATCH_BYTES = 8
HOT_WRITES_PER_OP = 0.5  # a global written on at least every other operation, by each thread


@dataclass(frozen=True)
class Global:
    name: str
    address: int
    size: int
    section: str  # ".bss" or ".data"


def globals_of(binary: Path) -> list[Global]:
    """The program's own global variables in .data and .bss, largest last (nm -S --size-sort)."""
    if not shutil.which("nm"):
        raise PerflabError("nm is missing: run `make lab` (it installs binutils)")
    done = processes.run(["nm", "-S", "--size-sort", str(binary)])
    if done.returncode != 0:
        raise PerflabError(f"nm cannot read {binary}: {done.stderr.strip()}")
    found = []
    for line in done.stdout.splitlines():
        match = re.fullmatch(r"([0-9a-f]+) ([0-9a-f]+) ([a-zA-Z]) (\S+)", line.strip())
        if not match or match[3] not in DATA_TYPES:
            continue
        name = match[4]
        if "@" in name or name.startswith(("_", "completed.")):  # libc's copies, the compiler's own
            continue
        found.append(Global(name, int(match[1], 16), int(match[2], 16), ".bss" if match[3] in "bB" else ".data"))
    return found


def watch_length(g: Global) -> int:
    """The longest breakpoint (1, 2, 4 or 8 bytes) that fits the object and its address's alignment."""
    return max(n for n in (1, 2, 4, WATCH_BYTES) if n <= max(1, g.size) and g.address % n == 0)


def breakpoint_events(chosen: list[Global]) -> list[str]:
    return [f"mem:{g.address:#x}/{watch_length(g)}:w" for g in chosen]


def count_writes(argv: list[str], candidates: list[Global]) -> dict[str, int]:
    """Writes to each candidate during one run of `argv` per four candidates."""
    if not shutil.which("perf"):
        raise PerflabError("perf is missing: run `make lab` (it installs linux-perf)")
    counts: dict[str, int] = {}
    for start in range(0, len(candidates), BREAKPOINTS):
        chosen = candidates[start:start + BREAKPOINTS]
        events = [arg for event in breakpoint_events(chosen) for arg in ("-e", event)]
        done = processes.run(["perf", "stat", "-x", ",", *events, "--", *argv])
        rows = [line.split(",") for line in done.stderr.splitlines() if ",mem:" in line]
        if done.returncode != 0 or len(rows) != len(chosen) or not all(r[0].isdigit() for r in rows):
            last = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
            raise PerflabError(f"perf could not set write breakpoints ({last[0]}): the kernel needs "
                               "CONFIG_HAVE_HW_BREAKPOINT and, as non-root, kernel.perf_event_paranoid <= 2")
        counts.update({g.name: int(row[0]) for g, row in zip(chosen, rows)})
    return counts


def hot_globals(counts: dict[str, int], operations: int) -> list[str]:
    """The globals written on at least HOT_WRITES_PER_OP of all operations, most written first."""
    hot = [name for name, writes in counts.items() if writes >= HOT_WRITES_PER_OP * operations]
    return sorted(hot, key=lambda name: -counts[name])
