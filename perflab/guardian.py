"""Ending what a perflab process started, even once it is gone: the guardian, and the helpers it shares.

Standard library only: perflab.processes runs this file by path (`python -I -S guardian.py`) as the
guardian of one perflab process. Its stdin is a pipe whose write end only that process holds, on which
it hears of each program:

    + TOKEN                  a program is about to start: it, and whatever it forks, carries PERFLAB_PROGRAM=TOKEN
    = TOKEN PGID STARTED     it started: its process group, and the start time of the group's leader
    - TOKEN                  it ended, or may outlive the process (released)

At EOF (the process ended, even by kill -9) it kills every program still listed: each process of its group,
and each process that carries its token, which also catches a program whose process was killed while
starting it, before it heard of its group, and one that left its group (the Jenkins way of finding a
build's processes). perflab.records ends the same way what a process left when its guardian died too.
"""

from __future__ import annotations

import os
import signal
import time
from typing import NamedTuple

TOKEN = "PERFLAB_PROGRAM"
KILL_WAIT_S = 5.0  # SIGKILL ends a process at once unless it is in uninterruptible sleep (a disk read)
LATE_EXEC_S = 0.5  # a child forked just before its parent died carries the token once it has exec'd


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


def _live(pid: int) -> bool:
    found = stat(pid)
    return found is not None and found.state not in "ZX"


def real_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as file:
            return next(int(line.split()[1]) for line in file if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return None


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def group_members(pgid: int, started: int) -> list[int]:
    """The live processes of the group whose leader, pid `pgid`, started at `started`.

    A group's number stays taken while any member lives, so members without their leader are still that
    group's; a leader with another start time means the number was free and is another group's now."""
    leader = stat(pgid)
    if leader is not None and leader.started != started:
        return []
    return [pid for pid in _pids() if (found := stat(pid)) and found.pgrp == pgid and found.state not in "ZX"]


def carrying(tokens: set[str]) -> list[int]:
    """The live processes whose environment holds one of the tokens (only this user's can be read, or any for root)."""
    wanted = {f"{TOKEN}={token}".encode() for token in tokens}
    found = []
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environment = set(file.read().split(b"\0"))
        except OSError:
            continue
        if wanted & environment and _live(pid):
            found.append(pid)
    return found


def end_group(pgid: int, started: int, first: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """A running program's group: `first`, then SIGKILL to what is left after `grace` seconds."""
    if not group_members(pgid, started) or not _signal_group(pgid, first):
        return
    deadline = time.monotonic() + grace
    while group_members(pgid, started) and time.monotonic() < deadline:
        time.sleep(0.02)
    deadline = time.monotonic() + KILL_WAIT_S
    while group_members(pgid, started) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)  # again: a member may have forked since
        time.sleep(0.02)


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_programs(programs: dict[str, tuple[int, int] | None], settle: float = 0.0, uid: int | None = None) -> list[int]:
    """SIGKILL every process of the programs (token: its group's (pgid, leader's start time), None if not heard
    of yet) until none is left; the pids it ended. settle: look again this long after the last one found.

    uid: end only that user's processes (a record's writer can name no one else's)."""
    ended: set[int] = set()
    quiet_from, deadline = time.monotonic(), time.monotonic() + settle + KILL_WAIT_S
    while programs and time.monotonic() < deadline:
        found = {pid for group in programs.values() if group for pid in group_members(*group)}
        found |= set(carrying(set(programs)))
        found = {pid for pid in found if uid is None or real_uid(pid) == uid}
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        ended |= found
        if found:
            quiet_from = time.monotonic()
        elif time.monotonic() >= quiet_from + settle:
            break
        time.sleep(0.05)
    return sorted(ended)


def guard() -> None:
    """The guardian's loop: keep the programs its process tells of; at EOF, end those still listed."""
    programs: dict[str, tuple[int, int] | None] = {}
    pending = b""
    while chunk := os.read(0, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            sign, token, *group = line.decode().split()
            if sign == "-":
                programs.pop(token, None)
            else:
                programs[token] = (int(group[0]), int(group[1])) if group else programs.get(token)
    end_programs(programs, settle=LATE_EXEC_S)


if __name__ == "__main__":
    guard()
