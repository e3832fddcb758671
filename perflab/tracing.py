"""Kernel tracepoints counted per CPU with `perf stat`, on a tracefs the journal mounts when it must.

perf finds tracepoints through tracefs, which some machines leave unmounted;
`tracefs_folder` mounts it through perflab.journal, so it is unmounted again
when the run ends, however it ends. Tracepoint names differ between kernels
and architectures, so each count lists its candidates and takes the first
that this kernel's available_events has.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from . import processes
from .errors import PerflabError
from .journal import SystemChanges
from .knobs import TracefsMount
from .paths import scratch
from .probe import Machine
from .sysfs import SysRoot
from .vm.profiles import TCG_SINGLE_THREAD

# Guest sessions that hung under QEMU's multi-threaded TCG while switching tracepoints: osnoise 7 of 13 (rtla 3
# of 7, perflab's hunt 4 of 6), perf 1 of 6 lab runs in numa2. Single-threaded (2026-11-24/25): osnoise 40 of 40
# starts and stops, perf 160 of 160 sessions (80 with a reader busy), no hang.
MTTCG_HANGS = "7 of 13"


def patching_can_hang(machine: Machine, root: SysRoot) -> bool:
    """Whether switching tracepoints on and off can hang this machine: a guest of QEMU's multi-threaded TCG.

    Switching a tracepoint rewrites kernel code under an int3 (text_poke_bp); under multi-threaded TCG every
    vCPU of a hung guest sat in that int3, in the timer interrupt's tracepoint. A profile with
    `tcg_single_thread` runs all vCPUs on one host thread and says so on the guest's kernel command line."""
    return machine.emulated() and TCG_SINGLE_THREAD not in (root.read("/proc/cmdline") or "").split()


@dataclass(frozen=True)
class Tracepoint:
    """One count: what it means, the tracepoints that can give it, and perf's filter on their fields."""

    label: str
    candidates: tuple[str, ...]
    filter: str = ""


def tracefs_folder(changes: SystemChanges, root: SysRoot) -> str:
    """Where tracefs is, mounted through `changes` if it was not."""
    knob = TracefsMount(root=root)
    if knob.read() is None:
        raise PerflabError("this kernel has no tracefs (CONFIG_TRACING): perf cannot count tracepoints here")
    changes.set(knob, "mounted")
    return knob.MOUNT_POINT


def chosen_events(tracepoints: tuple[Tracepoint, ...], root: SysRoot, folder: str) -> dict[str, str | None]:
    """label -> the first candidate this kernel has, or None."""
    available = set((root.read(f"{folder}/available_events") or "").split())
    return {t.label: next((name for name in t.candidates if name in available), None) for t in tracepoints}


def perf_stat_argv(tracepoints: tuple[Tracepoint, ...], events: dict[str, str | None], output: Path,
                   command: list[str]) -> list[str]:
    """`perf stat` counting every chosen event on every CPU (-a -A) while `command` runs, CSV into `output`."""
    argv = ["perf", "stat", "-a", "-A", "-x", ",", "-o", str(output)]
    for tracepoint in tracepoints:
        if events[tracepoint.label]:
            argv += ["-e", events[tracepoint.label]]
            if tracepoint.filter:
                argv += ["--filter", tracepoint.filter]
    return argv + ["--", *command]


def parse_per_cpu(text: str, tracepoints: tuple[Tracepoint, ...],
                  events: dict[str, str | None]) -> dict[str, dict[int, int]]:
    """perf's CSV (`CPU3,1234,,irq:softirq_entry,...`) as label -> {cpu: count}; an uncounted CPU counts 0.

    Rows come in the order the events were given, so two counts of one tracepoint under different filters
    stay apart."""
    labels = [t.label for t in tracepoints if events[t.label]]
    counts: dict[str, dict[int, int]] = {label: {} for label in labels}
    block, previous = -1, None
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 4 or not fields[0].startswith("CPU"):
            continue
        if fields[3] != previous or int(fields[0][3:]) in counts[labels[block]]:
            block, previous = block + 1, fields[3]
        counts[labels[block]][int(fields[0][3:])] = int(fields[1]) if fields[1].isdigit() else 0
    return counts


def count_per_cpu(tracepoints: tuple[Tracepoint, ...], events: dict[str, str | None],
                  command: list[str]) -> dict[str, dict[int, int]]:
    """Run `command` under perf stat: label -> {cpu: count} while it ran."""
    if shutil.which("perf") is None:
        raise PerflabError("perf is missing: install Debian's linux-perf package")
    with scratch("perf") as folder:
        output = Path(folder) / "stat.csv"
        done = processes.run(perf_stat_argv(tracepoints, events, output, command))
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise PerflabError(f"perf stat on tracepoints failed: {message}")
        return parse_per_cpu(output.read_text(), tracepoints, events)
