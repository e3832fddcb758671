"""Lab 3, hunting the noise: the kernel's osnoise tracer names what takes a CPU away from its work.

osnoise runs a kernel thread on the CPU it watches for part of every period
and accounts for each gap in that thread's time: an interrupt (irq_noise), a
softirq, another thread, an NMI, or, when nothing in the kernel ran, the
hardware (in a VM: the host). The hunt watches the CPU that takes the disk's
interrupt, in rounds of two arms in rotated order, while a reader on another
CPU reads the disk and while nothing reads, and counts each named cause per
second of osnoise's runtime. Then it hunts as one hunts a latency spike:
with stop_tracing_us, tracing stops at the first gap over STOP_US, and the
events just before the stop name its causes.

Every tracer setting goes through perflab.journal and comes back however the
run ends; tracefs is mounted through it when it is not.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import processes, stats
from ...build import ensure_built
from ...errors import PerflabError
from ...journal import SystemChanges
from ...knobs import TraceBuffer, TracerSetting
from ...paths import scratch
from ...probe import Machine
from ...sysfs import SysRoot
from ...tracing import MTTCG_HANGS, patching_can_hang, tracefs_folder
from ...verdict import ALPHA
from .completions import SOURCE_DIR, BlockPlan, Skipped, rotated

# osnoise's thread runs a fifth of each second, on one CPU: the rest of the guest goes on even under emulation.
RUNTIME_US, PERIOD_US = 200_000, 1_000_000
STOP_US = 100  # the gap the hunt stops at: a latency-critical thread's budget, far above an interrupt's cost
STOP_WAIT_S = 10  # how long the hunt waits for such a gap
ARMS = ("reading", "idle")
HARDWARE = "hw (nothing in the kernel ran)"

# One line per period (RUNTIME NOISE %AVAILABLE MAX-SINGLE HW NMI IRQ SIRQ THREAD), one per named gap, and one per
# sample over the threshold, with its interference: how many named gaps it held (none: the hardware's).
_HEAD = r"\[(?P<cpu>\d+)\]\s+\S+\s+(?P<time>\d+\.\d+):\s+"
PERIOD = re.compile(
    _HEAD + r"(?P<runtime>\d+)\s+(?P<noise>\d+)\s+[\d.]+\s+(?P<max>\d+)\s+(?P<hw>\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s*$"
)
NOISE = re.compile(_HEAD + r"(?P<kind>irq|softirq|thread|nmi)_noise:\s*(?P<source>.*?)\s*start [\d.]+ duration "
                           r"(?P<ns>\d+) ns")
SAMPLE = re.compile(
    _HEAD + r"sample_threshold: start [\d.]+ duration (?P<ns>\d+) ns interference (?P<interference>\d+)"
)


def parse_trace(text: str, cpu: int) -> dict[str, Any]:
    """The named gaps on `cpu` in the periods that began and ended while tracing was on.

    {"runtime_us", "periods", "max_single_us", "sources": {"irq virtio4-req.0:34": count, ...}, "last_gap": the
    last sample over the threshold and the named gaps in it, which is the one that stopped a stop_tracing_us
    trace (osnoise also prints "stop tracing hit", but only where the kernel has trace_printk buffers)}."""
    periods, noises, last_gap = [], [], None
    for line in text.splitlines():
        if (found := PERIOD.search(line)) and int(found["cpu"]) == cpu:
            periods.append((float(found["time"]), int(found["runtime"]), int(found["max"]), int(found["hw"])))
        elif (found := NOISE.search(line)) and int(found["cpu"]) == cpu:
            noises.append((float(found["time"]), f"{found['kind']} {found['source'] or found['kind']}",
                           int(found["ns"])))
        elif (found := SAMPLE.search(line)) and int(found["cpu"]) == cpu:
            held = noises[len(noises) - int(found["interference"]):] if int(found["interference"]) else []
            last_gap = {"gap_ns": int(found["ns"]), "causes": [{"source": source, "ns": took}
                                                                for _, source, took in held]}
    # The first period began before tracing was on, so its gaps are partly missing: count from its end.
    counted = periods[1:]
    start = periods[0][0] if periods else 0.0
    end = counted[-1][0] if counted else 0.0
    sources: dict[str, int] = {}
    for at, source, _ in noises:
        if start < at <= end:
            sources[source] = sources.get(source, 0) + 1
    if counted:
        sources[HARDWARE] = sum(hw for _, _, _, hw in counted)
    return {"runtime_us": sum(runtime for _, runtime, _, _ in counted), "periods": len(counted),
            "max_single_us": max((m for _, _, m, _ in counted), default=0), "sources": sources,
            "last_gap": last_gap}


def why_not(machine: Machine, plan: BlockPlan | Skipped, root: SysRoot) -> str | None:
    """Why the hunt cannot run here before looking at tracefs, or None."""
    if isinstance(plan, Skipped):
        return f"it watches a disk's interrupt, and {plan.reason}"
    if not machine.value("privileges", {}).get("root"):
        return "osnoise is a kernel tracer that only root may start: run `sudo perflab run first-core-ipi`"
    if patching_can_hang(machine, root):
        return (f"under QEMU's multi-threaded TCG, the guest hung in {MTTCG_HANGS} sessions that traced with osnoise, "
                "as the kernel patched its own tracepoints; a profile with `tcg_single_thread = true` (wide) runs "
                "the hunt, and so do KVM guests and bare metal")
    return None


class Reader:
    """blockread on `cpu`, reading `path` until stopped (its own counts are not needed here)."""

    def __init__(self, binary: Path, cpu: int, path: str, folder: str):
        self.argv = [str(binary), "-c", str(cpu), "-f", path, "-n", str(10 ** 12), "-i", f"{folder}/reader"]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Reader:
        self.process = processes.start(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def __exit__(self, *exc) -> None:
        processes.stop(self.process)  # SIGTERM: it reads until told
        _, err = self.process.communicate()
        if self.process.returncode not in (0, -15) and not exc[0]:
            raise PerflabError(f"the reader failed: {err.decode(errors='replace').strip() or self.process.returncode}")


def in_arm(arm: str, binary: Path, plan: BlockPlan, folder: str) -> Reader | contextlib.nullcontext:
    """What runs beside the measurement in `arm`: the reader while "reading", nothing while "idle"."""
    return Reader(binary, plan.submitter, plan.read_path, folder) if arm == "reading" else contextlib.nullcontext()


class NoOsnoise(PerflabError):
    """This kernel cannot run the osnoise tracer."""


class Osnoise:
    """The osnoise tracer on one CPU, set through the journal: clear, trace for a while, read."""

    def __init__(self, changes: SystemChanges, root: SysRoot, cpu: int):
        self.root, self.cpu, self.changes = root, cpu, changes
        try:
            self.folder = tracefs_folder(changes, root)
        except PerflabError as err:
            raise NoOsnoise(str(err)) from None
        if "osnoise" not in (root.read(f"{self.folder}/available_tracers") or "").split():
            raise NoOsnoise("this kernel has no osnoise tracer (CONFIG_OSNOISE_TRACER, Linux 5.14 and later): "
                               "`perflab run first-core-ipi --vm wide` boots Debian's real-time kernel, which has it")
        self.tracing_on = TracerSetting("tracing_on", root)
        self.stopped = False
        changes.set(self.tracing_on, "0")
        for name, value in (("osnoise/cpus", str(cpu)), ("osnoise/period_us", str(PERIOD_US)),
                            ("osnoise/runtime_us", str(RUNTIME_US)), ("osnoise/stop_tracing_us", "0"),
                            ("events/osnoise/enable", "1"), ("current_tracer", "osnoise")):
            self.set(name, value)

    def set(self, name: str, value: str) -> None:
        self.changes.set(TracerSetting(name, self.root), value)

    def trace(self, seconds: float, until_stopped: bool = False) -> str:
        """Trace for `seconds`, or until osnoise stops tracing itself if `until_stopped`; the trace's text."""
        self.changes.set(TraceBuffer(root=self.root), "emptied")
        self.changes.set(self.tracing_on, "1")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (until_stopped and self.tracing_on.read() == "0"):
            time.sleep(0.1)
        self.stopped = self.tracing_on.read() == "0"  # osnoise stopped it: a gap over stop_tracing_us
        self.changes.set(self.tracing_on, "0")
        return self.root.read(f"{self.folder}/trace") or ""


