"""Lab 2's two C programs, driven from Python: the victim run by run, the aggressor over a pipe."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from ... import processes
from ...errors import PerflabError
from ...paths import scratch
from ...probe import Machine
from ...runner import Interactive, run_once

PMU_EVENTS = ("L1-dcache-load-misses", "LLC-loads")


class Aggressor(Interactive):
    """The aggressor process in interactive mode; always stopped on exit, also on Ctrl-C and errors."""

    def __init__(self, binary: Path, cpu: int, max_bytes: int):
        super().__init__([str(binary), "-c", str(cpu), "-s", "0", "-m", str(max_bytes), "-i"], ready="meta")

    def stream(self, size: int) -> dict:
        """Stream over `size` bytes from now on (0: pause); return the period that just ended."""
        self.order(str(size))
        return next(r for r in self.read_until("ready") if r["type"] == "period")


def victim_argv(binary: Path, cpu: int, working_set: int, duration_ms: int) -> list[str]:
    return [str(binary), "-c", str(cpu), "-w", str(working_set), "-d", str(duration_ms)]


def pmu_events(machine: Machine) -> list[str]:
    """Hardware events to count on the victim, or [] where there is no PMU."""
    return list(PMU_EVENTS) if machine.value("hw_pmu") else []


def with_perf_stat(argv: list[str], events: list[str], output: Path) -> list[str]:
    """Wrap a command in `perf stat`, machine-readable, into a file (the command keeps stdout)."""
    return ["perf", "stat", "-x", ",", "-o", str(output), "-e", ",".join(events), "--", *argv]


def parse_perf_stat(text: str) -> dict[str, float | None]:
    """`perf stat -x ,` output -> {event: count}; None for "<not counted>" or "<not supported>"."""
    counts: dict[str, float | None] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if line.startswith("#") or len(fields) < 3 or not fields[2]:
            continue
        try:
            counts[fields[2]] = float(fields[0])
        except ValueError:
            counts[fields[2]] = None
    return counts


def run_victim(argv: list[str], events: list[str]) -> tuple[list[float], dict[str, float | None]]:
    """One victim run: its ns per access, warm-up dropped, and the counted events (if any)."""
    counts: dict[str, float | None] = {}
    if events:
        with scratch("perf") as folder:
            output = Path(folder) / "perf.csv"
            _, samples = run_once(with_perf_stat(argv, events, output))
            counts = parse_perf_stat(output.read_text())
    else:
        _, samples = run_once(argv)
    return [s["ns_per_access"] for s in samples if not s.get("warmup")], counts


def timeline(victim: Path, aggressor: Path, victim_cpu: int, aggressor_cpu: int, working_set: int, size: int,
             phase_ms: int) -> dict:
    """One long victim run: alone, then with the aggressor streaming `size` bytes, then alone again."""
    with Aggressor(aggressor, aggressor_cpu, size) as streamer:
        start = time.monotonic()
        process = processes.start(victim_argv(victim, victim_cpu, working_set, 3 * phase_ms),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(phase_ms / 1000)
            on_ms = (time.monotonic() - start) * 1000  # it starts streaming as soon as it reads the order
            streamer.stream(size)
            time.sleep(phase_ms / 1000)
            streamer.stream(0)
            off_ms = (time.monotonic() - start) * 1000
            out, err = process.communicate(timeout=Interactive.ANSWER_TIMEOUT_S)
        finally:
            processes.stop(process, signal.SIGKILL)
    if process.returncode != 0:
        raise PerflabError(f"victim failed: {err.strip()}")
    samples = [s for s in map(json.loads, out.splitlines()) if s["type"] == "sample" and not s.get("warmup")]
    return {"size": size, "aggressor_on_ms": on_ms, "aggressor_off_ms": off_ms,
            "t_ms": [s["t_ms"] for s in samples], "ns_per_access": [s["ns_per_access"] for s in samples]}
