"""Every program perflab starts, started one way, so that it dies with the perflab process that started it.

start() puts a program in a process group of its own, which whatever it forks joins too (stress-ng's
workers, perf's and coz's target, make's compilers), with PR_SET_PDEATHSIG (util-linux's setpriv sets it,
then runs the program): the kernel kills it when the thread that started it ends. That signal reaches
neither what the program forked nor a program started without it (a VM's QEMU, which `perflab vm up`
leaves running), so two more things end a run's programs:

- a guardian (perflab/guardian.py), one per perflab process that starts programs, in a session of its own:
  it hears of each program before it starts and as it ends, and when its process is gone (even after
  kill -9) it kills what is left: each program's process group, and each process that carries the
  program's token in its environment;
- a record of each program beside the measurement lock (perflab.records), so that the next `perflab run`
  and `perflab system reset` end what a process left when its guardian died too, and say which.

Also the project's one liveness check (start_time, alive, defined beside the guardian's /proc reader, which
must stay standard library only): a process is its pid *and* its start time, so a reused pid is never taken
for it.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Sequence

from . import records
from .guardian import TOKEN, end_group
from .guardian import alive as alive  # the liveness check, with start_time: callers take both from here
from .guardian import start_time as start_time
from .records import Record

SETPRIV = shutil.which("setpriv")  # util-linux's, in every Debian


@dataclass
class _Program:
    process: subprocess.Popen
    token: str
    started: int
    record: Record | None  # None where the folder of records could not be written


_lock = threading.Lock()
_programs: dict[int, _Program] = {}  # by process group, which is the program's pid
_guardian: dict[str, int] = {}  # "pid" of the guardian, "pipe" (write end), "for": the process it guards
_numbers = itertools.count()


def _forget_after_fork() -> None:
    """A forked child is not the process its parent's programs belong to: it gets its own guardian if it starts any."""
    _programs.clear()
    _guardian.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def start(argv: Sequence[str], *, own_session: bool = False, death_signal: bool = True,
          stdin=subprocess.DEVNULL, **popen) -> subprocess.Popen:
    """Start a program of this process, in a process group of its own (own_session: a session of its own, away
    from the terminal, as a VM's QEMU); end it with stop(), or use run(). Other arguments go to Popen.

    death_signal: the kernel kills it when the thread that started it ends, so start programs from a thread
    that outlives them (the main thread); only a program that may outlive this process (release) goes without.
    setpriv sets it and execs the program: 2.5 to 3 ms a program here, against 1.2 to 1.7 ms without it and 8 to
    9 ms for a preexec_fn (a fork instead of a vfork, and Python in the child), measured in a 135 MB lab process.
    """
    environment = popen.pop("env", None) or os.environ
    if shutil.which(argv[0], path=environment.get("PATH", os.defpath)) is None:  # not setpriv's exit code 127
        raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {argv[0]!r}", argv[0])
    token = f"{os.getpid()}.{start_time(os.getpid())}.{next(_numbers)}"
    wrapped = [SETPRIV, "--pdeathsig", "KILL", "--", *argv] if death_signal and SETPRIV else list(argv)
    group = {"start_new_session": True} if own_session else {"process_group": 0}
    with _lock:
        _tell(f"+ {token}\n")  # before the program exists: it carries the token from its first instruction
        try:
            process = subprocess.Popen(wrapped, stdin=stdin, env={**environment, TOKEN: token}, **group, **popen)
        except BaseException:
            _tell(f"- {token}\n")
            raise
        started = start_time(process.pid) or 0  # readable: the child is ours and not reaped yet
        _tell(f"= {token} {process.pid} {started}\n")
        _programs[process.pid] = _Program(process, token, started, records.write(process.pid, started, token, argv))
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
    """The program `pid` may outlive this process from now on: no guardian or record ends it (a VM `perflab vm up`
    boots)."""
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
        _tell(f"- {program.token}\n")
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
        except BrokenPipeError:  # killed on its own: start another, which hears of every running program
            os.close(_guardian["pipe"])
            _reap(_guardian["pid"])
            _guardian.clear()
    raise OSError(f"perflab cannot keep its guardian process running ({sys.executable} guardian.py)")


def _start_guardian() -> None:
    from . import guardian

    read_end, write_end = os.pipe()  # both close on exec: no program inherits the write end
    argv = [sys.executable, "-I", "-S", os.path.abspath(guardian.__file__)]
    try:
        pid = os.posix_spawn(sys.executable, argv, os.environ, setsid=True, file_actions=[
            (os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    finally:
        os.close(read_end)
    _guardian.update(pid=pid, pipe=write_end, **{"for": os.getpid()})
    for pgid, program in _programs.items():
        os.write(write_end, f"= {program.token} {pgid} {program.started}\n".encode())


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