def hunt(machine: Machine, plan: BlockPlan | Skipped, root: SysRoot, rounds: int, seconds: float,
         progress: bool) -> dict[str, Any]:
    """The hunt where this machine can run it (see hunt_on), or {"skipped": why}."""
    if reason := why_not(machine, plan, root):
        return {"skipped": reason}
    try:
        return hunt_on(plan, root, rounds, seconds, progress)
    except NoOsnoise as err:
        return {"skipped": str(err)}


# ANCHOR: hunt
def hunt_on(plan: BlockPlan, root: SysRoot, rounds: int, seconds: float, progress: bool) -> dict[str, Any]:
    """Rounds of both arms on the disk's interrupt CPU, then one stop hunt while reading:
    {"cpu", "irq", "reader", "disk", "samples": one per arm and round, "stop": the gap that stopped it, or None}."""
    cpu, samples = plan.irq_cpu, []
    reader = ensure_built(SOURCE_DIR, "blockread")
    with SystemChanges() as changes, scratch("noise") as folder:
        tracer = Osnoise(changes, root, cpu)
        with tqdm(total=2 * rounds + 1, desc=f"osnoise: what takes CPU {cpu}", disable=not progress,
                  file=sys.stderr, leave=False) as bar:
            for r in range(rounds):
                for arm in rotated(ARMS, r):
                    with in_arm(arm, reader, plan, folder):
                        text = tracer.trace(seconds)
                    samples.append({"round": r, "arm": arm, **parse_trace(text, cpu)})
                    bar.update()
            tracer.set("osnoise/stop_tracing_us", str(STOP_US))
            with Reader(reader, plan.submitter, plan.read_path, folder):
                text = tracer.trace(STOP_WAIT_S, until_stopped=True)
            stop = parse_trace(text, cpu)["last_gap"] if tracer.stopped else None
            bar.update()
    return {"cpu": cpu, "irq": plan.irq, "reader": plan.submitter, "disk": plan.disk, "samples": samples, "stop": stop}
