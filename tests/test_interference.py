"""Neighbours on a lab's CPUs: found, named, charged to the right CPU, and a verdict that says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from perflab import interference
from perflab.interference import Task, busy_cpus, charge, parse_stat, unless_quiet
from perflab.sysfs import SysRoot
from perflab.verdict import Effect, Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

# A real line of /proc/PID/stat (a name with a space and a parenthesis), fields 14-17 = 250 20 30 5, CPU 1.
STAT = ("4242 (stress-ng (cpu) S 4241 4241 9 0 -1 4194560 151 0 0 0 250 20 30 5 20 0 1 0 9123 24129536 1130 "
        "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0")


def task(pid: int, ticks: int, cpu: int = 1, ppid: int = 1, reaped: int = 0, name: str = "spin") -> Task:
    return Task(pid, name, ppid, False, ticks, reaped, cpu, started=100 + pid)


def as_map(*tasks: Task) -> dict:
    return {t.key: t for t in tasks}


def test_parse_stat_reads_the_name_times_and_cpu():
    parsed = parse_stat(4242, STAT)
    assert (parsed.name, parsed.ppid, parsed.ticks, parsed.reaped, parsed.cpu, parsed.started) == \
        ("stress-ng (cpu", 4241, 270, 35, 1, 9123)
    assert not parsed.kernel_thread


def test_tasks_are_read_through_the_sysroot(tmp_path):
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "stat").write_text(STAT)
    (tmp_path / "proc" / "stat").write_text(
        "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 0 0 0 0 0 3 0 0\ncpu1 1 0 0 0 0 0 0 9 0 0\n"
    )
    root = SysRoot(tmp_path)
    assert [t.pid for t in interference.tasks(root).values()] == [4242]
    assert interference.steal_ticks(root) == {0: 3, 1: 9}


def test_only_others_on_the_watched_cpus_are_charged():
    before = as_map(task(10, 100), task(11, 100, cpu=0), task(12, 100), task(13, 100))
    kernel = Task(14, "kworker/1:0", 2, True, 500, 0, 1, 114)
    now = as_map(task(10, 130), task(11, 190, cpu=0), task(12, 160), task(13, 100), kernel)
    assert charge(before, now, ours={12}, cpus={1}) == {(1, "spin", 10): 30}


def test_a_child_that_ended_charges_its_parent_only_what_was_not_seen():
    """A long-lived child seen at the last look adds nothing new when its parent reaps it; one that lived and
    ended between two looks is charged whole to its parent; a new process is charged from zero."""
    parent, child = task(20, 5), task(21, 400, ppid=20)
    before = as_map(parent, child)
    reaped_long = as_map(task(20, 5, reaped=410))  # the child ran 10 more ticks after the last look
    assert charge(before, reaped_long, set(), {1}) == {(1, "spin", 20): 10}
    short = as_map(task(20, 5, reaped=30))  # another child, never seen, used 30 ticks
    assert charge(as_map(parent), short, set(), {1}) == {(1, "spin", 20): 30}
    assert charge({}, as_map(task(22, 7)), set(), {1}) == {(1, "spin", 22): 7}
    # a shell's `timeout pytest`: both end between two looks, and the shell reaps timeout, which reaped pytest
    chain = as_map(task(30, 1), task(31, 0, ppid=30), task(32, 1600, ppid=31))
    assert charge(chain, as_map(task(30, 1, reaped=1605)), set(), {1}) == {(1, "spin", 30): 5}


def found(neighbours: list[tuple[int, str, float]], seconds: float = 10.0, steal: dict | None = None) -> dict:
    return {
        "cpus": [0, 1],
        "seconds": seconds,
        "neighbours": [{"cpu": c, "name": n, "pid": 100 + i, "seconds": s} for i, (c, n, s) in enumerate(neighbours)],
        "steal": steal or {"0": 0.0, "1": 0.0},
    }


def test_busy_cpus_names_the_cpu_the_share_and_the_programs():
    busy = busy_cpus(found([(1, "stress-ng-cpu", 2.9), (1, "firefox", 0.2), (0, "sshd", 0.1)]))
    assert busy == ["other programs ran on CPU 1 for 31% of it (stress-ng-cpu (pid 100), firefox (pid 101))"]
    assert busy_cpus(found([(0, "sshd", 0.4)])) == []  # 4% of a CPU: below the share that moves an effect
    assert busy_cpus(found([(0, "sshd", 0.02)], seconds=0.2)) == []  # 10% of a short run, but two ticks
    assert busy_cpus(found([(1, "spin", 0.05)], seconds=0.1)) == [  # a grader's 0.1 s pair run, half taken
        "other programs ran on CPU 1 for 50% of it (spin (pid 100))"]
    assert busy_cpus(found([], steal={"0": 1.5, "1": 0.0})) == ["the host took 15% of CPU 0 (steal time)"]
    # a make that reaped a compile of 17 s during a 1 s grade: no CPU gives others more than the whole window
    assert busy_cpus(found([(0, "make", 16.86)], seconds=1.0)) == [
        "other programs ran on CPU 0 for 100% of it (make (pid 100))"]


def verdict(kind: str = "reproduced") -> Verdict:
    return Verdict("loop-alignment", kind, "x1.4 slower", Effect("slowdown", 0.4, "relative"), "r.json", ["n"])


def test_a_busy_cpu_makes_the_verdict_inconclusive_and_keeps_what_was_measured():
    busy = found([(1, "stress-ng-cpu", 3.0)])
    for kind in ("reproduced", "not-reproduced", "inconclusive"):
        shown = unless_quiet(verdict(kind), busy)
        assert shown.verdict == "inconclusive" and "CPU 1 for 30%" in shown.reason and "stress-ng-cpu" in shown.reason
        assert shown.notes[0] == f"as measured beside the neighbours ({kind}): x1.4 slower" and shown.notes[1] == "n"
    assert unless_quiet(verdict("cannot-show"), busy).verdict == "cannot-show"
    assert unless_quiet(verdict(), found([(1, "sshd", 0.1)])) == verdict()
    assert unless_quiet(verdict(), None) == verdict()  # a result saved before perflab watched for neighbours


def start_neighbour(cpu: int, seconds: float) -> int:
    """A program spinning on `cpu` that is not this process's descendant (a shell starts it and exits): its pid."""
    shell = subprocess.run(["sh", "-c", f'taskset -c {cpu} "$@" >/dev/null 2>&1 & echo $!', "sh", *spin(seconds)],
                           capture_output=True, text=True, check=True)
    return int(shell.stdout)


def spin(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time\nt = time.monotonic() + {seconds}\nwhile time.monotonic() < t: pass"]


def test_watch_names_a_pinned_neighbour_and_not_the_labs_own_child():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    neighbour = start_neighbour(cpu, 3)
    try:
        with interference.watch([cpu]) as watched:
            own = subprocess.Popen(["taskset", "-c", str(cpu), *spin(1.5)])  # the lab's: as busy, not charged
            time.sleep(2)
            own.wait()
        seen = {n["pid"]: n for n in watched.summary["neighbours"]}
        assert seen[neighbour]["cpu"] == cpu and seen[neighbour]["seconds"] >= 0.5 and own.pid not in seen
        assert any(f"CPU {cpu}" in line and f"pid {neighbour}" in line for line in busy_cpus(watched.summary))
        assert watched.summary["cpus"] == [cpu] and 1.9 < watched.summary["seconds"] < 5
    finally:
        subprocess.run(["kill", str(neighbour)], capture_output=True)


def test_nothing_to_watch_runs_no_thread():
    with interference.watch([]) as watched:
        assert watched is None
