"""kill -9 of `perflab run LAB --quick` at three moments of every lab: 2 s later, nothing of that run is left.

Each lab's first moment runs with the fast tests (a few seconds each); the later ones wait for a lab's race
to be decided (first-core-ipi's part 1 takes 5 to 40 s, by the machine's load), so they are slow tests.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, lab_run_marks, without_guest_image
from perflab import journal
from perflab.cases.build import scratch
from perflab.labs import labs

# Three moments of each lab's quick run, each a program of it (a regex on its command line) and how many
# of those have started: its first measurement, then programs of other kinds, later in the run.
# first-core-ipi's oslat runs beside blockread's endless reader, which issue 32 found spinning under PID 1
# after such a kill (test_the_endless_reader_dies_with_its_lab has it alone, fast).
KILL_POINTS = {
    "core-to-core": [("pingpong", 1), ("pingpong", 3), ("perf --version", 1)],
    "inclusive-llc": [("aggressor .* -i", 1), ("victim", 1), ("victim", 6)],
    "first-core-ipi": [("bystander", 1), ("perf stat", 1), ("oslat", 1), ("bpftrace", 2)],
    "page-table-levels": [("make", 1), ("cpuid", 1)],  # no guest image here: only the probe's helpers run
    "numa-static-data": [("shared_global", 1), ("shared_global", 12), ("shared_global", 30)],
    "loop-alignment": [("offset_sweep", 1), ("objdump", 1), (r"offset_sweep .*-o \d+,\d+", 1)],
    "causal-profiling": [("perf record", 1), ("coz run", 1), (r"commit -d \d+", 3)],
    "4k-aliasing": [("alias_sweep", 1), ("alias_sweep", 3), ("stencil", 1)],
    "hidden-quadratic": [("lookup", 1), ("flows", 2), ("perf record", 1)],
    "memory-neighbour": [("victim", 1), ("victim", 2), ("neighbour", 1)],
    "memcpy-variant": [("copy_sweep", 1), ("bpftrace", 1), ("copy_sweep", 20)],  # naming, counting, racing
    "profiler-overhead": [("busy_work", 1), ("perf record", 1), ("perf record", 5)],
}
ATTEMPTS = 3  # runs of a lab that end before their kill point, before the test is skipped (see _kill_at)
# With a guest image, lab 4's quick run boots both paging modes at once, round by round: killed as the first
# QEMU starts, with both running, and in the second round.
BOOTING = [("qemu-system", 1), ("qemu-system", 2), ("qemu-system", 3)]


def _table() -> dict[int, tuple[int, int, str]]:
    """Every process now: pid -> (process group, start time, state)."""
    found = {}
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as file:
                fields = file.read().rpartition(")")[2].split()
        except (OSError, ValueError):
            continue
        if name.isdigit():
            found[int(name)] = (int(fields[2]), int(fields[19]), fields[0])
    return found


def _under(root: int) -> list[int]:
    """Every process below `root`, from the kernel's lists of children (fast enough to poll every millisecond)."""
    below, todo = [], [root]
    while todo:
        parent = todo.pop()
        try:
            children = [int(child) for task in os.listdir(f"/proc/{parent}/task")
                        for child in Path(f"/proc/{parent}/task/{task}/children").read_text().split()]
        except OSError:  # it ended meanwhile
            continue
        below += children
        todo += children
    return below


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _kill_at(lab: str, pattern: str, nth: int, env: dict, log: Path,
             verb: tuple[str, ...] = ("run", "{lab}", "--quick")) -> tuple[dict[int, int], set[int]]:
    """Run the lab (or `perflab VERB`), kill -9 it once the nth program matching `pattern` has started; what ran
    then: ({pid: start time} of it and every process under it, their process groups).

    A program that lives a few milliseconds (lab 4's cpuid helper) can start and end between two looks: the run
    is then started again, up to ATTEMPTS times in all, before the test is skipped."""
    for _ in range(ATTEMPTS):
        with log.open("w") as err:
            run = subprocess.Popen([sys.executable, "-m", "perflab", *(word.format(lab=lab) for word in verb)],
                                   cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        if _reached(run, pattern, nth):
            break
    else:
        pytest.skip(f"{lab}'s quick run here ended before it started {pattern!r} #{nth}, {ATTEMPTS} times: "
                    f"{log.read_text()[-300:]}")
    table = _table()
    tree = {pid: table[pid][1] for pid in [run.pid, *_under(run.pid)] if pid in table}
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    return tree, {table[pid][0] for pid in tree}


def _reached(run: subprocess.Popen, pattern: str, nth: int) -> bool:
    """Whether the nth program matching `pattern` started under `run` before it ended (if not, it is reaped).
    A run that neither gets there nor ends in 300 s is killed and the test skipped: another try would hang too."""
    matched: set[int] = set()
    deadline = time.monotonic() + 300
    while len(matched) < nth:
        ended, late = run.poll() is not None, time.monotonic() > deadline
        if ended or late:
            run.kill()
            run.wait()
            if late:
                pytest.skip(f"{pattern!r} #{nth} did not start within 300 s")
            return False
        matched |= {pid for pid in _under(run.pid) if re.search(pattern, _command(pid))}
        time.sleep(0.001)
    return True


def _left_after(tree: dict[int, int], groups: set[int], seconds: float) -> list[str]:
    """Wait up to `seconds` for every process of the tree and of its groups to end; what still runs."""
    deadline = time.monotonic() + seconds
    while True:
        table = _table()
        left = {pid for pid, started in tree.items() if pid in table and table[pid][1] == started
                and table[pid][2] != "Z"}
        left |= {pid for pid, (pgrp, _, state) in table.items() if pgrp in groups and state != "Z"}
        if not left or time.monotonic() > deadline:
            return [f"{pid} {_command(pid)}" for pid in sorted(left)]
        time.sleep(0.02)


def _check(lab: str, point: tuple[str, int], env: dict, tmp_path: Path) -> None:
    tree, groups = _kill_at(lab, *point, env, tmp_path / "stderr.txt")
    try:
        assert _left_after(tree, groups, 2.0) == [], f"left running after kill -9 at {point} of {lab}"
    finally:
        journal.recover()  # what the killed run changed on this machine (rq_affinity, tracers), as the next run would


def test_the_kill_points_name_every_lab():
    assert set(KILL_POINTS) == {lab.name for lab in labs() if lab.status == "ready"}


# Each runs its whole lab: those that change the machine one after another on one worker (lab_run_marks).
@pytest.mark.parametrize("lab, point", [pytest.param(lab, point,
                                                      marks=[pytest.mark.slow] * (later > 0) + lab_run_marks(lab))
                                         for lab, points in KILL_POINTS.items() for later, point in enumerate(points)],
                         ids=lambda value: value if isinstance(value, str) else f"{value[0]}#{value[1]}")
def test_nothing_of_a_run_outlives_its_kill_9(lab, point, tmp_path):
    _check(lab, point, {**os.environ, **without_guest_image(tmp_path)}, tmp_path)


READER = """
import tempfile, time
from perflab.build import ensure_built
from perflab.labs.first_core_ipi.blockdev import read_path
from perflab.labs.first_core_ipi.completions import SOURCE_DIR
from perflab.labs.first_core_ipi.noise import Reader
from perflab.sysfs import default_root
path = str(read_path(default_root()))
with tempfile.TemporaryDirectory() as folder, Reader(ensure_built(SOURCE_DIR, "blockread"), 0, path, folder) as reader:
    print(reader.process.pid, flush=True)
    time.sleep(300)
"""


def test_the_endless_reader_dies_with_its_lab():
    """Issue 32's case: after kill -9 of first-core-ipi, `blockread -n 1000000000000` spun on under PID 1."""
    lab = subprocess.Popen([sys.executable, "-c", READER], cwd=REPO, stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    reader = int(lab.stdout.readline())
    deadline = time.monotonic() + 5  # its pid comes before setpriv has exec'd blockread: its command line is empty
    while "-n 1000000000000" not in _command(reader) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "-n 1000000000000" in _command(reader)
    table = _table()
    tree = {pid: table[pid][1] for pid in [lab.pid, *_under(lab.pid)]}
    lab.kill()
    lab.wait()
    assert _left_after(tree, {table[pid][0] for pid in tree}, 2.0) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", [pytest.param(point, marks=lab_run_marks("page-table-levels")) for point in BOOTING],
                         ids=lambda value: f"{value[0]}#{value[1]}")
def test_lab_4s_vms_die_with_its_kill_9(point, tmp_path, guest_image):
    """A VM booted for a run is one of its programs: a kill -9 of the run stops its QEMU too."""
    _check("page-table-levels", point, dict(os.environ), tmp_path)


def test_nothing_of_a_case_grade_outlives_its_kill_9(tmp_path, monkeypatch):
    """Killed in its race, at the third run of the learner's build: no sessiond is left."""
    # A temporary folder of its own: any perflab process's scratch folder sweeps the killed grade's folder, and the
    # other workers' gradings once did so before this test looked for it.
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    env = {**os.environ, "PERFLAB_WORKSPACE": str(tmp_path / "work"), "PERFLAB_PROGRESS": str(tmp_path / "p.txt"),
           "TMPDIR": str(private)}
    setup = ("from perflab.cases.case import new_case\nfrom perflab.cases.reveal import solve\n"
             "solve(new_case(7, say=lambda _: None))")
    subprocess.run([sys.executable, "-c", setup], cwd=REPO, env=env, check=True)
    tree, groups = _kill_at("case-7", r"/yours --threads", 3, env, tmp_path / "stderr.txt",
                            verb=("grade", "{lab}", "--no-record"))
    assert _left_after(tree, groups, 2.0) == [], "left running after kill -9 of a case's grade"
    killed = next(iter(tree))  # the grade's own process: its build folder outlived it, until the next grade's sweep
    assert list(private.glob(f"perflab-case-grade-{killed}-*"))
    with scratch("grade"):
        assert not list(private.glob(f"perflab-case-grade-{killed}-*"))
