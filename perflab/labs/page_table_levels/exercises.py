"""Checks for the page-table-levels exercises.

The fifth level's cost per fault: the learner's function on boot records
drawn anew, and, once every other check passes, one pair of boots measured
for this grading. Fault-around:
the learner's pages per fault against a fresh native run. The power
calculation: the learner's function on fresh spreads, and their verdict on
their own native samples recomputed here.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import scipy.stats as sps

from ... import stats
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, calls, refuses
from ...grading.answers import function_check
from ...grading.numbers import shown
from ...lock import measurement_lock
from .. import CannotShow
from . import minimal
from .faults import MODES, boot_cost, fault_around
from .guests import check_vm_ready
from .native import measure_here
from .run import LAB

GRADE_SETTINGS = replace(LAB.QUICK, max_rounds=3, fault_rounds=3, pages=512)  # seconds natively, one pair in VMs
AROUND_TOLERANCE = 0.1  # pages per fault within 10% of the fresh run's
SOURCE_EFFECT = 0.0023  # the source's +0.23% per page
POWER_NEEDED = 0.8


# ---------------------------------------------------------------- the fifth level's cost per fault

def extra_per_fault(boots: list[dict[str, Any]]) -> float:
    """Mean over 5-level boots minus mean over 4-level boots of each boot's cheapest cost per anonymous fault."""
    by_levels = {levels: [boot_cost(b) for b in boots if b["paging_levels"] == levels] for levels in (5, 4)}
    return stats.mean(by_levels[5]) - stats.mean(by_levels[4])


def synthetic_boots(rng: random.Random) -> list[dict[str, Any]]:
    """Boots shaped like the lab's: a few per paging mode, rounds of anon and file faults, costs made up."""
    base, extra = rng.uniform(3000, 9000), rng.uniform(-20, 60)
    boots = []
    for levels in (5, 4) * rng.randint(1, 3):
        samples = []
        for mode in MODES:
            pages = rng.choice([256, 1024, 4096])
            minflt = pages if mode == "anon" else pages // 16 + 1
            for _ in range(rng.randint(3, 6)):
                cost = (base + (extra if levels == 5 else 0)) * (1.4 if mode == "file" else 1) + rng.gauss(0, 2)
                samples.append({"mode": mode, "pages": pages, "minflt": minflt, "elapsed_ns": round(cost * minflt)})
        boots.append({"paging_levels": levels, "samples": samples})
    return boots


def fresh_boot_lists() -> list[list]:
    """Three made-up boot lists, drawn anew for every grading."""
    rng = random.Random()
    return [[synthetic_boots(rng)] for _ in range(3)]


def pair_booted_now() -> list[dict[str, Any]]:
    """One 5-level and one 4-level minimal guest, booted side by side for this grading (the quick run's, whose
    boots of a mode count alike); CannotShow, saying why, where none can boot."""
    check_vm_ready()
    with measurement_lock("perflab grade ptl-cost-per-fault"):
        return list(minimal.boot_both(GRADE_SETTINGS, high=False).values())


@calls(my_extra_per_fault=fresh_boot_lists)
def cost_per_fault(ns: Answers) -> list[Check]:
    sign = ns.get("DEARER_WITH")
    checks = [function_check(ns, "my_extra_per_fault", extra_per_fault, 1e-9),
              Check("DEARER_WITH: the paging mode whose faults cost more", PASSED if sign == 5 else FAILED,
                    "5 or 4", shown(sign))]
    if any(check.status == FAILED for check in checks):
        return checks  # two boots (15 s or more) cannot change a failed grade: spare the learner the wait
    try:
        measured = pair_booted_now()
    except CannotShow as why:  # no QEMU, no image, or (a workshop's learner) no VMs of their own
        checks.append(Check("one pair of boots measured for this grading", INCONCLUSIVE,
                            "QEMU and the guest image, to boot la57-icount and no5lvl-icount", str(why)))
        return checks
    fresh = extra_per_fault(measured)
    checks.append(Check("the fifth level costs instructions on every fault (a pair booted just now)",
                        PASSED if fresh > 0 else INCONCLUSIVE, "5-level minus 4-level above 0",
                        f"{'+' if fresh > 0 else ''}{shown(fresh)} instructions per anonymous fault"))
    return checks


