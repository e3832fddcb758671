"""Lab 3, part 3 in time, not counts: how long each CPU spent in hard and soft interrupts, by bpftrace.

/proc/interrupts and /proc/softirqs count events; the time they took is what a
latency-critical thread loses. bcc's and libbpf-tools' hardirqs and softirqs
measure it, but the ones Debian 12 ships (libbpf-tools 0.26) sum over every
CPU, and the first core is the point here: so bpftrace sums the time per CPU
on the kernel's irq tracepoints while oslat spins, and the lab sets it beside
/proc's counts over the same window, a check that the two agree. It needs
root, bpftrace and tracefs (mounted through the journal when it is not).
A soft interrupt's time includes any hard interrupt that arrived during it.
"""

from __future__ import annotations

import json
import select
import shutil
import signal
import subprocess
import time
from typing import Any

from ... import processes
from ...errors import PerflabError
from ...journal import SystemChanges
from ...probe import Machine
from ...sysfs import default_root
from ...tracing import patching_can_hang, tracefs_folder
from ...uprobes import bpftrace_error
from .procstat import read_table

ATTACH_S = 30.0  # bpftrace compiles and attaches in about a second here; give a loaded machine time
PRINT_S = 10.0  # its maps print in milliseconds after SIGINT

# ANCHOR: program
PROGRAM = r"""
tracepoint:irq:irq_handler_entry { @hard_start[cpu] = nsecs; @irq_name[args->irq] = str(args->name); }
tracepoint:irq:irq_handler_exit /@hard_start[cpu]/ {
  @hard_ns[cpu, args->irq] = sum(nsecs - @hard_start[cpu]); @hard_n[cpu, args->irq] = count();
  delete(@hard_start[cpu]);
}
tracepoint:irq:softirq_entry { @soft_start[cpu] = nsecs; }
tracepoint:irq:softirq_exit /@soft_start[cpu]/ {
  @soft_ns[cpu, args->vec] = sum(nsecs - @soft_start[cpu]); @soft_n[cpu, args->vec] = count();
  delete(@soft_start[cpu]);
}
END {
  clear(@hard_start); clear(@soft_start);
  print(@irq_name); print(@hard_n); print(@hard_ns); print(@soft_n); print(@soft_ns);
  printf("maps printed\n");
}
"""
# ANCHOR_END: program


class NoIrqTimes(PerflabError):
    """bpftrace could not time the interrupts here: the lab goes on without the times."""


def why_not(machine: Machine) -> str | None:
    """Why bpftrace cannot time interrupts per CPU here, or None."""
    if not machine.value("privileges", {}).get("root"):
        return "bpftrace attaches to the kernel's tracepoints only as root: run `sudo perflab run first-core-ipi`"
    if shutil.which("bpftrace") is None:
        return "bpftrace is missing: install Debian's bpftrace package (`make lab` does)"
    if patching_can_hang(machine, default_root()):
        return ("under QEMU's multi-threaded TCG, attaching to tracepoints can hang the guest as the kernel patches "
                "its code")
    return None


def parse_maps(output: str, softirq_names: list[str]) -> dict[str, Any]:
    """bpftrace's `-f json` maps -> {"hard": {cpu: {"irq 36 virtio2-req.0": [count, ns]}}, "soft": {cpu: {"BLOCK":
    [count, ns]}}}; CPUs as strings, as JSON keeps them. A softirq is named by its row in /proc/softirqs, whose
    rows are in vector order."""
    maps: dict[str, dict[str, Any]] = {}
    for line in output.splitlines():
        if line.startswith("{") and (record := json.loads(line)).get("type") == "map":
            maps.update(record["data"])
    names = maps.get("@irq_name", {})
    timed: dict[str, Any] = {"hard": {}, "soft": {}}
    for kind, label in (("hard", lambda n: f"irq {n} {names.get(n, '')}".strip()),
                        ("soft", lambda n: softirq_names[int(n)] if int(n) < len(softirq_names) else f"vector {n}")):
        for key, ns in maps.get(f"@{kind}_ns", {}).items():
            cpu, number = key.split(",")
            timed[kind].setdefault(cpu, {})[label(number)] = [maps[f"@{kind}_n"].get(key, 0), ns]
    return timed


