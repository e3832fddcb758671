"""Neighbours: other programs, and a VM's host, running on the CPUs a lab measures.

The measurement lock keeps other perflab measurements away, but not a learner's
other programs (a browser, a second notebook, a build) nor, in a VM, the host.
A verdict measured while one of them took a CPU the lab measures on is about a
different machine, so it must not be stated as if the machine had been quiet.

While a lab measures, `watch` looks at every process every half second (one
read of /proc/PID/stat each: about a millisecond for a hundred processes) and
charges the CPU time each one used since the last look, children it reaped
included, to the CPU it is on. The lab's own processes (this one and its
descendants) and kernel threads (interrupts and the like, which the labs
themselves cause) are left out. The host's share comes from each CPU's steal
time in /proc/stat. A look every half second places a program that moves
between CPUs only roughly; one pinned to a CPU, exactly.

When neighbours took BUSY_SHARE or more of one of the lab's CPUs, `unless_quiet`
asks whether they could have made the verdict. The busiest half-second on any
watched CPU bounds how much they slowed an arm (`slowdown`); where the lab's
effect is a ratio of its arms' times or rates, the verdict stands if its
interval, widened by that factor, still decides it (perflab.verdict.decided_beside).
Otherwise, and for effects a neighbour moves in ways no share bounds, the verdict
is "inconclusive", naming the CPU, the share and the programs; what was measured
stays in the notes.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from .lock import measuring_on
from .sysfs import SysRoot, default_root

LOOK_EVERY_S = 0.5
BUSY_SHARE = 0.05  # of a CPU's time during the measurement: a neighbour this busy can move a lab's effect
MOST_SHARE = 0.9  # of a CPU in its busiest window: beyond it an arm could have run ten times as long
MIN_BUSY_S = 0.03  # three clock ticks: a process is charged whole ticks, so one or two may be rounding
PF_KTHREAD = 0x00200000
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Task:
    """One process as /proc/PID/stat shows it."""

    pid: int
    name: str
    ppid: int
    kernel_thread: bool
    ticks: int  # user + system time
    reaped: int  # user + system time of the children it waited for, whole lives
    cpu: int  # the CPU it runs on, or last ran on
    started: int  # clock ticks after boot: with the pid, one process for its whole life

    @property
    def key(self) -> tuple[int, int]:
        return self.pid, self.started


def parse_stat(pid: int, text: str) -> Task:
    """A Task from the text of /proc/PID/stat (the name may hold spaces and parentheses)."""
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()  # fields[0] is the state, field 3 of proc(5)
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return Task(pid, name, int(fields[1]), bool(int(fields[6]) & PF_KTHREAD), utime + stime, cutime + cstime,
                int(fields[36]), int(fields[19]))


def tasks(root: SysRoot) -> dict[tuple[int, int], Task]:
    """Every process now, by (pid, start time); those that end while being read are skipped."""
    found = {}
    for entry in os.scandir(root.path("/proc")):
        if entry.name.isdigit():
            text = root.read(f"/proc/{entry.name}/stat")
            if text:
                task = parse_stat(int(entry.name), text)
                found[task.key] = task
    return found


def descendants(of: int, now: dict[tuple[int, int], Task]) -> set[int]:
    """`of` and every process below it."""
    children = defaultdict(list)
    for task in now.values():
        children[task.ppid].append(task.pid)
    found, todo = set(), [of]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children[pid])
    return found


def charge(before: dict, now: dict, ours: set[int], cpus: set[int]) -> dict[tuple[int, str, int], int]:
    """{(cpu, name, pid): ticks} that other programs used on `cpus` between two looks.

    A child that ended between the looks adds its whole life to its parent's reaped time, and so does each
    of its own children that ended with it; what of them was seen at the last look was counted then (or was
    before the watch), so only the rest is charged: the end of a child seen, and the whole of one that lived
    and ended between two looks.
    """
    gone_by_parent: dict[int, int] = defaultdict(int)
    earlier_by_pid = {task.pid: task for task in before.values()}
    for key, task in before.items():
        if key not in now:  # its time reaches the first of its ancestors still alive, through those that ended too
            ancestor = earlier_by_pid.get(task.ppid)
            while ancestor is not None and ancestor.key not in now:
                ancestor = earlier_by_pid.get(ancestor.ppid)
            gone_by_parent[ancestor.pid if ancestor else task.ppid] += task.ticks + task.reaped
    used = {}
    for key, task in now.items():
        if task.pid in ours or task.kernel_thread or task.cpu not in cpus:
            continue
        earlier = before.get(key)
        own = task.ticks - (earlier.ticks if earlier else 0)
        reaped = task.reaped - (earlier.reaped if earlier else 0) - gone_by_parent[task.pid]
        if own + max(0, reaped) > 0:
            used[task.cpu, task.name, task.pid] = own + max(0, reaped)
    return used


def steal_ticks(root: SysRoot) -> dict[int, int]:
    """Each CPU's steal time from /proc/stat: time the host ran something else while this vCPU wanted to run."""
    steal = {}
    for line in (root.read("/proc/stat") or "").splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu" and len(values) >= 8:
            steal[int(name[3:])] = int(values[7])
    return steal


