"""Checks for the first-core IPI exercises.

The rows that rise are measured anew at every grading, on CPUs watched for
neighbours (perflab.grading.live); the quiet-CPU settings
are applied through the journal, measured and put back, beside a known wrong
setting that must be loud for the grade to mean anything; the original case's
ratio is checked with the learner's function on observations drawn anew.
"""

from __future__ import annotations

import random
from typing import Any

from ...build import ensure_built
from ...cpulist import format_cpulist, parse_cpulist
from ...errors import PerflabError
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, calls, refuses
from ...grading.answers import function_check
from ...grading.live import busy_check, watched
from ...grading.numbers import shown
from ...journal import SystemChanges
from ...knobs import IrqAffinity, RqAffinity
from ...lock import measurement_lock
from ...paths import scratch
from ...probe import Machine
from ...sequential import Race
from ...sysfs import default_root
from . import recorded
from .completions import MODES, SOURCE_DIR, BlockPlan, Skipped, block_plan, block_run
from .run import LAB, MIN_PER_OP, OPERATIONS, ROWS, decide_rows, measure_bystander

# Grading the rows: the lab's quick race, until every operation's every row is decided.
ROWS_SETTINGS = LAB.QUICK
EVERY_ROW = tuple((op, row) for op in OPERATIONS for row in ROWS)
# A quiet CPU takes at most this many BLOCK softirqs and CAL interrupts per 1,000 reads of another CPU
# (the rest of the system's I/O adds a few); the known wrong setting must put at least LOUD there.
QUIET_PER_1000 = 50
LOUD_PER_1000 = 500
QUIET_READS = 2000
KNOWN_WRONG = {"rq_affinity": "1", "irq_cpus": None}  # the 2.6.32 system's setting, with the interrupt left alone


# ---------------------------------------------------------------- which rows rise

def rows_that_rise(raced: Race, op: str, victim: int) -> tuple[set[str] | None, str]:
    """The rows that rise on the victim for `op`, decided for every row; None, saying why, if a row is undecided
    or rose on fewer than MIN_PER_OP of the operations yet significantly: an interrupt for a CPU whose thread is
    not running is skipped (membarrier asks only the CPUs running a thread of the process now, and a TLB flush
    skips a CPU that has switched to another process, or a vCPU its host preempted), so a bystander that was off
    its CPU for most operations counts a trickle of what it would take, and that is not "does not rise"."""
    rising, said = set(), []
    for row in ROWS:
        verdict, effect = decide_rows(raced.kept_values(), op, row, victim, raced.alpha_per_look)
        if verdict == "inconclusive":
            return None, f"{row}: {effect.text()}"
        if verdict == "not-reproduced" and effect.p_value < raced.alpha_per_look and effect.ci_low > 0:
            return None, (f"{row} rose, but on fewer than one {op} in {round(1 / MIN_PER_OP)} ({effect.text()}): "
                          "the bystander was off its CPU for most of them")
        if verdict == "reproduced":
            rising.add(row)
        said.append(f"{row} {shown(effect.value)} per operation")
    return rising, ", ".join(said)


@refuses(rows_that_rise)
def predict_rows(ns: Answers) -> list[Check]:
    predicted = ns.get("RISES")
    valid = isinstance(predicted, dict) and set(predicted) == set(OPERATIONS) and all(
        isinstance(rows, (list, tuple, set)) and set(rows) <= set(ROWS) for rows in predicted.values())
    checks = [Check("RISES names the rows for munmap, mprotect and membarrier", PASSED if valid else FAILED,
                    f"a dict of {', '.join(OPERATIONS)} to lists of rows from {ROWS}", shown(predicted)[:120])]
    if not valid:
        return checks
    machine = LAB.probe()
    try:
        placement = LAB.placement_here(machine=machine)
    except PerflabError as reason:
        return checks + [Check("a fresh measurement", INCONCLUSIVE, "two CPUs to measure on", str(reason))]
    with measurement_lock("perflab grade ipi-predict-rows"), watched(LAB.watched_cpus(placement)) as seen:
        raced = Race.from_json(measure_bystander(placement, ROWS_SETTINGS, False, EVERY_ROW)["race"])
    for op in OPERATIONS:
        name = f"{op}: the rows that rise on the bystander"
        measured, said = rows_that_rise(raced, op, placement.victim)
        mine = sorted(predicted[op])
        if seen.busy:
            checks.append(busy_check(name, "a measurement on quiet CPUs", seen, f"measured just now: {said}"))
        elif measured is None:
            checks.append(Check(name, INCONCLUSIVE, "a decided measurement",
                                f"undecided just now ({said}): grade again"))
        else:
            checks.append(Check(name, PASSED if set(mine) == measured else FAILED,
                                f"{sorted(measured)} (measured just now: {said})", shown(mine)))
    return checks


