"""Cases in a workshop: each learner gets a sealed case of their own seed (`perflab workshop cases`), and the
instructor's re-grade grades it from the seed, as root, with the learner's code built and run as the learner.

Root writes nothing into a learner's home and reads nothing there that is not a plain file of theirs
(perflab.workshop.learner_files): a case is made in root's scratch folder and unpacked by the learner's
own tar, and a re-grade reads the learner's three files into root's scratch folder first. What the case
is (its seed and CPUs) comes from root's store, never from the .case.json in the learner's folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Callable

from ..errors import PerflabError
from ..grading import PASSED
from ..probe import online_cpus
from ..workshop import learner_files, roster
from ..workshop.hub import require_root
from .build import scratch
from .case import Case, new_case
from .grade import grade_case
from .store import remember, sealed_cases

LEARNER_FILES = ("diagnosis.toml", "service.c", "start.sh")  # all a grade reads of the learner's case


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
        with scratch("give") as staging:
            case = new_case(None, say=say, into=Path(staging), sealed=True)
            try:
                learner_files.give(roster.system_user(learner), case.folder, "work/cases")
            except PerflabError as err:  # their ~/work/cases is not a folder of theirs: the others still get one
                lines.append(f"{learner}: no case given: {err}")
                continue
        given = workspace / "cases" / case.name
        remember(case.number, case.seed, learner, given, case.cpus)
        lines.append(f"{learner}: {case.name} in {given}")
    return lines


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
            with scratch("regrade") as staging:
                case = _copied(int(number), entry, Path(staging))
                report = grade_case(case, record=False, progress_bar=False, user=roster.system_user(learner))
            unmet = [f"{c.name}: {c.got}" for c in report.checks if c.status != PASSED]  # the first says why
            outcome = {"status": report.status, "at": at, "detail": "; ".join([*report.notes, *unmet[:1]])}
        except PerflabError as err:
            outcome = {"status": "error", "at": at, "detail": str(err)}
        outcomes.setdefault(learner, {})[f"case-{number}"] = outcome
        say(f"{learner} case-{number}: {outcome['status']} ({outcome['detail']})")
    return outcomes


def _copied(number: int, entry: dict, staging: Path) -> Case:
    """The learner's case as root's store knows it, its learner's files copied into `staging` (plain files of
    theirs only: one that is missing or is not reads as empty, and the grade says what it lacks)."""
    files = learner_files.of(entry["learner"])
    if files is None:
        raise PerflabError(f"{entry['learner']} has no system user: their case cannot be read")
    relative = Path(entry["folder"]).relative_to(files.home)
    for name in LEARNER_FILES:
        (staging / name).write_bytes(files.read(f"{relative}/{name}") or b"")
    cpus = tuple(entry.get("cpus") or online_cpus() or [0])  # stores from before cpus were kept: this machine's
    return Case(int(entry["seed"]), cpus, staging, number)