# ANCHOR_END: hunt


def rates(samples: list[dict[str, Any]], arm: str, source: str) -> list[float]:
    """Per round: how often `source` took the CPU per second of osnoise's runtime in that arm."""
    return [1e6 * s["sources"].get(source, 0) / s["runtime_us"] for s in samples if s["arm"] == arm and s["runtime_us"]]


def disk_sources(hunted: dict[str, Any]) -> list[str]:
    """The named causes that are the disk's interrupt: the handler, and on a threaded kernel its thread."""
    irq = hunted["irq"]
    seen = {source for s in hunted["samples"] for source in s["sources"]}
    return sorted(s for s in seen if s.startswith("irq ") and s.endswith(f":{irq}")
                  or s.startswith(f"thread irq/{irq}-"))


def notes(hunted: dict[str, Any]) -> list[str]:
    """What osnoise named on the disk's interrupt CPU, reading against idle, and what stopped the hunt."""
    if "skipped" in hunted:
        return [f"noise hunt (part 3) not run: {hunted['skipped']}"]
    cpu, reader, samples = hunted["cpu"], hunted["reader"], hunted["samples"]
    lines = []
    for source in disk_sources(hunted) or [f"irq ?:{hunted['irq']}"]:
        idle, reading = rates(samples, "idle", source), rates(samples, "reading", source)
        if len(idle) < 2 or len(reading) < 2:
            lines.append(f"osnoise on CPU {cpu}: too few whole periods to compare; rerun with more rounds")
            break
        difference, low, high, p = stats.mean_difference(idle, reading, 1 - ALPHA)
        lines.append(f"osnoise on CPU {cpu} named {source} {stats.mean(reading):.0f} times per second of its "
                     f"runtime while CPU {reader} read {hunted['disk']}, {stats.mean(idle):.1f} while nothing read "
                     f"(difference {difference:.0f}, {1 - ALPHA:.0%} CI {low:.0f} to {high:.0f}, p={p:.2g})")
    busiest = sorted(((stats.mean(rates(samples, "reading", s)), s) for s in
                      {s for sample in samples if sample["arm"] == "reading" for s in sample["sources"]}), reverse=True)
    lines.append(f"what took CPU {cpu} while reading, per second of osnoise's runtime: "
                 + ", ".join(f"{source} {rate:.0f}" for rate, source in busiest[:6]))
    stop = hunted["stop"]
    if stop is None:
        lines.append(f"the hunt with stop_tracing_us={STOP_US} saw no gap over {STOP_US} us in {STOP_WAIT_S} s")
    elif not stop["causes"]:
        lines.append(f"the hunt stopped at a gap of {stop['gap_ns'] / 1000:.0f} us with nothing in the kernel "
                     "running: hardware noise (in a VM, the host took the vCPU)")
    else:
        causes = ", ".join(f"{c['source']} ({c['ns'] / 1000:.0f} us)" for c in stop["causes"])
        named_us = sum(c["ns"] for c in stop["causes"]) / 1000
        lines.append(f"the hunt stopped at a gap of {stop['gap_ns'] / 1000:.0f} us; osnoise named: {causes}; "
                     f"{named_us:.0f} us of it, the rest with nothing in the kernel running")
    return lines
