"""The learner's workspace: their own copies of the notebooks, in work/, which git ignores.

The course's notebooks (labs/*/lab.ipynb, exercises/*.ipynb) stay as git has them,
so `git pull` brings course updates without conflicts. On first start the
notebooks are copied into work/; a copy that exists is never overwritten.
`perflab reset EXERCISE` is the one way back to a fresh copy, and it keeps the
old one in work/.backup/. Progress lives here too (work/progress.txt).
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import PerflabError
from .manifest.exercises import load_manifest
from .manifest.labs import labs
from .paths import REPO_ROOT, workspace_dir


@dataclass(frozen=True)
class Prepared:
    copied: list[Path]
    kept: list[Path]

    def summary(self) -> str:
        return (f"workspace {workspace_dir()}: {len(self.copied)} notebooks copied, "
                f"{len(self.kept)} of yours kept as they are")


def course_notebooks() -> list[tuple[Path, Path]]:
    """(the course's notebook, the learner's copy) for every lab and exercise notebook."""
    pairs = [(REPO_ROOT / lab.folder / "lab.ipynb", lab_notebook(lab.folder)) for lab in labs() if lab.ready]
    pairs += [(exercise.exercise_path, exercise.learner_path) for exercise in load_manifest().exercises]
    return pairs


def lab_notebook(folder: str) -> Path:
    """The learner's copy of a lab's notebook; `folder` as in labs/manifest.toml (labs/NN-name)."""
    return workspace_dir() / folder / "lab.ipynb"


def prepare() -> Prepared:
    """Copy every course notebook the learner does not have yet; never touch one they have."""
    copied, kept = [], []
    for course, mine in course_notebooks():
        if mine.exists():
            kept.append(mine)
            continue
        try:
            mine.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(course, mine)
        except OSError as err:
            raise PerflabError(f"cannot write {mine} ({err.strerror}): make {workspace_dir()} a writable "
                               "folder or set PERFLAB_WORKSPACE to one you own") from None
        copied.append(mine)
    return Prepared(copied, kept)


def reset(course: Path, mine: Path) -> Path | None:
    """Replace the learner's copy with a fresh one; the old copy moves to work/.backup/ (returned), never lost."""
    backup = None
    try:
        if mine.exists():
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            backup = workspace_dir() / ".backup" / f"{mine.stem}-{stamp}{mine.suffix}"
            backup.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(mine, backup)  # the backup first: if it fails, the learner's copy is untouched
        mine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(course, mine)
    except OSError as err:
        raise PerflabError(f"cannot write {err.filename or mine} ({err.strerror}): make {workspace_dir()} a "
                           "writable folder or set PERFLAB_WORKSPACE to one you own") from None
    return backup
