"""Which programs each perflab process has running, on disk: so that what a killed run left is ended later.

perflab.processes writes one file per program it starts (its process group, its token, its command line),
in a folder beside the measurement lock (/run/lock/perflab-measure.lock.processes/: emptied at boot, as
pids are meaningless after one), and removes it when the program ends. A process's guardian ends its
programs when it dies; if the guardian was killed too, the next `perflab run` and `perflab system reset`
find the records of processes that are gone and end what is still running of them (end_leftovers), as the
guardian would have, saying which.

The folder is shared by every user, as /tmp is. A record ends only processes of the user who wrote it
(the file's owner), unless root wrote it, so no one can make another user's run or root's reset kill
someone else's processes.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .guardian import alive, end_programs, start_time
from .paths import lock_path

_warned: list[str] = []  # the folder that could not be written, once said


def folder() -> Path:
    """<measurement lock>.processes: one place per machine (and per test, whose PERFLAB_LOCK is its own)."""
    lock = lock_path()
    return lock.with_name(lock.name + ".processes")


@dataclass(frozen=True)
class Record:
    path: Path

    def remove(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass


def write(pgid: int, started: int, token: str, argv: Sequence[str]) -> Record | None:
    """Record a program of this process; None (said once) where the folder cannot be written."""
    me = os.getpid()
    data = {"pgid": pgid, "started": started, "token": token, "argv": [str(a) for a in argv], "by": me,
            "by_started": start_time(me)}
    path = folder() / f"{pgid}-{started}.json"
    try:
        _make_shared(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, json.dumps(data).encode())
        finally:
            os.close(fd)
    except OSError as err:
        if not _warned:
            _warned.append(str(path.parent))
            print(f"perflab: cannot record this process's programs in {path.parent} ({err.strerror}): if it is killed "
                  "together with its guardian, the next run cannot end them", file=sys.stderr)
        return None
    return Record(path)


def _make_shared(where: Path) -> None:
    """The folder, sticky and writable by every user as /tmp is (each removes only their own files)."""
    if where.is_dir():
        return
    where.mkdir(mode=0o1777, exist_ok=True)
    if where.stat().st_uid == os.geteuid():
        os.chmod(where, 0o1777)  # the umask trimmed mkdir's mode


def _read(path: Path) -> tuple[dict[str, Any] | None, int]:
    """A record and the uid that wrote it; None for a damaged one (or a link: a record is a plain file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None, -1
    try:
        owner = os.fstat(fd).st_uid
        data = json.loads(os.read(fd, 1 << 16))
        return ({key: data[key] for key in ("pgid", "started", "token", "argv", "by", "by_started")}, owner)
    except (OSError, ValueError, TypeError, KeyError):
        return None, owner
    finally:
        os.close(fd)


def end_leftovers(say: bool = False) -> list[str]:
    """End what perflab processes that are gone left running; one line for each (on stderr too with `say`)."""
    lines = []
    where = folder()
    for path in sorted(where.glob("*.json")) if where.is_dir() else []:
        record, owner = _read(path)
        if record is not None and record["by_started"] is not None and alive(record["by"], record["by_started"]):
            continue  # its process runs: its guardian is there
        ended = [] if record is None else end_programs({record["token"]: (record["pgid"], record["started"])},
                                                       uid=None if owner == 0 else owner)
        if ended:
            command = shlex.join(record["argv"])
            lines.append(f"ended {command[:100] + ('...' if len(command) > 100 else '')} (process group "
                         f"{record['pgid']}: pid {', '.join(map(str, ended))}), which perflab process "
                         f"{record['by']} started and left running when it ended")
        Record(path).remove()  # only its writer or root can: another user's stays for them
    if say:
        for line in lines:
            print(f"perflab: {line}", file=sys.stderr)
    return lines
