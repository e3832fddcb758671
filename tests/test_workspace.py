"""The learner's workspace: their own notebooks in work/, never overwritten, never in git's way."""

from __future__ import annotations

import shutil
import subprocess

import nbformat

from conftest import REPO, run_cli
from perflab import workspace
from perflab.grading import grade, progress
from perflab.manifest.exercises import load_manifest


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


def test_prepare_copies_every_course_notebook_and_never_overwrites_an_edit():
    first = workspace.prepare()
    assert len(first.copied) == len(workspace.course_notebooks()) and not first.kept
    mine = load_manifest().find("c2c-harmonic-mean").learner_path
    mine.write_text(mine.read_text().replace("YOUR CODE HERE", "my own attempt"))
    edited = mine.read_bytes()
    again = workspace.prepare()
    assert not again.copied and mine in again.kept
    assert mine.read_bytes() == edited


def test_reset_gives_a_fresh_copy_and_keeps_the_old_one():
    exercise = load_manifest().find("c2c-harmonic-mean")
    workspace.prepare()
    exercise.learner_path.write_text(exercise.learner_path.read_text().replace("YOUR CODE HERE", "my attempt"))
    done = run_cli("reset", "c2c-harmonic-mean")
    assert done.returncode == 0, done.stderr
    backups = list((workspace.workspace_dir() / ".backup").glob("harmonic-mean-*.ipynb"))
    assert len(backups) == 1 and "my attempt" in backups[0].read_text()
    assert exercise.learner_path.read_bytes() == exercise.exercise_path.read_bytes()
    assert "Reload Notebook from Disk" in done.stdout  # the copy a JupyterLab tab may show was replaced


def test_a_first_copy_by_reset_asks_for_no_reload():
    """A learner's first `perflab reset NAME` (the way to a copy without grading) replaced nothing, yet told them
    to reload open notebooks."""
    done = run_cli("reset", "c2c-harmonic-mean", "--keep-progress")
    assert done.returncode == 0, done.stderr
    assert "a fresh copy" in done.stdout and "Reload" not in done.stdout


def test_grade_grades_the_learners_copy_and_only_that_copy_counts_as_progress():
    exercise = load_manifest().find("c2c-pipeline-pinning")
    assert grade(exercise.name, exercise.solution_path).status == "passed"
    assert grade(exercise.name, exercise.exercise_path).status == "failed"
    assert progress.entries() == [], "grading solutions/ or exercises/ must not enter the learner's progress"
    exercise.learner_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(exercise.solution_path, exercise.learner_path)
    assert grade(exercise.name).status == "passed"
    assert progress.current() == {exercise.name: "passed"}


def test_grading_in_the_workspace_leaves_git_status_as_it_was():
    before = _git_status()
    workspace.prepare()
    grade("c2c-pipeline-pinning")
    for verb in ("hint", "reset"):
        assert run_cli(verb, "c2c-pipeline-pinning").returncode == 0
    assert run_cli("list").returncode == 0
    assert _git_status() == before


def test_a_corrupt_or_unreadable_progress_file_costs_no_grade(tmp_path, monkeypatch):
    exercise = load_manifest().find("c2c-pipeline-pinning")
    corrupt = tmp_path / "corrupt-progress.txt"
    corrupt.write_bytes(b"\xff\xfe garbage\nc2c-pipeline-pinning\n\x00\x00 passed?\nnot a line at all\n")
    monkeypatch.setenv("PERFLAB_PROGRESS", str(corrupt))
    assert grade(exercise.name, exercise.exercise_path).hint  # a failed grade with its hint, no crash
    unreadable = tmp_path / "folder-not-file"
    unreadable.mkdir()
    monkeypatch.setenv("PERFLAB_PROGRESS", str(unreadable))
    workspace.prepare()
    shutil.copy(exercise.solution_path, exercise.learner_path)
    report = grade(exercise.name)
    assert report.status == "passed" and "progress not recorded" in report.notes[0]


def test_the_notebook_links_back_to_its_chapter_and_the_chapter_to_the_notebook():
    from perflab.manifest.labs import labs

    for lab in labs():
        if not lab.ready:
            continue
        first = nbformat.read(REPO / lab.folder / "lab.ipynb", as_version=4).cells[0].source
        chapter_html = lab.chapter.removesuffix(".md") + ".html"
        assert f"](/hub/user-redirect/perflab/book/{chapter_html})" in first, (
            f"{lab.folder}/lab.ipynb does not link its chapter"
        )
        chapter = (REPO / "book" / "src" / lab.chapter).read_text()
        assert f"](/hub/user-redirect/lab/tree/work/{lab.folder}/lab.ipynb)" in chapter, (
            f"{lab.chapter} does not link its notebook"
        )
