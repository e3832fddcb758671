"""Re-grading for the instructor: what each learner's progress file calls passed, graded again.

The progress file is in the learner's home, so they can edit it. `perflab workshop regrade`
grades each exercise it calls passed (every exercise with --all) from the learner's saved
notebook, as `perflab grade` does, but as the learner's own user (their code never runs as
root), in an isolated Python (-I: no user site-packages, no PYTHON* variables of theirs),
with the environment their server has, and without touching their progress. The outcomes go
to regrades.json in the workshop's state folder, which only root can read or write; the
dashboard shows them beside what the progress file says.
"""

from __future__ import annotations

import datetime as dt
import json
import pwd
import subprocess
from pathlib import Path
from typing import Callable

from ..errors import PerflabError
from ..grading import PASSED, progress
from ..grading.manifest import load_manifest
from ..results import write_atomic
from . import roster
from .hub import require_root

GRADE_TIMEOUT_S = 1800  # a grader that boots VMs takes minutes; a stuck one must not stop the class's re-grade
ERROR = "error"  # the grader itself did not finish: no status to believe


def regrades_path() -> Path:
    return roster.state_dir() / "regrades.json"


def load_regrades() -> dict[str, dict[str, dict]]:
    """learner -> exercise -> {"status", "at", "detail"}: the newest re-grade of each."""
    try:
        return json.loads(regrades_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise PerflabError(f"cannot read {regrades_path()} ({err}): move it away; the next re-grade writes it anew") from None


# ANCHOR: as_learner
def grade_as_learner(learner: str, exercise: str, workshop: roster.Workshop) -> dict:
    """One exercise graded from the learner's saved notebook, as their user; {"status", "at", "detail"}."""
    account = pwd.getpwnam(roster.system_user(learner))
    env = {"HOME": account.pw_dir, "USER": account.pw_name, "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
           **roster.learner_environment(workshop, learner, account.pw_dir)}
    argv = ["runuser", "-u", account.pw_name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            str(roster.VENV_BIN / "python"), "-I", "-m", "perflab", "grade", exercise, "--json", "--no-record"]
    at = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=account.pw_dir, timeout=GRADE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"status": ERROR, "at": at, "detail": f"the grader ran past {GRADE_TIMEOUT_S} s and was stopped"}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": ERROR, "at": at, "detail": f"the grader failed (exit {done.returncode}): {said}"}
    unmet = [c["name"] for c in report["checks"] if c["status"] != PASSED] + report["cell_errors"]
    return {"status": report["status"], "at": at, "detail": unmet[0] if unmet else ""}
# ANCHOR_END: as_learner


def regrade(learners: list[str], every: bool = False, say: Callable[[str], None] = print) -> list[str]:
    """Re-grade the learners' passed exercises (all of them with `every`); one line per exercise re-graded."""
    require_root("re-grading runs each learner's notebook as their own user")
    workshop = roster.require()
    unknown = [name for name in learners if name not in workshop.learners]
    if unknown:
        raise PerflabError(f"{unknown[0]} is not in this workshop: `perflab workshop status` lists its learners")
    exercises = [e.name for e in load_manifest().exercises]
    saved = load_regrades()
    lines = []
    for learner in learners or list(workshop.learners):
        try:
            claimed = progress.current(roster.workspace_of(learner) / "progress.txt")
        except PerflabError:  # unreadable: nothing claimed
            claimed = {}
        for exercise in exercises:
            if not every and claimed.get(exercise) != PASSED:
                continue
            say(f"re-grading {learner}'s {exercise}...")
            outcome = grade_as_learner(learner, exercise, workshop)
            saved.setdefault(learner, {})[exercise] = outcome
            write_atomic(regrades_path(), json.dumps(saved, indent=2))  # kept as it goes: an interrupted run loses one
            said = claimed.get(exercise, "not graded")
            lines.append(f"{learner} {exercise}: {outcome['status']} (progress file: {said})"
                         + (f": {outcome['detail']}" if outcome["detail"] and outcome["status"] != PASSED else ""))
    return lines
