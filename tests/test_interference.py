"""Neighbours on a lab's CPUs: found, named, charged to the right CPU, and a verdict that says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from perflab import interference, stats
from perflab.interference import Task, busiest, busy_cpus, charge, parse_stat, slowdown, unless_quiet
from perflab.sysfs import SysRoot
from perflab.verdict import Effect, Verdict, judge_change

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


def test_the_busiest_window_bounds_how_much_longer_an_arm_can_have_taken():
    tick = 1 / interference.TICKS_PER_S
    windows = [(0.5, {0: 5, 1: 0}), (0.5, {0: 10, 1: 25}), (0.1, {0: 20, 1: 0})]  # the last: 0.2 s of a tick
    shares = busiest(windows, [0, 1])
    assert shares == {"0": pytest.approx(round(30 * tick / 0.6, 3)), "1": pytest.approx(round(25 * tick / 0.6, 3))}
    assert busiest([(0.5, {0: 999})], [0]) == {"0": 1.0}  # a reaped child's whole life in one window: all of it
    assert slowdown({"busiest": {"0": 0.2, "1": 0.5}}) == pytest.approx(1.0)  # half the CPU: twice as long
    assert slowdown({"busiest": {"0": 0.95}}) is None  # nearly all of it: no bound worth the name
    assert slowdown(found([(1, "spin", 3.0)])) is None  # a result saved before the windows were kept


def timed(kind: str, low: float, high: float) -> Verdict:
    effect = Effect("check vs write", (low + high) / 2, "relative", low, high, 1e-6, 0.99, min_effect=0.10)
    return Verdict("numa-static-data", kind, "as measured", effect, "r.json", ["n"])


def test_a_neighbour_vetoes_a_time_ratio_only_where_it_could_have_made_the_verdict():
    ten_percent = {**found([(1, "stress-ng-cpu", 1.0)]), "busiest": {"0": 0.02, "1": 0.12}}
    kept = unless_quiet(timed("reproduced", 1.28, 1.78), ten_percent, time_ratio=True)
    assert kept.verdict == "reproduced" and kept.reason == "as measured" and kept.notes[0] == "n"
    assert "could have slowed an arm by up to 14%" in kept.notes[1] and kept.notes[1].endswith("still reproduced")
    # two spinning programs on one arm's CPU: two thirds of it, an arm three times as long, a +40% effect made
    hog = {**found([(1, "spin", 6.6)]), "busiest": {"0": 0.0, "1": 0.67}}
    faked = unless_quiet(timed("reproduced", 0.30, 0.50), hog, time_ratio=True)
    assert faked.verdict == "inconclusive" and faked.reason.startswith("neighbours could account for what was measured")
    assert "CPU 1 for 66%" in faked.reason and "up to 203%" in faked.reason
    assert faked.notes[0] == "as measured beside the neighbours (reproduced): as measured"
    # "not reproduced" stands only if even an effect the neighbour hid would be too small
    assert unless_quiet(timed("not-reproduced", -0.07, -0.04), ten_percent, time_ratio=True).verdict == "not-reproduced"
    hidden = unless_quiet(timed("not-reproduced", -0.02, 0.08), ten_percent, time_ratio=True)
    assert hidden.verdict == "inconclusive" and "+22.7%" in hidden.reason
    # what a share does not bound: an effect that is not a time ratio, or one judged against no smallest effect
    assert unless_quiet(timed("reproduced", 1.28, 1.78), ten_percent).verdict == "inconclusive"
    unbounded = timed("reproduced", 1.28, 1.78)
    unbounded.effect.min_effect = None
    assert unless_quiet(unbounded, ten_percent, time_ratio=True).verdict == "inconclusive"
    quiet = {**found([(1, "sshd", 0.1)]), "busiest": {"0": 0.0, "1": 0.04}}
    assert unless_quiet(timed("reproduced", 0.30, 0.50), quiet, time_ratio=True) == timed("reproduced", 0.30, 0.50)


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
        # alone on the CPU half of the time, sharing it with the lab's child the rest: some window all its own
        assert watched.summary["busiest"][str(cpu)] > 0.6, watched.summary
    finally:
        subprocess.run(["kill", str(neighbour)], capture_output=True)


def test_nothing_to_watch_runs_no_thread():
    with interference.watch([]) as watched:
        assert watched is None


def _spin_rate(cpu: int) -> float:
    """Fixed work on `cpu`, in this thread, longer than a few of the scheduler's slices: iterations per second."""
    os.sched_setaffinity(0, {cpu})
    started = time.perf_counter()
    for _ in range(5_000_000):
        pass
    return 5_000_000 / (time.perf_counter() - started)


def test_a_neighbour_on_one_arms_cpu_fakes_an_effect_and_the_verdict_says_so():
    """Two arms doing the same work, one on each CPU, and two programs spinning on the second: the neighbour alone
    makes the first arm faster, and judged as it was measured that would be a reproduced effect. Watched, the
    neighbour's busiest half-second says it could have made all of it, and the verdict is inconclusive, naming it."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: no arm can run on a CPU of its own")
    quiet, shared = cpus[0], cpus[-1]
    neighbours = [start_neighbour(shared, 60) for _ in range(2)]
    rates: dict[int, list[float]] = {quiet: [], shared: []}
    try:
        time.sleep(1)  # spinning before the arms run
        with interference.watch([quiet, shared]) as watched:
            for round_ in range(16):
                for cpu in (quiet, shared) if round_ % 2 else (shared, quiet):
                    rates[cpu].append(_spin_rate(cpu))
    finally:
        os.sched_setaffinity(0, set(cpus))
        subprocess.run(["kill", *map(str, neighbours)], capture_output=True)
    made, _, effect = judge_change(f"CPU {quiet} vs CPU {shared}", rates[shared], rates[quiet], 0.05, stats.median)
    assert made == "reproduced", f"the neighbour did not slow the arm beside it: {effect.text()}"
    judged = unless_quiet(Verdict("two-arms", made, effect.text(), effect), watched.summary, time_ratio=True)
    assert judged.verdict == "inconclusive", (judged, watched.summary)
    named = f"CPU {shared} for " in judged.reason and any(f"pid {pid}" in judged.reason for pid in neighbours)
    assert named, judged.reason
