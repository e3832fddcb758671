"""For authors: make learners' notebooks from the solutions, and prove the exercises work.

The author check (run in `make test`) asserts, as rustlings' does, that
every reference solution passes, every untouched exercise fails, every
learner notebook is exactly what the generator makes of its solution, every
written question has its rubric line, and no notebook sits in exercises/ or
solutions/ without a manifest entry; and for the cases, that the generator's
own fix passes and an untouched case fails (perflab.cases.check).
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import nbformat

from ..cases.check import author_problems
from ..manifest.exercises import BEGIN, END, EXERCISES_DIR, SOLUTIONS_DIR, Exercise, Manifest, load_manifest
from ..paths import environment
from . import FAILED, grade
from .written import questions

GRADINGS_AT_ONCE = 2
ROUNDS_IN_A_CHECK = "10"
# An untouched exercise's every answer still raises NotImplementedError (its cells are the generator's stubs), so
# it fails whatever its notebook measured: its lab runs stop at two rounds, as the notebook tests' do.
ROUNDS_UNTOUCHED = "2"


def strip_solutions(source: str, stub: str) -> str:
    """Replace every BEGIN/END SOLUTION region with the stub, keeping its indentation."""
    out: list[str] = []
    inside = False
    for line in source.splitlines():
        begin = BEGIN.match(line)
        if begin and not inside:
            inside = True
            out += [begin.group(1) + stub_line for stub_line in stub.splitlines()]
        elif END.match(line) and inside:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def learner_copy(solution: nbformat.NotebookNode, manifest: Manifest) -> nbformat.NotebookNode:
    """The learner's notebook: solutions replaced by stubs, outputs cleared."""
    notebook = copy.deepcopy(solution)
    for cell in notebook.cells:
        stub = manifest.stub_code if cell.cell_type == "code" else manifest.stub_markdown
        cell.source = strip_solutions(cell.source, stub)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return notebook


def generate_all() -> list[Path]:
    manifest = load_manifest()
    written = []
    for exercise in manifest.exercises:
        solution = nbformat.read(exercise.solution_path, as_version=4)
        exercise.exercise_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(learner_copy(solution, manifest), exercise.exercise_path)
        written.append(exercise.exercise_path)
    return written


@contextmanager
def check_environment() -> Iterator[None]:
    """How the author check grades: notebooks that honour quick_mode() measure briefly, and a lab run stops at
    ROUNDS_IN_A_CHECK rounds, decided or not. A reference solution must pass whatever verdict a learner's run
    ends in, and an undecided race no longer costs the check a lab's whole quick budget. The graders' own races
    keep their plans: the check proves correctness, not patience."""
    with environment("PERFLAB_QUICK", "1"), environment("PERFLAB_RUNS", ROUNDS_IN_A_CHECK):
        yield


def author_check() -> list[str]:
    """Every problem found, one line each; [] when the exercises are sound."""
    with check_environment():
        problems = listing_problems()
        # Two exercises at a time: most of a grading is a kernel starting and importing, and every measurement
        # in it (the notebook's or the grader's) queues for the machine-wide measurement lock anyway.
        with ThreadPoolExecutor(max_workers=GRADINGS_AT_ONCE) as pool:
            for found in pool.map(grading_problems, load_manifest().exercises):
                problems += found
        return problems + author_problems()


def listing_problems() -> list[str]:
    """What the check finds without grading: stray notebooks, hints that are not questions, rubric lines that do
    not match the written questions, learner copies that are not what the generator makes."""
    manifest = load_manifest()
    problems: list[str] = []
    listed = {e.notebook for e in manifest.exercises}
    for folder in (EXERCISES_DIR, SOLUTIONS_DIR):
        for path in folder.rglob("*.ipynb"):
            if ".ipynb_checkpoints" not in path.parts and str(path.relative_to(folder)) not in listed:
                problems.append(f"stray notebook {path}: add it to exercises/manifest.toml or delete it")
    for exercise in manifest.exercises:
        problems += [f"{exercise.name}: hint is not a question: {h!r}" for h in exercise.hints if not h.endswith("?")]
        solution = nbformat.read(exercise.solution_path, as_version=4)
        learner = nbformat.read(exercise.exercise_path, as_version=4)
        asked = len(questions(learner, manifest.stub_markdown))
        if len(exercise.rubric) != asked:
            problems.append(
                f"{exercise.name}: {asked} written questions but {len(exercise.rubric)} rubric lines in "
                "exercises/manifest.toml: give one per question, in the notebook's order"
            )
        expected = [c.source for c in learner_copy(solution, manifest).cells]
        if [c.source for c in learner.cells] != expected:
            problems.append(
                f"{exercise.exercise_path} differs from its solution's learner copy: run `perflab exercises generate`"
            )
    return problems


def grading_problems(exercise: Exercise) -> list[str]:
    """The reference solution passes and the untouched exercise fails (two gradings, under check_environment)."""
    return solution_problems(exercise) + untouched_problems(exercise)


def solution_problems(exercise: Exercise) -> list[str]:
    """The reference solution passes (or is inconclusive, on a machine that cannot show it or was busy)."""
    solved = grade(exercise.name, exercise.solution_path, record=False)
    if solved.status == FAILED:
        return [f"{exercise.name}: the reference solution does not pass:\n{solved.render()}"]
    return []


def untouched_problems(exercise: Exercise) -> list[str]:
    """The untouched exercise fails. Its lab runs stop at ROUNDS_UNTOUCHED: every answer of it raises, so what it
    measures cannot change its grade, nor can a busy machine."""
    untouched = grade(exercise.name, exercise.exercise_path, record=False, env={"PERFLAB_RUNS": ROUNDS_UNTOUCHED})
    if untouched.status != FAILED:
        return [f"{exercise.name}: the untouched exercise does not fail ({untouched.status}); its checks test nothing"]
    return []
