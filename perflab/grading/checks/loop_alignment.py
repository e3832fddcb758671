"""Checks for the loop-alignment exercise.

The slow build is rebuilt here, the learner's claims are checked against its
disassembly, and the learner's fix is raced against it in a fresh interleaved
run, together with a known fix: if the known fix is not faster either, this
machine does not show the effect and the grade is inconclusive, not failed.
"""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...errors import PerflabError
from ...labs import loop_alignment as lab
from ...probe import probe
from ...verdict import judge_change
from .. import FAILED, INCONCLUSIVE, PASSED, Check

RUNS = 10
ITERATIONS = 20_000_000
KNOWN_FIX = ["-falign-loops=64"]
BOUNDARIES = (16, 32, 64)


def _branch_crosses(loop: layout.Loop, block: int) -> bool:
    """Does the loop-closing jump (with the compare fused to it) straddle a `block`-byte boundary?"""
    return layout.crosses(*loop.branch_span(), block)


def slow_build_fix(ns: dict) -> list[Check]:
    slow = lab.exercise_slow_build()
    slow_binary = lab.build_variant(lab.EXERCISE_SOURCE, slow, lab.EXERCISE_BUILD_DIR)
    slow_loop = lab.function_loop(slow_binary, lab.EXERCISE_FUNCTION)
    checks = []

    start = ns.get("LOOP_START_IN_LINE")
    expected_start = slow_loop.start % layout.LINE
    checks.append(Check("where the slow build's loop starts in its 64-byte line", PASSED if start == expected_start else FAILED,
                        f"{expected_start} (objdump: loop at {slow_loop.start:#x})", repr(start)))

    fix = ns.get("FIX_FLAGS")
    valid = isinstance(fix, (list, tuple)) and fix and not lab.not_layout_flags(list(fix))
    checks.append(Check("FIX_FLAGS are layout flags only", PASSED if valid else FAILED,
                        f"a non-empty list of flags starting with {', '.join(lab.LAYOUT_FLAG_PREFIXES)}", repr(fix)))
    if not valid:
        return checks
    try:
        fixed = lab.with_fix(slow, list(fix))
        fixed_binary = lab.build_variant(lab.EXERCISE_SOURCE, fixed, lab.EXERCISE_BUILD_DIR)
        fixed_loop = lab.function_loop(fixed_binary, lab.EXERCISE_FUNCTION)
    except PerflabError as err:
        checks.append(Check("your fix builds", FAILED, "a build and a loop objdump can find", str(err)))
        return checks

    claim = ns.get("CROSSED_BOUNDARY")
    in_slow = claim in BOUNDARIES and _branch_crosses(slow_loop, claim)
    in_fixed = claim in BOUNDARIES and _branch_crosses(fixed_loop, claim)
    checks.append(Check("the boundary you named: crossed in the slow build, not in your fix",
                        PASSED if in_slow and not in_fixed else FAILED,
                        f"one of {BOUNDARIES} that the slow build's loop-closing jump crosses and your fix's does not",
                        f"{claim!r}: " + ("not a boundary size" if claim not in BOUNDARIES else
                                          f"slow build {'crosses' if in_slow else 'does not cross'} it, "
                                          f"your fix {'still crosses' if in_fixed else 'does not'}")))
    checks.append(_race(slow, slow_binary, fixed, fixed_binary))
    return checks


def _race(slow: lab.Variant, slow_binary: Path, fixed: lab.Variant, fixed_binary: Path) -> Check:
    """Slow build, your fix (both built already) and a known fix in one interleaved run: is yours faster?"""
    known = lab.Variant("known fix", slow.compiler, slow.flags + tuple(KNOWN_FIX))
    built = {slow.name: slow_binary, fixed.name: fixed_binary,
             known.name: lab.build_variant(lab.EXERCISE_SOURCE, known, lab.EXERCISE_BUILD_DIR)}
    cpu = lab.choose_cpu(probe(), None)
    times = lab.measure_builds(built, ITERATIONS, RUNS, cpu, "grading: slow build vs fixes", progress=False)
    mine, mine_reason, _ = judge_change("your fix vs slow build", lab.rates(times[slow.name]), lab.rates(times[fixed.name]),
                                        lab.MIN_EFFECT)
    known_result, known_reason, _ = judge_change("known fix vs slow build", lab.rates(times[slow.name]),
                                                 lab.rates(times[known.name]), lab.MIN_EFFECT)
    expected = f"at least {lab.MIN_EFFECT:.0%} more iterations per second than the slow build, significantly"
    if mine == "reproduced":
        return Check("your fix is faster, measured just now", PASSED, expected, mine_reason)
    if known_result != "reproduced":
        return Check("your fix is faster, measured just now", INCONCLUSIVE, expected,
                     f"{mine_reason}; but the known fix was not faster either ({known_reason}): this machine did not "
                     "show the effect in this run; rerun, or grade on a machine whose front end shows it")
    if mine == "inconclusive":
        return Check("your fix is faster, measured just now", INCONCLUSIVE, expected, f"{mine_reason}; grade again")
    return Check("your fix is faster, measured just now", FAILED, expected, f"{mine_reason} (a known fix was faster: {known_reason})")
