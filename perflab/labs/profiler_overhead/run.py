"""Lab 12, the measurement: the workload on every CPU, alone and under perf record -a in several settings,
raced until the overhead at 25 kHz and --affinity=cpu against the default are both decided."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT
from ...cpulist import check_cpus
from ...errors import PerflabError
from ...probe import Machine
from ...sequential import Plan, Race, race
from ...verdict import Effect, Verdict, judge_paired_change
from .. import Bound, CannotShow, Lab
from .workload import ALONE, Arm, perf_arm, require_perf, run_arm, workload_argv

MIN_EFFECT = 0.05  # the exercise's bar: a profile that costs the workload less than 5% of its time
DEFAULT = perf_arm("-F 25000")  # the source's frequency, perf's default affinity (sys)
AFFINITY_CPU = perf_arm("-F 25000 --affinity=cpu")
ARMS = (Arm(ALONE, None), perf_arm("-F 1000"), DEFAULT, AFFINITY_CPU, perf_arm("-F 25000 --aio"))


@dataclass(frozen=True)
class Settings:
    """How much to measure."""

    million_steps: int  # each CPU's work in one run, millions of xorshift steps (about 1.2 ns each)
    rounds_per_look: int  # rounds between two looks at the verdict (each: every arm once)
    max_rounds: int  # the race stops here undecided...
    budget_s: float  # ...or after this long


def expectation(machine: Machine) -> str:
    """What this machine should show, from its NUMA nodes."""
    nodes = len(machine.value("numa_nodes") or {}) or 1
    if nodes == 1:
        return ("one NUMA node: perf's reader thread competes with the workload for a CPU, as in the source, but "
                "cannot read across nodes; expect an overhead that grows with -F, and --affinity=cpu close to "
                "the default (the source's gain from it was a node effect)")
    return (f"{nodes} NUMA nodes: expect the overhead to grow with -F, and --affinity=cpu to cost less than the "
            "default, which reads every node's buffers from wherever it runs")


def overhead(values: dict[str, list[float]], arm: Arm, alpha: float) -> tuple[str, str, Effect]:
    """arm's wall time over the workload alone's, round by round."""
    return judge_paired_change(f"{arm.name} over the workload alone", values[arm.name], values[ALONE], MIN_EFFECT,
                               "slowdown", alpha)


def affinity_gain(values: dict[str, list[float]], alpha: float) -> tuple[str, str, Effect]:
    """The default's wall time over --affinity=cpu's: above 1 + MIN_EFFECT, pinning the reader helped."""
    return judge_paired_change("the default affinity over --affinity=cpu", values[DEFAULT.name],
                               values[AFFINITY_CPU.name], MIN_EFFECT, "slowdown", alpha)


# ANCHOR: decided
def decided(values: dict[str, list[float]], alpha: float) -> bool:
    """Both questions decided, each at half the look's error rate."""
    return all(judged[0] != "inconclusive" for judged in (overhead(values, DEFAULT, alpha / 2),
                                                          affinity_gain(values, alpha / 2)))
# ANCHOR_END: decided


def perf_may_record_all_cpus() -> str | None:
    """Why perf record -a cannot run for this user, or None."""
    if os.geteuid() == 0:
        return None
    try:
        paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    except (OSError, ValueError):
        return "perf_event_paranoid is unreadable"
    if paranoid > 0:
        return (f"perf record -a watches every CPU, which kernel.perf_event_paranoid {paranoid} allows only root: "
                "run the lab with sudo")
    return None


