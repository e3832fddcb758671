"""The list of labs, labs/manifest.toml.

Schema (format_version 1):
  [[lab]]       one table per lab, in course order:
    number      its place in the course; the folder is labs/NN-name/
    name        stable short name: `perflab run NAME`, results/NAME/
    title       the lab's title. The report and the landing page take it from
                here; the lab is "Lab N: <title>" (LabInfo.heading) in the book's
                SUMMARY and chapter heading and in its README's and notebook's
                first heading, which are written by hand, as is README.md's
                table, and tests/test_lab_contract.py checks them all against it
    phenomenon  one line for the tables of the README and the introduction
    status      "ready" (in this version) or "planned" (a draft chapter)
    here        how this machine can show it, or "" when it cannot
    vm          VM profiles (vm/NAME.toml) that can show it
    recorded    the recorded data it replays, or ""
    exercises   names from exercises/manifest.toml, in the order learners meet them
    expected_s  {quick, full}: how long a run takes, in seconds (quick: the median of the README's
                verdict-stability table; full: a full run measured, left out where none was); the
                measurement queue's estimate until a run of the lab has been measured on this machine
    budget_s    {quick, full}: the longest a run may hold a workshop's measurement queue, in seconds;
                the queue ends a learner's run that takes longer (perflab.workshop.turns)

The package of a lab is perflab/labs/<name with _ for -, a leading digit spelled
out>/ (paths.lab_package); perflab/labs/__init__.py says what it must hold.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import PerflabError
from ..paths import LABS_DIR, lab_package

FORMAT_VERSION = 1
MANIFEST = LABS_DIR / "manifest.toml"
STATUSES = ("ready", "planned")
KEYS = {"number": int, "name": str, "title": str, "phenomenon": str, "status": str, "here": str, "vm": list,
        "recorded": str, "exercises": list, "expected_s": dict, "budget_s": dict}


@dataclass(frozen=True)
class Seconds:
    """A time for the quick run and one for the full run; None where it is not known."""

    quick: float
    full: float | None

    def of(self, quick: bool) -> float | None:
        return self.quick if quick else self.full


@dataclass(frozen=True)
class LabInfo:
    """One lab as the manifest lists it."""

    number: int
    name: str
    title: str
    phenomenon: str
    status: str
    here: str
    vm: tuple[str, ...]
    recorded: str
    exercises: tuple[str, ...]
    expected_s: Seconds
    budget_s: Seconds

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def heading(self) -> str:
        """How the course names the lab everywhere: one number, the manifest's title."""
        return f"Lab {self.number}: {self.title}"

    @property
    def folder(self) -> str:
        """The lab's folder in the checkout: its C programs, notebook and README."""
        return f"labs/{self.number:02d}-{self.name}"

    @property
    def package(self) -> str:
        return f"perflab.labs.{lab_package(self.name)}"

    @property
    def chapter(self) -> str:
        """The book's chapter, relative to book/src."""
        return f"labs/{self.number:02d}-{self.name}.md"

    def load(self):
        """The lab's one instance, LAB, from its package."""
        if not self.ready:
            raise PerflabError(f"lab {self.name} is planned but not in this version of the course; "
                               f"available: {', '.join(available())}")
        return importlib.import_module(self.package).LAB


def _entry(table: dict, path: Path) -> LabInfo:
    where = f"{path}: lab {table.get('name', '?')!r}"
    if set(table) != set(KEYS):
        raise PerflabError(f"{where} must set exactly {', '.join(KEYS)}")
    for key, kind in KEYS.items():
        if not isinstance(table[key], kind):
            raise PerflabError(f"{where}: {key} must be a {kind.__name__}")
    if table["status"] not in STATUSES:
        raise PerflabError(f"{where}: status must be one of {', '.join(STATUSES)}")
    return LabInfo(**{**table, "vm": tuple(table["vm"]), "exercises": tuple(table["exercises"]),
                      "expected_s": _seconds(table["expected_s"], f"{where}: expected_s", full_required=False),
                      "budget_s": _seconds(table["budget_s"], f"{where}: budget_s", full_required=True)})


def _seconds(given: dict, where: str, full_required: bool) -> Seconds:
    if "quick" not in given or not set(given) <= {"quick", "full"} or (full_required and "full" not in given):
        raise PerflabError(f"{where} must be {{quick = SECONDS, full = SECONDS}}"
                           + ("" if full_required else ", full only where a full run was measured"))
    for value in given.values():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise PerflabError(f"{where}: give a positive number of seconds, not {value!r}")
    return Seconds(given["quick"], given.get("full"))


@cache
def labs(path: Path = MANIFEST) -> tuple[LabInfo, ...]:
    """Every lab of the manifest, in course order."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise PerflabError(f"cannot read the lab manifest {path}: {err}") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise PerflabError(f"{path}: format_version must be {FORMAT_VERSION}; update perflab or the manifest")
    found = tuple(_entry(table, path) for table in data.get("lab", []))
    if [lab.number for lab in found] != sorted({lab.number for lab in found}):
        raise PerflabError(f"{path}: labs must be listed once each, in the order of their numbers")
    return found


def available() -> list[str]:
    """The names of the labs in this version of the course."""
    return [lab.name for lab in labs() if lab.ready]


def find(name: str) -> LabInfo:
    for lab in labs():
        if lab.name == name:
            return lab
    raise PerflabError(f"unknown lab {name!r}; choose one of: {', '.join(available())} (or `all`)")


def run_named(what: str) -> tuple[LabInfo, bool] | None:
    """(the lab, quick?) when a measurement's description is a lab run, `perflab run NAME [--quick]`, else None."""
    for lab in labs():
        if what in (f"perflab run {lab.name}", f"perflab run {lab.name} --quick"):
            return lab, what.endswith("--quick")
    return None


def lab_named(what: str) -> LabInfo | None:
    """The lab a measurement's description names, by its name or one of its exercises', else None."""
    words = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", what))
    return next((lab for lab in labs() if lab.name in words or words & set(lab.exercises)), None)


def lab_of_exercise(exercise: str) -> LabInfo:
    """The lab whose manifest entry lists this exercise."""
    for lab in labs():
        if exercise in lab.exercises:
            return lab
    raise PerflabError(f"exercise {exercise!r} is in no lab's `exercises` in {MANIFEST}: add it there")
