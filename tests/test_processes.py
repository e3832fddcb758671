"""Programs die with the perflab process that started them: kill -9, a killed guardian, and the next run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, StubLab, run_cli
from perflab import guardian, processes, records
from perflab.paths import scratch

# Starts a shell that forks two sleeps (into its process group, unless told otherwise), prints its pid, and waits
# to be killed.
STARTER = textwrap.dedent("""
    import sys, time
    from perflab import processes
    shell = processes.start(["sh", "-c", sys.argv[1]])
    print(shell.pid, flush=True)
    time.sleep(300)
""")
TWO_SLEEPS = "sleep 300 & sleep 300 & wait"


def _starter(command: str = TWO_SLEEPS) -> tuple[subprocess.Popen, int]:
    """A perflab process with one program running, once it has forked its sleeps; and that program's pid."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER, command], stdout=subprocess.PIPE, text=True, cwd=REPO)
    shell = int(starter.stdout.readline())
    deadline = time.monotonic() + 10
    while len([pid for pid in _children(shell) if _command(pid).startswith(f"{pid} sleep")]) < 2:
        assert time.monotonic() < deadline, "the shell did not fork its sleeps"
        time.sleep(0.01)
    return starter, shell


def _children(pid: int) -> list[int]:
    return [int(child) for task in os.listdir(f"/proc/{pid}/task")
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]


def _guardian_of(pid: int) -> int:
    return next(child for child in _children(pid) if b"guardian.py" in Path(f"/proc/{child}/cmdline").read_bytes())


def _group(pgid: int) -> list[int]:
    """Every live process in the group now, whoever leads it."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and (found := guardian.stat(int(p)))
            and found.pgrp == pgid and found.state not in "ZX"]


def _gone_within(pids: dict[int, int], pgids: set[int], seconds: float) -> list[str]:
    """Wait until none of the processes (pid: start time) lives, nor any process in those groups; what is left."""
    deadline = time.monotonic() + seconds
    while True:
        left = {pid for pid, started in pids.items() if processes.alive(pid, started)}
        left |= {pid for pgid in pgids for pid in _group(pgid)}
        if not left or time.monotonic() > deadline:
            return [_command(pid) for pid in sorted(left)]
        time.sleep(0.02)


def _command(pid: int) -> str:
    try:
        return f"{pid} " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid} (gone)"


def test_a_program_and_what_it_forked_die_with_a_kill_9_of_the_perflab_process():
    starter, pgid = _starter()
    tree = {pid: processes.start_time(pid) for pid in [*_group(pgid), _guardian_of(starter.pid)]}
    assert len(tree) == 4 and records.folder().is_dir() and list(records.folder().glob(f"{pgid}-*.json"))
    starter.kill()
    starter.wait()
    assert _gone_within(tree, {pgid}, 2) == []


def test_a_process_that_left_the_programs_group_is_found_by_its_token():
    """A daemon that made a session of its own (setsid) is in no group perflab knows; its environment says whose it
    is."""
    starter, shell = _starter("setsid sleep 300 & sleep 300 & wait")
    tree = {pid: processes.start_time(pid) for pid in [shell, *_children(shell)]}
    assert len({guardian.stat(pid).pgrp for pid in tree}) == 2, "one sleep left the shell's group"
    starter.kill()
    starter.wait()
    assert _gone_within(tree, set(), 2) == []


def test_stop_ends_the_whole_group_and_forgets_its_record():
    shell = processes.start(["sh", "-c", "sleep 300 & sleep 300 & wait"])
    while len(_group(shell.pid)) < 3:
        time.sleep(0.01)
    assert processes.stop(shell, grace=5) == -signal.SIGTERM
    assert _group(shell.pid) == [] and not list(records.folder().glob(f"{shell.pid}-*.json"))


def test_a_timeout_ends_the_program_and_says_so_as_subprocess_does():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(["sh", "-c", "sleep 300 & sleep 300"], timeout=0.5)
    assert time.monotonic() - started < 5
    assert not list(records.folder().glob("*.json")), "the group and its record are gone"


def _leftover() -> tuple[int, list[int]]:
    """What a run leaves when it is killed together with its guardian: the shell dies (its death signal),
    the sleeps it forked run on. Their process group and pids."""
    starter, pgid = _starter()
    sleeps = [pid for pid in _group(pgid) if pid != pgid]
    os.kill(_guardian_of(starter.pid), signal.SIGKILL)
    starter.kill()
    starter.wait()
    time.sleep(0.2)
    assert sorted(_group(pgid)) == sorted(sleeps), "the shell died with its starter (its death signal), not its sleeps"
    return pgid, sleeps


def test_the_next_run_and_system_reset_end_what_a_killed_run_and_its_guardian_left(tmp_path, capsys):
    pgid, sleeps = _leftover()
    StubLab().run(quick=True, progress=False)
    said = capsys.readouterr().err
    assert re.search(rf"perflab: ended sh -c 'sleep 300 & sleep 300 & wait' \(process group {pgid}: pid "
                     rf"{sleeps[0]}, {sleeps[1]}\), which perflab process \d+ started", said), said
    assert _group(pgid) == []

    pgid, sleeps = _leftover()
    (tmp_path / "sys").mkdir()  # a machine with nothing in its journal
    done = run_cli("system", "reset", env={"PERFLAB_SYSROOT": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert f"ended sh -c 'sleep 300 & sleep 300 & wait' (process group {pgid}: pid " in done.stdout
    assert _group(pgid) == [] and not list(records.folder().glob("*.json"))


def test_a_record_ends_only_its_writers_processes(tmp_path):
    """A learner's file in the shared folder cannot make root's `system reset` kill someone else's process."""
    if os.geteuid() != 0:
        pytest.skip("writing a file as another user needs root")
    victim = processes.start(["sleep", "300"])
    record = records.folder() / f"{victim.pid}-{processes.start_time(victim.pid)}.json"
    forged = record.read_text().replace(f'"by": {os.getpid()}', '"by": 4194305')  # a pid that never lives
    nobody = tmp_path / "forged.json"
    nobody.write_text(forged)
    os.chown(nobody, 65534, 65534)
    os.replace(nobody, record)
    assert records.end_leftovers() == [] and processes.alive(victim.pid, processes.start_time(victim.pid))
    processes.stop(victim)


