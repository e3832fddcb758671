"""Every program perflab starts, started one way, so that it dies with the perflab process that started it.

start() puts a program in a process group of its own, which whatever it forks joins too (stress-ng's
workers, perf's and coz's target, make's compilers), with PR_SET_PDEATHSIG (util-linux's setpriv sets it,
then runs the program): the kernel kills it when the thread that started it ends. That signal reaches
neither what the program forked nor a program started without it (a VM's QEMU, which `perflab vm up`
leaves running), so two more things end a run's groups:

- a guardian, this file run by path, one per perflab process that starts programs: it holds the read end
  of a pipe whose write end only that process holds, hears of each group as it starts and ends, and when
  the pipe reads EOF (its process ended, even by kill -9) kills every group still running. It has a
  session of its own, so a signal to the run's process group or terminal spares it;
- a record of each group in a folder beside the measurement lock (records.py), so that the next
  `perflab run` and `perflab system reset` end what a process left when its guardian died too, and say which.

Also the project's one liveness check: a process is its pid *and* its start time, so a reused pid is never
taken for it. Standard library only at the top: the guardian imports nothing of perflab.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Sequence

if TYPE_CHECKING:
    from .records import Record

KILL_WAIT_S = 5.0  # SIGKILL ends a process at once unless it is in uninterruptible sleep (a disk read)


class Stat(NamedTuple):
    state: str
    pgrp: int
    started: int  # clock ticks after boot


def stat(pid: int) -> Stat | None:
    """Fields 3, 5 and 22 of /proc/PID/stat (the live /proc: processes are never in a fixture tree)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rpartition(")")[2].split()
    except OSError:
        return None
    return Stat(fields[0], int(fields[2]), int(fields[19]))


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks after boot; None when there is no such process."""
    found = stat(pid)
    return found.started if found else None


def alive(pid: int, started: int) -> bool:
    """Is the process that started at `started` still running? A zombie has ended; a reused pid is another process."""
    found = stat(pid)
    return found is not None and found.started == started and found.state not in "ZX"


def real_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as file:
            return next(int(line.split()[1]) for line in file if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return None


def group_members(pgid: int, started: int) -> list[int]:
    """The live processes of the group whose leader, pid `pgid`, started at `started`.

    A group's number stays taken while any member lives, so members without their leader are still that
    group's; a leader with another start time means the number was free and is another group's now."""
    leader = stat(pgid)
    if leader is not None and leader.started != started:
        return []
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := stat(int(name))) and found.pgrp == pgid and found.state not in "ZX":
            members.append(int(name))
    return members


def end_group(pgid: int, started: int, first: int = signal.SIGKILL, grace: float = 0.0,
              uid: int | None = None) -> list[int]:
    """Send `first` to the group, then SIGKILL to what is left after `grace` seconds; the pids it had, none if
    nothing of it ran (or it is not ours to end).

    uid: end it only if every member is that user's (a record's owner can name no one else's processes)."""
    members = group_members(pgid, started)
    if not members or (uid is not None and any(real_uid(pid) != uid for pid in members)):
        return []
    if not _signal_group(pgid, first):
        return []
    deadline = time.monotonic() + grace
    while group_members(pgid, started) and time.monotonic() < deadline:
        time.sleep(0.02)
    deadline = time.monotonic() + KILL_WAIT_S
    while group_members(pgid, started) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)  # again: a member may have forked since
        time.sleep(0.02)
    return members


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# ------------------------------------------------------------------ this process's programs

@dataclass
class _Program:
    process: subprocess.Popen
    started: int
    record: Record | None  # None where the folder of records could not be written


_lock = threading.Lock()
_programs: dict[int, _Program] = {}  # by process group, which is the program's pid
_guardian: dict[str, int] = {}  # "pid" of the guardian, "pipe" (write end), "for": the process it guards


def _forget_after_fork() -> None:
    """A forked child is not the process its parent's programs belong to: it gets its own guardian if it starts any."""
    _programs.clear()
    _guardian.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
SETPRIV = shutil.which("setpriv")  # util-linux's, in every Debian


