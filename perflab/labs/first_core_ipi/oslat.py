"""Lab 3, part 3 as a latency-critical thread sees it: rt-tests' oslat spins on the disk interrupt's CPU.

oslat runs a busy loop pinned to one CPU and puts the time of every pass in
a histogram of whole microseconds; an undisturbed pass takes under two. In
rounds of two arms in rotated order, a reader on another CPU reads the disk
or nothing reads, and the passes of two microseconds or more per second are
the gaps the disk's interrupt and its completion leave in a spinning thread.

oslat times its loop with the TSC, so its gaps belong to the guest only
where the guest's CPU is real: bare metal and KVM (whose host preemptions
fall on both arms alike). Under QEMU's TCG the loop stops whenever QEMU
runs something else, and those stops swamp the disk's.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import processes, stats
from ...build import ensure_built
from ...errors import PerflabError
from ...journal import SystemChanges
from ...paths import scratch
from ...probe import Machine
from ...verdict import ALPHA
from .completions import SOURCE_DIR, BlockPlan, Skipped, rotated
from .irqtime import IrqTimer, NoIrqTimes
from .irqtime import notes as irq_time_notes
from .irqtime import why_not as why_no_irq_times
from .noise import ARMS, in_arm

OSLAT_STACK = 1 << 20  # bytes: see run_oslat
GAP_US = 2  # oslat's bucket 1 holds every undisturbed pass; from bucket 2 on, something else ran
# Measured in wide (TCG, one host thread for 8 vCPUs), oslat on CPU 7 for 4 s, twice per arm, 2026-11-25.
TCG_GAPS = "2,257 and 2,954 gaps with nothing reading, 1,899 and 3,833 while CPU 3 read the disk on CPU 7's interrupt"


def why_not(machine: Machine, plan: BlockPlan | Skipped) -> str | None:
    """Why oslat cannot time the disk's interrupt here, or None."""
    if isinstance(plan, Skipped):
        return f"it watches a disk's interrupt, and {plan.reason}"
    if machine.emulated():
        return (f"under QEMU's TCG a vCPU's loop stops whenever QEMU runs another, so oslat times QEMU (in wide: "
                f"{TCG_GAPS}); KVM guests and bare metal run it")
    if shutil.which("oslat") is None:
        return "oslat is missing: install Debian's rt-tests package (`make lab` does)"
    return None


def parse_json(text: str, cpu: int) -> dict[str, Any]:
    """oslat's --json file, for the thread on `cpu`: {"seconds", "max_us", "histogram": [[us, passes], ...]}.

    Pairs, not a mapping, because JSON's keys are strings. The last bucket also holds every longer pass."""
    for thread in json.loads(text)["thread"].values():
        if thread["cpu"] == cpu:
            return {"seconds": thread["duration"], "max_us": thread["max"],
                    "histogram": sorted([int(us), passes] for us, passes in thread["histogram"].items())}
    raise PerflabError(f"oslat's results have no thread on CPU {cpu}")


def run_oslat(cpu: int, main_cpu: int, seconds: int, folder: str) -> dict[str, Any]:
    """oslat on `cpu` for `seconds` (after its one-second preheat), its main thread parked on `main_cpu`."""
    output = Path(folder) / "oslat.json"
    # oslat locks all its memory, thread stacks too: at the default 8 MiB stack, two threads pass a learner's
    # 8 MiB RLIMIT_MEMLOCK and its pthread_create fails with EAGAIN; its loop needs a few KiB of stack.
    done = processes.run(["prlimit", f"--stack={OSLAT_STACK}", "--", "oslat", "-c", str(cpu), "-C", str(main_cpu),
                          "-D", str(seconds), "-q", f"--json={output}"])
    if done.returncode != 0 or not output.exists():
        raise PerflabError(f"oslat failed: {oslat_error(done.stderr) or f'exit code {done.returncode}'}")
    return parse_json(output.read_text(), cpu)