# ---------------------------------------------------------------- keep a CPU quiet

def quiet_setup(machine: Machine | None = None) -> BlockPlan | Skipped:
    """The disk, its interrupt, the latency-critical CPU (irq_cpu: where the interrupt arrives now) and the reading
    CPU (submitter); or why this machine cannot measure them."""
    return block_plan(machine or LAB.probe(), default_root())


def noise_on(setup: BlockPlan, rq_affinity: str, irq_cpus: list[int] | None) -> dict[str, int]:
    """BLOCK softirqs and CAL on the latency-critical CPU per 1,000 reads, with these settings (then restored)."""
    cpu = str(setup.irq_cpu)
    with SystemChanges() as changes, scratch("quiet") as folder:
        if irq_cpus is not None:
            changes.set(IrqAffinity(str(setup.irq)), format_cpulist(irq_cpus))
        changes.set(RqAffinity(setup.disk), rq_affinity)
        sample = block_run(ensure_built(SOURCE_DIR, "blockread"), setup, setup.submitter, QUIET_READS, folder)
    return {counter: round(1000 * sample[counter][cpu] / sample["reads"]) for counter in ("block", "cal")}


def _irq_cpus(answer: Any, online: list[int]) -> list[int] | None:
    if answer is None:
        return None
    cpus = parse_cpulist(answer) if isinstance(answer, str) else list(answer)
    if not cpus or any(not isinstance(c, int) or c not in online for c in cpus):
        raise PerflabError(f"IRQ_CPUS {answer!r}: give None, or online CPUs from {format_cpulist(online)}")
    return cpus


def quiet_cpu(ns: Answers) -> list[Check]:
    rq_affinity = ns.get("RQ_AFFINITY")
    machine = LAB.probe()
    setup = quiet_setup(machine)
    checks = [Check("RQ_AFFINITY is a mode", PASSED if rq_affinity in MODES else FAILED, f"one of {MODES}",
                    shown(rq_affinity))]
    try:
        irq_cpus = _irq_cpus(ns.get("IRQ_CPUS"), machine.online_cpus)
    except PerflabError as err:
        checks.append(Check("IRQ_CPUS", FAILED, "None or a list of online CPUs", str(err)))
    if any(c.status == FAILED for c in checks):
        return checks
    if isinstance(setup, Skipped):
        return checks + [Check("settings measured", INCONCLUSIVE, "a disk and privileges to measure with",
                               setup.reason)]
    name = (f"BLOCK and CAL on CPU {setup.irq_cpu} per 1,000 reads from CPU {setup.submitter} "
            f"({setup.disk}, interrupt {setup.irq})")
    try:
        with measurement_lock("perflab grade ipi-quiet-cpu"):
            wrong = noise_on(setup, KNOWN_WRONG["rq_affinity"], KNOWN_WRONG["irq_cpus"])
            yours = noise_on(setup, rq_affinity, irq_cpus)
    except PerflabError as err:  # e.g. the kernel refused to move the interrupt: the answer cannot be applied here
        return checks + [Check(name, FAILED, "settings this machine accepts", str(err))]
    if sum(wrong.values()) < LOUD_PER_1000:
        return checks + [Check(name, INCONCLUSIVE, f"rq_affinity=1 to put at least {LOUD_PER_1000} there first",
                               f"it put {wrong}: this machine does not send completions there, so it cannot tell")]
    quiet = sum(yours.values()) <= QUIET_PER_1000
    return checks + [Check(name, PASSED if quiet else FAILED,
                           f"at most {QUIET_PER_1000} (with rq_affinity=1 and the interrupt left alone: {wrong})",
                           f"{yours} with rq_affinity={rq_affinity}, interrupt on "
                           f"{format_cpulist(irq_cpus) if irq_cpus else 'its CPU as before'}")]


# ---------------------------------------------------------------- the original case

def fresh_observations() -> list[list]:
    """Observations shaped like the recorded ones, drawn anew for every grading."""
    rng = random.Random()
    made = []
    for _ in range(5):
        low = rng.randint(100, 5000)
        made.append([{"hot_cpu": rng.randint(0, 63), "hot_count": rng.randint(10 ** 5, 10 ** 8),
                      "others_min": low, "others_max": low + rng.randint(1, 5000)}])
    return made


@calls(my_hot_ratio=fresh_observations)
def original_case(ns: Answers) -> list[Check]:
    cal = recorded.observation("CAL")
    hot = ns.get("HOT_CPU")
    return [Check("the CPU that took the function-call IPIs in the original case",
                  PASSED if hot == cal["hot_cpu"] else FAILED, shown(cal["hot_cpu"]), shown(hot)),
            function_check(ns, "my_hot_ratio", recorded.hot_ratio, 1e-9)]
