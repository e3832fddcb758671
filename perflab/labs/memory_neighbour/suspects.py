"""Three processes to tell apart, measured here: one hoards memory and computes, one sleeps on a smaller buffer,
and the smallest streams stores through its buffer.

For each, what a monitoring tool shows of it: its RSS, and a cumulative count of the bytes it moved read a few
times (what resctrl's mbm_total_bytes would show of a monitoring group holding it; here, where resctrl cannot
count, the process's own count of what it wrote). Their names are shuffled: which is which is for the learner
to find.
"""

from __future__ import annotations

import random
import time
from contextlib import ExitStack
from typing import Any

from ...build import ensure_built
from ...lock import measurement_lock
from .measure import SOURCE_DIR
from .programs import Neighbour, ram_bytes, rss_bytes

# (role, buffer, mode): the hoarder's RSS is eight times the streamer's.
ROLES = (("hoarder", 2 << 30, "compute"), ("sleeper", 512 << 20, "idle"), ("streamer", 256 << 20, "write"))
READINGS = 5
READ_EVERY_S = 0.25


def three_processes(victim_cpu: int, neighbour_cpu: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """([{name, rss_bytes, readings: [(seconds, bytes moved so far), ...]}, ...], {name: role}), measured now.

    The streamer gets the neighbour's CPU to itself; the hoarder computes on the victim's."""
    binary = ensure_built(SOURCE_DIR, "neighbour")
    cap = (ram_bytes() or 16 << 30) // 16
    names = random.sample("ABC", 3)
    cpus = {"hoarder": victim_cpu, "sleeper": victim_cpu, "streamer": neighbour_cpu}
    with measurement_lock("perflab memory-neighbour: three processes"), ExitStack() as running:
        started = {role: (running.enter_context(Neighbour(binary, cpus[role], min(size, cap))), mode)
                   for role, size, mode in ROLES}
        moved = {role: random.randrange(1 << 40) for role in started}  # a counter's start means nothing
        readings: dict[str, list[tuple[float, int]]] = {role: [] for role in started}
        start = time.monotonic()
        for process, mode in started.values():
            process.switch(mode)
        for _ in range(READINGS):
            time.sleep(READ_EVERY_S)
            for role, (process, mode) in started.items():
                moved[role] += process.switch(mode)["bytes"]  # the period so far, then the same mode again
                readings[role].append((round(time.monotonic() - start, 4), moved[role]))
        rss = {role: rss_bytes(process.pid) or 0 for role, (process, _) in started.items()}
    rows = [{"name": name, "rss_bytes": rss[role], "readings": readings[role]}
            for name, (role, _, _) in zip(names, ROLES)]
    return sorted(rows, key=lambda row: row["name"]), {name: role for name, (role, _, _) in zip(names, ROLES)}
