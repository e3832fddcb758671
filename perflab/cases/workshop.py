"""Cases in a workshop: each learner gets a sealed case of their own seed (`perflab workshop cases`), and the
instructor's re-grade grades it from the seed, as root, with the learner's code built and run as the learner."""

from __future__ import annotations

import datetime as dt
import os
import pwd
from pathlib import Path
from typing import Callable

from ..errors import PerflabError
from ..grading import PASSED
from ..workshop import roster
from ..workshop.hub import require_root
from .case import load_case, new_case
from .grade import grade_case
from .store import remember, sealed_cases


def give_cases(learners: list[str], say: Callable[[str], None] = print) -> list[str]:
    """A sealed case for each learner named (every learner when none is) who has none yet; a line for each."""
    require_root("giving cases writes into each learner's home and keeps the seeds where only root reads them")
    workshop = roster.require()
    unknown = [name for name in learners if name not in workshop.learners]
    if unknown:
        raise PerflabError(f"{unknown[0]} is not in this workshop: `perflab workshop status` lists its learners")
    has = {entry["learner"]: number for number, entry in sealed_cases().items()}
    lines = []
    for learner in learners or list(workshop.learners):
        if learner in has:
            lines.append(f"{learner}: has case-{has[learner]} already")
            continue
        workspace = roster.workspace_of(learner)
        if workspace is None:
            lines.append(f"{learner}: no system user, no case")
            continue
        case = new_case(None, say=say, into=workspace / "cases", sealed=True)
        remember(case.number, case.seed, learner, case.folder)
        _give(case.folder, roster.system_user(learner))
        lines.append(f"{learner}: {case.name} in {case.folder}")
    return lines


def _give(folder: Path, user: str) -> None:
    """The case's folder, and the cases folder above it, owned by the learner."""
    account = pwd.getpwnam(user)
    for path in (folder.parent, folder, *folder.iterdir()):
        os.chown(path, account.pw_uid, account.pw_gid)


def regrade_cases(learners: list[str], say: Callable[[str], None] = print) -> dict[str, dict[str, dict]]:
    """learner -> case name -> {"status", "at", "detail"}: each sealed case of the learners named (all when none
    is) graded from its seed, the learner's code as the learner. The detail is the causes found and fixed, and
    the first check not passed with what it found."""
    outcomes: dict[str, dict[str, dict]] = {}
    for number, entry in sealed_cases().items():
        learner = entry["learner"]
        if learners and learner not in learners:
            continue
        at = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
        try:
            report = grade_case(load_case(Path(entry["folder"])), record=False, progress_bar=False,
                                user=roster.system_user(learner))
            unmet = [f"{c.name}: {c.got}" for c in report.checks if c.status != PASSED]  # the first says why
            outcome = {"status": report.status, "at": at, "detail": "; ".join([*report.notes, *unmet[:1]])}
        except PerflabError as err:
            outcome = {"status": "error", "at": at, "detail": str(err)}
        outcomes.setdefault(learner, {})[f"case-{number}"] = outcome
        say(f"{learner} case-{number}: {outcome['status']} ({outcome['detail']})")
    return outcomes
