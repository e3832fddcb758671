"""One measurement at a time on this machine, in the order people asked.

Two benchmarks running together spoil each other's numbers, so every
measurement holds an exclusive flock(2) on one machine-wide file. The kernel
drops the lock when the holder exits, even on a crash or kill -9, so a stale
lock cannot outlive its process.

On a shared machine waiters queue: each takes a ticket, a file
named by the time it asked, in <lock>.queue/, and tries the lock only when no
live ticket is older. While it waits it shows its place in line and an
estimate from how long each waiting measurement took last time
(<lock>.queue/durations, a JSON object), or, for a lab run never measured here, from
the time the lab manifest expects. A ticket whose process is gone is skipped, so a
killed waiter does not hold up the line.

Anyone who can open the lock file can hold it forever, so in a workshop measurement_lock
asks the workshop's queue service for a turn instead (perflab.turns), with the same
interface for its callers.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from .errors import PerflabError
from .manifest.labs import run_named
from .paths import lock_path
from .processes import alive, start_time
from .turns import socket_path, turn

REPEAT_PLACE_S = 15  # a waiter's place is shown when it changes, and the estimate this often
_held = threading.local()  # re-entrant within a process: a lab run calls measurements that also lock


def open_shared(path: Path, what: str, instead: str = "") -> int:
    """Open (or create) a lock file that every local user can open too; PerflabError in one line if it cannot be.

    An existing file is opened without O_CREAT: with fs.protected_regular, O_CREAT on another user's
    file in a sticky folder such as /run/lock fails even when the file is mode 0666.
    """
    try:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:  # another process created it a moment ago
                fd = os.open(path, os.O_RDWR)
    except OSError as err:
        owner, fix = "", "it must be a plain file, in a folder that exists or can be made"
        if err.errno in (errno.EACCES, errno.EPERM):
            try:
                info = path.stat()
                owner = f" (owner uid {info.st_uid}, mode {info.st_mode & 0o777:o})"
                fix = f"ask its owner or root to `chmod 666 {path}`"
            except OSError:  # no file: the folder is what we may not write
                folder = next(p for p in path.parents if p.exists())
                fix = f"ask root to make {folder} writable by every user (`chmod 1777`, like /tmp)"
        raise PerflabError(f"cannot open {what} {path}{owner}: {err.strerror}; {fix}{instead}") from None
    info = os.fstat(fd)
    if info.st_uid == os.geteuid() and info.st_mode & 0o666 != 0o666:
        os.fchmod(fd, 0o666)  # the umask (022) made it 0644, and then no other user could open it to lock it
    return fd


@contextmanager
def exclusive(path: Path, busy: str):
    """Hold an exclusive flock(2) on `path`; when another process holds it, print `busy` and wait.

    For the locks that only serialise (a VM's boot, its agent, the image build); the kernel
    releases them when the holder dies, so none can go stale.
    """
    fd = open_shared(path, "the lock file")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"perflab: {busy}; waiting for it", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Ticket:
    """One run that asked for the lock: who, for what, since when (time.time()), and the process behind it."""

    pid: int
    started: int  # the process's start time, so a reused pid is not taken for the waiter
    user: str
    what: str
    since: float

    @classmethod
    def mine(cls, what: str) -> Ticket:
        return cls(os.getpid(), start_time(os.getpid()) or 0, who_am_i(), what, time.time())

    def alive(self) -> bool:
        return alive(self.pid, self.started)

    def describe(self) -> str:
        return f"{self.user}'s {self.what}"


def who_am_i() -> str:
    """The learner's name in a workshop, else the login name."""
    return os.environ.get("PERFLAB_LEARNER") or pwd.getpwuid(os.getuid()).pw_name


def queue_dir() -> Path:
    return lock_path().with_name(lock_path().name + ".queue")


def _shared_folder(folder: Path) -> Path:
    """The queue folder, sticky and writable by every user as /tmp is, made on first use."""
    try:
        folder.mkdir(mode=0o1777, exist_ok=True)
        if folder.stat().st_uid == os.geteuid():
            os.chmod(folder, 0o1777)  # the umask trimmed mkdir's mode
    except OSError as err:
        raise PerflabError(
            f"cannot use the measurement queue {folder} ({err.strerror}): ask root to "
            f"`chmod 1777 {folder}`, or set PERFLAB_LOCK to a file in a folder every user can write"
        ) from None
    return folder


def _tickets() -> list[Ticket]:
    """Every live ticket, oldest first; dead ones are skipped (only their owner or root can delete them)."""
    found = []
    for path in sorted(queue_dir().glob("*.ticket")):
        try:
            ticket = Ticket(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if ticket.alive():
            found.append(ticket)
    return found


@contextmanager
def _in_line(ticket: Ticket):
    folder = _shared_folder(queue_dir())
    path = folder / f"{time.time_ns():020d}-{ticket.pid}.ticket"
    path.write_text(json.dumps(asdict(ticket)))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def expected_seconds(what: str) -> float | None:
    """How long the last run of `what` held the lock, if any run recorded it, else what the manifest expects."""
    try:
        measured = json.loads((queue_dir() / "durations").read_text()).get(what)
    except (OSError, ValueError, AttributeError):
        measured = None
    return measured if measured is not None else manifest_seconds(what)


def manifest_seconds(what: str) -> float | None:
    """What the lab manifest expects of a lab run (`perflab run NAME [--quick]`), until one is measured here."""
    run = run_named(what)
    return run[0].expected_s.of(quick=run[1]) if run else None


def _record_duration(what: str, seconds: float) -> None:
    """Best effort: an estimate is a courtesy, never a reason for a measurement to fail."""
    try:
        fd = open_shared(_shared_folder(queue_dir()) / "durations", "the durations file")
    except PerflabError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            known = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
        except ValueError:
            known = {}
        known[what] = round(seconds, 1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(known).encode(), 0)
    finally:
        os.close(fd)


def place_in_line(mine: Ticket, holder: Ticket | None, now: float) -> str:
    """"2nd in line, about 40 s (now: alice's perflab run loop-alignment)": what a waiter is shown."""
    ahead = [t for t in _tickets() if (t.since, t.pid) < (mine.since, mine.pid)]
    waits = [expected_seconds(t.what) for t in ahead]
    if holder is not None:  # a run past what it usually takes has no estimate left
        running, ran = expected_seconds(holder.what), now - holder.since
        waits.append(None if running is None or ran > running else running - ran)
    estimate = estimate_and_bound(waits, [None]) if waits else "no estimate yet"  # a lock file's holder has no limit
    return describe_place(len(ahead) + 1, estimate, holder.describe() if holder else "a run finishing")


def estimate_and_bound(estimates: list[float | None], limits: list[float | None]) -> str:
    """"about 40 s, at most 130 s": the estimate where every turn ahead has one, the bound where every one has a
    limit (root's turns have none)."""
    estimate = f"about {max(sum(estimates), 1):.0f} s" if None not in estimates else "no estimate yet"
    return estimate + (f", at most {sum(limits):.0f} s" if None not in limits else "")


def describe_place(place: int, estimate: str, now: str) -> str:
    """"2nd in line, about 40 s (now: alice's perflab run loop-alignment)", as both queues say it."""
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(place if place < 20 else place % 10, "th")
    return f"{place}{suffix} in line, {estimate} (now: {now})"


def _holder(fd: int) -> Ticket | None:
    try:
        return Ticket(**json.loads(os.pread(fd, 1000, 0)))
    except (ValueError, TypeError):
        return None


@contextmanager
def measurement_lock(what: str, wait: bool = True):
    """Hold the machine-wide measurement lock while the block runs; queue for it in order when it is busy.

    In a workshop the turn comes from its queue service instead (perflab.turns), with a time limit.
    With wait=False a busy lock raises PerflabError at once instead of waiting.
    """
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    queue = socket_path()
    with _noting_wait() as granted, turn(queue, what, wait) if queue else _lock_file(what, wait) as held:
        granted()
        _held.depth, _held.turn = 1, held
        try:
            yield
        finally:
            _held.depth, _held.turn = 0, None


def measuring_on(cpus: list[int]) -> None:
    """Within a workshop's turn, ask the queue to move the rest of the class off the CPUs about to be measured (where
    the machine has others to spare), and say what it did; outside a workshop, nothing."""
    held = getattr(_held, "turn", None)
    if held is not None and cpus:
        said = held.measuring_on(cpus)
        if said:
            print(f"perflab: {said}", file=sys.stderr, flush=True)


@contextmanager
def _noting_wait() -> Iterator[Callable[[], None]]:
    """Keep PERFLAB_WAITED's file (a grading kernel's) up to date with the time this process has waited for its turn:
    "TOTAL" between waits, "TOTAL SINCE" while waiting (CLOCK_MONOTONIC, the same in every process), so that a
    grade's budget leaves the wait out even while it lasts. Yields the call that marks the turn as granted."""
    path = os.environ.get("PERFLAB_WAITED")
    if not path:
        yield lambda: None
        return
    try:
        total = float(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        total = 0.0
    asked = time.monotonic()
    Path(path).write_text(f"{total:.3f} {asked:.3f}")
    granted = []

    def grant() -> None:
        granted.append(time.monotonic())
        Path(path).write_text(f"{total + granted[0] - asked:.3f}")

    try:
        yield grant
    finally:
        if not granted:  # refused or interrupted while waiting
            grant()


@contextmanager
def _lock_file(what: str, wait: bool):
    """The lock file's way: flock(2), in line with a ticket when it is busy; the run's duration recorded."""
    fd = open_shared(lock_path(), "the measurement lock", ", or set PERFLAB_LOCK to one file every user here can write")
    mine = Ticket.mine(what)
    try:
        if not _try_lock(fd):
            holder = _holder(fd)
            if not wait:
                raise PerflabError(
                    "another measurement is running "
                    f"({holder.describe() + f', pid {holder.pid}' if holder else 'unknown'}); "
                    "wait for it to finish, or drop --no-wait to queue behind it"
                )
            _wait_in_line(fd, mine)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(mine)).encode(), 0)
        began = time.monotonic()
        try:
            yield
            _record_duration(what, time.monotonic() - began)  # not reached by a run that failed part-way
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _wait_in_line(fd: int, mine: Ticket) -> None:
    """Wait with a ticket; try the lock only when first in line, so the lock goes in the order asked."""
    shown, shown_at = "", 0.0
    with _in_line(mine):
        while True:
            first = all((t.since, t.pid) >= (mine.since, mine.pid) for t in _tickets())
            if first and _try_lock(fd):
                return
            line = place_in_line(mine, _holder(fd), time.time())
            place = line.split(",")[0]
            if place != shown.split(",")[0] or time.monotonic() - shown_at > REPEAT_PLACE_S:
                print(f"perflab: waiting to measure: {line}", file=sys.stderr, flush=True)
                shown, shown_at = line, time.monotonic()
            time.sleep(0.5)
