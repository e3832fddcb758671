"""Lab 3, the measurement: a bystander CPU interrupted for another thread's memory-map changes, and block
completions sent where the disk's rq_affinity says."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT, Bound
from ...build import ensure_built
from ...cpulist import check_cpus
from ...errors import PerflabError
from ...paths import scratch
from ...probe import Machine
from ...runner import run_once
from ...sequential import DECIDED, MAX_RUNS, Plan, Race, race
from ...sysfs import default_root
from ...verdict import ALPHA, Effect, Verdict
from .. import CannotShow, Lab
from . import noise, oslat, recorded, tracepoints
from .completions import (
    SOURCE_DIR,
    BlockPlan,
    Skipped,
    block_plan,
    disk_plan,
    judge_block,
    measure_block,
    plan_from_json,
)
from .procstat import read_table

OPERATIONS = ("munmap", "mprotect", "membarrier")
PROCESSES = ("shared", "separate")  # the victim a thread of the aggressor's process, or another process (control)
ROWS = ("CAL", "TLB")  # function-call IPIs and TLB shootdowns, as /proc/interrupts names them
# An interrupt on the bystander for at least one operation in 20. Bare metal shows one per operation; KVM's
# paravirtual TLB flush skips a vCPU the host has preempted (it flushes when the vCPU runs again), so a busy host
# lowers the count (0.2 to 1 per munmap measured on a 2-vCPU KVM guest).
MIN_PER_OP = 0.05
# Under QEMU's TCG an operation that interrupts another vCPU costs milliseconds (with one host thread for all
# vCPUs, as in `wide`, 4 to 8 ms): fewer per run keep the count per operation exact and a round under a minute.
EMULATED_OPS = 1000


@dataclass(frozen=True)
class Settings:
    """How much to measure. A round runs every operation in both processes (part 1), or every rq_affinity mode
    (part 2), in rotated order; part 1 races until decided, looking every few rounds."""

    rounds_per_look: int
    max_rounds: int  # part 1 stops here, or at budget_s, if still undecided
    budget_s: float
    block_rounds: int
    ops: int  # aggressor operations per run
    reads: int  # reads per run
    threshold_ns: int  # a gap in the victim's timeline longer than this counts (oslat's idea)
    noise_rounds: int  # part 3's rounds: oslat and the osnoise hunt each run both arms per round
    noise_seconds: float  # osnoise's trace per arm
    oslat_seconds: int  # oslat's loop per arm, after its one-second preheat


@dataclass(frozen=True)
class Placement:
    victim: int
    aggressor: int


# ---------------------------------------------------------------- part 1: a bystander's interrupts

def bystander_run(binary: Path, placement: Placement, op: str, process: str, settings: Settings,
                  folder: str) -> dict[str, Any]:
    """One aggressor run; its sample with the per-CPU CAL and TLB counts accumulated during the loop."""
    prefix = os.path.join(folder, f"{op}-{process}")
    _, (sample,) = run_once([str(binary), "-v", str(placement.victim), "-a", str(placement.aggressor), "-o", op,
                             "-p", process, "-n", str(settings.ops), "-t", str(settings.threshold_ns), "-i", prefix])
    counted = read_table(f"{prefix}.after").since(read_table(f"{prefix}.before"))
    sample["interrupts"] = {row: {str(cpu): n for cpu, n in counted.get(row).items()} for row in ROWS}
    return sample


def arm(op: str, process: str, row: str) -> str:
    return f"{op}/{process}/{row}"


def measure_bystander(placement: Placement, settings: Settings, progress: bool,
                      decide_on: tuple[tuple[str, str], ...] = (("munmap", "CAL"),)) -> dict[str, Any]:
    """Race every operation in both processes, round by round, until each (operation, row) in `decide_on` is
    decided: {"race": the race's per-op counts, "samples": every run's raw sample}."""
    runs = [(op, process) for op in OPERATIONS for process in PROCESSES]
    binary = ensure_built(SOURCE_DIR, "bystander")  # once: make runs two processes even when nothing changed
    samples: list[dict[str, Any]] = []

    def one_round(r: int, order: list[str]) -> dict[str, float]:
        measured = {}
        for op, process in dict.fromkeys(tuple(a.split("/")[:2]) for a in order):  # each run once, rotated
            sample = dict(bystander_run(binary, placement, op, process, settings, folder), round=r)
            samples.append(sample)
            measured.update({arm(op, process, row): sample["interrupts"][row][str(placement.victim)] / sample["ops"]
                             for row in ROWS})
        return measured

    def decided(values: dict[str, list[float]], alpha: float) -> bool:
        return all(decide_rows(values, op, row, placement.victim, alpha)[0] in DECIDED for op, row in decide_on)

    plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
    with scratch("ipi") as folder:
        raced = race([arm(op, process, row) for op, process in runs for row in ROWS], one_round, decided, plan,
                     control=arm("munmap", "separate", "CAL"), desc="bystander: rounds until decided",
                     progress=progress)
    return {"race": raced.to_json(), "samples": [s for s in samples if s["round"] >= raced.first_kept]}


def per_op(samples: list[dict[str, Any]], op: str, process: str, row: str, cpu: int) -> list[float]:
    """One value per round: `row` interrupts on `cpu` per aggressor operation."""
    return [s["interrupts"][row][str(cpu)] / s["ops"] for s in samples if s["op"] == op and s["process"] == process]


def operation_times(result: dict[str, Any]) -> list[float]:
    """ns per aggressor operation in every bystander run of a result."""
    return [s["elapsed_ns"] / s["ops"] for s in result["bystander"]["samples"]]


def read_times(result: dict[str, Any]) -> list[float]:
    """ns per 4 KiB read in every block run of a result (none when part 2 was skipped)."""
    return [s["elapsed_ns"] / s["reads"] for s in result.get("block", {}).get("samples", [])]


def gaps_per_op(samples: list[dict[str, Any]], op: str, process: str) -> list[float]:
    return [s["victim_gaps"] / s["ops"] for s in samples if s["op"] == op and s["process"] == process]


# ANCHOR: decide
def decide_rows(values: dict[str, list[float]], op: str, row: str, victim: int,
                alpha: float = ALPHA) -> tuple[str, Effect]:
    """Does the victim take more `row` interrupts per `op` when it shares the aggressor's process?"""
    shared, separate = values[arm(op, "shared", row)], values[arm(op, "separate", row)]
    difference, low, high, p = stats.mean_difference(separate, shared, 1 - alpha)
    effect = Effect(f"{row} on CPU {victim} per {op}, shared process minus separate", difference,
                    "interrupts per operation", low, high, p, 1 - alpha, relative=False)
    if p < alpha and low >= MIN_PER_OP:
        return "reproduced", effect
    if high < MIN_PER_OP:
        return "not-reproduced", effect
    return "inconclusive", effect
