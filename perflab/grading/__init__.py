"""Autograding: run a learner's notebook in a fresh kernel, check what it produced, say expected and got.

The learner's code runs in its own kernel (perflab.grading.kernel); the checks
run here, on the plain data that came back, and recompute every expected value
themselves: from raw result files whose provenance holds, from recorded data,
or from a fresh measurement.

A check passes, fails, or is inconclusive (a fresh measurement disagreed in a
way a rerun can settle, or was taken on a busy machine): inconclusive is never
reported as a failure. A grade with a cell error in it never passes, nor one
whose written question is unanswered (perflab.grading.written): "code passed,
written answer missing".
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import PerflabError
from ..manifest.exercises import load_manifest
from ..workspace import prepare
from . import progress
from .kernel import graded_cells, read_notebook, run_notebook

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


@dataclass
class Check:
    name: str
    status: str
    expected: str
    got: str  # numbers in expected and got as perflab.grading.numbers.shown writes them
    written: bool = False  # a written answer's check, not the code's

    def render(self) -> str:
        mark = {PASSED: "ok  ", FAILED: "FAIL", INCONCLUSIVE: "??  "}[self.status]
        return f"[{mark}] {self.name}\n         expected: {self.expected}\n         got:      {self.got}"


@dataclass
class Report:
    exercise: str
    checks: list[Check]
    cell_errors: list[str] = field(default_factory=list)
    hint: str | None = None
    notes: list[str] = field(default_factory=list)
    written: dict[str, str | None] = field(default_factory=dict)  # each written question: the learner's answer

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.checks}
        if FAILED in statuses or not self.checks or self.cell_errors:
            return FAILED
        return INCONCLUSIVE if INCONCLUSIVE in statuses else PASSED

    @property
    def code_passed(self) -> bool:
        code = [c for c in self.checks if not c.written]
        return bool(code) and not self.cell_errors and all(c.status == PASSED for c in code)

    @property
    def headline(self) -> str:
        unanswered = any(c.written and c.status == FAILED for c in self.checks)
        said = " (code passed, written answer missing)" if unanswered and self.code_passed else ""
        return f"{self.exercise}: {self.status.upper()}{said}"

    def to_json(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "status": self.status, "headline": self.headline,
                "checks": [asdict(c) for c in self.checks], "cell_errors": self.cell_errors, "hint": self.hint,
                "notes": self.notes, "written": self.written}

    def render(self) -> str:
        lines = [self.headline]
        lines += [f"  cell error: {e}" for e in self.cell_errors]
        lines += [c.render() for c in self.checks]
        if self.status == INCONCLUSIVE:
            lines.append("Inconclusive is not a failure: a measurement moved, or was taken beside other programs (the "
                         "check says which). Grade again; a pass, once graded, stays passed.")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def calls(**functions: Callable[[], list[list]]):
    """Declare the learner's functions a check needs, each with a maker of fresh inputs (lists of arguments).

        @calls(my_harmonic_mean=fresh_rate_lists)
        def harmonic_mean(answers): ...

    The inputs are made anew for every grading, passed into the learner's kernel, and only the results come
    back: answers["my_harmonic_mean"] is a FunctionAnswer, whose results line up with answers.inputs[...].
    """
    def mark(check_function: Callable) -> Callable:
        check_function.functions = functions
        return check_function
    return mark


def refuses(*answers: Any):
    """Declare what in the course computes a check's answers (functions, and constants such as a known fix): a
    notebook whose code names any of them, under any name (perflab.grading.own_code.reached), fails.

        @refuses(lost_sizes, KNOWN_FIX)
        def predict(answers): ...
    """
    def mark(check_function: Callable) -> Callable:
        check_function.refused = answers
        return check_function
    return mark


def own_work(check_function: Callable, code: list[str]) -> list[Check]:
    """A failed check naming the course's answer the notebook reached for, if it did."""
    from .own_code import reached

    if shortcut := reached(code, getattr(check_function, "refused", ())):
        return [Check("your answers are your own work", FAILED, "worked out in your notebook", shortcut)]
    return []


