"""`perflab workshop regrade` for a class: what it grades again, what it does not, how many at once, what it says.

The learners' workspaces are folders here and the grading itself is a stand-in that records when it ran; the
end-to-end test in test_workshop.py grades real notebooks as real learners.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from perflab.manifest.exercises import load_manifest
from perflab.workshop import learner_files, regrade, roster
from perflab.workshop.learner_files import LearnerFiles

EDITED = ["c2c-harmonic-mean", "llc-predict", "nsd-fix"]


@pytest.fixture
def classroom(tmp_path, monkeypatch):
    """alice and bob, each with the course's notebooks as handed out; alice has edited three exercises.
    Returns the list of gradings that ran: (learner, exercise, began, ended)."""
    from perflab.workspace import prepare

    monkeypatch.setenv("PERFLAB_WORKSHOP_DIR", str(tmp_path / "state"))
    roster.save(roster.Workshop("127.0.0.1", 1, 2, 3, 4, "t", "t", "h", learners={"alice": "h", "bob": "h"}))
    for learner in ("alice", "bob"):
        monkeypatch.setenv("PERFLAB_WORKSPACE", str(tmp_path / learner / "work"))
        prepare()
    monkeypatch.setattr(learner_files, "of", lambda learner: LearnerFiles(tmp_path / learner, os.getuid()))
    monkeypatch.setattr(regrade, "require_root", lambda why: None)
    for name in EDITED:
        with (tmp_path / "alice" / "work" / "exercises" / load_manifest().find(name).notebook).open("a") as notebook:
            notebook.write("\n")  # saved again: another file, whatever the grade
    ran, lock = [], threading.Lock()

    def grading(learner, exercise, workshop):
        began = time.monotonic()
        time.sleep(0.4)
        with lock:
            ran.append((learner, exercise, began, time.monotonic()))
        return {"status": "passed", "at": "2026-01-01T00:00:00Z", "detail": ""}

    monkeypatch.setattr(regrade, "grade_as_learner", grading)
    return ran


def test_a_class_regrade_grades_only_what_changed_a_few_at_a_time_and_says_each_outcome(classroom):
    said = []
    lines = regrade.regrade([], every=True, say=said.append)
    exercises = len(load_manifest().exercises)
    assert sorted(exercise for _, exercise, _, _ in classroom) == sorted(EDITED)
    assert {learner for learner, *_ in classroom} == {"alice"}
    overlapping = any(a[2] < b[3] and b[2] < a[3] for a in classroom for b in classroom if a is not b)
    assert overlapping, "the gradings ran one after another"
    assert len(lines) == 2 * exercises
    assert "bob llc-predict: failed (progress file: not graded): not started: the notebook is the exercise as " \
           "handed out" in lines
    assert "alice llc-predict: passed (progress file: not graded)" in lines
    assert said[0].startswith(f"re-grading {2 * exercises} exercises: {2 * exercises - 3} as handed out or unchanged")
    assert [line.split("]")[0] for line in said[1:]] == [f"[{n}/{2 * exercises}" for n in range(1, 2 * exercises + 1)]


def test_an_unchanged_notebook_keeps_its_regrade_and_an_edited_or_undecided_one_is_graded_again(classroom, tmp_path):
    regrade.regrade(["alice"], every=True, say=lambda line: None)
    classroom.clear()
    said = []
    regrade.regrade(["alice"], every=True, say=said.append)
    assert classroom == [], "an unchanged notebook was graded again"
    assert "alice llc-predict: passed (unchanged since 2026-01-01T00:00:00Z)" in [
        line.split("] ")[1] for line in said[1:]
    ]
    with (tmp_path / "alice" / "work" / "exercises" / load_manifest().find("llc-predict").notebook).open(
        "a"
    ) as notebook:
        notebook.write("\n")
    saved = regrade.load_regrades()
    saved["alice"]["nsd-fix"]["status"] = "inconclusive"  # as a race the noise left undecided
    regrade.write_atomic(regrade.regrades_path(), regrade.json.dumps(saved))
    classroom.clear()
    regrade.regrade(["alice"], every=True, say=lambda line: None)
    assert sorted(exercise for _, exercise, _, _ in classroom) == ["llc-predict", "nsd-fix"]
