"""Where the learner stands: every lab with its last verdict, every exercise with its status.

One source for `perflab list`, `perflab progress` and the landing page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .formatting import table
from .grading import progress
from .manifest.exercises import load_manifest
from .manifest.labs import labs
from .results import last_verdict
from .workspace import lab_notebook


@dataclass(frozen=True)
class LabRow:
    number: int
    name: str
    title: str
    ready: bool
    chapter: str        # relative to the built book, e.g. labs/01-core-to-core.html
    notebook: Path      # the learner's copy
    last_verdict: str | None


@dataclass(frozen=True)
class ExerciseRow:
    name: str
    lab: str
    lab_number: int
    title: str
    notebook: Path      # the learner's copy
    status: str         # the best grade (progress.Standing): passed | failed | inconclusive | not attempted
    later: str = ""     # the grades after the first pass: "later: failed, inconclusive"


def lab_rows() -> list[LabRow]:
    return [LabRow(lab.number, lab.name, lab.title, lab.ready, lab.chapter.removesuffix(".md") + ".html",
                   lab_notebook(lab.folder), last_verdict(lab.name) if lab.ready else None) for lab in labs()]


def exercise_rows() -> list[ExerciseRow]:
    """Lab by lab, each lab's exercises in the order its manifest entry lists them (the order learners meet them)."""
    standing = progress.standing()
    exercises = sorted(load_manifest().exercises, key=lambda e: (e.lab.number, e.lab.exercises.index(e.name)))
    rows = []
    for e in exercises:
        found = standing.get(e.name)
        rows.append(ExerciseRow(e.name, e.lab.name, e.lab.number, notebook_title(e.exercise_path), e.learner_path,
                                found.status if found else "not attempted", found.later_text() if found else ""))
    return rows


def notebook_title(path: Path) -> str:
    """The notebook's first heading, without its "Exercise:" prefix."""
    cells = json.loads(path.read_text())["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else path.stem
    title = first.lstrip("# ").removeprefix("Exercise: ").strip()
    return title[:1].upper() + title[1:]


def render_exercises(rows: list[ExerciseRow]) -> str:
    passed = sum(r.status == "passed" for r in rows)
    return "\n".join([table([["lab", "exercise", "status", "notebook"],
                             *[[f"{r.lab_number} {r.lab}", r.name, r.status + (f" ({r.later})" if r.later else ""),
                                str(r.notebook)] for r in rows]]),
                      f"{passed} of {len(rows)} passed (progress in {progress.progress_path()}; a pass stays passed, "
                      "later grades beside it)"])


def render() -> str:
    """The text of `perflab list`."""
    lab_table = table([["#", "lab", "state", "last verdict", "title"],
                       *[[str(r.number), r.name, "ready" if r.ready else "coming",
                          r.last_verdict or ("not run" if r.ready else "-"), r.title] for r in lab_rows()]])
    return "\n\n".join([lab_table, render_exercises(exercise_rows()),
                        "next: perflab run LAB --quick · perflab grade EXERCISE · perflab hint EXERCISE"])