def start(argv: Sequence[str], *, own_session: bool = False, death_signal: bool = True,
          stdin=subprocess.DEVNULL, **popen) -> subprocess.Popen:
    """Start a program of this process, in a process group of its own (own_session: a session of its own, away
    from the terminal, as a VM's QEMU); end it with stop(), or use run(). Other arguments go to Popen.

    death_signal: the kernel kills it when the thread that started it ends, so start programs from a thread
    that outlives them (the main thread); only a program that may outlive this process (release) goes without.
    setpriv sets it and execs the program, about 2 ms; a preexec_fn setting it would cost 6 to 8 ms a program
    (a fork instead of a vfork, and Python in the child; measured on a 2-vCPU KVM guest).
    """
    from . import records  # here: the guardian runs this file on its own

    search = (popen.get("env") or os.environ).get("PATH", os.defpath)
    if shutil.which(argv[0], path=search) is None:  # as subprocess says it, not as setpriv's exit code 127
        raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {argv[0]!r}", argv[0])
    wrapped = [SETPRIV, "--pdeathsig", "KILL", "--", *argv] if death_signal and SETPRIV else list(argv)
    group = {"start_new_session": True} if own_session else {"process_group": 0}
    with _lock:
        if _guardian.get("for") != os.getpid():
            _start_guardian()  # before the program: once it runs, nothing may stop it being told of
        process = subprocess.Popen(wrapped, stdin=stdin, **group, **popen)
        started = start_time(process.pid) or 0  # readable: the child is ours and not reaped yet
        _tell(f"+ {process.pid} {started}\n")
        _programs[process.pid] = _Program(process, started, records.write(process.pid, started, argv))
    return process


def run(argv: Sequence[str], *, timeout: float | None = None, input: str | None = None,
        **popen) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True) for a program of this process: its whole group
    ends with it, also on a timeout (subprocess.TimeoutExpired, raised after), Ctrl-C or any error."""
    popen.setdefault("text", True)
    process = start(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
    try:
        out, err = process.communicate(input, timeout)
    finally:
        stop(process, signal.SIGKILL)
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


def stop(process: subprocess.Popen, first: int = signal.SIGTERM, grace: float = 10.0) -> int:
    """End a program start() started and everything left in its group: `first`, then SIGKILL after `grace`
    seconds; its exit code (-15 for SIGTERM, as subprocess gives it)."""
    program = _programs.get(process.pid)
    if program is not None and (process.poll() is None or _group_exists(process.pid)):
        end_group(process.pid, program.started, first, grace)
    process.wait()
    _forget(process.pid)
    return process.returncode


def end(pid: int, started: int, first: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """End the group `pid` leads or led, whether this process started it or another did (a VM `perflab vm up` left)."""
    program = _programs.get(pid)
    if program is not None and program.started == started:
        stop(program.process, first, grace)
    else:
        end_group(pid, started, first, grace)


def release(pid: int) -> None:
    """The program `pid` may outlive this process from now on: no guardian or record ends it (a VM `perflab vm up` boots)."""
    _forget(pid)


def _group_exists(pgid: int) -> bool:
    """Is any process left in the group? Cheap: no /proc scan for the usual answer, no."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _forget(pid: int) -> None:
    with _lock:
        program = _programs.pop(pid, None)
        if program is None:
            return
        _tell(f"- {pid} {program.started}\n")
    if program.record is not None:
        program.record.remove()


# ------------------------------------------------------------------ the guardian

def _tell(line: str) -> None:
    """Tell this process's guardian (under _lock), starting one first if it has none or it died."""
    for _ in range(2):
        if _guardian.get("for") != os.getpid():
            _start_guardian()
        try:
            os.write(_guardian["pipe"], line.encode())
            return
        except BrokenPipeError:  # killed on its own: start another, which hears of every running group
            os.close(_guardian["pipe"])
            _reap(_guardian["pid"])
            _guardian.clear()
    raise OSError(f"perflab cannot keep a guardian process running ({sys.executable} {__file__})")


def _start_guardian() -> None:
    read_end, write_end = os.pipe()  # both close on exec: no program inherits the write end
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
    try:
        pid = os.posix_spawn(sys.executable, argv, os.environ, setsid=True, file_actions=[
            (os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    finally:
        os.close(read_end)
    _guardian.update(pid=pid, pipe=write_end, **{"for": os.getpid()})
    for pgid, program in _programs.items():
        os.write(write_end, f"+ {pgid} {program.started}\n".encode())


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def guard() -> None:
    """The guardian: keep the groups its process tells it of; when the pipe reads EOF, end those still running."""
    groups: dict[int, int] = {}
    pending = b""
    while chunk := os.read(0, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            sign, pgid, started = line.split()
            if sign == b"+":
                groups[int(pgid)] = int(started)
            else:
                groups.pop(int(pgid), None)
    running = {pgid: started for pgid, started in groups.items() if group_members(pgid, started)}
    for pgid in running:  # every group at once, then wait for each
        _signal_group(pgid, signal.SIGKILL)
    for pgid, started in running.items():
        end_group(pgid, started)


if __name__ == "__main__":
    guard()
