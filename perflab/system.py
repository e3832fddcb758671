"""`perflab system show | tune | reset`: the knobs the labs use, a quieter machine, and everything put back.

`tune` does what pyperf's `system tune` does for frequency: the performance
governor on every cpufreq policy, and turbo off, where the machine has them
(a VM usually has neither: its host decides). Its changes are journaled and
stay until `reset`, which also restores what a killed run left changed and
ends the programs it left running. `reset` takes the journal's own lock only,
so it never queues behind a measurement, and it leaves a live run's changes
to that run.
"""

from __future__ import annotations

import itertools

from .formatting import table
from .journal import TUNE, Journal, SystemChanges, reset
from .knobs import Knob, Turbo, governors, used_by_labs
from .lock import measurement_lock
from .records import end_leftovers
from .sysfs import SysRoot, default_root


def show(root: SysRoot | None = None) -> str:
    """One row per knob (or per run of alike knobs): its value, what it means, whether perflab changed it."""
    root = root or default_root()
    changed = {(e.kind, e.target): e for e in Journal(root).entries()}

    def state(knob: Knob) -> tuple[str, str, str, str]:
        value, entry = knob.read(), changed.get((knob.kind, knob.target))
        by = "" if entry is None else (f"system tune (was {entry.old})" if entry.owner == TUNE else
                                      f"a run, pid {entry.pid} (was {entry.old})")
        return knob.kind, value or "?", knob.meaning(value), by

    rows = [["knob", "value", "meaning", "changed by perflab", "file"]]
    # A server's 64 governors alike are one row, not 64.
    for (_, value, meaning, by), alike in itertools.groupby(used_by_labs(root), key=state):
        group = list(alike)
        first, last = group[0], group[-1]
        label = first.label if len(group) == 1 else f"{first.label}..{last.target} ({len(group)})"
        path = first.path if len(group) == 1 else first.path.replace(first.target, "*")
        rows.append([label, value, meaning, by, path])
    if len(rows) == 1:
        return "none of the knobs the labs use exists here"
    return table(rows)


def _tunable(root: SysRoot) -> list[tuple[Knob, str]]:
    """(knob, value) pairs that make timings steadier on this machine."""
    wanted: list[tuple[Knob, str]] = [(g, "performance") for g in governors(root)
                                      if g.available() and "performance" in (g.choices() or ["performance"])]
    turbo = Turbo(root=root)
    if turbo.available():
        wanted.append((turbo, turbo.off))
    return wanted


def tune(root: SysRoot | None = None) -> list[str]:
    """Set the performance governor and turbo off, journaled until `perflab system reset`."""
    root = root or default_root()
    wanted = _tunable(root)
    if not wanted:
        return []
    done = []
    with measurement_lock("perflab system tune"), SystemChanges(TUNE, root) as changes:
        for knob, value in wanted:
            old = knob.read()
            changes.set(knob, value)
            done.append(f"{knob.label}: {old} -> {value}" + ("" if old != value else " (already)"))
    return done


def reset_all(root: SysRoot | None = None) -> list[str]:
    """End what ended runs left running; restore what `tune` set and what they left changed. Never waits for
    the measurement lock: a run measuring now keeps its own changes, and its programs."""
    root = root or default_root()  # a bad PERFLAB_SYSROOT is refused before anything is ended
    return end_leftovers() + reset(root)

