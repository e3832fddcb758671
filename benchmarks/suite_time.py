"""Suite time: where `make test`'s minutes go on this machine, test by test, and whether the machine was the limit.

usage: .venv/bin/python benchmarks/suite_time.py [--phase both|parallel|live] [--top N] [--json] [-- PYTEST_ARGS]

`make test` runs the suite in two phases: the tests that time nothing, side
by side (pytest-xdist), then the live tests alone, since each measures this
machine. This runs the same two pytest commands and records, for every test,
its wall time and the CPU time of its worker and of the processes it waited
for; and, for each phase, how busy the whole machine was (/proc/stat, over the
phase and minute by minute), including the steal time: what the host took from
this guest's vCPUs.

What it tells: a phase whose CPUs are busy nearly all the time is bound by its
work (only less work makes it faster, not more workers); a phase with idle
CPUs waits (sleeps, one-CPU races, a guest booting); steal that grows between
two runs is a host that got busier, not a slower suite. The CPU of a process
that a test did not wait for (a VM left up by `perflab vm up`, libvirt's
guests) is in the machine's busy share, not in the test's.

The tables go to stdout (or --json); the records are saved as JSON under
results/benchmarks/ with the commit and the probe's summary of the machine.
This is a benchmark, not a test: the whole suite takes 14 to 20 minutes here.

examples:
  .venv/bin/python benchmarks/suite_time.py
  .venv/bin/python benchmarks/suite_time.py --phase live --top 30
  .venv/bin/python benchmarks/suite_time.py --phase parallel -- tests/test_notebooks.py tests/test_kill_9.py
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDS = "SUITE_TIME_RECORDS"  # the file each pytest process appends its tests' records to
# The Makefile's `test` target runs these two pytest commands, in this order.
PHASES = {"parallel": ["--phase", "parallel", "-n", "3", "--dist", "loadgroup"], "live": ["--phase", "live"]}


# --- the pytest plugin (`-p suite_time`): one JSON line per test ----------------------------------------------

def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if RECORDS not in os.environ:
        yield
        return
    began, own, waited = time.monotonic(), _cpu_seconds(resource.RUSAGE_SELF), _cpu_seconds(resource.RUSAGE_CHILDREN)
    yield
    group = item.get_closest_marker("xdist_group")  # tests/conftest.py names each group as its one argument
    record = {"test": item.nodeid, "group": group.args[0] if group else None,
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
              "wall_s": time.monotonic() - began, "cpu_s": _cpu_seconds(resource.RUSAGE_SELF) - own,
              "children_cpu_s": _cpu_seconds(resource.RUSAGE_CHILDREN) - waited}
    with open(os.environ[RECORDS], "a") as out:  # one short write with O_APPEND: workers' lines never interleave
        out.write(json.dumps(record) + "\n")


# --- the benchmark -------------------------------------------------------------------------------------------

def cpu_times() -> dict[str, int]:
    """The machine's CPU time so far, in clock ticks: busy (this guest's work), idle (with iowait) and steal."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"busy": user + nice + system + irq + softirq, "idle": idle + iowait, "steal": steal}


def machine_shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """The share of the machine's CPU time between two readings that was busy, idle and stolen."""
    spent = {kind: after[kind] - before[kind] for kind in before}
    total = sum(spent.values()) or 1
    return {kind: ticks / total for kind, ticks in spent.items()}


def run_phase(phase: str, pytest_args: list[str], records: Path) -> dict:
    """One phase's pytest, its output on stderr (its progress); its wall time, exit code and the machine's shares,
    overall and for every minute."""
    minutes, stop = [], threading.Event()

    def sample() -> None:
        last = cpu_times()
        while not stop.wait(60):
            now = cpu_times()
            minutes.append(machine_shares(last, now))
            last = now

    from perflab import processes  # pytest and what it starts die with this process, even after kill -9

    argv = [sys.executable, "-m", "pytest", "-p", "suite_time", *PHASES[phase], *pytest_args]
    env = {**os.environ, RECORDS: str(records),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "benchmarks"), os.environ.get("PYTHONPATH")]))}
    before, began = cpu_times(), time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    suite = processes.start(argv, cwd=REPO, env=env, stdout=sys.stderr)
    try:
        suite.wait()
    finally:
        stop.set()
        processes.stop(suite)
    return {"phase": phase, "argv": argv[1:], "returncode": suite.returncode, "wall_s": time.monotonic() - began,
            "machine": machine_shares(before, cpu_times()), "machine_by_minute": minutes}


