"""Autograding: run a learner's notebook in a fresh kernel, check what it produced, say expected and got.

The learner's code runs in its own kernel (perflab.grading.kernel); the checks
run here, on the plain data that came back, and recompute every expected value
themselves: from raw result files whose provenance holds, from recorded data,
or from a fresh measurement.

A check passes, fails, or is inconclusive (a fresh measurement disagreed in a
way a rerun can settle): inconclusive is never reported as a failure.
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
from ..workspace import prepare
from . import progress
from .kernel import CELL_TIMEOUT_S, run_notebook
from .manifest import load_manifest

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


@dataclass
class Check:
    name: str
    status: str
    expected: str
    got: str

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

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.checks}
        if FAILED in statuses or not self.checks:
            return FAILED
        return INCONCLUSIVE if INCONCLUSIVE in statuses else PASSED

    def to_json(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "status": self.status, "checks": [asdict(c) for c in self.checks],
                "cell_errors": self.cell_errors, "hint": self.hint, "notes": self.notes}

    def render(self) -> str:
        lines = [f"{self.exercise}: {self.status.upper()}"]
        lines += [f"  cell error: {e}" for e in self.cell_errors]
        lines += [c.render() for c in self.checks]
        if self.status == INCONCLUSIVE:
            lines.append("Inconclusive is not a failure: a measurement moved. Run the notebook and grade again.")
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


class Answers(dict):
    """What the learner's kernel produced: plain values by name, FunctionAnswers, and the inputs they were given."""

    def __init__(self, values: dict[str, Any], inputs: dict[str, list[list]]):
        super().__init__(values)
        self.inputs = inputs


def next_hint(exercise) -> tuple[int, str] | None:
    """(number, hint): one more hint for each failed attempt, as rustlings does; None if it has no hints."""
    if not exercise.hints:
        return None
    try:
        attempts = progress.failures(exercise.name)
    except PerflabError:  # an unreadable progress file costs the learner a hint, not their grade
        attempts = 0
    shown = min(attempts, len(exercise.hints) - 1)
    return shown + 1, exercise.hints[shown]


def grade(name: str, notebook: str | os.PathLike | None = None, record: bool = True,
          timeout: float = CELL_TIMEOUT_S) -> Report:
    """Grade an exercise: run its notebook (the learner's copy in work/ unless told otherwise) in a fresh kernel,
    then check what it produced here. Progress is recorded only for the learner's own copy."""
    exercise = load_manifest().find(name)
    path = Path(notebook) if notebook else exercise.learner_path
    if not notebook and not path.exists():
        prepare()  # first use without `make lab`: the learner's copy is the fresh exercise
    check_function = exercise.check_function()
    inputs = {fn: make() for fn, make in getattr(check_function, "functions", {}).items()}
    values, errors = run_notebook(path, inputs, timeout)
    report = Report(name, check_function(Answers(values, inputs)), errors)
    if report.status == FAILED and (hint := next_hint(exercise)):
        report.hint = hint[1]
    if record and path.resolve() == exercise.learner_path.resolve():
        try:
            progress.record(name, report.status)
        except PerflabError as err:
            report.notes.append(str(err))
    return report


def this_notebook(name: str) -> Path:
    """The notebook this kernel belongs to (Jupyter Server names it in JPY_SESSION_NAME), else the learner's copy."""
    exercise = load_manifest().find(name)
    session = Path(os.environ.get("JPY_SESSION_NAME", ""))
    return session if session.name == Path(exercise.notebook).name and session.is_file() else exercise.learner_path


def check_button(name: str):
    """A button for the notebook: grade the notebook as saved, in a fresh kernel, as `perflab grade NAME` does."""
    import ipywidgets as widgets

    button = widgets.Button(description=f"Check {name}", button_style="primary", icon="check",
                            layout=widgets.Layout(width="auto"))
    output = widgets.Output()

    def on_click(_):
        output.clear_output()
        button.disabled = True
        with output:
            saved = this_notebook(name)
            print(f"grading {saved.name} as saved at {dt.datetime.fromtimestamp(saved.stat().st_mtime):%H:%M:%S} "
                  "(save first: Ctrl-S), from the top, in a fresh kernel...", flush=True)
            done = subprocess.run([sys.executable, "-m", "perflab", "grade", name, "--notebook", str(saved)],
                                  capture_output=True, text=True)
            print(done.stdout or done.stderr)
        button.disabled = False

    button.on_click(on_click)
    return widgets.VBox([button, output])
