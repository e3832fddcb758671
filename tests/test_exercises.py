"""Exercises: the author check, the marker convention, grading and progress."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from conftest import lab_run_marks, without_guest_image
from perflab.grading import FAILED, PASSED, Check, Report, authoring, progress
from perflab.grading.authoring import learner_copy, strip_solutions
from perflab.manifest.exercises import load_manifest

# The exercises whose grading measures this machine: the notebook runs a lab, or the grader races two builds.
# They are graded alone, after the tests that run side by side. Every other grading must leave the measurement
# lock untouched (the test below checks), so a measurement cannot slip into the parallel phase unlisted.
MEASURING = {"c2c-harmonic-mean", "c2c-measure-pair", "alignment-slow-build", "llc-predict", "coz-find-the-line",
             "ipi-predict-rows", "ipi-quiet-cpu", "ptl-fault-around", "nsd-cap-model", "nsd-fix", "aliasing-predict",
             "aliasing-fix-offsets", "hq-predict-crossover", "hq-find-the-line", "hq-fix", "mn-flood-suspect",
             "mn-predict-slowdown", "memcpy-predict", "memcpy-tune", "po-cost-per-sample", "po-quiet-options"}


def test_the_exercises_are_listed_generated_and_asked_as_the_manifest_says():
    """No stray notebook, every hint a question, a rubric line per written question, every learner copy exactly
    what the generator makes of its solution (the author check's part that grades nothing)."""
    assert authoring.listing_problems() == []


@pytest.mark.parametrize("exercise", [pytest.param(e, id=e.name, marks=[pytest.mark.live] * (e.name in MEASURING))
                                      for e in load_manifest().exercises])
def test_the_reference_solution_passes(exercise, monkeypatch, tmp_path):
    """The author check's grading of the solution, one exercise each, as `perflab exercises check` grades it.

    Without a guest image, the two graders that boot VMs (ptl-cost-per-fault, nsd-placement) grade a
    solution inconclusive, never passed; their boots are the labs' own, tested by the slow VM tests."""
    for name, value in without_guest_image(tmp_path).items():
        monkeypatch.setenv(name, value)
    with authoring.check_environment():
        assert authoring.solution_problems(exercise) == []
    if exercise.name not in MEASURING:
        assert not Path(os.environ["PERFLAB_LOCK"]).exists(), \
            f"grading {exercise.name} took the measurement lock: list it in MEASURING, so that it is graded alone"


# An untouched exercise's grade fails whatever its measurements say, so it needs no quiet machine: it runs side by
# side. One that measures runs its lab's programs, so it goes where that lab's runs go (lab_run_marks).
@pytest.mark.parametrize("exercise", [pytest.param(e, id=e.name,
                                                   marks=lab_run_marks(e.lab.name) * (e.name in MEASURING))
                                      for e in load_manifest().exercises])
def test_the_untouched_exercise_fails(exercise, monkeypatch, tmp_path):
    """The author check's grading of the untouched exercise, one exercise each."""
    for name, value in without_guest_image(tmp_path).items():
        monkeypatch.setenv(name, value)
    with authoring.check_environment():
        assert authoring.untouched_problems(exercise) == []


def test_the_untouched_exercises_lab_runs_stop_at_two_rounds_and_the_solutions_do_not(monkeypatch):
    """Every answer of an untouched exercise raises, so what its notebook measures cannot change its grade."""
    exercise = load_manifest().find("po-cost-per-sample")
    graded = {}

    def grade(name, path, record, env=None):
        graded[path] = env
        return Report(name, [Check("answer", FAILED if path == exercise.exercise_path else PASSED, "", "")])

    monkeypatch.setattr(authoring, "grade", grade)
    assert authoring.grading_problems(exercise) == []
    assert graded == {exercise.solution_path: None, exercise.exercise_path: {"PERFLAB_RUNS": "2"}}


def test_the_author_check_is_its_parts_and_grades_every_exercise_the_way_the_tests_do(monkeypatch):
    """`perflab exercises check` is the listing, a grading of every exercise and the cases' part, which the tests
    above and tests/test_cases.py run one by one: here only that it puts them together, each grading inside
    check_environment."""
    graded = []

    def grading_problems(exercise):
        graded.append((exercise.name, os.environ.get("PERFLAB_QUICK"), os.environ.get("PERFLAB_RUNS")))
        return [f"{exercise.name}: graded"]

    monkeypatch.setattr(authoring, "listing_problems", lambda: ["listed"])
    monkeypatch.setattr(authoring, "grading_problems", grading_problems)
    monkeypatch.setattr(authoring, "author_problems", lambda: ["cases"])
    names = [e.name for e in load_manifest().exercises]
    assert authoring.author_check() == ["listed", *(f"{name}: graded" for name in names), "cases"]
    assert sorted(graded) == sorted((name, "1", authoring.ROUNDS_IN_A_CHECK) for name in names)


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