def busiest(windows: list[tuple[float, dict[int, int]]], cpus: list[int]) -> dict[str, float]:
    """Each CPU's largest share taken by others in one window between two looks: [(seconds, {cpu: ticks})], a
    window shorter than half a look merged into the one before (a tick in a few milliseconds is no share)."""
    merged: list[tuple[float, dict[int, int]]] = []
    for seconds, ticks in windows:
        if merged and seconds < LOOK_EVERY_S / 2:
            last_seconds, last_ticks = merged[-1]
            merged[-1] = (last_seconds + seconds, {c: last_ticks.get(c, 0) + ticks.get(c, 0) for c in cpus})
        else:
            merged.append((seconds, ticks))
    return {str(cpu): round(min(1.0, max((ticks.get(cpu, 0) / TICKS_PER_S / seconds for seconds, ticks in merged
                                          if seconds > 0), default=0.0)), 3) for cpu in cpus}


def summary(cpus: list[int], seconds: float, used: dict[tuple[int, str, int], int],
            steal_before: dict[int, int], steal_after: dict[int, int],
            windows: list[tuple[float, dict[int, int]]]) -> dict[str, Any]:
    """What the result keeps: the watched CPUs and time, each neighbour's seconds per CPU, the host's steal, and
    the busiest window's share of each CPU (neighbours and steal)."""
    return {"cpus": cpus, "seconds": round(seconds, 3), "busiest": busiest(windows, cpus),
            "neighbours": [{"cpu": cpu, "name": name, "pid": pid, "seconds": ticks / TICKS_PER_S}
                           for (cpu, name, pid), ticks in sorted(used.items(), key=lambda kv: -kv[1])],
            "steal": {str(cpu): (steal_after.get(cpu, 0) - steal_before.get(cpu, 0)) / TICKS_PER_S for cpu in cpus}}


