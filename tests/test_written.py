"""Written answers count: an exercise's question in words must be answered to pass, the answer is kept beside the
progress file, and the class dashboard shows it to the instructor beside the manifest's rubric."""

from __future__ import annotations

import json
import os
import shutil

import nbformat
import pytest

from perflab.errors import PerflabError
from perflab.grading import FAILED, PASSED, grade, progress, written
from perflab.grading.authoring import learner_copy
from perflab.manifest.exercises import load_manifest
from perflab.workshop import dashboard, dashboard_page
from perflab.workshop.learner_files import LearnerFiles

MANIFEST = load_manifest()
HARMONIC = MANIFEST.find("c2c-harmonic-mean")
STUB = MANIFEST.stub_markdown
QUESTION = "Why is the arithmetic mean of these rates too high?"


def solved_but_unanswered(answer: str = STUB) -> nbformat.NotebookNode:
    """The reference solution, its code as it is, its written answer as handed out (or `answer` in its place)."""
    notebook = nbformat.read(HARMONIC.solution_path, as_version=4)
    handed_out = learner_copy(notebook, MANIFEST)
    for cell, stubbed in zip(notebook.cells, handed_out.cells):
        if cell.cell_type == "markdown" and STUB in stubbed.source:
            cell.source = stubbed.source.replace(STUB, answer)
    return notebook


def test_correct_code_with_the_answer_left_as_handed_out_does_not_pass():
    """It passed before written answers counted: the grader checked the code alone."""
    HARMONIC.learner_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(solved_but_unanswered(), HARMONIC.learner_path)
    report = grade(HARMONIC.name)
    assert report.status == FAILED and report.code_passed and not report.cell_errors
    assert report.render().startswith("c2c-harmonic-mean: FAILED (code passed, written answer missing)")
    unanswered = [c for c in report.checks if c.status == FAILED]
    assert len(unanswered) == 1 and unanswered[0].written and QUESTION in unanswered[0].name
    assert "in the cell under '## 4. In your own words'" in unanswered[0].got
    assert report.hint is None, "a hint about the code helps no one whose code passed"
    assert progress.current() == {HARMONIC.name: FAILED}

    mine = "Each rate weighs the same however long its sample took, so the fast samples count too much."
    nbformat.write(solved_but_unanswered(mine), HARMONIC.learner_path)
    report = grade(HARMONIC.name)
    assert report.status == PASSED, report.render()
    assert report.written == {QUESTION: mine}
    kept = json.loads(written.answers_path().read_text())
    assert kept[HARMONIC.name][0]["question"] == QUESTION and kept[HARMONIC.name][0]["answer"] == mine

    nbformat.write(solved_but_unanswered("  "), HARMONIC.learner_path)  # the answer deleted again
    assert grade(HARMONIC.name).status == FAILED
    assert written.kept()[HARMONIC.name][0]["answer"] == mine, "an empty answer replaced a written one"
    assert progress.current() == {HARMONIC.name: PASSED}


def test_the_answer_is_read_without_the_stub_or_the_solutions_markers():
    handed_out = nbformat.read(HARMONIC.exercise_path, as_version=4)
    (question,) = written.questions(handed_out, STUB)
    assert question.text == QUESTION and question.heading == "## 4. In your own words"
    solution = nbformat.read(HARMONIC.solution_path, as_version=4)
    (answer,) = written.answers(handed_out, solution, STUB)
    assert answer.written and answer.text.startswith("Fast samples contribute") and "SOLUTION" not in answer.text
    (left,) = written.answers(handed_out, solved_but_unanswered(f"{STUB}\n\n"), STUB)
    assert not left.written and written.check(left, STUB).status == FAILED


def test_a_deleted_question_is_a_missing_answer_that_says_how_to_get_it_back():
    handed_out = nbformat.read(HARMONIC.exercise_path, as_version=4)
    notebook = solved_but_unanswered("my answer")
    notebook.cells = [c for c in notebook.cells if "In your own words" not in c.source]
    (answer,) = written.answers(handed_out, notebook, STUB)
    check = written.check(answer, STUB)
    assert answer.text is None and check.status == FAILED and "`perflab reset`" in check.got


def test_every_written_question_has_a_rubric_line_and_a_bad_rubric_is_refused(tmp_path):
    for exercise in MANIFEST.exercises:
        asked = written.questions(nbformat.read(exercise.exercise_path, as_version=4), STUB)
        assert len(exercise.rubric) == len(asked), exercise.name
    text = (HARMONIC.exercise_path.parents[1] / "manifest.toml").read_text()
    (tmp_path / "manifest.toml").write_text(text.replace("rubric = [", "rubric = [3, ", 1))
    with pytest.raises(PerflabError, match="c2c-harmonic-mean': rubric is a list of lines of text"):
        load_manifest(tmp_path / "manifest.toml")


def test_the_dashboard_shows_each_learners_answer_beside_the_rubric(tmp_path, monkeypatch):
    workspace = tmp_path / "alice" / "work"
    monkeypatch.setenv("PERFLAB_PROGRESS", str(workspace / "progress.txt"))
    handed_out = nbformat.read(HARMONIC.exercise_path, as_version=4)
    written.keep(HARMONIC.name, written.answers(handed_out, solved_but_unanswered("Fast <b>runs</b> weigh more"), STUB))
    alice = dashboard.learner_state("alice", LearnerFiles(workspace.parent, os.getuid()), machine=None)
    page = dashboard_page.answers_html([alice, dashboard.LearnerState("bob")])
    assert f"<code>c2c-harmonic-mean</code>: {QUESTION}" in page
    assert f"<b>A good answer:</b> {HARMONIC.rubric[0]}" in page
    assert "Fast &lt;b&gt;runs&lt;/b&gt; weigh more" in page, "the learner's words, escaped"
    assert "<tr><th>bob</th><td class=none>no answer yet</td>" in page


def test_a_solution_answers_its_questions_and_an_untouched_copy_does_not():
    for exercise in MANIFEST.exercises:
        handed_out = nbformat.read(exercise.exercise_path, as_version=4)
        solution = nbformat.read(exercise.solution_path, as_version=4)
        assert all(a.written for a in written.answers(handed_out, solution, STUB)), exercise.name
        assert not any(a.written for a in written.answers(handed_out, handed_out, STUB)), exercise.name


def test_an_unwritable_answers_file_costs_no_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_PROGRESS", str(tmp_path / "progress.txt"))
    (tmp_path / "answers.json").mkdir()
    HARMONIC.learner_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(HARMONIC.solution_path, HARMONIC.learner_path)
    report = grade(HARMONIC.name)
    assert report.status == PASSED and any("answers" in note for note in report.notes), report.notes