def phase_rows(phases: list[dict], tests: list[dict]) -> list[list[str]]:
    rows = [["phase", "wall s", "tests", "test s", "test CPU s", "machine busy", "idle", "steal", "exit"]]
    for phase in phases:
        mine = [t for t in tests if t["phase"] == phase["phase"]]
        shares = phase["machine"]
        rows.append([phase["phase"], f"{phase['wall_s']:.0f}", str(len(mine)), f"{sum(t['wall_s'] for t in mine):.0f}",
                     f"{sum(t['cpu_s'] + t['children_cpu_s'] for t in mine):.0f}", f"{shares['busy']:.0%}",
                     f"{shares['idle']:.0%}", f"{shares['steal']:.0%}", str(phase["returncode"])])
    return rows


def slowest_rows(tests: list[dict], top: int) -> list[list[str]]:
    rows = [["phase", "wall s", "CPU s", "group", "test"]]
    for t in sorted(tests, key=lambda t: -t["wall_s"])[:top]:
        rows.append([t["phase"], f"{t['wall_s']:.1f}", f"{t['cpu_s'] + t['children_cpu_s']:.1f}", t["group"] or "",
                     t["test"]])
    return rows


def file_rows(tests: list[dict], top: int) -> list[list[str]]:
    sums: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for t in tests:
        entry = sums[(t["phase"], t["test"].split("::")[0])]
        entry[0] += t["wall_s"]
        entry[1] += t["cpu_s"] + t["children_cpu_s"]
        entry[2] += 1
    rows = [["phase", "wall s", "CPU s", "tests", "file"]]
    for (phase, file), (wall, cpu, count) in sorted(sums.items(), key=lambda kv: -kv[1][0])[:top]:
        rows.append([phase, f"{wall:.0f}", f"{cpu:.0f}", str(count), file])
    return rows


def main() -> int:
    sys.path.insert(0, str(REPO))
    from perflab.cli import Parser
    from perflab.formatting import table
    from perflab.paths import results_dir, scratch
    from perflab.probe import probe
    from perflab.results import write_atomic

    parser = Parser(prog="benchmarks/suite_time.py", description=__doc__.split("\n\n")[0],
                    epilog="examples:" + __doc__.split("examples:")[1])
    parser.add_argument("--phase", choices=("both", *PHASES), default="both", help="which phase to run (default both)")
    parser.add_argument("--top", type=int, default=15, help="rows in the tables of tests and files (default 15)")
    parser.add_argument("--json", action="store_true", help="print the whole record as JSON instead of the tables")
    parser.add_argument("pytest_args", nargs="*", metavar="PYTEST_ARGS", help="after --: tests or options for pytest")
    args = parser.parse_args()
    if args.top < 1:
        parser.error("--top must be at least 1")
    phases, tests = [], []
    with scratch("suite-time") as folder:  # a folder a kill -9 leaves is removed by the next perflab run
        for phase in PHASES if args.phase == "both" else [args.phase]:
            records = Path(folder) / f"{phase}.jsonl"
            records.touch()
            phases.append(run_phase(phase, args.pytest_args, records))
            tests += [{"phase": phase, **json.loads(line)} for line in records.read_text().splitlines()]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    now = dt.datetime.now(dt.timezone.utc)
    record = {"version": 1, "created": now.isoformat(timespec="seconds"), "commit": commit.stdout.strip() or None,
              "machine": probe().summary(), "phases": phases, "tests": tests}
    out = results_dir() / "benchmarks" / f"suite-time-{now:%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(record, indent=1) + "\n")
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print("\n\n".join(table(rows) for rows in (phase_rows(phases, tests), slowest_rows(tests, args.top),
                                                   file_rows(tests, args.top))))
    print(f"saved: {out}", file=sys.stderr)
    return 1 if any(phase["returncode"] not in (0, 5) for phase in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
