"""Run a learner's notebook in a fresh kernel, top to bottom, and bring back its answers as plain data.

The learner's code never runs in the grader's process: nbclient starts a new
kernel (over Unix sockets, not TCP), runs perflab.grading.export's setup
before the learner's first cell, then every code cell (errors do not stop it:
an unfinished cell should cost the checks that need it, not every check),
stopping a cell that runs past the grade's budget, and finally the export,
which writes the answers to a file sealed with a key made for this grading.
The grader checks the seal and reads the answers back as literals.
"""

from __future__ import annotations

import ast
import hmac
import json
import os
import secrets
import signal
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import PerflabError
from ..paths import scratch

if TYPE_CHECKING:
    import nbformat

# Run by its path, not imported as perflab.grading.export: that import would first run this package's
# __init__ and what it imports, half a second of every grading.
EXPORT_SCRIPT = Path(__file__).with_name("export.py")
CHANGED = "the notebook changed the grader's modules"
UNREAD = "the notebook's answers could not be read after it ran"


@dataclass(frozen=True)
class Unreadable:
    """A global the checks cannot read: not plain data."""

    what: str

    def __repr__(self) -> str:
        return f"<not plain data: {self.what}>"


@dataclass(frozen=True)
class FunctionAnswer:
    """A learner's function, as the kernel saw it: where and under what name it was defined, and what it returned
    for each input."""

    module: str | None
    qualname: str | None
    results: list[Any]  # the value, or a CallError, per input


