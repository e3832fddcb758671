"""One measurement at a time on this machine.

Two benchmarks running together spoil each other's numbers, so every
measurement holds an exclusive flock(2) on one machine-wide file. The kernel
drops the lock when the holder exits, even on a crash or kill -9, so a stale
lock cannot outlive its process.
"""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from .errors import PerflabError

_held = threading.local()  # re-entrant within a process: a lab run calls measurements that also lock


def lock_path() -> Path:
    if "PERFLAB_LOCK" in os.environ:
        return Path(os.environ["PERFLAB_LOCK"])
    run_lock = Path("/run/lock")
    folder = run_lock if os.access(run_lock, os.W_OK) else Path(tempfile.gettempdir())
    return folder / "perflab-measure.lock"


@contextmanager
def exclusive(path: Path, busy: str):
    """Hold an exclusive flock(2) on `path`; when another process holds it, print `busy` and wait.

    For the locks that only serialise (a VM's boot, its agent, the image build); the kernel
    releases them when the holder dies, so none can go stale.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
    path = lock_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
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