class Answers(dict):
    """What the learner's kernel produced: plain values by name, FunctionAnswers, the inputs they were given, and
    the notebook's code (each code cell graded), for the checks that read it."""

    def __init__(self, values: dict[str, Any], inputs: dict[str, list[list]], code: list[str] | None = None):
        super().__init__(values)
        self.inputs = inputs
        self.code = code or []


def next_hint(exercise, failing_now: bool = False) -> tuple[int, str] | None:
    """(number, hint): the newest hint opened, one by each failed grade as rustlings does (the first is open from
    the start); `failing_now` counts a failure not recorded in the progress file. One count for `perflab hint`
    and the hint a failed grade shows, so neither repeats the other. None if the exercise has no hints."""
    if not exercise.hints:
        return None
    try:
        failures = progress.failures(exercise.name) + failing_now
    except PerflabError:  # an unreadable progress file costs the learner a hint, not their grade
        failures = failing_now
    number = min(max(failures, 1), len(exercise.hints))
    return number, exercise.hints[number - 1]


def grade(name: str, notebook: str | os.PathLike | None = None, record: bool = True,
          timeout: float | None = None, env: dict[str, str] | None = None) -> Report:
    """Grade an exercise: run its notebook (the learner's copy in work/ unless told otherwise) in a fresh kernel,
    with `env` added to its environment, all of it within `timeout` seconds (None: the exercise's budget in the
    manifest), then check what it produced here, and that every written question has an answer. Progress, and the
    answers written, are recorded only for the learner's own copy."""
    from . import written

    manifest = load_manifest()
    exercise = manifest.find(name)
    path = Path(notebook) if notebook else exercise.learner_path
    if not notebook and not path.exists():
        prepare()  # first use without `make lab`: the learner's copy is the fresh exercise
    check_function = exercise.check_function()
    inputs = {fn: make() for fn, make in getattr(check_function, "functions", {}).items()}
    saved = read_notebook(path)
    code = [cell.source for _, cell in graded_cells(saved) if cell.cell_type == "code"]
    answered = written.answers(read_notebook(exercise.exercise_path), saved, manifest.stub_markdown)
    values, errors = run_notebook(saved, path.parent, inputs, exercise.budget_s if timeout is None else timeout, env)
    checks = own_work(check_function, code) + check_function(Answers(values, inputs, code))
    checks += [written.check(answer, manifest.stub_markdown) for answer in answered]
    report = Report(name, checks, errors, written={a.question.text: a.text for a in answered})
    recorded = False
    if record and path.resolve() == exercise.learner_path.resolve():
        try:
            progress.record(name, report.status)
            recorded = True
            written.keep(name, answered)
        except PerflabError as err:
            report.notes.append(str(err))
    if report.status == FAILED and not report.code_passed and (hint := next_hint(exercise, failing_now=not recorded)):
        report.hint = hint[1]
    return report


def this_notebook(name: str) -> Path:
    """The notebook this kernel belongs to (Jupyter Server names it in JPY_SESSION_NAME), else the learner's copy."""
    exercise = load_manifest().find(name)
    session = Path(os.environ.get("JPY_SESSION_NAME", ""))
    return session if session.name == Path(exercise.notebook).name and session.is_file() else exercise.learner_path


def check_button(name: str):
    """A button for the notebook: grade the notebook as saved, in a fresh kernel, as `perflab grade NAME` does,
    within the exercise's budget."""
    import ipywidgets as widgets

    from ..notebook import action_button

    def grade_saved() -> None:
        saved = this_notebook(name)
        print(f"grading {saved.name} as saved at {dt.datetime.fromtimestamp(saved.stat().st_mtime):%H:%M:%S} "
              "(save first: Ctrl-S), from the top, in a fresh kernel...", flush=True)
        budget = load_manifest().find(name).budget_s
        done = subprocess.run([sys.executable, "-m", "perflab", "grade", name, "--notebook", str(saved),
                               "--timeout", f"{budget:g}"], capture_output=True, text=True)
        print(done.stdout or done.stderr)

    return widgets.VBox(action_button(f"Check {name}", grade_saved, icon="check"))
