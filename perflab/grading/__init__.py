"""Autograding: run a learner's notebook, check what it produced, say expected and got.

A check passes, fails, or is inconclusive (a fresh measurement disagreed in a
way a rerun can settle): inconclusive is never reported as a failure.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from . import progress
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

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.checks}
        if FAILED in statuses or not self.checks:
            return FAILED
        return INCONCLUSIVE if INCONCLUSIVE in statuses else PASSED

    def to_json(self) -> dict[str, Any]:
        return {"exercise": self.exercise, "status": self.status, "checks": [asdict(c) for c in self.checks],
                "cell_errors": self.cell_errors, "hint": self.hint}

    def render(self) -> str:
        lines = [f"{self.exercise}: {self.status.upper()}"]
        lines += [f"  cell error: {e}" for e in self.cell_errors]
        lines += [c.render() for c in self.checks]
        if self.status == INCONCLUSIVE:
            lines.append("Inconclusive is not a failure: a measurement moved. Run the notebook and grade again.")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


def execute_notebook(path: Path) -> tuple[dict[str, Any], list[str]]:
    """Run the notebook's code cells in one namespace, as a kernel would; skip cells tagged `check`.

    Errors do not stop the run: a learner's unfinished cell should cost the
    checks that need it, not every check.
    """
    notebook = nbformat.read(path, as_version=4)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    errors: list[str] = []
    old_cwd = os.getcwd()
    os.chdir(path.parent)
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        for number, cell in enumerate(notebook.cells, 1):
            if cell.cell_type != "code" or "check" in cell.metadata.get("tags", []):
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exec(compile(cell.source, f"{path.name} cell {number}", "exec"), namespace)
            except Exception as err:  # a learner's cell may raise anything
                errors.append(f"cell {number}: {type(err).__name__}: {err}")
    finally:
        os.chdir(old_cwd)
    return namespace, errors


def _hint(exercise, attempts: int) -> str | None:
    """One more hint for each failed attempt, as rustlings does."""
    return exercise.hints[min(attempts, len(exercise.hints) - 1)] if exercise.hints else None


def check(name: str, namespace: dict[str, Any], record: bool = True, cell_errors: list[str] | None = None) -> Report:
    """Run the exercise's checks against a namespace (a notebook's globals())."""
    exercise = load_manifest().find(name)
    report = Report(name, exercise.check_function()(namespace), cell_errors or [])
    if report.status == FAILED:
        report.hint = _hint(exercise, progress.failures(name))
    if record:
        progress.record(name, report.status)
    return report


def grade(name: str, notebook: str | os.PathLike | None = None, record: bool = True) -> Report:
    """Grade an exercise: run its notebook (the learner's copy unless told otherwise) and check it."""
    exercise = load_manifest().find(name)
    path = Path(notebook) if notebook else exercise.exercise_path
    namespace, errors = execute_notebook(path)
    return check(name, namespace, record=record, cell_errors=errors)


def check_button(name: str, namespace: dict[str, Any]):
    """A button for the notebook: click to run the checks on the notebook's current state."""
    import ipywidgets as widgets

    button = widgets.Button(description=f"Check {name}", button_style="primary", icon="check",
                            layout=widgets.Layout(width="auto"))
    output = widgets.Output()

    def on_click(_):
        output.clear_output()
        with output:
            print(check(name, namespace).render())

    button.on_click(on_click)
    return widgets.VBox([button, output])
