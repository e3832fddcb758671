"""Each learner in a cgroup of their own: made and removed through the journal, entered before their code runs,
and, while another learner measures, holding a CPU weight so low that their busy loop barely shares the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.journal import WORKSHOP, Journal, SystemChanges
from perflab.sysfs import SysRoot, default_root
from perflab.workshop import cgroups

LIVE = cgroups.layout(default_root()) if os.path.isdir("/sys/fs/cgroup") else None
live = pytest.mark.skipif(os.geteuid() != 0 or LIVE is None,
                          reason="needs root and a machine with cpu, memory and pids cgroup controllers")


def _tree(tmp_path, controllers: str | None, v1: bool = False) -> SysRoot:
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       24000000 kB\n")
    group = tmp_path / "sys" / "fs" / "cgroup"
    group.mkdir(parents=True)
    if controllers is not None:
        (group / "cgroup.controllers").write_text(controllers + "\n")
    for name in ("cpu", "memory", "pids") if v1 else ():
        (group / name).mkdir()
        (group / name / "cgroup.procs").write_text("")
    return SysRoot(tmp_path)


def test_the_layout_follows_what_the_machine_mounts(tmp_path):
    assert cgroups.layout(_tree(tmp_path / "v2", "cpuset cpu io memory pids")) is cgroups.V2
    assert cgroups.layout(_tree(tmp_path / "v1", "", v1=True)) is cgroups.V1  # an empty unified hierarchy, as here
    bare = _tree(tmp_path / "none", "cpu")
    assert cgroups.layout(bare) is None and "without limits" in cgroups.describe(bare)
    said = cgroups.describe(_tree(tmp_path / "v2b", "cpu memory pids"))
    assert "(v2)" in said and f"at most {int(24000000 * 1024 * cgroups.MEMORY_SHARE) >> 20} MiB" in said
    assert said.count("\n") == 0


def _class_tree(tmp_path, version: int, cpus: str = "0-3", cpuset: bool = True) -> SysRoot:
    """The groups of a class of two (perflab-ana, perflab-bo) as `up` leaves them, in a tree of plain files."""
    root = _tree(tmp_path, "cpuset cpu memory pids" if version == 2 else "", v1=version == 1)
    base = tmp_path / "sys" / "fs" / "cgroup"
    if version == 2:
        (base / "cgroup.subtree_control").write_text("cpuset cpu memory pids\n" if cpuset else "cpu memory pids\n")
    elif cpuset:
        (base / "cpuset").mkdir()
        (base / "cpuset" / "cgroup.procs").write_text("")
    hierarchies = ["cpu"] + (["cpuset"] if cpuset else []) if version == 1 else [""]
    for hierarchy in hierarchies:
        workshop = base / hierarchy / cgroups.GROUP
        workshop.mkdir(parents=True)
        if cpuset:
            (workshop / ("cpuset.cpus.effective" if version == 2 else "cpuset.cpus")).write_text(cpus + "\n")
        for user in ("perflab-ana", "perflab-bo"):
            (workshop / user).mkdir()
            for name in ("cpu.weight", "cpuset.cpus") if version == 2 else ("cpu.shares", "cpuset.cpus"):
                (workshop / user / name).write_text("")
    return root


@pytest.mark.parametrize("version", [1, 2])
def test_while_one_measures_the_rest_of_the_class_moves_off_its_cpus_where_others_are_spare(tmp_path, version):
    root = _class_tree(tmp_path, version)
    folder = cgroups.cpuset_folder(root, cgroups.layout(root))
    learners = ["perflab-ana", "perflab-bo"]
    cpus = {user: f"{folder}/{user}/cpuset.cpus" for user in learners}
    said = cgroups.hold_off("perflab-ana", learners, [0, 1], root)
    assert said == "the class runs on CPU 2-3 while this measures on CPU 0-1"
    assert root.read(cpus["perflab-bo"]) == "2-3" and root.read(cpus["perflab-ana"]) == ""  # the holder stays
    cgroups.hold_off("root", learners, [3], root)  # root's turn: the whole class moves
    assert root.read(cpus["perflab-ana"]) == root.read(cpus["perflab-bo"]) == "0-2"
    cgroups.yield_to(None, learners, root)  # the turn's end: everyone back on every CPU
    everyone = "0-3" if version == 1 else ""  # v2: an empty list, the parent's CPUs
    assert root.read(cpus["perflab-ana"]) == root.read(cpus["perflab-bo"]) == everyone
    assert "where there are others to spare" in cgroups.describe(root)


@pytest.mark.parametrize("version", [1, 2])
def test_a_class_stays_on_the_measured_cpus_and_is_told_so_where_none_are_spare_or_there_is_no_cpuset(tmp_path,
                                                                                                      version):
    learners = ["perflab-ana", "perflab-bo"]
    full = _class_tree(tmp_path / "full", version, cpus="0-1")
    said = cgroups.hold_off("perflab-ana", learners, [0, 1], full)
    assert said == ("the class shares CPU 0-1 at the least CPU weight: this machine has no CPU to spare beyond "
                    "those measured")
    folder = cgroups.cpuset_folder(full, cgroups.layout(full))
    assert full.read(f"{folder}/perflab-bo/cpuset.cpus") == ""
    bare = _class_tree(tmp_path / "bare", version, cpuset=False)
    assert cgroups.cpuset_folder(bare, cgroups.layout(bare)) is None
    assert "no cpuset controller" in cgroups.hold_off("perflab-ana", learners, [0], bare)
    assert "no cpuset controller" in cgroups.describe(bare)
    assert cgroups.hold_off("perflab-ana", ["perflab-ana"], [0], full) == ""  # a class of one: no one to move


def test_a_learner_with_cpus_of_their_own_is_never_moved_onto_a_classmates(tmp_path, monkeypatch):
    from perflab.workshop import roster, turns

    monkeypatch.setenv("PERFLAB_WORKSHOP_DIR", str(tmp_path / "state"))
    roster.save(roster.Workshop("127.0.0.1", 1, 2, 3, 4, "t", "t", "h", learners={"ana": "h", "bo": "h"},
                                cpus={"ana": "1"}))
    moved = []
    monkeypatch.setattr(cgroups, "hold_off", lambda holder, learners, cpus: moved.append(learners) or "")
    turns.hold_the_others_off_cpus(0, [0])
    assert moved == [[roster.system_user("bo")]]


@pytest.fixture
def group(tmp_path):
    """A learner's group made through a journal of its own, as `up` makes one; restored however the test ends."""
    journal = Journal(path=str(tmp_path / "accounts.journal"),
                      kinds={cgroups.LearnerCgroup.kind: cgroups.LearnerCgroup})
    user = f"perflab-t{os.getpid() % 100000}"
    with SystemChanges(WORKSHOP, journal=journal) as changes:
        changes.set(cgroups.LearnerCgroup(user), "present")
    try:
        yield user
    finally:
        journal.restore(lambda entry: entry.owner == WORKSHOP)
    assert cgroups.LearnerCgroup(user).read() == "absent" and not journal.path.exists()


