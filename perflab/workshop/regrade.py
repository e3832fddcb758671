"""Re-grading for the instructor: what each learner's progress file calls passed, graded again.

The progress file is in the learner's home, so they can edit it, and root reads it and the
notebooks only as plain files the learner owns (perflab.workshop.learner_files). `perflab workshop regrade`
grades each exercise it calls passed (every exercise with --all) from the learner's saved
notebook, as `perflab grade` does, but as the learner's own user (their code never runs as
root), in an isolated Python (-I: no user site-packages, no PYTHON* variables of theirs),
with the environment their server has, and without touching their progress. The outcomes go
to regrades.json in the workshop's state folder, which only root can read or write; the
dashboard shows them beside what the progress file says. Each learner's sealed case (perflab.cases.workshop) is
graded too, from its seed, with the learner's code built and run as the learner.

A class's re-grade must not take an hour: a notebook still as handed out fails without being run
(the author check proves every untouched exercise fails), one unchanged since its last re-grade,
by its hash and its grader's, keeps that outcome if it passed or failed (an inconclusive one is
graded again), and the rest are graded GRADINGS_AT_ONCE at a time (their measurements queue as
every measurement does). A line on stderr says each outcome.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import pwd
import subprocess
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

from ..cases.workshop import regrade_cases
from ..errors import PerflabError
from ..grading import FAILED, PASSED, progress
from ..manifest.exercises import Exercise, load_manifest
from ..paths import REPO_ROOT
from ..results import write_atomic
from . import learner_files, roster
from .hub import require_root

GRADE_TIMEOUT_S = 1800  # a grader that boots VMs takes minutes; a stuck one must not stop the class's re-grade
ERROR = "error"  # the grader itself did not finish: no status to believe
GRADINGS_AT_ONCE = max(2, (os.cpu_count() or 2) // 2)  # a grading is mostly a kernel starting and importing
AS_HANDED_OUT = "not started: the notebook is the exercise as handed out"


def regrades_path() -> Path:
    return roster.state_dir() / "regrades.json"


def load_regrades() -> dict[str, dict[str, dict]]:
    """learner -> exercise -> {"status", "at", "detail"}: the newest re-grade of each."""
    try:
        return json.loads(regrades_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise PerflabError(
            f"cannot read {regrades_path()} ({err}): move it away; the next re-grade writes it anew"
        ) from None


# ANCHOR: as_learner
def grade_as_learner(learner: str, exercise: str, workshop: roster.Workshop) -> dict:
    """One exercise graded from the learner's saved notebook, as their user; {"status", "at", "detail"}."""
    account = pwd.getpwnam(roster.system_user(learner))
    env = {
        "HOME": account.pw_dir,
        "USER": account.pw_name,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        **roster.learner_environment(workshop, learner, account.pw_dir),
    }
    argv = [
        str(roster.VENV_BIN / "python"),
        "-m",
        "perflab.workshop.cgroups",  # held to the learner's limits
        account.pw_name,
        "--",
        "runuser",
        "-u",
        account.pw_name,
        "--",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        str(roster.VENV_BIN / "python"),
        "-I",
        "-m",
        "perflab",
        "grade",
        exercise,
        "--json",
        "--no-record",
    ]
    at = _now()
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
    """Re-grade the learners' passed exercises (all of them with `every`); one line per exercise re-graded, and a
    line to `say` as each outcome is known."""
    require_root("re-grading runs each learner's notebook as their own user")
    workshop = roster.require()
    unknown = [name for name in learners if name not in workshop.learners]
    if unknown:
        raise PerflabError(f"{unknown[0]} is not in this workshop: `perflab workshop status` lists its learners")
    saved = load_regrades()
    wanted, claims, exercises = [], {}, load_manifest().exercises
    for learner in learners or list(workshop.learners):
        files = learner_files.of(learner)
        claims[learner] = progress.current(text=files.text("work/progress.txt")) if files else {}
        wanted += [(learner, e) for e in exercises if every or claims[learner].get(e.name) == PASSED]
    outcomes = {}
    for (learner, exercise), outcome in _outcomes(wanted, workshop, saved, say):
        outcomes[learner, exercise.name] = outcome
        saved.setdefault(learner, {})[exercise.name] = outcome
        write_atomic(regrades_path(), json.dumps(saved, indent=2))  # kept as it goes: an interrupted run loses little
    lines = []
    for learner, exercise in wanted:
        outcome, said = outcomes[learner, exercise.name], claims[learner].get(exercise.name, "not graded")
        lines.append(
            f"{learner} {exercise.name}: {outcome['status']} (progress file: {said})"
            + (f": {outcome['detail']}" if outcome["detail"] and outcome["status"] != PASSED else "")
        )
    for learner, cases in regrade_cases(learners, say).items():  # every sealed case: a class has one each
        for name, outcome in cases.items():
            saved.setdefault(learner, {})[name] = outcome
            lines.append(f"{learner} {name}: {outcome['status']}: {outcome['detail']}")
        write_atomic(regrades_path(), json.dumps(saved, indent=2))
    return lines


def _outcomes(wanted: list[tuple[str, Exercise]], workshop: roster.Workshop, saved: dict, say: Callable[[str], None]):
    """((learner, exercise), outcome) for each, known ones first, then each grading as it ends."""
    known, to_grade = [], []
    for learner, exercise in wanted:
        files = learner_files.of(learner)
        notebook = _fingerprint(files.read(f"work/exercises/{exercise.notebook}") if files else None, exercise)
        before = saved.get(learner, {}).get(exercise.name, {})
        if notebook and notebook == _fingerprint(exercise.exercise_path.read_bytes(), exercise):
            known.append(
                ((learner, exercise), {"status": FAILED, "at": _now(), "detail": AS_HANDED_OUT, "notebook": notebook})
            )
        elif notebook and before.get("notebook") == notebook and before.get("status") in (PASSED, FAILED):
            known.append(((learner, exercise), before))
        else:
            to_grade.append(((learner, exercise), notebook))
    say(
        f"re-grading {len(wanted)} exercises: {len(known)} as handed out or unchanged since their last re-grade, "
        f"{len(to_grade)} to grade, {GRADINGS_AT_ONCE} at a time"
    )
    count = 0
    for key, outcome in known:
        count += 1
        say(
            f"[{count}/{len(wanted)}] {key[0]} {key[1].name}: {outcome['status']} "
            f"({'as handed out' if outcome['detail'] == AS_HANDED_OUT else 'unchanged since ' + outcome['at']})"
        )
        yield key, outcome
    with ThreadPoolExecutor(max_workers=GRADINGS_AT_ONCE) as pool:
        running = {
            pool.submit(grade_as_learner, learner, exercise.name, workshop): ((learner, exercise), notebook)
            for (learner, exercise), notebook in to_grade
        }
        for future in as_completed(running):
            key, notebook = running[future]
            outcome = {**future.result(), "notebook": notebook}
            count += 1
            say(f"[{count}/{len(wanted)}] {key[0]} {key[1].name}: {outcome['status']}")
            yield key, outcome


def _fingerprint(notebook: bytes | None, exercise: Exercise) -> str | None:
    """The notebook's SHA-256 and its grader's (the lab's exercises.py), or None when there is no notebook (none
    that is a plain file of the learner's: perflab.workshop.learner_files)."""
    if notebook is None:
        return None
    digest = hashlib.sha256(notebook)
    grader = REPO_ROOT.joinpath(*exercise.lab.package.split(".")) / "exercises.py"
    digest.update(grader.read_bytes())
    return digest.hexdigest()


def _now() -> str:
    return f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
