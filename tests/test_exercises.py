"""Exercises: the author check, the marker convention, grading and progress."""

from __future__ import annotations

import nbformat
import pytest

from conftest import without_guest_image
from perflab.grading import FAILED, PASSED, Check, Report, progress
from perflab.grading.authoring import author_check, learner_copy, strip_solutions
from perflab.manifest.exercises import load_manifest


def test_author_check_passes(monkeypatch, tmp_path):
    """Every solution passes, every untouched exercise fails, copies match, no strays.

    Without a guest image, the two graders that boot VMs (ptl-cost-per-fault, nsd-placement) grade a
    solution inconclusive, never passed; their boots are the labs' own, tested by the slow VM tests."""
    for name, value in without_guest_image(tmp_path).items():
        monkeypatch.setenv(name, value)
    assert author_check() == []


def test_strip_solutions_keeps_indentation_and_surroundings():
    stub = "# YOUR CODE HERE\npass  # the stub"
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\nprint(f(1))"
    assert strip_solutions(source, stub) == "def f(x):\n    # YOUR CODE HERE\n    pass  # the stub\nprint(f(1))"
    assert strip_solutions("no markers here", stub) == "no markers here"


def test_learner_copy_clears_outputs_and_markdown_answers():
    manifest = load_manifest()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("Why?\n\nBEGIN SOLUTION\nBecause.\nEND SOLUTION"),
        nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")], execution_count=3),
    ]
    copy = learner_copy(nb, manifest)
    assert copy.cells[0].source == "Why?\n\nYOUR ANSWER HERE"
    assert copy.cells[1].outputs == [] and copy.cells[1].execution_count is None
    assert nb.cells[1].outputs, "the solution itself is not modified"


def test_manifest_lists_questions_as_hints():
    manifest = load_manifest()
    assert manifest.exercises
    for exercise in manifest.exercises:
        assert exercise.solution_path.exists() and exercise.exercise_path.exists()
        assert exercise.hints and all(h.endswith("?") for h in exercise.hints)
        assert exercise.budget_s >= 60, (
            "a kernel starting on a busy machine takes seconds: give every notebook a minute"
        )


@pytest.mark.parametrize("budget", ["", "budget_s = 0\n", "budget_s = 'ten minutes'\n", "budget_s = true\n"])
def test_an_exercise_without_a_budget_is_refused(tmp_path, budget):
    from perflab.errors import PerflabError
    from perflab.manifest.exercises import EXERCISES_DIR, load_manifest

    text = (EXERCISES_DIR / "manifest.toml").read_text()
    first = text.index("budget_s = ")
    (tmp_path / "manifest.toml").write_text(text[:first] + budget + text[text.index("\n", first) + 1:])
    with pytest.raises(PerflabError, match="exercise 'c2c-harmonic-mean' needs budget_s"):
        load_manifest(tmp_path / "manifest.toml")


def test_report_status_and_rendering():
    ok = Check("a", PASSED, "1", "1")
    bad = Check("b", FAILED, "2", "3")
    assert Report("x", [ok]).status == PASSED
    assert Report("x", [ok, bad]).status == FAILED
    assert Report("x", []).status == FAILED, "no check run is no pass"
    assert Report("x", [ok], ["code cell 2: ValueError: x"]).status == FAILED, "a cell error is no pass"
    text = Report("x", [bad]).render()
    assert "expected: 2" in text and "got:      3" in text


def test_progress_file_records_reads_and_resets():
    progress.record("c2c-harmonic-mean", "failed")
    progress.record("c2c-harmonic-mean", "passed")
    assert progress.current() == {"c2c-harmonic-mean": "passed"}
    assert progress.failures("c2c-harmonic-mean") == 1
    assert "c2c-harmonic-mean" in progress.progress_path().read_text()
    progress.reset()
    assert progress.current() == {}


def test_grading_untouched_exercise_gives_a_question_hint():
    from perflab.grading import grade

    report = grade("c2c-pipeline-pinning")
    assert report.status == FAILED
    assert report.hint and report.hint.endswith("?")
    assert report.cell_errors, "the unfinished cells are reported"
    assert progress.current()["c2c-pipeline-pinning"] == FAILED


@pytest.mark.parametrize("answer, passes", [([5, 6, 7, 8], True), ([14, 15, 16, 17], False), ([0, 32, 1, 2], False)])
def test_pipeline_checks_judge_placements(answer, passes):
    from perflab.labs.core_to_core.exercises import pipeline_pinning

    checks = pipeline_pinning({"placement": answer, "naive_crosses": "socket"})
    placement_checks = [c for c in checks if "placement" in c.name or "core" in c.name or "latency" in c.name]
    assert all(c.status == PASSED for c in placement_checks) == passes
