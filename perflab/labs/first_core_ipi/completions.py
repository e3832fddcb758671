"""Lab 3, part 2: reads from one CPU, and where the disk's rq_affinity sends their completions.

The sweep writes /sys/block/DISK/queue/rq_affinity through perflab's journal
(perflab.journal.SystemChanges): the old value comes back however the run ends.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import stats
from ...build import ensure_built
from ...journal import SystemChanges
from ...knobs import RqAffinity
from ...paths import scratch
from ...probe import Machine
from ...runner import run_once
from ...sysfs import SysRoot
from .. import CannotShow
from .blockdev import effective_cpus, find_disk
from .procstat import read_table

SOURCE_DIR = "labs/03-first-core-ipi"
MODES = ("0", "1", "2")  # rq_affinity
# Block completions "land on" a CPU when it ran this share of the BLOCK softirqs in every round.
ON_PREDICTED = 0.9


def rotated(items: tuple, by: int) -> list:
    """The items in an order rotated by the round number: drift hits every arm alike."""
    return [items[(i + by) % len(items)] for i in range(len(items))]


@dataclass(frozen=True)
class BlockPlan:
    """Where part 2 reads and where its completions may land. Saved in a result as asdict() gives it."""

    disk: str  # its name under /sys/block
    read_path: str  # what blockread reads with O_DIRECT: the disk, or a scratch file on it
    queues: int  # hardware queues: always 1, as a multi-queue disk is skipped
    irq: int  # the interrupt of its request queue
    irq_cpu: int  # the one CPU that interrupt arrives on
    submitter: int  # the CPU the reads are issued from
    shares_llc: bool  # whether submitter shares a last-level cache with irq_cpu

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Skipped:
    """Why part 2 cannot run here. Saved in a result as {"skipped": reason}.

    A type of its own, not a field of BlockPlan: a skipped plan has no disk or CPU that code could read by mistake,
    and every use says which of the two it holds (isinstance)."""

    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"skipped": self.reason}


def plan_from_json(saved: dict[str, Any]) -> BlockPlan | Skipped:
    """The plan a result saved (result["block"]["plan"]), in the keys every version of lab 3 wrote."""
    return Skipped(saved["skipped"]) if "skipped" in saved else BlockPlan(**saved)


def block_plan(machine: Machine, root: SysRoot) -> BlockPlan | Skipped:
    """The disk, its completion interrupt's CPU and a submitting CPU elsewhere; or why part 2 cannot run here."""
    if reason := forced_irq_threads(root):
        return Skipped(f"{reason}: every interrupt runs in a thread, and blk-mq never sends a completion to another "
                       "CPU when it would only wake that CPU's ksoftirqd (blk_mq_complete_need_ipi); boot a standard "
                       "kernel to sweep rq_affinity (`--vm numa2`)")
    plan = disk_plan(machine, root)
    if isinstance(plan, BlockPlan) and not machine.value("privileges", {}).get("root"):
        return Skipped(f"the sweep writes /sys/block/{plan.disk}/queue/rq_affinity, which needs root: run "
                       "`sudo perflab run first-core-ipi` (part 1 needs no root)")
    return plan


def disk_plan(machine: Machine, root: SysRoot) -> BlockPlan | Skipped:
    """A one-queue disk, the one CPU its interrupt arrives on, and a CPU to read from elsewhere (across a cache
    boundary where there is one); or why there is none."""
    try:
        disk = find_disk(root)
    except CannotShow as reason:
        return Skipped(str(reason))
    if disk.queues != 1:
        return Skipped(f"{disk.name} has {disk.queues} hardware queues: a multi-queue disk completes each request "
                       "on its own queue's interrupt, near the submitter, so rq_affinity has little to move. A "
                       "single-queue disk shows it (virtio-blk with one queue, a SATA disk)")
    interrupts = read_table("/proc/interrupts")
    vectors = [irq for irq in disk.irqs if str(irq) in interrupts.rows]
    if not vectors:
        return Skipped(f"{disk.name}'s interrupts ({disk.irqs or 'none found in sysfs'}) are not in /proc/interrupts")
    busiest = max(vectors, key=lambda irq: sum(interrupts.rows[str(irq)]))  # its request queue's vector
    targets = effective_cpus(root, busiest)
    others = [c for c in machine.online_cpus if c not in targets]
    if len(targets) != 1 or not others:
        return Skipped(f"interrupt {busiest} of {disk.name} goes to CPUs {targets}: the lab needs it on one CPU and "
                       "another CPU to read from")
    irq_cpu = targets[0]
    sharing = {cpu for group in machine.llc_groups() if irq_cpu in group for cpu in group}
    # A reader across a cache boundary where there is one (numa2's other socket): there even mode 1 sends an IPI.
    submitter = next((cpu for cpu in reversed(others) if cpu not in sharing), others[-1])
    return BlockPlan(disk=disk.name, read_path=disk.read_path, queues=disk.queues, irq=busiest, irq_cpu=irq_cpu,
                     submitter=submitter, shares_llc=submitter in sharing)


