"""A turn to measure, asked of a workshop's measurement queue: measurement_lock's way in a workshop.

The lock file of perflab.lock is fair among users who play by its rules, but anyone who can
open it can hold it forever. In a workshop, measurements queue instead at a root-owned service
(perflab.workshop.turns) over a unix socket: it grants one turn at a time, each with a time
limit, and takes the turn back when the limit is up, whatever the holder does. Here is the
asking side: which queue to ask, the wait with its place in line, and the turn itself, which
ends its own measurement at the limit (SIGALRM, in the main thread) and says why.

One JSON object a line, each way:
  asker: {"what": "perflab run numa-static-data --quick", "wait": true}
  queue: {"busy": "alice's perflab run ..."}      wait was false and someone measures or waits
         {"waiting": "2nd in line, about 40 s (now: alice's perflab run ...)"}   on each change
         {"turn": 120}                            granted, for at most 120 s (null: no limit)
  asker: {"cpus": [0, 1]}                         optional, any number of times: the CPUs it measures on
  queue: {"held_off": "the class runs on CPU 2-7 while this measures on CPU 0-1"}   what it did ("": nothing)
  asker: {"done": true}                           finished (a failed run just closes the socket)
  queue: {"over": 120}                            the turn was taken back at its limit
         {"done": true}                           or: the turn ended in time
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .errors import PerflabError

DEFAULT_SOCKET = Path("/run/perflab-workshop/turns.sock")


class TurnOver(PerflabError):
    """The measurement ran past its turn's limit and was ended so that the next in line could measure."""


def socket_path() -> Path | None:
    """The queue to ask, or None for the lock file: PERFLAB_TURNS when set (empty: none), else a running workshop's."""
    given = os.environ.get("PERFLAB_TURNS")
    if given is not None:
        return Path(given) if given else None
    return DEFAULT_SOCKET if DEFAULT_SOCKET.exists() else None


class Turn:
    """A turn the queue granted, while it lasts."""

    def __init__(self, stream, path: Path):
        self.stream, self.path = stream, path

    def measuring_on(self, cpus: list[int]) -> str:
        """Tell the queue the CPUs the measurement runs on, so that it moves the rest of the class off them where
        the machine has others; the line that says what it did ("" for nothing)."""
        _send(self.stream, {"cpus": sorted(set(cpus))})
        return str(_receive(self.stream, self.path).get("held_off") or "")


@contextmanager
def turn(path: Path, what: str, wait: bool = True):
    """Hold a turn from the queue at `path` while the block runs (it gets the Turn); wait=False raises PerflabError
    when it is busy."""
    with _connect(path) as connection, connection.makefile("rwb", buffering=0) as stream:
        _send(stream, {"what": what, "wait": wait})
        limit = _granted(stream, path)
        with _ended_after(limit, what):
            yield Turn(stream, path)
        _send(stream, {"done": True})
        if "over" in _receive(stream, path):
            print(f"perflab: {what} ran past its turn's limit of {limit:.0f} s and the next in line was let in before "
                  "it ended: its last numbers may be spoiled", file=sys.stderr, flush=True)


def _connect(path: Path) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except OSError as err:
        connection.close()
        raise PerflabError(f"the workshop's measurement queue {path} does not answer ({err.strerror}): ask the "
                           "instructor to run `perflab workshop status`; `perflab workshop up` starts it again, and "
                           "no one's work is lost") from None
    return connection


def _send(stream, message: dict) -> None:
    stream.write(json.dumps(message).encode() + b"\n")


def _receive(stream, path: Path) -> dict:
    line = stream.readline()
    try:
        return json.loads(line)
    except ValueError:
        raise PerflabError(f"the workshop's measurement queue {path} closed the connection: ask the instructor "
                           "whether it is still up (`perflab workshop status`)") from None


def _granted(stream, path: Path) -> float | None:
    """Wait for the turn, showing each new place in line; the turn's limit in seconds (None: no limit)."""
    while True:
        said = _receive(stream, path)
        if "turn" in said:
            return said["turn"]
        if "busy" in said:
            raise PerflabError(f"another measurement is running ({said['busy']}); wait for it to finish, or drop "
                               "--no-wait to queue behind it")
        print(f"perflab: waiting to measure: {said.get('waiting', said)}", file=sys.stderr, flush=True)


@contextmanager
def _ended_after(limit: float | None, what: str):
    """Raise TurnOver in the block when it outlives the limit (only the main thread can be interrupted so; the
    queue takes the turn back at the limit anyway). A timer the caller had set runs on afterwards."""
    if limit is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def over(_number, _frame):
        raise TurnOver(f"{what} ran past its turn's limit of {limit:.0f} s and was ended so that the next in line "
                       "can measure; run it again (--quick is shorter), or ask the instructor for a longer limit")

    previous = signal.signal(signal.SIGALRM, over)
    before, _ = signal.setitimer(signal.ITIMER_REAL, limit)
    began = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if before:
            signal.setitimer(signal.ITIMER_REAL, max(before - (time.monotonic() - began), 0.001))