@dataclass(frozen=True)
class CallError:
    message: str

    def __repr__(self) -> str:
        return self.message


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at `path`, checked against the notebook format, or one line saying why it is not one."""
    # Imported here, not above: with jsonschema it takes 1.5 s, which a notebook that imports a lab's checks
    # (and so this package) need not pay.
    import nbformat

    if not path.is_file():
        raise PerflabError(f"{path} is not a file: give the path of an exercise notebook (.ipynb)")
    try:
        with warnings.catch_warnings():  # nbformat warns about cells without ids, which JupyterLab adds on save
            warnings.simplefilter("ignore")
            notebook = nbformat.read(path, as_version=4)
            nbformat.validate(notebook)
        return notebook
    except nbformat.ValidationError as err:
        said = str(err).splitlines()[0] if str(err) else "it does not follow the notebook format"
        raise PerflabError(f"{path} is not a valid notebook ({said}): open it in JupyterLab and save it, or "
                           "`perflab reset` the exercise") from None
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


def graded_cells(notebook: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    """(index, cell) of the cells a grading runs: all but code cells tagged `check` (the Check button's)."""
    return [(i, c) for i, c in enumerate(notebook.cells)
            if not (c.cell_type == "code" and "check" in c.metadata.get("tags", []))]


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
            answers[name] = FunctionAnswer(entry.get("module"), entry.get("qualname"),
                                           [_read_back(e) for e in entry.get("calls", [])])
    return answers


def unsealed(path: Path, key: bytes) -> tuple[dict, str | None]:
    """The export's answers, or ({}, why they cannot be believed)."""
    try:
        sealed = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, UNREAD
    payload, seal = (sealed.get("payload"), sealed.get("seal")) if isinstance(sealed, dict) else (None, None)
    if not (isinstance(payload, str) and isinstance(seal, str)
            and hmac.compare_digest(seal, hmac.new(key, payload.encode(), "sha256").hexdigest())):
        return {}, ("the notebook replaced the grader's export: its answers are not sealed (a cell must not "
                    "redefine _perflab_export or write the grader's answers file)")
    exported = json.loads(payload)
    if exported.get("changed"):
        return {}, (f"{CHANGED} ({', '.join(exported['changed'])}): a cell must not replace a module in "
                    "sys.modules or a builtin; its answers are not read")
    return exported, None


class Budget:
    """A grade's budget: seconds of the notebook's own running. Time its kernel waited for its turn in the
    measurement queue (perflab.lock writes it to `waited_path`) does not count: in a busy class it can be minutes."""

    def __init__(self, seconds: float, waited_path: Path):
        self.seconds, self.waited_path, self.spent = seconds, waited_path, False
        self.started = time.monotonic()

    def waited(self) -> float:
        """Seconds waited so far, the wait under way included (see perflab.lock's _noting_wait)."""
        try:
            total, *since = (float(word) for word in self.waited_path.read_text().split())
        except (OSError, ValueError):
            return 0.0
        return total + (time.monotonic() - since[0] if since else 0.0)

    def waits(self) -> str:
        waited = self.waited()
        return f" (not counting {waited:.0f} s waiting for the measurement queue)" if waited >= 1 else ""

    @contextmanager
    def enforced(self, stop: Callable[[], None]):
        """Call `stop` (which kills the kernel) once the running time, waits left out, passes the budget."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.25):
                if time.monotonic() - self.started - self.waited() > self.seconds:
                    self.spent = True
                    try:
                        stop()
                    except (AttributeError, OSError):  # no kernel yet, or it has just ended
                        continue
                    return

        watcher = threading.Thread(target=watch, name="perflab-grade-budget", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()


def kernel_config(folder: str):
    """Unix sockets in the grading's own folder: no TCP port, and no "running over TCP without encryption"; and a
    client that looks for the kernel's replies every second (perflab.grading.channels says why)."""
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(Path(folder) / "kernel")
    config.KernelManager.client_class = "perflab.grading.channels.LookingClient"
    return config


def run_notebook(notebook: nbformat.NotebookNode, folder: Path, functions: dict[str, list[list]], budget_s: float,
                 env: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Execute the notebook (read_notebook's; cells tagged `check` left out) in a fresh kernel started in `folder`
    (with `env` added to its environment), all of it within `budget_s` seconds; return its answers and cell errors.
    The notebook becomes the run's."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    names = cell_names(notebook)
    kept = graded_cells(notebook)
    for _, cell in kept:
        if cell.cell_type == "code":
            cell.outputs = []  # the learner's saved outputs are not this run's: a cell never reached shows none
    with scratch("grade") as grading:
        key, key_path, out = secrets.token_bytes(32), Path(grading) / "key", Path(grading) / "answers.json"
        key_path.write_bytes(key)
        setup = nbformat.v4.new_code_cell(f"_perflab_export = __import__('runpy').run_path({str(EXPORT_SCRIPT)!r})"
                                          f"['sealed_export'](globals(), {str(key_path)!r})")
        export = nbformat.v4.new_code_cell(f"_perflab_export({functions!r}, {str(out)!r})")
        notebook.cells = [setup, *(c for _, c in kept), export]
        running = []  # the index in notebook.cells of the cell that started last

        def started(cell, cell_index, **_):
            running.append(cell_index)

        client = NotebookClient(notebook, kernel_name="python3", allow_errors=True, config=kernel_config(grading),
                                resources={"metadata": {"path": str(folder)}}, on_cell_execute=started)
        budget = Budget(budget_s, Path(grading) / "waited")
        errors = []
        try:
            with budget.enforced(lambda: os.kill(client.km.provisioner.pid, signal.SIGKILL)):
                client.execute(env={**os.environ, **(env or {}), "PERFLAB_WAITED": str(budget.waited_path)})
        except DeadKernelError:
            errors.append(f"{_named(running, kept, names)} was still running when the grade's budget of "
                          f"{budget_s:.0f} s ran out{budget.waits()}, and was stopped: an endless loop, or a "
                          "measurement that a busy machine kept racing to its budget? Nothing after it ran"
                          if budget.spent else
                          f"the kernel died while running {_named(running, kept, names)} (a crash, or os._exit): "
                          "nothing after it ran")
        errors += [f"{names[i]}: {o.ename}: {o.evalue}" for i, c in kept if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "error"]
        errors += [f"{_named([at], kept, names)}: {o.ename}: {o.evalue}" for at in (0, len(notebook.cells) - 1)
                   for o in notebook.cells[at].get("outputs", []) if o.output_type == "error"]
        exported, problem = unsealed(out, key)
        if problem and not (problem == UNREAD and errors):  # a cell error already says why nothing came back
            errors.append(problem)
    return answers_from(exported), errors


def _named(running: list[int], kept: list[tuple[int, Any]], names: dict[int, str]) -> str:
    """The learner's name for the cell that was running: the grader's setup comes before all of theirs, its
    export after."""
    if not running or running[-1] == 0:
        return "the grader's setup before your first cell"
    if running[-1] > len(kept):
        return "the call of your functions on the grader's inputs"
    return names[kept[running[-1] - 1][0]]
