"""Grading runs the learner's notebook in a fresh kernel and checks what came back in the grader's own process:
every way around it that was found by hand now fails, and cells are named as the learner sees them."""

from __future__ import annotations

import nbformat
import pytest

from conftest import run_cli
from perflab.grading import FAILED, PASSED, grade, progress
from perflab.grading.kernel import cell_names, run_notebook
from perflab.grading.manifest import load_manifest

PINNING = load_manifest().find("c2c-pipeline-pinning")


def notebook_with(tmp_path, *sources: str, solution=PINNING):
    """The exercise's reference solution with code cells appended (or, as `replace:N:text`, cell N replaced)."""
    notebook = nbformat.read(solution.solution_path, as_version=4)
    for source in sources:
        if source.startswith("replace:"):
            _, index, text = source.split(":", 2)
            notebook.cells[int(index)].source = text
        else:
            notebook.cells.append(nbformat.v4.new_code_cell(source))
    path = tmp_path / "attempt.ipynb"
    nbformat.write(notebook, path)
    return path


def test_the_reference_solution_passes_in_a_fresh_kernel_and_magics_work(tmp_path):
    path = notebook_with(tmp_path, "%time twice = 2 * 2", "%%capture\nprint('hidden')")
    assert grade(PINNING.name, path).status == PASSED


def test_a_cell_replacing_a_check_function_changes_nothing(tmp_path):
    path = notebook_with(
        tmp_path, "replace:3:placement = [0, 32, 1, 2]",
        "import perflab.labs.core_to_core.exercises as e\nfrom perflab.grading import Check, PASSED\n"
        "e.pipeline_pinning = lambda ns: [Check('anything', PASSED, '', '')]")
    report = grade(PINNING.name, path)
    assert report.status == FAILED and any(c.name == "no two stages share a core" and c.status == FAILED
                                           for c in report.checks)


def test_sys_exit_in_a_cell_is_a_failed_cell_not_a_silent_pass(tmp_path):
    path = notebook_with(tmp_path, "replace:3:import sys\nsys.exit(0)\nplacement = [5, 6, 7, 8]")
    done = run_cli("grade", PINNING.name, "--notebook", str(path))
    assert done.returncode == 1 and "FAILED" in done.stdout and "SystemExit" in done.stdout


def test_a_killed_kernel_fails_with_a_message(tmp_path):
    report = grade(PINNING.name, notebook_with(tmp_path, "replace:3:import os\nos._exit(0)"))
    assert report.status == FAILED and "the kernel died while running code cell 2" in report.cell_errors[0]


def test_an_endless_loop_is_stopped_and_named(tmp_path):
    path = tmp_path / "loop.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Mine"), nbformat.v4.new_code_cell("placement = [5, 6, 7, 8]"),
                      nbformat.v4.new_markdown_cell("## 2. Forever"), nbformat.v4.new_code_cell("while True:\n    pass")]
    nbformat.write(notebook, path)
    report = grade(PINNING.name, path, timeout=8)
    assert report.status == FAILED
    assert report.cell_errors[0].startswith("code cell 2 (under '## 2. Forever') did not finish in 8 s")


def test_cells_are_named_by_position_and_heading_not_by_markdown_count():
    names = cell_names(nbformat.read(PINNING.solution_path, as_version=4))
    assert list(names.values())[:2] == ["code cell 1 (under '# Exercise: pin a 4-stage pipeline on a two-socket server')",
                                        "code cell 2 (under '## 1. Your placement')"]


def test_grading_a_solution_is_not_the_learners_progress():
    assert grade(PINNING.name, PINNING.solution_path).status == PASSED
    assert PINNING.name not in progress.current()
    assert grade(PINNING.name).status == FAILED, "the learner's own, untouched copy"
    assert progress.current()[PINNING.name] == FAILED


HARMONIC = load_manifest().find("c2c-harmonic-mean")
MADE_UP = """
import json, pathlib
path = pathlib.Path("made-up.json").resolve()
samples = [{"round": 0, "round_trips": 1000, "elapsed_ns": 200000 + i, "one_way_ns": 100.0} for i in range(30)]
path.write_text(json.dumps({"perflab_result_version": 1, "lab": "core-to-core", "kind": "pair", "machine": {},
                            "runs": [{"label": "0,1", "samples": samples}], "matrix": {"cpus": [0, 1]}}))
result = {"path": str(path)}
rates = [s["round_trips"] * 1e9 / s["elapsed_ns"] for s in samples]
"""


