"""Progress: a plain text file the learner can read, edit and reset.

One line per graded attempt: "<exercise> <status> <UTC time>". The last line
for an exercise is its current status.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from ..errors import PerflabError
from ..paths import workspace_dir

STATUSES = ("passed", "failed", "inconclusive")


def progress_path() -> Path:
    return Path(os.environ.get("PERFLAB_PROGRESS", workspace_dir() / "progress.txt"))


def record(exercise: str, status: str) -> None:
    path = progress_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(f"{exercise} {status} {dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}\n")
    except OSError as err:
        raise PerflabError(f"progress not recorded: cannot append to {path} ({err.strerror}); "
                           "fix its permissions or set PERFLAB_PROGRESS to a file you own") from None


def entries(path: Path | None = None) -> list[tuple[str, str]]:
    """(exercise, status) for every attempt, oldest first, from this learner's file or `path`. Lines that are not
    "<name> <status> ..." are skipped: the file is the learner's to edit, and a stray line must not cost them their progress."""
    path = path or progress_path()
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    except OSError as err:
        raise PerflabError(f"cannot read {path} ({err.strerror}): fix its permissions, or move it away "
                           "to start a new progress file") from None
    fields = (line.split() for line in text.splitlines())
    return [(f[0], f[1]) for f in fields if len(f) >= 2 and f[1] in STATUSES]


def current(path: Path | None = None) -> dict[str, str]:
    """The latest status of each exercise attempted."""
    return dict(entries(path))


def failures(exercise: str) -> int:
    return sum(1 for name, status in entries() if name == exercise and status == "failed")


def reset() -> None:
    progress_path().unlink(missing_ok=True)