def forced_irq_threads(root: SysRoot) -> str | None:
    """Why this kernel threads every interrupt (a PREEMPT_RT kernel, or `threadirqs`), or None."""
    if root.read("/sys/kernel/realtime") == "1":
        return "this is a PREEMPT_RT kernel"
    if "threadirqs" in (root.read("/proc/cmdline") or "").split():
        return "this kernel was booted with threadirqs"
    return None


# ANCHOR: predict
def predicted_cpu(mode: str, plan: BlockPlan) -> int:
    """Where blk-mq runs a single-queue disk's completion (block/blk-mq.c, blk_mq_complete_need_ipi):

    0: where the interrupt arrived; 1: there too if that CPU shares a cache with the submitter, else on the
    submitter (an IPI); 2: on the submitting CPU itself (an IPI unless the interrupt arrived there)."""
    if mode == "0" or (mode == "1" and plan.shares_llc):
        return plan.irq_cpu
    return plan.submitter
# ANCHOR_END: predict


def block_run(binary: Path, plan: BlockPlan, cpu: int, reads: int, folder: str) -> dict[str, Any]:
    """One read loop on `cpu`; its sample with the per-CPU BLOCK softirqs, CAL and disk interrupts during it."""
    prefix = os.path.join(folder, "block")
    _, (sample,) = run_once([str(binary), "-c", str(cpu), "-f", plan.read_path,
                             "-n", str(reads), "-i", prefix])
    softirqs = read_table(f"{prefix}.softirqs.after").since(read_table(f"{prefix}.softirqs.before"))
    interrupts = read_table(f"{prefix}.interrupts.after").since(read_table(f"{prefix}.interrupts.before"))
    sample.update(block={str(c): n for c, n in softirqs.get("BLOCK").items()},
                  cal={str(c): n for c, n in interrupts.get("CAL").items()},
                  disk_irq={str(c): n for c, n in interrupts.get(str(plan.irq)).items()})
    return sample


def measure_block(plan: BlockPlan, rounds: int, reads: int, progress: bool) -> list[dict[str, Any]]:
    """Sweep rq_affinity 0, 1, 2 in rotated order, round after round; the old value comes back however this ends."""
    binary = ensure_built(SOURCE_DIR, "blockread")
    samples = []
    with SystemChanges() as changes, scratch("block") as folder, \
            tqdm(total=rounds * len(MODES), desc=f"block: rq_affinity sweep on {plan.disk}",
                 disable=not progress, file=sys.stderr, leave=False) as bar:
        for r in range(rounds):
            for mode in rotated(MODES, r):
                changes.set(RqAffinity(plan.disk), mode)
                samples.append(dict(block_run(binary, plan, plan.submitter, reads, folder), mode=mode, round=r))
                bar.update()
    return samples


def block_shares(samples: list[dict[str, Any]], mode: str, cpu: int) -> list[float]:
    """Per round: the share of the BLOCK softirqs that ran on `cpu`."""
    return [s["block"][str(cpu)] / max(1, sum(s["block"].values())) for s in samples if s["mode"] == mode]


def per_read(samples: list[dict[str, Any]], mode: str, counter: str, cpu: int) -> float:
    chosen = [s for s in samples if s["mode"] == mode]
    return sum(s[counter][str(cpu)] for s in chosen) / sum(s["reads"] for s in chosen)


def judge_block(plan: BlockPlan, samples: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    """Did every mode's completions land on the CPU blk-mq predicts, in every round?"""
    notes, as_predicted = [], True
    for mode in MODES:
        cpu = predicted_cpu(mode, plan)
        shares = block_shares(samples, mode, cpu)
        landed = min(shares) >= ON_PREDICTED
        as_predicted &= landed
        notes.append(f"rq_affinity={mode}: {100 * stats.mean(shares):.0f}% of the BLOCK softirqs on CPU {cpu} "
                     f"({'as predicted' if landed else f'predicted: at least {ON_PREDICTED:.0%} in every round'}); "
                     f"per 1,000 reads: BLOCK {1000 * per_read(samples, mode, 'block', cpu):.0f} and CAL "
                     f"{1000 * per_read(samples, mode, 'cal', cpu):.0f} on CPU {cpu}")
    return as_predicted, notes
