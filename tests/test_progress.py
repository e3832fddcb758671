"""Status is the best grade: a pass stays passed with later grades beside it, in `perflab list`, `perflab progress`
and the landing page; `perflab reset` asks whether to clear an exercise's progress (grades, opened hints, written
answers), takes --progress or --keep-progress from a script, --all for the whole workspace, and says what it did."""

from __future__ import annotations

import io
import json

from conftest import run_cli
from perflab import cli, workspace
from perflab.grading import next_hint, progress, written
from perflab.manifest.exercises import load_manifest

HARMONIC = load_manifest().find("c2c-harmonic-mean")
LINES = ("c2c-harmonic-mean failed 2026-01-01T10:00:00Z\n"
         "c2c-harmonic-mean passed 2026-01-01T10:05:00Z\n"
         "c2c-harmonic-mean inconclusive 2026-01-01T10:09:00Z\n"
         "my own note, not a grade\n"
         "nsd-hunt failed 2026-01-01T10:10:00Z\n"
         "c2c-harmonic-mean failed 2026-01-01T10:12:00Z\n")


def with_progress() -> None:
    progress.progress_path().write_text(LINES)
    written.answers_path().write_text(json.dumps({
        HARMONIC.name: [{"question": "Why?", "answer": "Because.", "graded": "2026-01-01T10:05:00Z"}],
        "nsd-hunt": []}))


def test_a_pass_stays_passed_and_later_grades_are_listed_beside_it():
    with_progress()
    assert progress.current() == {HARMONIC.name: "passed", "nsd-hunt": "failed"}
    assert progress.standing()[HARMONIC.name].later_text() == "later: inconclusive, failed"
    listed = run_cli("list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if " c2c-harmonic-mean " in line)
    assert "passed (later: inconclusive, failed)" in row
    assert "1 of " in listed.stdout and "a pass stays passed" in listed.stdout
    from perflab.landing import render_html

    page = render_html(workspace.workspace_dir().parent)
    assert '<span class="status passed">passed</span> <small class="later">later: inconclusive, failed</small>' in page


def test_many_later_grades_are_counted_not_all_listed():
    progress.progress_path().write_text("".join(f"x {s} t\n" for s in ["passed"] + ["failed"] * 6 + ["inconclusive"]))
    assert progress.standing()["x"].later_text() == "later: 3 more, failed, failed, failed, inconclusive"


def test_reset_with_progress_clears_that_exercise_only_and_says_what(tmp_path):
    workspace.prepare()
    with_progress()
    assert next_hint(HARMONIC)[0] == 2
    done = run_cli("reset", HARMONIC.name, "--progress")
    assert done.returncode == 0, done.stderr
    assert "cleared: 4 grades, best passed; hint 2 of 3 opened; 1 written answer" in done.stdout
    assert progress.progress_path().read_text() == ("my own note, not a grade\n"
                                                    "nsd-hunt failed 2026-01-01T10:10:00Z\n")
    assert next_hint(HARMONIC)[0] == 1, "the hints start again from the first"
    assert HARMONIC.name not in written.kept() and "nsd-hunt" in written.kept()


def test_reset_without_a_terminal_or_with_keep_progress_keeps_it_and_says_how_to_clear():
    workspace.prepare()
    with_progress()
    for extra in ([], ["--keep-progress"]):
        done = run_cli("reset", HARMONIC.name, *extra)  # stdin is not a terminal here
        assert done.returncode == 0, done.stderr
        assert progress.progress_path().read_text() == LINES
    assert "progress kept, as --keep-progress says" in done.stdout
    again = run_cli("reset", HARMONIC.name)
    assert f"progress kept (4 grades, best passed; hint 2 of 3 opened; 1 written answer); `perflab reset " \
           f"{HARMONIC.name} --progress` clears it" in again.stdout


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reset_on_a_terminal_asks_first(monkeypatch, capsys):
    workspace.prepare()
    with_progress()
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert cli.main(["reset", HARMONIC.name]) == 0
    assert "Clear c2c-harmonic-mean's progress too (4 grades, best passed" in capsys.readouterr().out
    assert progress.progress_path().read_text() == LINES
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli.main(["reset", HARMONIC.name]) == 0
    assert "cleared: 4 grades" in capsys.readouterr().out and HARMONIC.name not in progress.current()


def test_reset_all_gives_every_notebook_afresh_and_clears_every_grade():
    workspace.prepare()
    with_progress()
    mine = HARMONIC.learner_path
    mine.write_text(mine.read_text().replace("YOUR CODE HERE", "my attempt"))
    done = run_cli("reset", "--all", "--progress")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": a fresh copy") == len(workspace.course_notebooks())
    assert "cleared: 5 grades of 2 exercises, 1 passed; 1 hint opened beyond the first; 1 written answer" in done.stdout
    assert mine.read_bytes() == HARMONIC.exercise_path.read_bytes()
    assert progress.entries() == [] and not written.answers_path().exists()