# Where programs start: every one through perflab.processes, but for code other engineers own or that
# does not belong to a run (the guest's agent is the guest's init's child; a workshop's users and hub).
NOT_A_RUNS_PROGRAM = {"processes.py", "vm/agent.py", "vm/image.py", "vm/vagrant.py", "knobs.py",
                      "workshop/accounts.py", "grading/__init__.py",
                      "workshop/hub.py", "workshop/checks.py", "workshop/turns.py", "workshop/regrade.py"}


def test_every_program_a_run_starts_goes_through_perflab_processes():
    starts = re.compile(r"\bsubprocess\.(run|Popen|call|check_call|check_output)\(|\bos\.(system|spawn\w*|fork)\(")
    package = REPO / "perflab"
    offenders = [f"{path.relative_to(package)}:{number}" for path in sorted(package.rglob("*.py"))
                 if str(path.relative_to(package)) not in NOT_A_RUNS_PROGRAM
                 for number, line in enumerate(path.read_text().splitlines(), 1) if starts.search(line)]
    assert offenders == []


def test_every_temporary_folder_a_run_makes_is_a_scratch_folder():
    """tempfile's folders outlive a kill -9; paths.scratch's are removed by the next one (the case's staging
    folder is in the learner's workspace, renamed into the case when whole)."""
    makes = re.compile(r"\btempfile\.(TemporaryDirectory|mkdtemp)\(")
    package = REPO / "perflab"
    offenders = [f"{path.relative_to(package)}:{number}" for path in sorted(package.rglob("*.py"))
                 if str(path.relative_to(package)) not in {"paths.py", "cases/case.py"}
                 for number, line in enumerate(path.read_text().splitlines(), 1) if makes.search(line)]
    assert offenders == []


def test_restarting_a_notebooks_kernel_ends_the_programs_it_started():
    """In a notebook the kernel is the lab's process: a restart kills it (SIGKILL), and its programs go too."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", cwd=str(REPO))
    try:
        said = []
        client.execute_interactive('from perflab import processes\nshell = processes.start(["sh", "-c", '
                                   '"sleep 300 & sleep 300 & wait"])\nprint(shell.pid)', timeout=60,
                                   output_hook=lambda message: said.append(message["content"].get("text", "")))
        pgid = int("".join(said))
        while len(_group(pgid)) < 3:
            time.sleep(0.01)
        tree = {pid: processes.start_time(pid) for pid in _group(pgid)}
        manager.restart_kernel(now=True)
        assert _gone_within(tree, {pgid}, 2) == []
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# Opens a scratch folder of kind argv[2], prints its path, then kills itself (argv[1] == "kill") or waits to be
# killed.
SCRATCH_HOLDER = textwrap.dedent("""
    import os, signal, sys, time
    from perflab.paths import scratch
    with scratch(sys.argv[2]) as folder:
        open(os.path.join(folder, "data"), "w").close()
        print(folder, flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(300)
""")


def test_a_scratch_folder_left_by_a_kill_9_is_removed_by_the_next_and_a_live_runs_stays(tmp_path, monkeypatch):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))

    def holder(how: str, kind: str) -> tuple[subprocess.Popen, Path]:
        started = subprocess.Popen([sys.executable, "-c", SCRATCH_HOLDER, how, kind], cwd=REPO, env=env,
                                   stdout=subprocess.PIPE, text=True)
        return started, Path(started.stdout.readline().strip())

    killed, left = holder("kill", "probe")
    assert killed.wait(10) == -signal.SIGKILL and (left / "data").exists(), "a kill -9 skips the clean-up"
    live, kept = holder("wait", "live")  # a scratch folder of any kind removes what a kill -9 left
    decoy_target = tmp_path / "not-scratch"
    decoy_target.mkdir()
    decoy = tmp_path / "perflab-probe-1-abcdefgh"  # named like a scratch folder, but a symlink
    decoy.symlink_to(decoy_target)
    try:
        with scratch("other") as mine:
            assert not left.exists(), "the killed run's folder outlived the next scratch folder"
            assert (kept / "data").exists(), "a live run's folder was removed"
            assert decoy.is_symlink() and decoy_target.is_dir(), "a symlink was followed"
            assert Path(mine).name.startswith(f"perflab-other-{os.getpid()}-")
        assert not Path(mine).exists()
    finally:
        live.kill()
        live.wait()