class IrqTimer:
    """bpftrace timing every CPU's interrupts from entering the block until leaving it, with /proc's counts over
    the same window: {"seconds", "hard", "soft", "proc": {"interrupts": {row: {cpu: n}}, "softirqs": ...}}."""

    def __init__(self, changes: SystemChanges, rows: tuple[str, ...]):
        try:
            tracefs_folder(changes, changes.root)
        except PerflabError as err:
            raise NoIrqTimes(str(err)) from None
        self.rows = rows  # the /proc/interrupts rows to count beside bpftrace's times
        self.softirq_names = list(read_table("/proc/softirqs").rows)
        self.timed: dict[str, Any] = {}

    def __enter__(self) -> IrqTimer:
        self.process = processes.start(["bpftrace", "-f", "json", "-e", PROGRAM], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
        try:
            self._wait_attached()
        except BaseException:
            processes.stop(self.process, signal.SIGKILL)
            raise
        self.before = read_table("/proc/interrupts"), read_table("/proc/softirqs")  # the same window as bpftrace's
        self.started = time.monotonic()
        return self

    def _wait_attached(self) -> None:
        self.lines: list[str] = []
        if not self._read_until('"attached_probes"', ATTACH_S):
            raise NoIrqTimes(f"bpftrace did not attach to the irq tracepoints within {ATTACH_S:.0f} s")

    def _read_until(self, marker: str, seconds: float) -> bool:
        """Read bpftrace's lines into self.lines until one holds `marker` (True), or for `seconds` (False); NoIrqTimes
        if bpftrace ended first, with its error."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], deadline - time.monotonic())
            line = self.process.stdout.readline() if ready else ""
            if marker in line:
                return True
            self.lines.append(line)
            if not line and self.process.poll() is not None:
                reason = bpftrace_error(self.process.stderr.read())[:200]
                raise NoIrqTimes(f"bpftrace could not attach to the irq tracepoints: {reason}")
        return False

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:  # the measurement failed: nothing to keep
            processes.stop(self.process, signal.SIGKILL)
            return
        interrupts = read_table("/proc/interrupts").since(self.before[0])
        softirqs = read_table("/proc/softirqs").since(self.before[1])
        seconds = time.monotonic() - self.started
        # SIGINT runs END, which prints the maps and a marker. bpftrace 0.17 loses a SIGINT that comes within
        # milliseconds of its "attached" line and hangs, so the signal is sent again until the marker comes.
        self.lines, printed, deadline = [], False, time.monotonic() + PRINT_S
        try:
            while not printed and time.monotonic() < deadline:
                self.process.send_signal(signal.SIGINT)
                printed = self._read_until("maps printed", 1.0)
        finally:
            processes.stop(self.process, signal.SIGKILL)  # it has printed what is needed: no need to wait more
        if not printed:
            raise NoIrqTimes(f"bpftrace printed no maps within {PRINT_S:.0f} s of SIGINT")
        self.timed = {"seconds": seconds, **parse_maps("".join(self.lines), self.softirq_names),
                      "proc": {"interrupts": {row: {str(c): n for c, n in interrupts.get(row).items()}
                                              for row in self.rows},
                               "softirqs": {"BLOCK": {str(c): n for c, n in softirqs.get("BLOCK").items()}}}}


def in_irq(timed: dict[str, Any], cpu: int, kind: str, label: str | None = None) -> float:
    """The share of its time `cpu` spent in `kind` ("hard" or "soft") interrupts, or in the one named `label`
    (a softirq's name; an irq's number)."""
    entries = timed[kind].get(str(cpu), {})
    chosen = [v for name, v in entries.items()
              if label is None or name == label or name.split()[:2] == ["irq", label]]
    return sum(ns for _, ns in chosen) / 1e9 / timed["seconds"]


def mean_share(timed: list[dict[str, Any]], cpu: int, kind: str, label: str | None = None) -> float:
    """in_irq's mean over several windows."""
    return sum(in_irq(t, cpu, kind, label) for t in timed) / len(timed)


def counted(timed: dict[str, Any], cpu: int, kind: str, label: str) -> int:
    """The events bpftrace counted for one interrupt or softirq on `cpu`."""
    return sum(n for name, (n, _) in timed[kind].get(str(cpu), {}).items()
               if name == label or name.split()[:2] == ["irq", label])


def notes(timed_loops: dict[str, Any]) -> list[str]:
    """Per arm, the time the interrupt's CPU and the reader's spent in interrupts, and bpftrace's counts beside
    /proc's over the same windows."""
    if "irq_time_skipped" in timed_loops:
        return [f"interrupt times per CPU (bpftrace) not measured: {timed_loops['irq_time_skipped']}"]
    samples = [s for s in timed_loops["samples"] if "irq_time" in s]
    if not samples:
        return []
    irq = next(iter(samples[0]["irq_time"]["proc"]["interrupts"]))  # the disk's row; then CAL
    lines = []
    for cpu, role in ((timed_loops["cpu"], "the disk's interrupt and oslat's"),
                      (timed_loops["reader"], "the reader's")):
        parts = []
        for arm in ("reading", "idle"):
            chosen = [s["irq_time"] for s in samples if s["arm"] == arm]
            parts.append(f"{mean_share(chosen, cpu, 'hard'):.2%} of its time in hard interrupts (irq {irq}: "
                         f"{mean_share(chosen, cpu, 'hard', irq):.2%}) and {mean_share(chosen, cpu, 'soft'):.2%} in "
                         f"softirqs (BLOCK: {mean_share(chosen, cpu, 'soft', 'BLOCK'):.2%}) while "
                         + (f"CPU {timed_loops['reader']} read {timed_loops['disk']}" if arm == "reading"
                            else "nothing read"))
        lines.append(f"bpftrace on the irq tracepoints, CPU {cpu} ({role}): {'; '.join(parts)}")
    reading = [s["irq_time"] for s in samples if s["arm"] == "reading"]
    cpu = str(timed_loops["cpu"])
    lines.append(f"counted beside /proc on CPU {cpu} while reading: irq {irq} "
                 f"{sum(counted(t, int(cpu), 'hard', irq) for t in reading):,} by bpftrace, "
                 f"{sum(t['proc']['interrupts'][irq][cpu] for t in reading):,} in /proc/interrupts; BLOCK softirqs "
                 f"{sum(counted(t, int(cpu), 'soft', 'BLOCK') for t in reading):,} by bpftrace, "
                 f"{sum(t['proc']['softirqs']['BLOCK'][cpu] for t in reading):,} in /proc/softirqs")
    return lines
