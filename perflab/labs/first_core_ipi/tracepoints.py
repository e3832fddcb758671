"""Lab 3, part 3 here: the kernel's own tracepoints name the interrupts that /proc/interrupts only counts.

perf counts four tracepoints on every CPU while the bystander's aggressor
runs (and while one read loop runs, where part 2 can): function-call IPIs
(the CAL row), TLB flushes done because another CPU asked (the TLB row), and
BLOCK softirqs. perf needs root and tracefs; tracefs is mounted through the
journal when it is not, and unmounted when the run ends.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from tqdm.auto import tqdm

from ...build import ensure_built
from ...errors import PerflabError
from ...journal import SystemChanges
from ...knobs import RqAffinity
from ...paths import scratch
from ...probe import Machine
from ...sysfs import SysRoot, default_root
from ...tracing import Tracepoint, chosen_events, count_per_cpu, patching_can_hang, tracefs_folder
from .completions import SOURCE_DIR, BlockPlan, Skipped

# ANCHOR: tracepoints
TRACEPOINTS = (
    Tracepoint("function-call IPIs", ("irq_vectors:call_function_entry",)),
    Tracepoint("single-CPU function-call IPIs", ("irq_vectors:call_function_single_entry",)),
    # reason 1 is TLB_REMOTE_SHOOTDOWN (include/linux/mm_types.h): a flush another CPU asked this one for
    Tracepoint("TLB flushes asked by another CPU", ("tlb:tlb_flush",), "reason == 1"),
    Tracepoint("BLOCK softirqs", ("irq:softirq_entry",), "vec == 4"),  # BLOCK_SOFTIRQ
)
# ANCHOR_END: tracepoints
CPU_VICTIM, CPU_INTERRUPT, CPU_SUBMITTER = "the victim", "the disk's interrupt", "the reader"
WORKLOADS = (("munmap", "shared"), ("munmap", "separate"), ("mprotect", "shared"), ("membarrier", "shared"))


def why_not(machine: Machine, root: SysRoot) -> str | None:
    """Why perf cannot count tracepoints here, or None."""
    if not machine.value("privileges", {}).get("root"):
        return "perf counts tracepoints on every CPU only as root: run `sudo perflab run first-core-ipi`"
    if shutil.which("perf") is None:
        return "perf is missing: install Debian's linux-perf package (`make lab` does)"
    if patching_can_hang(machine, root):
        # Seen in numa2: perf stuck in the guest kernel (a soft lockup on CPU 0) in 1 of 6 lab runs.
        return ("under QEMU's multi-threaded TCG, perf's tracepoints can hang the guest as the kernel patches its "
                "own code, so they are left out here; `--vm wide` (one host thread for all vCPUs), KVM guests and "
                "bare metal count them")
    return None


def count_workloads(victim: int, aggressor: int, ops: int, reads: int, plan: BlockPlan | Skipped, machine: Machine,
                    progress: bool) -> dict[str, Any]:
    """Each workload once under perf stat: {"events": label -> tracepoint, "runs": [...]}, or {"skipped": why}."""
    root = default_root()
    if reason := why_not(machine, root):
        return {"skipped": reason}
    bystander = ensure_built(SOURCE_DIR, "bystander")
    runs = []
    with SystemChanges() as changes, scratch("tracepoints") as folder:
        try:
            events = chosen_events(TRACEPOINTS, root, tracefs_folder(changes, root))
        except PerflabError as err:
            return {"skipped": str(err)}
        if not any(events.values()):
            return {"skipped": "this kernel has none of the tracepoints counted: "
                               + ", ".join(name for t in TRACEPOINTS for name in t.candidates)}
        commands = [(f"{op}, {process} process", ops, [CPU_VICTIM],
                     [str(bystander), "-v", str(victim), "-a", str(aggressor), "-o", op, "-p", process,
                      "-n", str(ops), "-i", os.path.join(folder, "bystander")])
                    for op, process in WORKLOADS]
        if isinstance(plan, BlockPlan):
            reader = ensure_built(SOURCE_DIR, "blockread")
            mode = RqAffinity(plan.disk, root).read()
            commands.append((f"read, from CPU {plan.submitter} at rq_affinity={mode}", reads,
                             [CPU_INTERRUPT, CPU_SUBMITTER],
                             [str(reader), "-c", str(plan.submitter), "-f", plan.read_path,
                              "-n", str(reads), "-i", os.path.join(folder, "block")]))
        for workload, times, watched, command in tqdm(commands, desc="perf: tracepoints per CPU",
                                                      disable=not progress, file=sys.stderr, leave=False):
            try:
                counts = count_per_cpu(TRACEPOINTS, events, command)
            except PerflabError as err:  # parts 1 and 2 are measured already: keep them, say why this failed
                return {"skipped": str(err)}
            runs.append({"workload": workload, "times": times, "watched": watched,
                         "counts": {label: {str(cpu): n for cpu, n in per_cpu.items()}
                                    for label, per_cpu in counts.items()}})
    return {"events": events, "runs": runs}


def notes(counted: dict[str, Any], victim: int, plan: BlockPlan | Skipped) -> list[str]:
    """What perf saw per operation on the victim, and per read on the interrupt's and the reader's CPU."""
    if "skipped" in counted:
        return [f"tracepoints (part 3) not counted: {counted['skipped']}"]
    found = [f"{label} ({name})" for label, name in counted["events"].items() if name]
    lines = [f"perf counted per CPU: {'; '.join(found)}"]
    cpus = {CPU_VICTIM: victim}
    if isinstance(plan, BlockPlan):  # a read was counted only then
        cpus.update({CPU_INTERRUPT: plan.irq_cpu, CPU_SUBMITTER: plan.submitter})
    for run in counted["runs"]:
        for role in run["watched"]:
            per = ", ".join(f"{label} {per_cpu[str(cpus[role])] / run['times']:.2f}"
                            for label, per_cpu in run["counts"].items())
            lines.append(f"per {run['workload']}, on CPU {cpus[role]} ({role}): {per}")
    return lines
