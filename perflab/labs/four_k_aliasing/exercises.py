"""The 4k-aliasing exercises and their checks.

aliasing-predict: the learner's model of which distances make a load meet an
older store in bits 11:0 is called on fresh inputs against the reference
below, and the number of stores back it needs to explain their own sweep is
recomputed from the raw samples of their saved result.

aliasing-fix-offsets: emphasis.c's buffers come from a page arena; the
learner picks the offset per allocation. Its layout is read from the
program, and the fix is raced against no offset, a known fix and a known
wrong fix (perflab.grading.races): if the known fix is not faster either,
this machine cannot grade it and the grade is inconclusive, not failed.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from ... import results, stats
from ...build import ensure_built
from ...grading import FAILED, PASSED, Answers, Check, calls, refuses
from ...grading.answers import function_check, saved_result
from ...grading.races import race_fixes
from ...lock import measurement_lock
from ...runner import run_records
from ...sequential import Plan
from .run import LAB
from .sweep import KERNELS, SOURCE_DIR, by_distance, classify, measure_sweep

PAGE = 4096
MAX_STORES_BACK = 64  # more stores than any store buffer holds


def meets_a_store(distance: int, width: int, stores_back: int) -> bool:
    """In dst[i] = k * src[i] with dst - src = distance (mod 4096), does the load of src[i] (width bytes) overlap,
    in address bits 11:0, one of the stores to dst[i-1] ... dst[i-stores_back] still in flight?"""
    for k in range(1, stores_back + 1):
        gap = (distance - k * width) % PAGE  # where the store k steps back sits, from the load, modulo 4 KiB
        if gap < width or gap > PAGE - width:
            return True
    return False


def fresh_cases() -> list[list]:
    """Inputs drawn anew for every grading: many near the aliasing window, some anywhere on the page."""
    rng = random.Random()
    cases = []
    for _ in range(60):
        width, back = rng.choice((4, 8, 16, 32)), rng.randint(0, 12)
        near = rng.randint(-3 * width, (back + 3) * width)
        cases.append([near if rng.random() < 0.7 else rng.randint(-2048, 2047), width, back])
    return cases


def stores_back_needed(slow: list[int], width: int) -> int | None:
    """The fewest stores in flight for which the model makes every slow distance slow; None if none does."""
    for back in range(MAX_STORES_BACK + 1):
        if all(meets_a_store(d, width, back) for d in slow):
            return back
    return None


def sweep_here(rounds: int | None = None, cpu: int | None = None, progress: bool = True) -> dict[str, Any]:
    """The lab's sweep alone, both loops, saved: the result the aliasing-predict exercise reads."""
    machine = LAB.probe()
    settings = replace(LAB.QUICK, sweep_rounds=rounds) if rounds else LAB.QUICK
    cpu = LAB.placement_here([cpu] if cpu is not None else None, machine)
    with measurement_lock(f"perflab {LAB.name} sweep"):
        sweep = measure_sweep(cpu, settings.sweep_rounds, settings.sweep_repeats, progress)
    result = results.new_result(LAB.name, "sweep", machine.summary(), {"cpu": cpu, "rounds": settings.sweep_rounds,
                                                                      "repeats": settings.sweep_repeats})
    result["sweep"] = sweep
    result["path"] = str(results.save(result))
    return result


@calls(meets_a_store=fresh_cases)
@refuses(stores_back_needed)
def predict(ns: Answers) -> list[Check]:
    checks = [function_check(ns, "meets_a_store", meets_a_store, 0)]
    saved, found = saved_result(ns, "sweep_here()")
    checks.append(found)
    if saved is None:
        return checks
    samples = saved["sweep"]["samples"]
    expected = {kernel: stores_back_needed(classify(by_distance(samples, kernel))["slow"], width)
                for kernel, width in KERNELS.items() if any(s["kernel"] == kernel for s in samples)}
    got = ns.get("STORES_BACK")
    checks.append(Check("the stores in flight your sweep's slow distances need, per loop",
                        PASSED if got == expected else FAILED, repr(expected), repr(got)))
    return checks


