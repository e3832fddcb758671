"""Lab 10, the measurement: a victim's time per access beside a neighbour that is idle, computes, or streams
stores through its buffer; the neighbour's bandwidth and both processes' RSS beside it; the verdict."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ... import results
from ...bounds import NO_LIMIT
from ...cpulist import check_cpus
from ...probe import Machine
from ...sequential import DECIDED, Race
from ...verdict import ALPHA, Verdict, judge_paired_change
from .. import Bound, CannotShow, Lab
from . import monitors
from .measure import Placement, Settings, arm, measure_race
from .programs import ram_bytes
from .report import measured_notes

# The verdict's two arms: the far working set beside a neighbour that streams plain stores, against the same
# set beside a neighbour that keeps its CPU as busy and sends the memory controller nothing.
STREAM, BUSY = arm("far", "write"), arm("far", "compute")
# The smallest slowdown worth teaching: a neighbour worth hunting costs the others a tenth of their speed. One
# streaming core of a server socket (a VM's vCPU) stays under it, and a quiet run says so; a desktop's does not.
MIN_EFFECT = 0.10
NEIGHBOUR_BYTES = 1 << 30  # the source's process: a modest share of RAM (capped at an eighth of it)
FAR_MIN = 256 << 20  # the far set: twice the LLC, and never less than this


# ANCHOR: sizes
def working_sets(machine: Machine, cpu: int, ram: int | None) -> tuple[int, int]:
    """(far, near): twice the LLC (at least 256 MiB, at most an eighth of RAM), and half the L2."""
    caches = [c for c in machine.caches_of(cpu) if c["type"] in ("Data", "Unified")]
    llc = max(caches, key=lambda c: c["level"], default=None)
    l2 = next((c for c in caches if c["level"] == 2), None)
    far = max(2 * llc["size_kib"] << 10, FAR_MIN) if llc else 1 << 30
    return min(far, (ram or 16 << 30) // 8), (l2["size_kib"] << 10) // 2 if l2 else 256 << 10
# ANCHOR_END: sizes


# ANCHOR: predict
def predict(machine: Machine, watching: dict[str, Any]) -> dict[str, Any]:
    """What this machine should show, said before measuring: from its CPUs and what can watch its memory."""
    cpus = len(machine.online_cpus)
    text = ("expect the far victim to slow down beside the streaming neighbour and not beside the computing one: "
            "its every access waits in the memory controller's queues, which the neighbour's stores fill. The near "
            "victim, inside its L2, should not notice either. How much the far victim loses depends on the share of "
            "the controller's bandwidth one core can take: most on a desktop with two channels, least on a server "
            f"socket with eight or twelve; this machine shows {cpus} CPU(s)")
    if machine.value("virtualization"):
        text += (", and as a VM it shares the host's controllers, a server's, with every other guest, whose traffic "
                 f"this lab cannot see or stop: one streaming vCPU may cost the victim less than {MIN_EFFECT:.0%}")
    said = watching["text"]
    return {"text": f"{text}. {said[:1].upper()}{said[1:]}", "expected": "slowdown"}
# ANCHOR_END: predict


# ANCHOR: judge
def judge_stream(ns: dict[str, list[float]], alpha: float = ALPHA) -> tuple[str, str, Any]:
    """Does the far victim slow down beside the streaming neighbour, against the same neighbour computing? Round by
    round: both arms of a round run one right after the other, and share what the host's other guests did then."""
    return judge_paired_change("far victim's time per access beside the streaming neighbour vs the computing one",
                               ns[STREAM], ns[BUSY], MIN_EFFECT, unit="slowdown", alpha=alpha)
# ANCHOR_END: judge


