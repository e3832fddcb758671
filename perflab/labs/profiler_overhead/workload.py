"""Lab 12: the workload on every CPU, alone or under `perf record -a`, and where perf's own threads ran.

busy_work times its own threads from a barrier to the last one's end, so perf's start-up and its write-out
after the workload are left out: what is left is what perf costs the workload while it runs. While an arm
runs, a thread here reads the run time (schedstat, in ns) and the CPU of every thread of the started
program every POLL_S: under perf, those are perf's reader thread and its helpers (the workload's own
threads are its children, not its tasks). The same look runs in every arm, so its small cost is in all.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import processes
from ...build import ensure_built
from ...errors import PerflabError
from ...paths import scratch

SOURCE_DIR = "labs/12-profiler-overhead"
POLL_S = 0.02
ALONE = "alone"


@dataclass(frozen=True)
class Arm:
    """How the workload runs: alone, or under perf record -a with these options."""

    name: str
    perf_options: tuple[str, ...] | None  # None: no perf

    def argv(self, workload: list[str], data: Path) -> list[str]:
        if self.perf_options is None:
            return workload
        # --no-bpf-event: perf's side-band thread for BPF events held every run open for about a second at exit
        # here (perf 6.1: 1.14 s for `true`, 0.25 s without it); it records BPF programs loading, not samples.
        return ["perf", "record", "-q", "-a", "--no-bpf-event", "-e", "cpu-clock", *self.perf_options, "-o",
                str(data), "--", *workload]


def perf_arm(options: str) -> Arm:
    return Arm(f"perf {options}", tuple(options.split()))


def require_perf() -> None:
    if shutil.which("perf") is None:
        raise PerflabError("perf is missing: run `make lab` (it installs Debian's linux-perf)")


def workload_argv(cpus: list[int], million_steps: int) -> list[str]:
    return [str(ensure_built(SOURCE_DIR, "busy_work")), "-n", str(million_steps), "-c", ",".join(map(str, cpus))]


def task_times(pid: int) -> dict[int, tuple[int, int]]:
    """tid -> (ns it has run, the CPU it is on or last ran on), for every thread of process pid now."""
    found = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            ran = int((task / "schedstat").read_text().split()[0])
            stat = (task / "stat").read_text()
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while being read
        found[int(task.name)] = (ran, int(stat[stat.rindex(")") + 2:].split()[36]))
    return found


def has_children(pid: int) -> bool:
    try:
        return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return False


class ThreadClock:
    """Charges the run time of the program's threads to the CPU each one was on, at each look while the program's
    own child (perf's workload) runs: perf's start-up before it and its write-out after it are left out."""

    def __init__(self, pid: int):
        self.pid, self.last, self.by_cpu = pid, {}, {}
        self.started = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _look(self) -> bool:
        """One look; False once the child has come and gone."""
        running = has_children(self.pid)
        if self.started and not running:
            return False
        for tid, (ran, cpu) in task_times(self.pid).items():
            if self.started and tid in self.last:
                self.by_cpu[cpu] = self.by_cpu.get(cpu, 0) + ran - self.last[tid]
            self.last[tid] = ran
        self.started = self.started or running
        return True

    def _loop(self) -> None:
        while not self.done.wait(POLL_S) and self._look():
            pass

    def __enter__(self) -> ThreadClock:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


# ANCHOR: run_arm
def run_arm(arm: Arm, workload: list[str]) -> dict[str, Any]:
    """One run of the workload in this arm: {"wall_ns", "threads_ns": {cpu: ns}}: under perf, the run time of
    perf's own threads on each CPU while the workload ran ({} alone)."""
    with scratch("perf") as folder:
        process = processes.start(arm.argv(workload, Path(folder) / "perf.data"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        with ThreadClock(process.pid) as clock:
            out, err = process.communicate()
        processes.stop(process)
    if process.returncode != 0:
        last = (err.strip().splitlines() or [f"exit code {process.returncode}"])[-1]
        raise PerflabError(f"{arm.name} failed: {last}")
    sample = next(r for r in map(json.loads, out.splitlines()) if r.get("type") == "sample")
    return {"wall_ns": sample["wall_ns"], "threads_ns": {str(cpu): ns for cpu, ns in sorted(clock.by_cpu.items())}}
# ANCHOR_END: run_arm
