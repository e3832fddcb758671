"""Lab notebooks run headless, top to bottom, in quick mode, as a learner's kernel would run them: the learner's
copy in the workspace, saved with its outputs, and git sees no change; what they print shows no exercise's answer."""

from __future__ import annotations

import subprocess

import nbformat
import pytest
from answer_leaks import exercise_answers, notebook_text, shown_in
from nbclient import NotebookClient

from conftest import REPO, RUNS_FOR_PLUMBING, lab_run_marks, without_guest_image
from perflab import workspace
from perflab.grading.kernel import kernel_config

LAB_NOTEBOOKS = sorted((REPO / "labs").glob("*/lab.ipynb"))


# Each runs its whole lab: those that change the machine one after another on one worker (lab_run_marks).
@pytest.mark.parametrize("path", [pytest.param(path, marks=lab_run_marks(path.parent.name.partition("-")[2]))
                                  for path in LAB_NOTEBOOKS], ids=lambda p: p.parent.name)
def test_lab_notebook_runs_in_quick_mode(path, monkeypatch, tmp_path):
    monkeypatch.setenv("PERFLAB_QUICK", "1")
    monkeypatch.setenv("PERFLAB_RUNS", RUNS_FOR_PLUMBING)
    for name, value in without_guest_image(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MPLBACKEND")  # the kernel's own inline backend, as a learner has it
    git_before = _git_status()
    workspace.prepare()
    mine = workspace.lab_notebook(str(path.parent.relative_to(REPO)))
    notebook = nbformat.read(mine, as_version=4)
    NotebookClient(  # the grader's kernel set-up: its client cannot miss a reply for ten minutes
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(mine.parent)}},
        config=kernel_config(str(tmp_path)),
    ).execute()
    nbformat.write(notebook, mine)  # saved with its outputs, as JupyterLab would
    assert _git_status() == git_before, "running the learner's copy changed files git tracks"
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the notebook draws the topology and at least one measured plot"
    text = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert any(v in text for v in ("reproduced", "not-reproduced", "inconclusive", "cannot-show"))
    assert [str(a) for a in shown_in(notebook_text(notebook), exercise_answers())] == []


def test_lab_notebooks_are_short_and_import_the_package():
    for path in LAB_NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        code = [c.source for c in notebook.cells if c.cell_type == "code"]
        assert "from perflab" in code[0]
        assert sum(len(c.splitlines()) for c in code) <= 40, f"{path}: logic belongs in the package"
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), (
            f"{path}: commit without outputs"
        )


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout
