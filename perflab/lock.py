"""One measurement at a time on this machine.

Two benchmarks running together spoil each other's numbers, so every
measurement holds an exclusive flock(2) on one machine-wide file. The kernel
drops the lock when the holder exits, even on a crash or kill -9, so a stale
lock cannot outlive its process.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from .errors import PerflabError

_held = threading.local()  # re-entrant within a process: a lab run calls measurements that also lock


def lock_path() -> Path:
    """The same file for every user and environment, or the lock would not exclude anyone.

    Chosen by the folders' modes, not by this user's access or TMPDIR, which differ between users.
    """
    if "PERFLAB_LOCK" in os.environ:
        return Path(os.environ["PERFLAB_LOCK"])
    try:
        shared = os.stat("/run/lock").st_mode & 0o1777 == 0o1777  # sticky and writable by all, as on Debian
    except OSError:
        shared = False
    return Path("/run/lock" if shared else "/tmp") / "perflab-measure.lock"


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


@contextmanager
def measurement_lock(what: str, wait: bool = True):
    """Hold the machine-wide measurement lock while the block runs.

    With wait=False a busy lock raises PerflabError at once instead of waiting.
    """
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    fd = open_shared(lock_path(), "the measurement lock", ", or set PERFLAB_LOCK to one file every user here can write")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            if not wait:
                raise PerflabError(
                    f"another measurement is running ({holder}); wait for it to finish, or drop --no-wait to queue behind it"
                ) from None
            print(f"perflab: waiting for another measurement to finish ({holder})...", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