# --- aliasing-fix-offsets ----------------------------------------------------------------------------------

RACE = Plan(rounds_per_look=20, max_rounds=300, budget_s=40)
MIN_EFFECT = 0.05  # a light loop, and recent cores lose a tenth or so to false matches, not half
KNOWN_FIX, KNOWN_WRONG_FIX = 2048, 4096  # half a page apart; a whole page, which changes no bit below 12
MAX_OFFSET = 1 << 20  # what page_arena.h accepts


def emphasis_argv(offset: int, repeats: int = 200, samples: int = 15, cpu: int | None = None) -> list[str]:
    argv = [str(ensure_built(SOURCE_DIR, "emphasis")), "-o", str(offset), "-n", str(repeats), "-s", str(samples)]
    return argv + (["-C", str(cpu)] if cpu is not None else [])


def page_offsets(offset: int) -> dict[str, int]:
    """Where emphasis.c's buffers start in their pages with this offset per allocation (the program says)."""
    records = run_records(emphasis_argv(offset, repeats=1, samples=1))
    return next(r["page_offsets"] for r in records if r.get("type") == "layout")


def fastest_ns(records: list[dict[str, Any]]) -> float:
    """A run's fastest sample, ns per element: an interruption only ever adds time."""
    return min(r["ns_per_element"] for r in records if r.get("type") == "sample")


def try_offset(offset: int, rounds: int = 10, cpu: int | None = None) -> dict[str, float]:
    """No offset against yours, interleaved: the median over rounds of each run's fastest ns per element."""
    cpu = LAB.placement_here([cpu] if cpu is not None else None)
    times: dict[int, list[float]] = {0: [], offset: []}
    with measurement_lock(f"perflab {LAB.name} try_offset"):
        for r in range(rounds):
            for arm in ((0, offset) if r % 2 else (offset, 0)):
                times[arm].append(fastest_ns(run_records(emphasis_argv(arm, cpu=cpu))))
    return {f"offset {arm}": stats.median(values) for arm, values in times.items()}


def _valid_offset(offset: Any) -> bool:
    return isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset <= MAX_OFFSET


def fix_offsets(ns: dict) -> list[Check]:
    offset = ns.get("OFFSET")
    checks = [Check("OFFSET is bytes per allocation that the arena takes", PASSED if _valid_offset(offset) else FAILED,
                    f"a whole number from 0 to {MAX_OFFSET}", repr(offset))]
    nothing = ns.get("CHANGES_NOTHING")
    same = _valid_offset(nothing) and nothing > 0 and page_offsets(nothing) == page_offsets(0)
    checks.append(Check("an offset above 0 that leaves every buffer where no offset does, in its page",
                        PASSED if same else FAILED, "buffers at the page offsets no offset gives", repr(nothing)))
    if not _valid_offset(offset):
        return checks
    layout = page_offsets(offset)
    distance = (layout["out"] - layout["in"]) % PAGE
    got = ns.get("DISTANCE")
    checks.append(Check("out - in modulo 4096 with your offset", PASSED if got == distance else FAILED,
                        f"{distance} (the program's layout line)", repr(got)))
    cpu = LAB.placement_here()
    argv = {"baseline": emphasis_argv(0, cpu=cpu), "yours": emphasis_argv(offset, cpu=cpu),
            "known fix": emphasis_argv(KNOWN_FIX, cpu=cpu), "known wrong fix": emphasis_argv(KNOWN_WRONG_FIX, cpu=cpu)}
    checks.append(race_fixes(argv, lambda samples: 1 / fastest_ns(samples), RACE,
                             MIN_EFFECT, "your offset makes the filter faster, measured just now",
                             f"at least {MIN_EFFECT:.0%} more elements per second than no offset, significantly, "
                             f"where {KNOWN_WRONG_FIX} bytes (a whole page) is not", LAB.watched_cpus(cpu)))
    return checks
