"""The exercise manifest, exercises/manifest.toml.

Schema (format_version 3: budget_s is new in 3):
  format_version   int, must be 3
  stub_code        text that replaces a solution region in a code cell
  stub_markdown    text that replaces a solution region in a Markdown cell
  [[exercise]]     one table per exercise:
    name       stable id used by `perflab grade NAME`; the lab that lists it
               in labs/manifest.toml is its lab
    notebook   path below exercises/ (generated from the solution), solutions/
               (reference) and work/exercises/ (the learner's own copy)
    checks     a function in its lab's exercises.py; it takes the notebook's
               namespace and returns a list of Check
    hints      questions, shown when a check fails, one more each attempt
    budget_s   seconds the grader gives the notebook, all its cells together,
               in its fresh kernel (about 3x what the reference solution
               took here); `perflab grade --timeout` gives another
    rubric     for the instructor, one line per written question (a Markdown
               solution region), in the notebook's order: what a good answer
               says. The class dashboard shows it beside each learner's answer;
               the author check wants one for every written question
    answers    (read by tests/test_answers.py only) what the book must not show
"""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import PerflabError
from ..paths import REPO_ROOT, workspace_dir
from .labs import LabInfo, lab_of_exercise

FORMAT_VERSION = 3
# A solution region: `### BEGIN SOLUTION` to `### END SOLUTION` in code, the same words (or in <!-- -->) in Markdown.
BEGIN = re.compile(r"^(\s*)(?:###|<!--)?\s*BEGIN SOLUTION.*$")
END = re.compile(r"^\s*(?:###|<!--)?\s*END SOLUTION.*$")
EXERCISES_DIR = REPO_ROOT / "exercises"
SOLUTIONS_DIR = REPO_ROOT / "solutions"


@dataclass(frozen=True)
class Exercise:
    name: str
    notebook: str
    checks: str
    hints: tuple[str, ...]
    budget_s: float
    rubric: tuple[str, ...] = ()

    @property
    def lab(self) -> LabInfo:
        return lab_of_exercise(self.name)

    @property
    def exercise_path(self) -> Path:
        return EXERCISES_DIR / self.notebook

    @property
    def learner_path(self) -> Path:
        return workspace_dir() / "exercises" / self.notebook

    @property
    def solution_path(self) -> Path:
        return SOLUTIONS_DIR / self.notebook

    def check_function(self) -> Callable:
        return getattr(importlib.import_module(f"{self.lab.package}.exercises"), self.checks)


@dataclass(frozen=True)
class Manifest:
    stub_code: str
    stub_markdown: str
    exercises: tuple[Exercise, ...]

    def find(self, name: str) -> Exercise:
        for exercise in self.exercises:
            if exercise.name == name:
                return exercise
        names = ", ".join(e.name for e in self.exercises)
        raise PerflabError(f"unknown exercise {name!r}; choose one of: {names}")


def load_manifest(path: Path = EXERCISES_DIR / "manifest.toml") -> Manifest:
    data = tomllib.loads(path.read_text())
    if data.get("format_version") != FORMAT_VERSION:
        raise PerflabError(f"{path}: format_version must be {FORMAT_VERSION}; update perflab or the manifest")
    for entry in data["exercise"]:
        budget = entry.get("budget_s")
        if not isinstance(budget, (int, float)) or isinstance(budget, bool) or not 1 <= budget <= 86400:
            raise PerflabError(f"{path}: exercise {entry.get('name')!r} needs budget_s, the seconds its notebook may "
                               f"take when graded (1 to 86400), not {budget!r}")
        rubric = entry.get("rubric", [])
        if not isinstance(rubric, list) or not all(isinstance(line, str) and line.strip() for line in rubric):
            raise PerflabError(f"{path}: exercise {entry.get('name')!r}: rubric is a list of lines of text, one per "
                               f"written question, not {rubric!r}")
    exercises = tuple(Exercise(e["name"], e["notebook"], e["checks"], tuple(e.get("hints", ())), float(e["budget_s"]),
                               tuple(e.get("rubric", ()))) for e in data["exercise"])
    return Manifest(data["stub_code"], data["stub_markdown"], exercises)