class ProfilerOverhead(Lab):
    """The profiler competes with what it profiles: perf record -a's cost to a workload on every CPU."""

    name = "profiler-overhead"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(million_steps=100, rounds_per_look=8, max_rounds=48, budget_s=50)
    FULL = Settings(million_steps=400, rounds_per_look=10, max_rounds=100, budget_s=300)
    RUNS = ("max_rounds",)
    EMULATED = "under QEMU's TCG the vCPUs and perf's timer interrupts are QEMU's threads and QEMU's timers"
    IN_A_VM = ("in a VM perf's cpu-clock samples come from the guest kernel's timers, and the host may run a "
               "vCPU's work elsewhere: the overhead is the guest's")
    BOUNDS = (
        Bound("wall time of the workload (ns)", 1e6, NO_LIMIT, "a million dependent steps take at least 0.17 ms "
              "at 6 GHz, one a cycle", lambda result: [v for vs in result["race"]["values"].values() for v in vs]),
    )
    CANNOT_SHOW = ("The source's table, replayed in the figures, shows it on a large NUMA server; perf record -a "
                   "needs root (or kernel.perf_event_paranoid 0 or lower).")

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> list[int]:
        """Every CPU given, else every online CPU: the source's workload filled the machine."""
        if cpus:
            check_cpus(cpus, machine.online_cpus)
            return sorted(set(cpus))
        return machine.online_cpus

    def watched_cpus(self, placement: list[int], **options) -> list[int]:
        return list(placement)

    def measure(self, machine: Machine, cpus: list[int], settings: Settings, progress: bool) -> dict[str, Any]:
        if why := perf_may_record_all_cpus():
            raise CannotShow(why)
        try:
            require_perf()
        except PerflabError as why:
            raise CannotShow(str(why)) from None
        workload = workload_argv(cpus, settings.million_steps)
        threads: dict[str, list[dict[str, int]]] = {arm.name: [] for arm in ARMS}
        by_name = {arm.name: arm for arm in ARMS}

        def measure_round(_r: int, order: list[str]) -> dict[str, float]:
            measured = {}
            for name in order:
                ran = run_arm(by_name[name], workload)
                measured[name] = ran["wall_ns"]
                threads[name].append(ran["threads_ns"])
            return measured

        plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
        raced = race(list(by_name), measure_round, decided, plan, (DEFAULT.name, ALONE),
                     "the workload, alone and under perf record -a", progress)
        result = results.new_result(self.name, "run", machine.summary(), {"cpus": cpus, **asdict(settings)})
        result["expectation"] = expectation(machine)
        result["race"], result["threads_ns"] = raced.to_json(), threads
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        raced = Race.from_json(result["race"])
        values, alpha = raced.kept_values(), raced.alpha_per_look
        verdict, _, effect = overhead(values, DEFAULT, alpha / 2)
        pinned, _, gain = affinity_gain(values, alpha / 2)
        alone_ms = stats.median(values[ALONE]) / 1e6
        notes = [f"expected from the probe, before measuring: {result['expectation']}",
                 f"the workload alone: {alone_ms:.0f} ms on CPUs {', '.join(map(str, result['params']['cpus']))} "
                 f"(median of {raced.rounds - raced.first_kept} rounds)",
                 *(overhead(values, arm, alpha)[2].text() for arm in ARMS[1:]),
                 affinity_note(pinned, gain),
                 *reader_notes(result["threads_ns"]),
                 f"{raced.rounds} rounds in {raced.looks} look{'s' if raced.looks != 1 else ''} "
                 f"({raced.seconds:.0f} s)",
                 *raced.notes]
        if verdict == "reproduced":
            reason = (f"{effect.text()}: perf record -a at 25 kHz took {effect.value:.0%} of the workload's time "
                      "from it; the profiler competes with what it profiles")
        elif verdict == "not-reproduced":
            reason = f"{effect.text()}: perf record -a at 25 kHz cost the workload less than {MIN_EFFECT:.0%} here"
        else:
            reason = f"{effect.text()}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, effect, notes=notes)


def affinity_note(pinned: str, gain: Effect) -> str:
    if pinned == "reproduced":
        return f"--affinity=cpu helped: {gain.text()}"
    if pinned == "not-reproduced" and gain.ci_high < 0:
        return (f"--affinity=cpu made it worse: {gain.text()}; it moves perf's reader to each buffer's CPU in "
                "turn, and here every buffer is on a CPU the workload fills")
    if pinned == "not-reproduced":
        return f"--affinity=cpu did not help by {MIN_EFFECT:.0%} or more: {gain.text()}"
    return f"--affinity=cpu against the default is not decided: {gain.text()}"


def reader_notes(threads_ns: dict[str, list[dict[str, int]]]) -> list[str]:
    """Where perf's own threads ran in each perf arm: their CPU time per run and its share on each CPU."""
    notes = []
    for arm, runs in threads_ns.items():
        if arm == ALONE or not runs:
            continue
        totals: dict[str, int] = {}
        for run in runs:
            for cpu, ns in run.items():
                totals[cpu] = totals.get(cpu, 0) + ns
        if not totals:  # no look saw the workload's process (a kernel without /proc/PID/task/TID/children)
            continue
        whole = sum(totals.values())
        shares = ", ".join(f"CPU {cpu} {ns / whole:.0%}" for cpu, ns in sorted(totals.items(), key=lambda i: int(i[0])))
        notes.append(f"{arm}: perf's own threads ran {whole / len(runs) / 1e6:.1f} ms a run while its workload "
                     f"process existed ({shares})")
    return notes


LAB = ProfilerOverhead()