def test_a_made_up_result_fails_however_right_the_arithmetic(tmp_path):
    report = grade(HARMONIC.name, notebook_with(tmp_path, MADE_UP, solution=HARMONIC))
    by_name = {c.name: c for c in report.checks}
    saved = by_name["your measurement, saved by perflab on this machine"]
    assert report.status == FAILED and saved.status == FAILED and "no provenance" in saved.got


def test_an_edited_result_fails(tmp_path):
    edit = ("import json, pathlib\npath = pathlib.Path(result['path'])\ndata = json.loads(path.read_text())\n"
            "data['runs'][0]['samples'][-1]['elapsed_ns'] //= 2\npath.write_text(json.dumps(data))")
    report = grade(HARMONIC.name, notebook_with(tmp_path, edit, solution=HARMONIC))
    saved = next(c for c in report.checks if c.name.startswith("your measurement"))
    assert saved.status == FAILED and "changed after perflab wrote it" in saved.got


def test_a_function_from_the_package_is_not_your_own(tmp_path):
    path = notebook_with(tmp_path, "from perflab.stats import harmonic_mean as my_harmonic_mean", solution=HARMONIC)
    check = next(c for c in grade(HARMONIC.name, path).checks if "my_harmonic_mean" in c.name)
    assert check.status == FAILED and "perflab.stats" in check.got


@pytest.mark.parametrize("content", ["a,b\n1,2\n", "{not json", "\x00\x01binary", None, "dir"])
def test_a_bad_notebook_is_one_line(tmp_path, content):
    path = tmp_path / "bad.ipynb"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content.encode())
    done = run_cli("grade", PINNING.name, "--notebook", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_answers_come_back_as_plain_data_only(tmp_path):
    path = notebook_with(tmp_path, "import numpy as np\nfrom pathlib import Path\nARRAY = np.arange(3)\n"
                                   "WHERE = Path('/x')\nKEYS = {0.5: True}\nclass Thing: pass\nTHING = Thing()\n"
                                   "SCALAR = np.float64(0.25) + np.float64(0.5)")
    answers, errors = run_notebook(path, {}, timeout=60)
    assert errors == [] and answers["ARRAY"] == [0, 1, 2] and answers["WHERE"] == "/x" and answers["KEYS"] == {0.5: True}
    assert answers["SCALAR"] == 0.75, "numpy's float64 is a float subclass whose repr is a call: sent as a float"
    assert "not plain data" in repr(answers["THING"])


def test_a_function_answering_yes_or_no_is_checked_against_the_same_bool():
    from perflab.grading import Answers
    from perflab.grading.answers import function_check
    from perflab.grading.kernel import FunctionAnswer

    inputs = {"my_f": [[1], [2]]}
    right = Answers({"my_f": FunctionAnswer("__main__", [False, True])}, inputs)
    assert function_check(right, "my_f", lambda x: x == 2, 0).status == "passed"
    for wrong in ([0, 1], [True, True]):  # numbers are not answers to a yes-or-no question
        answers = Answers({"my_f": FunctionAnswer("__main__", wrong)}, inputs)
        assert function_check(answers, "my_f", lambda x: x == 2, 0).status == "failed"


def test_a_function_failing_on_inputs_that_are_not_numbers_is_reported():
    """A failing call on a list of records (lab 4's boots) is a FAILED check that shows the input, not a crash."""
    from perflab.grading import Answers
    from perflab.grading.answers import function_check
    from perflab.grading.kernel import CallError, FunctionAnswer

    boots = [[{"paging_levels": 5, "samples": []}]]
    answers = Answers({"my_f": FunctionAnswer("__main__", [CallError("NotImplementedError: ")])}, {"my_f": boots})
    check = function_check(answers, "my_f", lambda records: 1.0, 1e-9)
    assert check.status == "failed" and "paging_levels" in check.name and check.got == "NotImplementedError: "
