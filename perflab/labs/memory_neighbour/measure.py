"""Lab 10's race: the victim's two working sets beside the neighbour in each of its modes, round by round.

One round measures every arm once: for each neighbour mode (in the round's rotated order) the neighbour
switches, then each victim chases for victim_ms. Beside the timings it keeps what the neighbour did in each
period (bytes written, compute steps), what resctrl counted where it can, and every process's RSS.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable

from ...build import ensure_built
from ...sequential import Plan, race
from . import monitors
from .programs import MODES, Neighbour, Victim, rss_bytes

SOURCE_DIR = "labs/10-memory-neighbour"
SETS = ("far", "near")


def arm(working_set: str, mode: str) -> str:
    return f"{working_set} victim, {mode} neighbour"


PARTS = {arm(s, m): (s, m) for m in MODES for s in SETS}  # each arm's working set and neighbour mode
ARMS = list(PARTS)


@dataclass(frozen=True)
class Settings:
    """How much to measure."""

    max_rounds: int  # at most this many rounds (each: both victims beside every mode)...
    budget_s: float  # ...and at most this long: the race stops as soon as the verdict is decided
    victim_ms: int  # one victim sample: this long a chase
    rounds_per_look: int


@dataclass(frozen=True)
class Placement:
    """The victim's CPU, the neighbours', and how large each one's memory is."""

    victim_cpu: int
    neighbour_cpus: tuple[int, ...]  # one neighbour process on each, all in the same mode
    far_bytes: int  # the victim's far working set: well beyond the LLC
    near_bytes: int  # the victim's near working set: inside its L2
    neighbour_bytes: int  # the neighbours' buffers together


class Recorder:
    """What happens around the timings: the neighbour's periods, resctrl's counts, the processes' RSS."""

    def __init__(self, mbm_files: list[str]):
        self.mbm_files = mbm_files
        self.neighbour: dict[str, list[dict]] = {mode: [] for mode in MODES}
        self.mbm_gb_per_s: dict[str, list[float]] = {mode: [] for mode in MODES}
        self.rss: dict[str, list[int]] = {}
        self.cpu_share: dict[str, list[float]] = {a: [] for a in ARMS}
        self._mbm_start: tuple[float, int] | None = None

    def period_ended(self, periods: list[dict]) -> None:
        """The neighbours' reports of the mode they just left, summed, and resctrl's bytes over the same time."""
        mode = periods[0]["mode"]
        self.neighbour[mode].append({"seconds": max(p["seconds"] for p in periods),
                                     **{k: sum(p[k] for p in periods) for k in ("bytes", "gb_per_s", "steps_per_ns")}})
        now = (time.monotonic(), monitors.read_mbm(self.mbm_files)) if self.mbm_files else None
        if now and self._mbm_start and now[1] is not None and self._mbm_start[1] is not None:
            self.mbm_gb_per_s[mode].append((now[1] - self._mbm_start[1]) / (now[0] - self._mbm_start[0]) / 1e9)
        self._mbm_start = now

    def resident(self, processes: dict[str, int]) -> None:
        for name, pid in processes.items():
            if (rss := rss_bytes(pid)) is not None:
                self.rss.setdefault(name, []).append(rss)

    def to_json(self) -> dict[str, Any]:
        return {"neighbour_periods": self.neighbour, "mbm_gb_per_s": {m: v for m, v in self.mbm_gb_per_s.items() if v},
                "rss_bytes": self.rss, "victim_cpu_share": self.cpu_share}


# ANCHOR: round
def measure_race(placement: Placement, settings: Settings, decided: Callable[[dict[str, list[float]], float], bool],
                 progress: bool = True) -> dict[str, Any]:
    """Race every arm until `decided`; the neighbour and both victims are set up once and kept for every round."""
    victim, neighbour = ensure_built(SOURCE_DIR, "victim"), ensure_built(SOURCE_DIR, "neighbour")
    recorder = Recorder(monitors.mbm_files())
    share = placement.neighbour_bytes // len(placement.neighbour_cpus)
    with ExitStack() as running:
        far = running.enter_context(Victim(victim, placement.victim_cpu, placement.far_bytes))
        near = running.enter_context(Victim(victim, placement.victim_cpu, placement.near_bytes))
        streamers = [running.enter_context(Neighbour(neighbour, cpu, share)) for cpu in placement.neighbour_cpus]
        victims = {"far": far, "near": near}
        processes = {"far victim": far.pid, "near victim": near.pid,
                     **{f"neighbour on CPU {cpu}": s.pid for cpu, s in zip(placement.neighbour_cpus, streamers)}}

        def switch(mode: str) -> None:
            recorder.period_ended([s.switch(mode) for s in streamers])

        def one_round(_r: int, order: list[str]) -> dict[str, float]:
            ns = {}
            for mode in dict.fromkeys(PARTS[a][1] for a in order):  # the modes in this round's order
                switch(mode)
                recorder.resident(processes)
                for name in (a for a in order if PARTS[a][1] == mode):
                    sample = victims[PARTS[name][0]].chase(settings.victim_ms)
                    ns[name] = sample["ns_per_access"]
                    recorder.cpu_share[name].append(sample["cpu_share"])
            switch("idle")
            return ns

        plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
        raced = race(ARMS, one_round, decided, plan, control=(arm("far", "write"), arm("far", "compute")),
                     desc="both victims beside every neighbour mode, until decided", progress=progress)
    return {"race": raced.to_json(), **recorder.to_json()}
# ANCHOR_END: round