# ANCHOR_END: decide


# ---------------------------------------------------------------- the lab

class FirstCoreIpi(Lab):
    """Interrupts land on a core that did not ask for them: TLB shootdowns, function calls, block completions."""

    name = "first-core-ipi"
    QUICK = Settings(rounds_per_look=4, max_rounds=40, budget_s=40, block_rounds=5, ops=5000, reads=1000,
                     threshold_ns=1000, noise_rounds=3, noise_seconds=3.5, oslat_seconds=1)
    FULL = Settings(rounds_per_look=5, max_rounds=100, budget_s=180, block_rounds=15, ops=20000, reads=4000,
                    threshold_ns=1000, noise_rounds=8, noise_seconds=4.5, oslat_seconds=4)
    IN_A_VM = ("in a VM the interrupt counts are the guest kernel's and hold; KVM's paravirtual TLB flush skips a "
               "vCPU the host has preempted, so a busy host lowers the count per operation, and the victim's gaps "
               "include the host's preemptions")
    CANNOT_SHOW = ("Any machine with two CPUs shows part 1, in a VM too: `perflab run first-core-ipi --vm default`; "
                   "`--vm numa2` shows part 2 as well, on a one-queue scratch disk across two sockets, and `--vm wide` "
                   "the osnoise hunt")
    # Every operation is at least one system call (munmap also maps and writes a page): entering and leaving the
    # kernel alone takes ~100 cycles, and no core clocks above ~6 GHz. Every read is O_DIRECT: a request through
    # the block layer to the device and back on an interrupt, microseconds even on the fastest NVMe.
    BOUNDS = (Bound("time per operation (ns)", 20, NO_LIMIT, "each is a system call, which takes at least "
                    "~100 cycles", operation_times),
              Bound("time per 4 KiB read (ns)", 500, NO_LIMIT, "each goes to the disk and back on an interrupt",
                    read_times))

    # Part 1's race is capped at that many rounds; parts 2 and 3 run that many.
    RUNS = ("max_rounds", "block_rounds", "noise_rounds")

    def settings_for(self, quick: bool, runs: int | None = None) -> Settings:
        """As every lab's, but part 2's confidence interval needs two rounds."""
        if runs is not None and not 2 <= runs <= MAX_RUNS:
            raise PerflabError(f"{self.name} needs 2 to {MAX_RUNS} rounds (--runs, or PERFLAB_RUNS), not {runs}: "
                               "part 2's confidence interval needs two")
        return super().settings_for(quick, runs)

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> Placement:
        """-C V,A: the victim, then the aggressor. By default the last two online CPUs, the victim last."""
        if cpus:
            check_cpus(cpus, machine.online_cpus)
            if len(cpus) != 2:
                raise CannotShow(f"give two different CPUs, the victim then the aggressor (-C 1,0), not {len(cpus)}")
            return Placement(victim=cpus[0], aggressor=cpus[1])
        if len(machine.online_cpus) < 2:
            raise CannotShow("one CPU: no other CPU to interrupt")
        return Placement(victim=machine.online_cpus[-1], aggressor=machine.online_cpus[-2])

    def watched_cpus(self, placement: Placement) -> list[int]:
        """The bystander's and the munmap thread's: a neighbour there changes which CPUs a shootdown must reach."""
        return [placement.victim, placement.aggressor]

    def measure(self, machine: Machine, placement: Placement, settings: Settings, progress: bool) -> dict[str, Any]:
        if machine.emulated():
            settings = replace(settings, ops=min(settings.ops, EMULATED_OPS))
        result = results.new_result(self.name, "run", machine.summary(), {**asdict(placement), **asdict(settings)})
        plan = block_plan(machine, default_root())  # first: a bad PERFLAB_BLOCK_DEVICE stops the run at once
        result["bystander"] = measure_bystander(placement, settings, progress)
        result["block"] = {
            "plan": plan.to_json(),
            "samples": []
            if isinstance(plan, Skipped)
            else measure_block(plan, settings.block_rounds, settings.reads, progress),
        }
        result["tracepoints"] = tracepoints.count_workloads(placement.victim, placement.aggressor, settings.ops,
                                                            settings.reads, plan, machine, progress)
        watched = plan if isinstance(plan, BlockPlan) else disk_plan(machine, default_root())  # part 2's disk, if any
        result["oslat"] = oslat.time_loops(machine, watched, settings.noise_rounds, settings.oslat_seconds, progress)
        result["noise"] = noise.hunt(machine, watched, default_root(), settings.noise_rounds, settings.noise_seconds,
                                     progress)
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        victim = result["params"]["victim"]
        raced = Race.from_json(result["bystander"]["race"])
        kept = raced.kept_values()
        verdict, effect = decide_rows(kept, "munmap", "CAL", victim, raced.alpha_per_look)
        notes = [bystander_note(kept, op, victim) for op in OPERATIONS]
        notes += [gaps_note(result["bystander"]["samples"]), *raced.notes]
        plan = plan_from_json(result["block"]["plan"])
        block_ok, block_notes = judge_part_2(plan, result["block"]["samples"])
        notes += block_notes
        if "tracepoints" in result:  # results saved before part 3 was added have none
            notes += tracepoints.notes(result["tracepoints"], victim, plan)
        if "oslat" in result:  # nor oslat
            notes += oslat.notes(result["oslat"])
        if "noise" in result:  # nor the osnoise hunt
            notes += noise.notes(result["noise"])
            if "skipped" in result["noise"]:
                notes += [
                    f"recorded in the wide VM under TCG: {line}" for line in noise.notes(recorded.load_hunt()["hunt"])
                ]
        shown = f"{effect.text()}"
        if verdict == "reproduced" and block_ok is False:
            return Verdict(self.name, "not-reproduced", f"{shown}; but block completions did not land where "
                           "rq_affinity predicts (see the notes)", effect, notes=notes)
        if verdict == "reproduced":
            tail = "; block completions landed where rq_affinity sends them" if block_ok else ""
            return Verdict(self.name, verdict, f"{shown}: another thread's munmap interrupts this CPU{tail}",
                           effect, notes=notes)
        if verdict == "not-reproduced":
            return Verdict(self.name, verdict, f"{shown}; {MIN_PER_OP} or more per operation is ruled out",
                           effect, notes=notes)
        return Verdict(self.name, verdict, f"{shown}; {raced.undecided()}", effect, notes=notes)


