"""The labs, and the contract every lab follows.

labs/manifest.toml lists the labs (perflab/manifest/labs.py reads it). A ready
lab is two folders with the same files in every lab:

    labs/NN-name/                 the C programs, a Makefile that includes
                                  labs/common.mk, lab.ipynb, README.md and
                                  example-output.txt
    perflab/labs/name/            the lab's Python package:
        __init__.py               the lab's docstring and `from .run import LAB`
        run.py                    a subclass of `Lab` below and its one instance LAB:
                                  settings, choosing CPUs, measuring, judging
        figures.py                figures(verdict) -> [(title, Figure)], and the
                                  notebook's widget panels
        exercises.py              the checks its exercises name in exercises/manifest.toml
        cli.py                    optional: subcommands of its own (below)
        ...                       helpers of this lab alone (a parser, a simulator)

`Lab.run` is the skeleton every lab shares; no lab overrides it:

    settings_for -> under the measurement lock (taken once, held to the end):
    probe -> choose_cpus -> check the results folder is writable -> replay a
    crashed run's system changes and end the programs it left -> measure,
    watching its CPUs for neighbours -> judge -> cannot-show under an emulated
    CPU if the lab says why -> inconclusive if neighbours took its CPUs and could
    have made the verdict -> save the result with its verdict

A lab writes only what is its own:

    name              its name in the manifest
    QUICK, FULL       how much to measure: two instances of a frozen dataclass
    RUNS              the fields of that dataclass that --runs sets
    OPTIONS           lab-specific choices, {option: (default, other values...)}
    EMULATED          why an emulated CPU (QEMU's TCG) cannot show it; None if it can
    IN_A_VM           what a virtual machine does to the measurement: a note on every
                      verdict judged in one
    CANNOT_SHOW       what shows the idea where this machine cannot
    BOUNDS            the physical bounds of its raw samples (perflab.bounds.Bound),
                      at least one, each with the physics that sets it: a grader refuses
                      a saved result with a sample outside them
    TIME_RATIO        True when its effect is a ratio of its arms' times or rates
                      (verdict.judge_change, judge_paired_change): a neighbour then
                      can have moved it only as much as it slowed an arm, and a
                      verdict its widened interval still decides stands beside one
    choose_cpus(machine, cpus) -> placement
                      where to measure; raises CannotShow when no CPUs of this
                      machine fit (with -C given, that is the learner's error)
    watched_cpus(placement, **options) -> [cpu, ...]
                      the CPUs on which another program would change what it
                      measures (perflab.interference watches them); [] where
                      none can (an instruction count under icount)
    measure(machine, placement, settings, progress, **options) -> result
                      a dict from results.new_result with every raw sample; a
                      change to the system goes through perflab.knobs, and a
                      program starts only through perflab.processes (run, start),
                      so it dies with the lab's process, even on kill -9; raises
                      CannotShow, before measuring, when a tool it needs is
                      missing here (QEMU, a guest image)
    judge(machine, result) -> Verdict
                      verdict, reason, effect and notes from the result alone

Figures are drawn from the result in memory (verdict.result), never re-read
from disk.

A lab may add subcommands to `perflab`, for a tool that is useful beyond its
run (`perflab c2c analyze` reads any latency matrix), in cli.py:

    add_commands(commands)
                      adds them with commands.add_parser(name, help=...,
                      description=..., examples=(...)), as argparse's
                      subparsers do; each sets func=handler, and
                      handler(args) returns the exit code

perflab/cli/labtools.py finds cli.py in the package of every ready lab of
the manifest and loads it by its path for every `perflab` command, without
importing the lab's package: so only the standard library at its top, and the
lab's modules imported absolutely inside the handlers. `perflab --help` lists
the commands under their lab.

tests/test_lab_contract.py checks every lab against this contract.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, ClassVar

from .. import interference
from ..bounds import Bound
from ..cpulist import check_cpus
from ..errors import PerflabError
from ..lock import measurement_lock
from ..manifest.labs import LabInfo, available, find, labs
from ..probe import Machine, online_cpus, probe
from ..sequential import MAX_RUNS
from ..verdict import Verdict, unless_emulated

__all__ = ["Bound", "CannotShow", "Lab", "LabInfo", "available", "find", "labs"]


def reserved_cpus() -> list[int] | None:
    """The CPUs a workshop reserved for this learner (PERFLAB_CPUS), which every lab then uses unless told others."""
    from ..cpulist import parse_cpulist

    given = os.environ.get("PERFLAB_CPUS")
    return parse_cpulist(given) if given else None


def capped_runs() -> int | None:
    """The rounds every race is capped at when a run gives no --runs (PERFLAB_RUNS), for headless runs whose point
    is the plumbing, not the verdict: the tests' notebooks and the author check."""
    given = os.environ.get("PERFLAB_RUNS")
    if not given:
        return None
    if not given.isdigit() or not 1 <= int(given) <= MAX_RUNS:
        raise PerflabError(f"PERFLAB_RUNS={given!r} is out of range: give a whole number of rounds from 1 to "
                           f"{MAX_RUNS}, or unset it")
    return int(given)


def one_cpu(machine: Machine, cpus: list[int] | None) -> int:
    """For a lab that measures on one CPU: the first one given, checked, else the last online CPU (CPU 0 takes
    the most interrupts)."""
    if cpus:
        check_cpus(cpus, machine.online_cpus)
        return cpus[0]
    return machine.online_cpus[-1]


class CannotShow(PerflabError):
    """This machine has no CPUs (or devices) the lab can use; the message says why."""