def oslat_error(stderr: str) -> str:
    """oslat's error block in one line: the failed test and its errno, else its last line with text.

    oslat prints a block of "ERROR:" lines: the failed test, its source line, then errno."""
    lines = [line.removeprefix("ERROR:").strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    failed = [line for line in lines if line.startswith(("TEST(", "errno="))]
    return " with ".join(failed) if failed else (lines[-1] if lines else "")


def time_loops(machine: Machine, plan: BlockPlan | Skipped, rounds: int, seconds: int,
               progress: bool) -> dict[str, Any]:
    """oslat's loop on the disk interrupt's CPU (see time_loops_on), or {"skipped": why}."""
    if reason := why_not(machine, plan):
        return {"skipped": reason}
    return time_loops_on(plan, rounds, seconds, progress, why_no_irq_times(machine))


# ANCHOR: oslat
def time_loops_on(plan: BlockPlan, rounds: int, seconds: int, progress: bool,
                  no_irq_times: str | None = "not asked for") -> dict[str, Any]:
    """Rounds of both arms: {"cpu", "reader", "disk", "samples": one per arm and round, with oslat's histogram
    and bpftrace's interrupt times per CPU ("irq_time") unless `no_irq_times` says why not}."""
    cpu, reader, samples = plan.irq_cpu, ensure_built(SOURCE_DIR, "blockread"), []
    with SystemChanges() as changes, scratch("oslat") as folder, \
            tqdm(total=2 * rounds, desc=f"oslat: a spinning thread on CPU {cpu}", disable=not progress,
                 file=sys.stderr, leave=False) as bar:
        for r in range(rounds):
            for arm in rotated(ARMS, r):
                timed, no_irq_times = spin_timed(arm, reader, plan, seconds, folder, changes, no_irq_times)
                samples.append({"round": r, "arm": arm, **timed})
                bar.update()
    return {"cpu": cpu, "reader": plan.submitter, "disk": plan.disk, "samples": samples,
            **({"irq_time_skipped": no_irq_times} if no_irq_times else {})}
# ANCHOR_END: oslat


def spin_timed(arm: str, reader: Path, plan: BlockPlan, seconds: int, folder: str, changes: SystemChanges,
               no_irq_times: str | None) -> tuple[dict[str, Any], str | None]:
    """oslat on the interrupt's CPU in one arm, under bpftrace's interrupt timer unless there is a reason not to (or
    it fails now: then oslat runs alone, and the reason is kept for the rest of the run). The timer starts before
    the reader and ends after it, so bpftrace's counts and /proc's cover the same reads."""
    if no_irq_times is None:
        try:
            with IrqTimer(changes, (str(plan.irq), "CAL")) as timer, in_arm(arm, reader, plan, folder):
                timed = run_oslat(plan.irq_cpu, plan.submitter, seconds, folder)
            return {**timed, "irq_time": timer.timed}, None
        except NoIrqTimes as err:
            no_irq_times = str(err)
    with in_arm(arm, reader, plan, folder):
        return run_oslat(plan.irq_cpu, plan.submitter, seconds, folder), no_irq_times


def gaps_per_second(samples: list[dict[str, Any]], arm: str) -> list[float]:
    """Per round: oslat's passes of GAP_US or more per second in that arm."""
    return [sum(passes for us, passes in s["histogram"] if us >= GAP_US) / s["seconds"]
            for s in samples if s["arm"] == arm]


def notes(timed: dict[str, Any]) -> list[str]:
    """The gaps a spinning thread on the interrupt's CPU saw, reading against idle."""
    if "skipped" in timed:
        return [f"oslat (part 3) not run: {timed['skipped']}"]
    samples = timed["samples"]
    idle, reading = gaps_per_second(samples, "idle"), gaps_per_second(samples, "reading")
    difference, low, high, p = stats.mean_difference(idle, reading, 1 - ALPHA)
    longest = {arm: max(s["max_us"] for s in samples if s["arm"] == arm) for arm in ARMS}
    return [f"oslat on CPU {timed['cpu']}: {stats.mean(reading):,.0f} passes of {GAP_US} us or more per second while "
            f"CPU {timed['reader']} read {timed['disk']}, {stats.mean(idle):,.0f} while nothing read (difference "
            f"{difference:,.0f}, {1 - ALPHA:.0%} CI {low:,.0f} to {high:,.0f}, p={p:.2g}); the longest pass "
            f"{longest['reading']:,} us reading, {longest['idle']:,} us idle (in a VM the longest is often the "
            "host's: compare the histograms)", *irq_time_notes(timed)]