class MemoryNeighbour(Lab):
    """A process using a few percent of RAM slows everyone: a victim beside a neighbour that streams stores."""

    name = "memory-neighbour"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(max_rounds=32, budget_s=30, victim_ms=100, rounds_per_look=4)
    FULL = Settings(max_rounds=200, budget_s=180, victim_ms=200, rounds_per_look=5)
    RUNS = ("max_rounds",)
    EMULATED = "an emulated CPU has no caches and no memory controller queues of its own to fill"
    BOUNDS = (
        Bound(
            "victim's time per access (ns)",
            0.4,
            NO_LIMIT,
            "a dependent load takes at least an L1 hit, four cycles of a 6 GHz clock",
            lambda result: [v for arm in result["race"]["values"].values() for v in arm],
        ),
        Bound(
            "neighbour's GB/s",
            0,
            1200,
            "one core cannot write faster than its L1 takes stores",
            lambda result: [p["gb_per_s"] for periods in result["neighbour_periods"].values() for p in periods],
        ),
    )
    IN_A_VM = ("in a VM the memory controllers are the host's: other guests' traffic queues there too, and two "
               "vCPUs may be hyperthreads of one host core, which the computing neighbour would slow as well")
    CANNOT_SHOW = ("Any machine with two CPUs shows it: a laptop, a desktop, a KVM guest; on bare metal resctrl "
                   "(mbm_total_bytes) or the uncore's memory-controller counters show every program's bandwidth")

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> Placement:
        """-C VICTIM,NEIGHBOUR[,NEIGHBOUR...]: the first CPU for the victim, a neighbour on each of the others.
        By default the last online CPU for the victim (CPU 0 takes the most interrupts) and one neighbour, on a
        CPU of the victim's NUMA node on another core (a hyperthread would share the victim's core, and the
        computing neighbour could no longer be told from the streaming one)."""
        if cpus:
            check_cpus(cpus, machine.online_cpus)
            victim, neighbours = cpus[0], tuple(dict.fromkeys(c for c in cpus if c != cpus[0]))
            if not neighbours:
                raise CannotShow(f"give two different CPUs or more, the victim's then the neighbours' (-C 1,0), "
                                 f"not {cpus}")
        else:
            victim = machine.online_cpus[-1]
            node = machine.cpu(victim).get("node")
            others = [c for c in machine.online_cpus if c != victim]
            if not others:
                raise CannotShow("this machine has one CPU: the victim and the neighbour need one each")
            neighbours = (min(others, key=lambda c: (machine.cpu(c).get("node") != node,
                                                     c in machine.cpu(victim)["smt_siblings"], c)),)
        ram = ram_bytes()
        far, near = working_sets(machine, victim, ram)
        return Placement(victim, neighbours, far, near, min(NEIGHBOUR_BYTES, (ram or 16 << 30) // 8))

    def watched_cpus(self, placement: Placement) -> list[int]:
        """The victim's and the neighbours': another program on any of them changes what they do."""
        return [placement.victim_cpu, *placement.neighbour_cpus]

    def measure(self, machine: Machine, placement: Placement, settings: Settings, progress: bool) -> dict[str, Any]:
        watching = monitors.monitors()
        result = results.new_result(self.name, "race", machine.summary(),
                                    {**asdict(placement), **asdict(settings), "ram_bytes": ram_bytes()})
        result.update(prediction=predict(machine, watching), monitors=watching)
        result.update(measure_race(placement, settings, lambda ns, alpha: judge_stream(ns, alpha)[0] in DECIDED,
                                   progress))
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        raced = Race.from_json(result["race"])
        verdict, reason, effect = judge_stream(raced.kept_values(), raced.alpha_per_look)
        if verdict == "reproduced":
            reason = f"{effect.text()}: the neighbour's stores, not its CPU time or its memory size, cost the victim"
        elif verdict == "not-reproduced":
            reason = (f"{reason}: one streaming core did not fill this machine's memory controllers (on a VM the "
                      "host's may have many channels); more streaming cores may (on a bigger machine, -C VICTIM "
                      "followed by several neighbour CPUs)")
        else:
            reason = f"{effect.text()}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, effect, notes=measured_notes(result) + raced.notes)


LAB = MemoryNeighbour()
