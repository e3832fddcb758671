"""The journal of system changes: every knob perflab changes is put back, however the run ends.

Before a knob is written, its old value is appended to the journal and
fsync'd. Then:

- the SystemChanges block that made the change restores it when the block
  ends: normally, on an exception, on Ctrl-C (SIGINT), SIGTERM or SIGHUP;
- after a kill -9 nothing in the process runs, so the next `perflab run`
  (under the measurement lock, before it measures) and `perflab system reset`
  (under the journal's lock only: it never waits behind a measurement)
  restore every entry whose process is gone, and say what they restored;
- a knob that a live run changed after the entry being restored stays as that
  run set it: its entry takes over the older old value, and puts that back
  when the run ends, so a restore never pulls a knob from under a live run;
- `perflab system tune` writes entries owned by "tune": they stay until
  `perflab system reset`.

The journal is /run/perflab/knobs.journal inside the SysRoot. /run is emptied
at boot, just when the kernel forgets the changes too, so a journal never
outlives the changes it records.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Callable, Iterator

from .errors import PerflabError
from .knobs import KNOBS, Knob
from .processes import alive, start_time
from .sysfs import SysRoot, default_root

JOURNAL = "/run/perflab/knobs.journal"
RUN, TUNE, WORKSHOP = "run", "tune", "workshop"


@dataclass(frozen=True)
class Entry:
    kind: str
    target: str
    old: str
    owner: str  # RUN: restored when its process ends; TUNE: kept until `perflab system reset`;
    #             WORKSHOP: kept until `perflab workshop down`
    pid: int
    started: int  # the process's start time (clock ticks after boot): a reused pid is not the same process

    def knob(self, root: SysRoot, kinds: dict[str, type[Knob]] = KNOBS) -> Knob:
        return kinds[self.kind](self.target, root)

    def alive(self) -> bool:
        return alive(self.pid, self.started)

    def puts_back(self) -> str:
        """Who puts this entry's old value back, and when, in words."""
        when = {RUN: f"the run that changed it since (pid {self.pid}) puts back {self.old!r} when it ends",
                TUNE: f"`perflab system reset` puts back {self.old!r}",
                WORKSHOP: f"`perflab workshop down` puts back {self.old!r}"}
        return when[self.owner]


class Journal:
    def __init__(self, root: SysRoot | None = None, path: str = JOURNAL, kinds: dict[str, type[Knob]] = KNOBS):
        self.root = root or default_root()
        self.path = self.root.path(path)
        self.kinds = kinds  # the knobs its entries may name: the kernel's, and a workshop's accounts in its own

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The journal's own lock: every change and every restore holds it, and nothing else."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as err:
            raise PerflabError(f"cannot use the journal folder {self.path.parent}: {err.strerror}; changing system "
                               "settings needs root: run as root or with sudo") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def entries(self) -> list[Entry]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                found.append(Entry(**json.loads(line)))
            except (ValueError, TypeError):
                print(f"perflab: skipping a damaged line of {self.path}: {line[:80]!r}", file=sys.stderr)
        return found

    def append(self, entry: Entry) -> None:
        """Record the old value durably (within locked()): it must be on disk before the knob changes."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(asdict(entry)) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def restore(self, which: Callable[[Entry], bool]) -> list[str]:
        """Put back every chosen entry, newest first; the journal keeps only what could not be restored.

        A knob that a kept entry changed later is left as it is: that entry takes over the chosen one's old
        value (and says so on stderr)."""
        done, kept = [], []
        with self.locked():
            entries = self.entries()
            for entry in reversed(entries):
                if not which(entry):
                    kept.append(entry)
                    continue
                later = next((i for i, k in enumerate(kept) if (k.kind, k.target) == (entry.kind, entry.target)), None)
                if later is not None:
                    kept[later] = replace(kept[later], old=entry.old)
                    print(
                        f"perflab: left {entry.kind} {entry.target}".rstrip() + f" as it is: {kept[later].puts_back()}",
                        file=sys.stderr,
                    )
                    continue
                try:
                    entry.knob(self.root, self.kinds).restore(entry.old)
                    done.append(f"{entry.kind} {entry.target}".strip() + f" back to {entry.old!r}")
                except PerflabError as err:
                    kept.append(entry)
                    print(f"perflab: could not restore {entry.kind} {entry.target}: {err}", file=sys.stderr)
            if len(kept) < len(entries):  # else unchanged: a user who may not write it has nothing to write
                self._rewrite(list(reversed(kept)))
        return done

    def _rewrite(self, entries: list[Entry]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text("".join(json.dumps(asdict(e)) + "\n" for e in entries))
        os.replace(temporary, self.path)


def recover(root: SysRoot | None = None) -> list[str]:
    """Restore what runs that are gone (kill -9, a crash) left changed; print and return what was restored."""
    journal = Journal(root)
    if not journal.path.exists():
        return []
    restored = journal.restore(lambda e: e.owner == RUN and not e.alive())
    for line in restored:
        print(f"perflab: restored {line}: a run changed it and ended without restoring it", file=sys.stderr)
    return restored


def reset(root: SysRoot | None = None) -> list[str]:
    """Restore `perflab system tune`'s settings and any dead run's changes; a live run's stay with it."""
    journal = Journal(root)
    if not journal.path.exists():
        return []
    return journal.restore(lambda e: e.owner == TUNE or (e.owner == RUN and not e.alive()))


# ANCHOR: changes
class SystemChanges:
    """Knob changes that are undone when the block ends, however it ends.

        with SystemChanges() as changes:
            changes.set(RqAffinity("vda"), "2")
            ...measure...
    """

    def __init__(self, owner: str = RUN, root: SysRoot | None = None, journal: Journal | None = None):
        self.owner = owner
        self.journal = journal or Journal(root)
        self.root = self.journal.root
        self._signals = signals_end_the_process() if owner == RUN else nullcontext()
        self._journaled: set[tuple[str, str]] = set()  # knobs whose first value this block has on disk

    def set(self, knob: Knob, value: str) -> None:
        """Write `value`, its old value journaled first; once a block, as the first value is the one put back."""
        with self.journal.locked():  # no restore comes between reading the old value and writing the new one
            old = knob.read()
            if old is None:
                raise PerflabError(f"{knob.label} is not available on this machine ({knob.path} is missing)")
            if old == value:
                return
            if (knob.kind, knob.target) not in self._journaled:
                self.journal.append(Entry(knob.kind, knob.target, old, self.owner, os.getpid(),
                                          start_time(os.getpid()) or 0))
                self._journaled.add((knob.kind, knob.target))
            knob.write(value)
    # ANCHOR_END: changes

    def __enter__(self) -> SystemChanges:
        self._signals.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.owner == RUN and self._journaled:  # a block that changed nothing needs no journal: a learner
                pid = os.getpid()  # may not even open its folder (/run/perflab, root's, gone after a reboot)
                self.journal.restore(lambda e: e.owner == RUN and e.pid == pid)
        finally:
            self._signals.__exit__(None, None, None)


@contextmanager
def signals_end_the_process():
    """Within: SIGTERM and SIGHUP raise SystemExit (in the main thread), so every `finally` runs; then as before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, _exit_on_signal) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _exit_on_signal(number: int, _frame) -> None:
    """SIGTERM and SIGHUP end the process as SystemExit does, so every `finally` (and restore) runs."""
    raise SystemExit(128 + number)