class Watch:
    """The monitor thread of `watch`; `summary` is set when the block ends."""

    def __init__(self, cpus: list[int], root: SysRoot):
        self.cpus, self.root = sorted(cpus), root
        self.used: dict[tuple[int, str, int], int] = defaultdict(int)
        self.windows: list[tuple[float, dict[int, int]]] = []  # (seconds, {cpu: ticks of others and the host})
        self.summary: dict[str, Any] | None = None
        self._stop = threading.Event()

    def _look(self, before: dict, steal_before: dict[int, int], since: float) -> tuple[dict, dict[int, int], float]:
        now, steal, at = tasks(self.root), steal_ticks(self.root), time.monotonic()
        window = {cpu: steal.get(cpu, 0) - steal_before.get(cpu, 0) for cpu in self.cpus}
        for key, ticks in charge(before, now, descendants(os.getpid(), now), set(self.cpus)).items():
            self.used[key] += ticks
            window[key[0]] += ticks
        self.windows.append((at - since, window))
        return now, steal, at

    def _loop(self, first: dict, steal: dict[int, int], started: float) -> None:
        last = first, steal, started
        while not self._stop.wait(LOOK_EVERY_S):
            last = self._look(*last)
        self._look(*last)

    @contextmanager
    def running(self) -> Iterator[Watch]:
        steal_before, started = steal_ticks(self.root), time.monotonic()
        thread = threading.Thread(target=self._loop, args=(tasks(self.root), steal_before, started),
                                  name="perflab-neighbours", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self.summary = summary(self.cpus, time.monotonic() - started, self.used, steal_before,
                                   steal_ticks(self.root), self.windows)


def watch(cpus: list[int], root: SysRoot | None = None):
    """`with watch([1, 3]) as w: measure()`; then w.summary. No CPUs to watch: nothing runs, summary is None.
    In a workshop's turn, the queue first moves the rest of the class off them where it can (lock.measuring_on)."""
    root = root or default_root()
    if not cpus or not root.exists("/proc/stat"):
        return _nothing()
    if root.is_live:
        measuring_on(cpus)
    return Watch(cpus, root).running()


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


# ANCHOR: busy
def busy_cpus(found: dict[str, Any]) -> list[str]:
    """One phrase per watched CPU that neighbours or the host took BUSY_SHARE or more of, busiest first."""
    seconds, phrases = found["seconds"], []
    by_cpu: dict[int, list[dict]] = defaultdict(list)
    for neighbour in found["neighbours"]:
        by_cpu[neighbour["cpu"]].append(neighbour)
    for cpu in found["cpus"]:
        # at most the whole window: a child's life reaped in it may have run before it, or on other CPUs
        others = min(sum(n["seconds"] for n in by_cpu[cpu]), seconds)
        if others >= MIN_BUSY_S and others >= BUSY_SHARE * seconds:
            names = ", ".join(f"{n['name']} (pid {n['pid']})" for n in by_cpu[cpu][:3])
            phrases.append((others, f"other programs ran on CPU {cpu} for {others / seconds:.0%} of it ({names})"))
        steal = found["steal"].get(str(cpu), 0)
        if steal >= MIN_BUSY_S and steal >= BUSY_SHARE * seconds:
            phrases.append((steal, f"the host took {steal / seconds:.0%} of CPU {cpu} (steal time)"))
    return [text for _, text in sorted(phrases, key=lambda p: -p[0])]
# ANCHOR_END: busy


# ANCHOR: slowdown
def slowdown(found: dict[str, Any]) -> float | None:
    """How much longer others can have made an arm's time: a share s of its CPU leaves it 1 - s of the time, so
    s / (1 - s) longer, from the busiest window of any watched CPU; None for a result saved before windows were
    kept, or a CPU others took nearly all of."""
    if "busiest" not in found:
        return None
    share = max(found["busiest"].values(), default=0.0)
    return None if share >= MOST_SHARE else share / (1 - share)
# ANCHOR_END: slowdown


def unless_quiet(verdict, found: dict[str, Any] | None, time_ratio: bool = False):
    """The verdict, unless neighbours that took a share of the lab's CPUs could have made it.

    `time_ratio`: the verdict's effect is a ratio of arms' times or rates on the watched CPUs, judged against
    its min_effect, so the widened interval tells (perflab.verdict.decided_beside); any other effect, a
    neighbour's share does not bound, and a busy CPU leaves it inconclusive. cannot-show stays: it says what
    this machine lacks, which no neighbour changes.
    """
    from .verdict import Verdict, decided_beside, widened

    busy = busy_cpus(found) if found else []
    if not busy or verdict.verdict == "cannot-show":
        return verdict
    effect, slowed = verdict.effect, slowdown(found)
    decided = verdict.verdict in ("reproduced", "not-reproduced")
    if decided and time_ratio and effect and effect.min_effect is not None and slowed is not None:
        low, high = widened(effect, slowed)
        could = (f"{'; '.join(busy)}: they could have slowed an arm by up to {slowed:.0%} (the busiest half-second: "
                 f"{max(found['busiest'].values()):.0%} of a measured CPU), which leaves {low:+.1%} to {high:+.1%}")
        if decided_beside(effect, slowed) == verdict.verdict:
            return Verdict(verdict.lab, verdict.verdict, verdict.reason, effect, verdict.results,
                           [*verdict.notes, f"decided beside neighbours ({could}): still {verdict.verdict}"],
                           verdict.result)
        reason = f"neighbours could account for what was measured ({could}): rerun when they are done or paused"
    else:
        reason = (f"the machine was busy while the lab measured ({'; '.join(busy)}): a verdict from shared CPUs is "
                  "not this machine's; rerun when they are done or paused")
    return Verdict(verdict.lab, "inconclusive", reason, verdict.effect, verdict.results,
                   [f"as measured beside the neighbours ({verdict.verdict}): {verdict.reason}", *verdict.notes],
                   verdict.result)
