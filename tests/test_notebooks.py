"""Lab notebooks run headless, top to bottom, in quick mode, as a learner's kernel would run them."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO

LAB_NOTEBOOKS = sorted((REPO / "labs").glob("*/lab.ipynb"))


@pytest.mark.parametrize("path", LAB_NOTEBOOKS, ids=lambda p: p.parent.name)
def test_lab_notebook_runs_in_quick_mode(path, monkeypatch):
    monkeypatch.setenv("PERFLAB_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND")  # the kernel's own inline backend, as a learner has it
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the notebook draws the topology and at least one measured plot"
    text = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert any(v in text for v in ("reproduced", "not-reproduced", "inconclusive", "cannot-show"))


def test_lab_notebooks_are_short_and_import_the_package():
    for path in LAB_NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        code = [c.source for c in notebook.cells if c.cell_type == "code"]
        assert "from perflab" in code[0]
        assert sum(len(c.splitlines()) for c in code) <= 40, f"{path}: logic belongs in the package"
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), f"{path}: commit without outputs"
