"""Progress: a plain text file the learner can read, edit and reset.

One line per graded attempt: "<exercise> <status> <UTC time>". An exercise's
status is its best grade: passed once any grade passed, and a pass stays passed;
until then, its latest grade. The grades after the first pass are listed beside
it (a later inconclusive or failed grade does not take the pass away).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import PerflabError
from ..paths import workspace_dir
from ..results import write_atomic

STATUSES = ("passed", "failed", "inconclusive")
LATER_SHOWN = 4  # later grades listed beside a pass; more are counted


@dataclass(frozen=True)
class Standing:
    """Where one exercise stands: its status (the best grade), the grades after its first pass, and how many."""

    status: str
    later: tuple[str, ...]
    grades: int

    def later_text(self) -> str:
        """ "later: failed, inconclusive", the newest last; "" when nothing came after."""
        if not self.later:
            return ""
        hidden = len(self.later) - LATER_SHOWN
        shown = self.later[-LATER_SHOWN:]
        return "later: " + (f"{hidden} more, " if hidden > 0 else "") + ", ".join(shown)


def progress_path() -> Path:
    return Path(os.environ.get("PERFLAB_PROGRESS", workspace_dir() / "progress.txt"))


def record(exercise: str, status: str) -> None:
    path = progress_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(f"{exercise} {status} {dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}\n")
    except OSError as err:
        raise PerflabError(
            f"progress not recorded: cannot append to {path} ({err.strerror}); "
            "fix its permissions or set PERFLAB_PROGRESS to a file you own"
        ) from None


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    except OSError as err:
        raise PerflabError(
            f"cannot read {path} ({err.strerror}): fix its permissions, or move it away to start a new progress file"
        ) from None


def _attempt(line: str) -> tuple[str, str] | None:
    fields = line.split()
    return (fields[0], fields[1]) if len(fields) >= 2 and fields[1] in STATUSES else None


def entries(path: Path | None = None, text: str | None = None) -> list[tuple[str, str]]:
    """(exercise, status) for every attempt, oldest first, from this learner's file, `path`, or a file's `text`
    read already (as root reads a learner's). Lines that are not "<name> <status> ..." are skipped: the file is the
    learner's to edit, and a stray line must not cost them their progress."""
    text = _text(path or progress_path()) if text is None else text
    return [found for line in text.splitlines() if (found := _attempt(line))]


def standing(path: Path | None = None, text: str | None = None) -> dict[str, Standing]:
    """Each exercise attempted, by name: its best grade and the grades after its first pass."""
    grades: dict[str, list[str]] = {}
    for name, status in entries(path, text):
        grades.setdefault(name, []).append(status)
    found = {}
    for name, statuses in grades.items():
        if "passed" in statuses:
            first = statuses.index("passed")
            found[name] = Standing("passed", tuple(statuses[first + 1 :]), len(statuses))
        else:
            found[name] = Standing(statuses[-1], (), len(statuses))
    return found


def current(path: Path | None = None, text: str | None = None) -> dict[str, str]:
    """The status of each exercise attempted: passed once a grade passed, else its latest grade."""
    return {name: found.status for name, found in standing(path, text).items()}


def failures(exercise: str) -> int:
    return sum(1 for name, status in entries() if name == exercise and status == "failed")


def forget(exercise: str) -> int:
    """Remove an exercise's grades from the progress file, keeping every other line as it is; how many went."""
    path = progress_path()
    lines = _text(path).splitlines(keepends=True)
    kept = [line for line in lines if (_attempt(line) or ("",))[0] != exercise]
    if len(kept) < len(lines):
        try:
            write_atomic(path, "".join(kept))
        except OSError as err:
            raise PerflabError(f"cannot rewrite {path} ({err.strerror}): fix its permissions") from None
    return len(lines) - len(kept)


def reset() -> None:
    progress_path().unlink(missing_ok=True)
