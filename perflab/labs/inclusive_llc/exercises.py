"""Checks for the inclusive-LLC exercises.

Predictions about the described machine are checked against the simulator
run on that machine's geometry (scaled down: fewer sets, the same ways).
The learner's reading of their own measurement is checked against a fresh
one: if the fresh run cannot decide, the grade is inconclusive, not failed.
What five runs per arm can decide (llc-five-runs) is checked on arm sizes
and levels drawn anew for every grading.
"""

from __future__ import annotations

import random

from ... import cpuid
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, calls, refuses
from ...grading.answers import function_check
from ...grading.live import busy_check, watched
from ...grading.numbers import shown
from ...lock import measurement_lock
from ...probe import Fact, Machine
from .. import CannotShow
from . import cachesim, recorded
from .run import FRACTIONS, LAB, Settings, judge_sweep, sweep

PREDICT_FRACTIONS = (0.5, 0.75, 0.9, 0.95, 1.0, 1.5)
SCALED_SETS = 64  # the described L3 has 16384 sets; 64 behave the same and simulate in a blink
FRESH = Settings(rounds=120, budget_s=90, fractions=(FRACTIONS[0], FRACTIONS[-1]), victim_ms=150, timeline_ms=0,
                 stress_seconds=0, stress_rounds=0)
RISKS = ("none", "back-invalidation", "shared L1")


# ANCHOR: described
DESCRIBED_NOISY_CPU = 3  # a batch job streams 40 MiB here
DESCRIBED_IRQ_CPU = 8  # the network card's interrupts land here
# Leaf 4 subleaf 3 of a Xeon E5-2667 v3 (Haswell-EP): its L3.
DESCRIBED_LLC_REGISTERS = {"eax": 0x3C07C163, "ebx": 0x04C0003F, "ecx": 0x00003FFF, "edx": 0x00000006}
# ANCHOR_END: described