def judge_part_2(plan: BlockPlan | Skipped, samples: list[dict[str, Any]]) -> tuple[bool | None, list[str]]:
    """Did the block completions land where rq_affinity sends them (None: not measured), and the notes saying so."""
    if isinstance(plan, Skipped):
        return None, [f"block completions (part 2) not measured: {plan.reason}"]
    block_ok, block_notes = judge_block(plan, samples)
    return block_ok, [f"block completions on {plan.disk}: its interrupt {plan.irq} arrives on CPU {plan.irq_cpu}, "
                      f"reads from CPU {plan.submitter} ({'sharing' if plan.shares_llc else 'not sharing'} a "
                      "last-level cache)", *block_notes]


def bystander_note(kept: dict[str, list[float]], op: str, victim: int) -> str:
    counts = {(row, process): stats.mean(kept[arm(op, process, row)]) for row in ROWS for process in PROCESSES}
    return (f"{op}: on CPU {victim} per operation, CAL {counts['CAL', 'shared']:.2f} and TLB "
            f"{counts['TLB', 'shared']:.2f} with the victim in the same process, CAL {counts['CAL', 'separate']:.3f} "
            f"and TLB {counts['TLB', 'separate']:.3f} in another")


def gaps_note(samples: list[dict[str, Any]]) -> str:
    threshold = samples[0]["threshold_ns"]
    parts = [f"{op} {stats.mean(gaps_per_op(samples, op, 'shared')):.2f} vs "
             f"{stats.mean(gaps_per_op(samples, op, 'separate')):.3f}" for op in OPERATIONS]
    return (f"the victim's gaps over {threshold / 1000:g} us per aggressor operation, same process vs another: "
            f"{', '.join(parts)}")


LAB = FirstCoreIpi()