def _in_group(user: str, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perflab.workshop.cgroups", user, "--", *argv])


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@live
def test_a_learners_group_holds_their_processes_to_its_limits_and_down_ends_them(group):
    knob = cgroups.LearnerCgroup(group)
    root = knob.root
    assert root.read(knob._file("pids.max")) == str(cgroups.PROCESSES_MAX)
    assert int(root.read(knob._file(knob.layout.memory))) == cgroups._memory_limit(root)
    sleeper = _in_group(group, ["sleep", "60"])
    time.sleep(0.3)
    marks = ("0::",) if knob.layout.version == 2 else (":cpu:", ":memory:", ":pids:") + (
        (":cpuset:",) if cgroups.cpuset_folder(root, knob.layout) else ())
    lines = [line for line in open(f"/proc/{sleeper.pid}/cgroup") if any(mark in line for mark in marks)]
    assert len(lines) == len(marks) and all(line.strip().endswith(f"/{cgroups.GROUP}/{group}") for line in lines)
    cgroups.LearnerCgroup(group).write("absent")  # as `down` does: what still runs in it is ended first
    assert sleeper.wait(timeout=10) == -9


@live
@pytest.mark.live  # two busy loops share a CPU: alone, after the tests that run side by side
@pytest.mark.parametrize("holder", ["root", "classmate"])
def test_while_another_measures_a_classmates_busy_loop_yields_the_cpu(group, holder, tmp_path):
    """Two busy loops on one CPU: the one in a yielding group gets a sliver of it, the measuring one nearly all,
    whether root measures (outside the class) or another learner (a sibling group)."""
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    spin = ["taskset", "-c", cpu, sys.executable, "-c", "while True: pass"]
    other = f"perflab-u{os.getpid() % 100000}"
    journal = Journal(path=str(tmp_path / "other.journal"), kinds={cgroups.LearnerCgroup.kind: cgroups.LearnerCgroup})
    if holder == "classmate":
        with SystemChanges(WORKSHOP, journal=journal) as changes:
            changes.set(cgroups.LearnerCgroup(other), "present")
    classmate = _in_group(group, spin)
    measuring = _in_group(other, spin) if holder == "classmate" else subprocess.Popen(spin)
    try:
        cgroups.yield_to(other if holder == "classmate" else "root", [group, other])
        time.sleep(0.5)
        before = _cpu_seconds(classmate.pid), _cpu_seconds(measuring.pid)
        time.sleep(2.0)
        theirs, ours = (_cpu_seconds(p.pid) - b for p, b in zip((classmate, measuring), before))
        # weights 2 against 1024 give the classmate 0.2%; a host that steals or moves vCPUs blurs it, not 20%
        assert ours > 0.5 and theirs < 0.2 * ours, f"the classmate kept {theirs:.2f} s against {ours:.2f} s"
        cgroups.yield_to(None, [group, other])
        assert knob_value(group) == cgroups.LearnerCgroup(group).layout.normal
    finally:
        for process in (classmate, measuring):
            process.kill()
            process.wait()
        journal.restore(lambda entry: entry.owner == WORKSHOP)


@live
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU to spare beyond the measured one")
def test_a_classmates_busy_loop_leaves_the_measured_cpu_and_comes_back_when_the_turn_ends(group, tmp_path):
    knob = cgroups.LearnerCgroup(group)
    folder = cgroups.cpuset_folder(knob.root, knob.layout)
    if folder is None:
        pytest.skip("this machine has no cpuset controller")
    measured, *spare = sorted(os.sched_getaffinity(0))
    holder = f"perflab-u{os.getpid() % 100000}"
    classmate = _in_group(group, ["taskset", "-c", str(measured), sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 20  # until the loop runs, pinned: under load its start takes seconds
        while Path(f"/proc/{classmate.pid}/cmdline").read_bytes().split(b"\0")[1:3] != [b"-c", b"while True: pass"]:
            assert classmate.poll() is None and time.monotonic() < deadline, "the classmate's loop did not start"
            time.sleep(0.05)
        said = cgroups.hold_off(holder, [group, holder], [measured])
        assert said.endswith(f"while this measures on CPU {measured}"), said
        time.sleep(0.3)  # even pinned to the measured CPU, the loop runs only on the cpuset's
        seen = set()
        for _ in range(20):
            seen.add(_last_cpu(classmate.pid))
            time.sleep(0.02)
        assert seen <= set(spare), f"the classmate ran on CPU {seen} while CPU {measured} was measured"
        cgroups.yield_to(None, [group, holder])
        time.sleep(0.3)
        assert _last_cpu(classmate.pid) == measured, "the classmate's own pinning did not come back"
    finally:
        classmate.kill()
        classmate.wait()


def _last_cpu(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[36])


def knob_value(user: str) -> str:
    knob = cgroups.LearnerCgroup(user)
    return knob.root.read(knob._file(knob.layout.cpu))


@live
def test_a_queue_killed_mid_turn_leaves_no_learner_yielding_or_moved_once_it_starts_again(group, tmp_path, monkeypatch):
    from perflab.workshop import roster, turns

    monkeypatch.setenv("PERFLAB_WORKSHOP_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(roster, "system_user", lambda learner: group)
    roster.save(roster.Workshop("127.0.0.1", 1, 2, 3, 4, "t", "t", "h", learners={"alice": "h"}))
    turns.hold_the_others_off(0)  # root's turn: the class yields as a whole
    knob = cgroups.LearnerCgroup(group)
    assert knob.root.read(f"{knob.layout.folders[0]}/{knob.layout.cpu}") == knob.layout.yielding
    cpuset = cgroups.cpuset_folder(knob.root, knob.layout)
    everyone = cpuset and knob.root.read(f"{cpuset}/{group}/cpuset.cpus")
    if cpuset and len(os.sched_getaffinity(0)) > 1:  # and its measurement named CPU 0: the class moved off it
        assert turns.hold_the_others_off_cpus(0, [0]).startswith("the class runs on CPU ")
        assert knob.root.read(f"{cpuset}/{group}/cpuset.cpus") != everyone
    turns.hold_the_others_off(None)  # what the queue does as it starts, before it serves anyone
    assert knob.root.read(f"{knob.layout.folders[0]}/{knob.layout.cpu}") == knob.layout.normal
    assert knob_value(group) == knob.layout.normal
    assert not cpuset or knob.root.read(f"{cpuset}/{group}/cpuset.cpus") == everyone
