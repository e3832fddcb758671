"""Run a learner's notebook in a fresh kernel, top to bottom, and bring back its answers as plain data.

The learner's code never runs in the grader's process: nbclient starts a new
kernel, runs every code cell (errors do not stop it: an unfinished cell
should cost the checks that need it, not every check), stops a cell that
runs past the timeout, and finally runs perflab.grading.export, which writes
the answers to a file. The grader reads them back as literals.
"""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PerflabError

if TYPE_CHECKING:
    import nbformat

CELL_TIMEOUT_S = 600  # a cell that measures may take minutes; an endless loop is stopped after this
# Run by its path, not imported as perflab.grading.export: that import would first run this package's
# __init__ and what it imports, half a second of every grading.
EXPORT_SCRIPT = Path(__file__).with_name("export.py")


@dataclass(frozen=True)
class Unreadable:
    """A global the checks cannot read: not plain data."""

    what: str

    def __repr__(self) -> str:
        return f"<not plain data: {self.what}>"


@dataclass(frozen=True)
class FunctionAnswer:
    """A learner's function, as the kernel saw it: where it was defined, and what it returned for each input."""

    module: str | None
    results: list[Any]  # the value, or a CallError, per input


@dataclass(frozen=True)
class CallError:
    message: str

    def __repr__(self) -> str:
        return self.message


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at `path`, or one line saying why it is not one."""
    # Imported here, not above: with jsonschema it takes 1.5 s, which a notebook that imports a lab's checks
    # (and so this package) need not pay.
    import nbformat

    if not path.is_file():
        raise PerflabError(f"{path} is not a file: give the path of an exercise notebook (.ipynb)")
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError, ValueError,
            AttributeError, KeyError, TypeError) as err:  # JSON that is not a notebook fails deep in nbformat
        raise PerflabError(f"{path} is not a notebook that can be read ({type(err).__name__}): open it in "
                           "JupyterLab and save it, or `perflab reset` the exercise") from None


def cell_names(notebook: nbformat.NotebookNode) -> dict[int, str]:
    """For each code cell's index: "code cell 3 (under '## 2. The harmonic mean')", as the learner finds it."""
    names, heading, number = {}, None, 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            headings = [line.strip() for line in cell.source.splitlines() if line.startswith("#")]
            heading = headings[-1] if headings else heading
        elif cell.cell_type == "code":
            number += 1
            names[index] = f"code cell {number}" + (f" (under '{heading}')" if heading else "")
    return names


def _read_back(entry: dict) -> Any:
    if "literal" in entry:
        return ast.literal_eval(entry["literal"])
    if "error" in entry:
        return CallError(entry["error"])
    return Unreadable(entry.get("unreadable", "?"))


def answers_from(exported: dict) -> dict[str, Any]:
    answers = {name: _read_back(entry) for name, entry in exported.get("values", {}).items()}
    for name, entry in exported.get("functions", {}).items():
        if not entry.get("missing"):
            answers[name] = FunctionAnswer(entry.get("module"), [_read_back(e) for e in entry.get("calls", [])])
    return answers


def run_notebook(path: Path, functions: dict[str, list[list]], timeout: float = CELL_TIMEOUT_S
                 ) -> tuple[dict[str, Any], list[str]]:
    """Execute the notebook (cells tagged `check` left out) in a fresh kernel; return its answers and cell errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    notebook = read_notebook(path)
    names = cell_names(notebook)
    kept = [(i, c) for i, c in enumerate(notebook.cells)
            if not (c.cell_type == "code" and "check" in c.metadata.get("tags", []))]
    with tempfile.TemporaryDirectory(prefix="perflab-grade-") as folder:
        out = Path(folder) / "answers.json"
        export = nbformat.v4.new_code_cell("import runpy as _perflab_runpy\n"
                                           f"_perflab_runpy.run_path({str(EXPORT_SCRIPT)!r})['export']"
                                           f"(globals(), {functions!r}, {str(out)!r})")
        notebook.cells = [c for _, c in kept] + [export]
        running = []  # the index in notebook.cells of the cell that started last

        def started(cell, cell_index, **_):
            running.append(cell_index)

        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}}, on_cell_execute=started)
        errors = []
        try:
            client.execute()
        except CellTimeoutError:
            errors.append(f"{_named(running, kept, names)} did not finish in {timeout:.0f} s and was stopped: "
                          "an endless loop? Nothing after it ran")
        except DeadKernelError:
            errors.append(f"the kernel died while running {_named(running, kept, names)} (a crash, or os._exit): "
                          "nothing after it ran")
        errors += [f"{names[i]}: {o.ename}: {o.evalue}" for i, c in kept if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "error"]
        try:
            exported = json.loads(out.read_text())
        except (OSError, json.JSONDecodeError):
            exported = {}
            if not errors:
                errors.append("the notebook's answers could not be read after it ran")
    return answers_from(exported), errors


def _named(running: list[int], kept: list[tuple[int, Any]], names: dict[int, str]) -> str:
    """The learner's name for the cell that was running: the export cell comes after all of theirs."""
    if not running:
        return "the first code cell"
    if running[-1] >= len(kept):
        return "the call of your functions on the grader's inputs"
    return names[kept[running[-1]][0]]