def described_machine() -> Machine:
    """Two Xeon E5-2667 v3 sockets: 8 cores each, SMT 2, a 20 MiB inclusive L3 per socket.

    CPUs 0-7 are socket 0's cores and 8-15 socket 1's; 16-31 are their SMT
    siblings, in the same order, as Linux numbers them on such machines.
    """
    topology, caches = {}, []
    for cpu in range(32):
        core = cpu % 16
        topology[str(cpu)] = {"package": core // 8, "die": 0, "core": core % 8, "smt_siblings": [core, core + 16],
                              "node": core // 8}
    for core in range(16):
        caches += [
            {"level": 1, "type": "Data", "size_kib": 32, "cpus": [core, core + 16], "ways": 8, "line_size": 64},
            {"level": 2, "type": "Unified", "size_kib": 256, "cpus": [core, core + 16], "ways": 8, "line_size": 64},
        ]
    for socket in range(2):
        cpus = [c for c in range(32) if topology[str(c)]["package"] == socket]
        caches.append({"level": 3, "type": "Unified", "size_kib": 20480, "cpus": cpus, "ways": 20, "line_size": 64})
    source = "described in the exercise"
    return Machine({"online_cpus": Fact(list(range(32)), source), "topology": Fact(topology, source),
                    "caches": Fact(caches, source), "llc_inclusive": Fact(True, source)})


def _described_llc() -> dict:
    return cpuid.decode_cache_leaf(**DESCRIBED_LLC_REGISTERS)


def _scaled_geometry(ways: int) -> cachesim.Geometry:
    return cachesim.Geometry(llc=(SCALED_SETS, ways), victim_lines=SCALED_SETS // 2)


def simulated_evictions(policy: str, ways: int, fractions=PREDICT_FRACTIONS) -> dict[float, bool]:
    """For each aggressor size (in LLCs), does the simulator's LLC back-invalidate the victim?"""
    counts = cachesim.sweep(policy, fractions, _scaled_geometry(ways))
    return {f: c.back_invalidated > 0 for f, c in counts.items()}


def _same(name: str, expected, got, shown_expected: str | None = None) -> Check:
    return Check(name, PASSED if got == expected else FAILED, shown_expected or shown(expected), shown(got))


@refuses(simulated_evictions)
def predict_and_measure(ns: dict) -> list[Check]:
    llc = _described_llc()
    checks = [_same("the described L3 is inclusive (EDX bit 1)", llc["inclusive"], ns.get("LLC_INCLUSIVE")),
              _same("the described L3's ways (EBX bits 31-22, plus one)", llc["ways"], ns.get("LLC_WAYS"))]
    expected = simulated_evictions("inclusive" if llc["inclusive"] else "non-inclusive", llc["ways"])
    got = ns.get("EVICTS_VICTIM")
    wrong = sorted(f for f in expected if not isinstance(got, dict) or got.get(f) != expected[f])
    checks.append(Check("which aggressor sizes back-invalidate the victim (the simulator on the described L3)",
                        FAILED if wrong else PASSED, shown(expected),
                        shown(got) if not wrong else f"{shown(got)}; wrong or missing for {shown(wrong)}"))

    machine = LAB.probe()
    inclusive_here = machine.value("llc_inclusive")
    predicted = ns.get("EXPECT_SLOWDOWN_HERE", "missing")
    if inclusive_here is None:
        checks.append(Check("your prediction for this machine", PASSED if predicted is None else FAILED,
                            "None: CPUID does not say whether this LLC is inclusive", shown(predicted)))
    else:
        checks.append(_same("your prediction for this machine (from its CPUID)", inclusive_here, predicted,
                            f"{inclusive_here!r}: `perflab probe` says llc_inclusive is {inclusive_here}"))
    checks.append(_fresh_measurement(machine, ns.get("SLOWDOWN_HERE", "missing"), ns.get("RUN_REASON")))
    return checks


def _fresh_measurement(machine, claim, reason=None) -> Check:
    name = "what your measurement showed, against a fresh one"
    if claim not in (True, False, None):
        return Check(name, FAILED, "True, False or None (your run could not decide)", shown(claim))
    if claim is None:
        why = f" ({reason})" if isinstance(reason, str) and reason else ""
        return Check(name, INCONCLUSIVE, "True or False", f"None: your own run could not decide{why}; rerun it")
    try:
        pair = LAB.placement_here(machine=machine)
    except CannotShow as reason:
        return Check(name, INCONCLUSIVE, "a machine that can measure this", str(reason))
    with measurement_lock("perflab grade: llc-predict"), watched(LAB.watched_cpus(pair)) as seen:
        measured = sweep(pair, FRESH, progress=False, fractions=FRESH.fractions, alone=False)
    verdict, reason, _ = judge_sweep(measured["ns_per_access"], measured["race"]["alpha_per_look"])
    fresh = {"reproduced": True, "not-reproduced": False}.get(verdict)
    if seen.busy:
        return busy_check(name, "a fresh run on quiet CPUs", seen, f"the fresh run said {verdict} ({reason})")
    if fresh is None:
        return Check(name, INCONCLUSIVE, "a fresh run that decides", f"the fresh run could not: {reason}")
    return Check(name, PASSED if claim == fresh else FAILED, f"{fresh!r} (fresh run: {reason})", shown(claim))


@refuses(simulated_evictions)
def noisy_neighbour(ns: dict) -> list[Check]:
    machine = described_machine()
    noisy, irq = DESCRIBED_NOISY_CPU, DESCRIBED_IRQ_CPU
    llc_of = {cpu: next(g for g in machine.llc_groups() if cpu in g) for cpu in machine.online_cpus}
    sibling_of = {cpu: set(machine.cpu(cpu)["smt_siblings"]) for cpu in machine.online_cpus}
    checks = []

    choice = ns.get("LATENCY_CPU")
    problems = [] if choice in machine.online_cpus else ["not a CPU of the described machine"]
    if not problems:
        problems += ["shares the LLC with the noisy job"] if noisy in llc_of[choice] else []
        problems += ["shares a core with the interrupts"] if irq in sibling_of[choice] else []
    checks.append(Check("a CPU for the latency-critical thread", FAILED if problems else PASSED,
                        f"a CPU outside CPU {noisy}'s LLC, not on CPU {irq}'s core",
                        f"{choice!r}" + (f": {'; '.join(problems)}" if problems else "")))

    same = ns.get("SAME_SOCKET_CPU")
    good = same in llc_of[noisy] and noisy not in sibling_of.get(same, set())
    checks.append(Check("on the noisy job's socket: a CPU that does not share its core", PASSED if good else FAILED,
                        f"one of {sorted(set(llc_of[noisy]) - sibling_of[noisy])}", shown(same)))

    llc = _described_llc()
    for policy, key in (("an inclusive", "SAME_SOCKET_RISK"), ("a non-inclusive", "RISK_IF_NON_INCLUSIVE")):
        evicts = simulated_evictions(policy.split()[1], llc["ways"], (2.0,))[2.0]
        checks.append(_same(f"what still reaches that thread's L1 with {policy} L3 (the simulator, 2x LLC)",
                            "back-invalidation" if evicts else "none", ns.get(key),
                            f"{'back-invalidation' if evicts else 'none'} (choose from {RISKS})"))
    return checks


# --- the source's five runs per arm ----------------------------------------------------------------------

def fewest_runs(alpha: float) -> int:
    """The fewest runs per arm, the same in both, with which the lab's Mann-Whitney test can give p below alpha."""
    runs = 1
    while recorded.p_floor(runs, runs) >= alpha:
        runs += 1
    return runs


def fresh_arm_sizes() -> list[list]:
    rng = random.Random()
    return [[5, 5], *([rng.randint(2, 20), rng.randint(2, 20)] for _ in range(4))]


def fresh_levels() -> list[list]:
    """The lab's 5%, one look of its race, and levels from 0.1% to 5% drawn anew."""
    rng = random.Random()
    return [[0.05], [recorded.race_alpha()], *([10 ** rng.uniform(-3, -1.3)] for _ in range(3))]


@calls(my_p_floor=fresh_arm_sizes, my_fewest_runs=fresh_levels)
def five_runs(ns: Answers) -> list[Check]:
    return [function_check(ns, "my_p_floor", recorded.p_floor, 1e-6),
            function_check(ns, "my_fewest_runs", fewest_runs, 0,
                           also_refused=("perflab.labs.inclusive_llc.recorded.p_floor",))]