# ---------------------------------------------------------------- fault-around

def fault_around_now() -> dict[str, float]:
    """Pages per fault for each mode, from a fresh native run on the lab's CPU."""
    with measurement_lock("perflab grade ptl-fault-around"):
        runs = measure_here(LAB.placement_here(), GRADE_SETTINGS, progress=False)
    return {mode: stats.median([fault_around(s) for r in runs for s in r["samples"] if s["mode"] == mode])
            for mode in MODES}


@refuses(fault_around_now, fault_around)
def fault_around_check(ns: Answers) -> list[Check]:
    answers = {"anon": ns.get("ANON_PAGES_PER_FAULT"), "file": ns.get("FILE_PAGES_PER_FAULT")}
    checks = []
    for mode, got in answers.items():
        if not isinstance(got, (int, float)) or isinstance(got, bool) or got <= 0:
            checks.append(Check(f"{mode.upper()}_PAGES_PER_FAULT is a number", FAILED, "pages per fault, above 0",
                                shown(got)))
    if checks:
        return checks
    fresh = fault_around_now()
    for mode, got in answers.items():
        close = abs(got - fresh[mode]) <= AROUND_TOLERANCE * fresh[mode]
        checks.append(Check(f"pages per {mode} fault", PASSED if close else FAILED,
                            f"{shown(fresh[mode])} within {AROUND_TOLERANCE:.0%} (measured just now)", shown(got)))
    return checks


# ---------------------------------------------------------------- would 30 boots resolve it?

def power(costs: list[float], n: int, effect: float, alpha: float = 0.05) -> float:
    """Power of a two-sided two-sample t-test, n runs per mode, to see a relative `effect` at the spread of `costs`."""
    d = effect / stats.coefficient_of_variation(costs)  # the effect in standard deviations
    df = 2 * n - 2
    t_crit = sps.t.ppf(1 - alpha / 2, df)
    shift = d * math.sqrt(n / 2)  # noncentrality of the t statistic
    # |t| beyond t_crit on either side; the lower tail as the upper tail of -t (scipy's cdf is NaN far out)
    return float(sps.nct.sf(t_crit, df, shift) + sps.nct.sf(t_crit, df, -shift))


def fresh_spreads() -> list[list]:
    rng = random.Random()
    made = []
    for _ in range(4):
        mean, cv = rng.uniform(500, 5000), rng.uniform(0.0005, 0.05)
        costs = [rng.gauss(mean, mean * cv) for _ in range(rng.randint(5, 30))]
        made.append([costs, rng.choice([5, 10, 30, 100]), rng.choice([0.0023, 0.01, 0.05]), 0.05])
    return made


@calls(my_power=fresh_spreads)
@refuses(power)
def power_check(ns: Answers) -> list[Check]:
    checks = [function_check(ns, "my_power", power, 1e-6)]
    costs, answer = ns.get("MY_COSTS"), ns.get("WOULD_RESOLVE")
    valid = isinstance(costs, list) and len(costs) >= 5 and all(
        isinstance(c, (int, float)) and c > 0 for c in costs)
    if not valid:
        return checks + [Check("MY_COSTS: your native costs per fault", FAILED, "at least 5 positive values",
                               shown(costs)[:80])]
    resolved = power(costs, 30, SOURCE_EFFECT) >= POWER_NEEDED
    return checks + [Check("WOULD_RESOLVE: 30 runs per mode see +0.23% with 80% power at your spread",
                           PASSED if answer is resolved else FAILED,
                           f"{resolved} (power {shown(power(costs, 30, SOURCE_EFFECT))} at a spread of "
                           f"{stats.coefficient_of_variation(costs):.2%})", shown(answer))]
