"""Progress: a plain text file the learner can read, edit and reset.

One line per graded attempt: "<exercise> <status> <UTC time>". The last line
for an exercise is its current status.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from ..paths import REPO_ROOT


def progress_path() -> Path:
    return Path(os.environ.get("PERFLAB_PROGRESS", REPO_ROOT / "progress.txt"))


def record(exercise: str, status: str) -> None:
    path = progress_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(f"{exercise} {status} {dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}\n")


def entries() -> list[tuple[str, str]]:
    """(exercise, status) for every attempt, oldest first."""
    path = progress_path()
    if not path.exists():
        return []
    return [(p[0], p[1]) for p in (line.split() for line in path.read_text().splitlines()) if len(p) >= 2]


def current() -> dict[str, str]:
    """The latest status of each exercise attempted."""
    return dict(entries())


def failures(exercise: str) -> int:
    return sum(1 for name, status in entries() if name == exercise and status == "failed")


def reset() -> None:
    progress_path().unlink(missing_ok=True)


def render() -> str:
    from .manifest import load_manifest

    status = current()
    lines = [f"{e.name:28} {status.get(e.name, 'not attempted')}" for e in load_manifest().exercises]
    return "\n".join(lines + [f"(from {progress_path()})"])