# ANCHOR: contract
class Lab(ABC):
    """The contract: see the module's docstring."""

    name: ClassVar[str]
    QUICK: ClassVar[Any]
    FULL: ClassVar[Any]
    RUNS: ClassVar[tuple[str, ...]] = ()
    OPTIONS: ClassVar[dict[str, tuple]] = {}
    EMULATED: ClassVar[str | None] = None
    IN_A_VM: ClassVar[str] = ""
    CANNOT_SHOW: ClassVar[str] = ""
    BOUNDS: ClassVar[tuple[Bound, ...]] = ()
    TIME_RATIO: ClassVar[bool] = False

    @property
    def info(self) -> LabInfo:
        return find(self.name)

    def probe(self) -> Machine:
        return probe()

    def settings_for(self, quick: bool, runs: int | None = None):
        """QUICK or FULL; `runs` replaces every field named in RUNS."""
        chosen = self.QUICK if quick else self.FULL
        if runs is None:
            return chosen
        if not self.RUNS:
            raise PerflabError(f"{self.name} measures until its verdict is decided and takes no --runs; drop it "
                               "(--quick for a shorter first look)")
        if not 1 <= runs <= MAX_RUNS:
            raise PerflabError(f"--runs {runs} is out of range: give 1 to {MAX_RUNS} interleaved rounds")
        return replace(chosen, **{name: runs for name in self.RUNS})

    @abstractmethod
    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> Any:
        """Where to measure: the learner's CPUs checked, or the lab's own choice; raise CannotShow if none fit."""

    def placement_here(self, cpus: list[int] | None = None, machine: Machine | None = None) -> Any:
        """choose_cpus outside a lab run (a grader's fresh measurement, an exercise's helper): within the CPUs a
        workshop reserved for this learner (PERFLAB_CPUS) unless told others."""
        return self.choose_cpus(machine or self.probe(), cpus or reserved_cpus())

    @abstractmethod
    def watched_cpus(self, placement: Any, **options) -> list[int]:
        """The CPUs whose neighbours would change what measure() measures at this placement."""

    @abstractmethod
    def measure(self, machine: Machine, placement: Any, settings: Any, progress: bool, **options) -> dict[str, Any]:
        """Measure at the placement; return a result (results.new_result) with the raw samples."""

    @abstractmethod
    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        """The verdict on a result, from its raw samples alone."""

    def cannot_show(self, machine: Machine, reason: CannotShow) -> Verdict:
        """The verdict when choose_cpus finds nothing here to measure."""
        return Verdict(self.name, "cannot-show", f"{reason}. {self.CANNOT_SHOW}".strip())

    def run(self, cpus: list[int] | None = None, quick: bool = False, runs: int | None = None,
            progress: bool = True, wait: bool = True, **options) -> Verdict:
        """The whole lab, start to verdict; the result file it saves is in verdict.results."""
        from .. import journal, records, results

        if cpus and (online := online_cpus()) is not None:
            check_cpus(
                cpus, online
            )  # before the queue: a CPU this machine lacks is refused at once, not after the wait
        reserved = None if cpus else reserved_cpus()
        cpus = cpus or reserved
        chosen_options = self._options(options)
        if runs is None and self.RUNS:
            runs = capped_runs()
        settings = self.settings_for(quick, runs)
        asked = f"perflab run {self.name}{' --quick' if quick else ''}{f' --runs {runs}' if runs else ''}"
        with measurement_lock(asked, wait=wait):  # one lock, probe to saved result; durations kept per `asked`
            machine = self.probe()
            try:
                placement = self.choose_cpus(machine, cpus)
            except CannotShow as reason:
                if reserved:
                    raise CannotShow(f"{reason} (PERFLAB_CPUS: the CPUs this workshop reserved for you; ask the "
                                     "instructor for more)") from None
                if cpus:
                    raise  # the CPUs the learner chose do not qualify: say so, do not judge the machine
                return self.cannot_show(machine, reason)
            results.check_writable(results.results_dir() / self.name)
            journal.recover()
            records.end_leftovers(say=True)
            try:
                with interference.watch(self.watched_cpus(placement, **chosen_options)) as watched:
                    result = self.measure(machine, placement, settings, progress, **chosen_options)
            except CannotShow as reason:  # a tool or device the measurement needs is missing here
                if cpus:
                    raise
                return self.cannot_show(machine, reason)
            result["interference"] = watched.summary if watched else None
            verdict = self.verdict_of(machine, result)
            result["verdict"] = verdict.to_json()
            verdict.results = str(results.save(result))
        verdict.result = result
        return verdict
    # ANCHOR_END: contract

    def verdict_of(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        """The verdict on a result, with the notes this machine adds; the same from a saved result as in the run."""
        verdict = self.judge(machine, result)
        if self.IN_A_VM and machine.value("virtualization"):
            verdict.notes.append(self.IN_A_VM)
        if self.EMULATED:
            verdict = unless_emulated(verdict, machine, self.EMULATED)
        return interference.unless_quiet(verdict, result.get("interference"), self.TIME_RATIO)

    def figures(self, verdict: Verdict) -> list[tuple[str, Any]]:
        """The lab's pictures of a verdict, from figures.py (imported late: matplotlib is slow to load)."""
        return importlib.import_module(f"{self.info.package}.figures").figures(verdict)

    def _options(self, given: dict[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.OPTIONS)
        if unknown:
            raise PerflabError(f"{self.name} has no option {sorted(unknown)[0]!r}; its options: "
                               f"{', '.join(self.OPTIONS) or 'none'}")
        chosen = {name: given.get(name, values[0]) for name, values in self.OPTIONS.items()}
        for name, value in chosen.items():
            if value not in self.OPTIONS[name]:
                raise PerflabError(f"{self.name}: {name} must be one of {', '.join(map(str, self.OPTIONS[name]))}, "
                                   f"not {value!r}")
        return chosen

