"""The loop-alignment exercises: a slow build to fix with layout flags only, and the seed's talk read as
evidence; their checks.

The slow build is rebuilt here, the learner's claims are checked against its
disassembly, and the learner's fix is raced against it until decided,
together with a known fix and a known wrong fix (perflab.grading.races): if
the known fix is not faster either, or the wrong one is faster too, this run
cannot grade the fix and the grade is inconclusive, not failed. The talk's
numbers are recorded, so its checks recompute them from the data set and
call the learner's function on shares drawn anew for every grading.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ... import stats
from ...errors import PerflabError
from ...grading import FAILED, PASSED, Answers, Check, calls, refuses
from ...grading.answers import close, function_check
from ...grading.numbers import shown
from ...grading.races import BASELINE, RIGHT, WRONG, YOURS, race_fixes
from ...paths import REPO_ROOT, RUN_BUILD_DIR
from ...sequential import Plan
from . import layout, recorded
from .builds import Variant, build_variant, function_loop, measure_builds
from .run import LAB, MIN_EFFECT, SOURCE_DIR

EXERCISE_SOURCE = REPO_ROOT / SOURCE_DIR / "checksum.c"
EXERCISE_FUNCTION = "checksum"
EXERCISE_BUILD_DIR = RUN_BUILD_DIR / "06-loop-alignment" / "exercise"
# Alignment off, so PADDING alone decides where the loop starts.
EXERCISE_FLAGS = ("-O2", "-fno-align-loops", "-fno-align-jumps", "-fno-align-labels")
# Flags that move code without changing what it computes: the only fixes the exercise accepts.
LAYOUT_FLAG_PREFIXES = (
    "-falign-",
    "-fno-align-",
    "-Wa,-mbranches-within-32B-boundaries",
    "-Wa,-malign-branch",
    "-DPADDING=",
)


def exercise_slow_build(compiler: str = "gcc") -> Variant:
    """The build of checksum.c whose loop-closing jump straddles a 64-byte line, for this compiler.

    Build once without padding, see where the jump lands, and pad so that it
    starts on the last byte of a line; then check the result in objdump.
    """
    plain = Variant(f"{compiler}, no padding", compiler, EXERCISE_FLAGS)
    jump = function_loop(build_variant(EXERCISE_SOURCE, plain, EXERCISE_BUILD_DIR), EXERCISE_FUNCTION).branch
    padding = (layout.LINE - 1 - jump.address) % layout.LINE
    slow = Variant(f"{compiler}, slow build", compiler, EXERCISE_FLAGS + (f"-DPADDING={padding}",))
    loop = function_loop(build_variant(EXERCISE_SOURCE, slow, EXERCISE_BUILD_DIR), EXERCISE_FUNCTION)
    if not layout.crosses(loop.branch.address, loop.branch.end, layout.LINE):
        raise PerflabError(
            f"{compiler} laid out checksum.c differently than expected (jump at {loop.branch.address:#x}); "
            "report this with `perflab probe --json` and your compiler version"
        )
    return slow


def with_fix(slow: Variant, fix_flags: list[str]) -> Variant:
    """The slow build with the learner's flags appended (later flags win)."""
    return Variant(f"{slow.compiler}, your fix", slow.compiler, slow.flags + tuple(fix_flags))


def not_layout_flags(fix_flags: list[str]) -> list[str]:
    """The flags of a fix that could change more than where code sits."""
    return [f for f in fix_flags if not (isinstance(f, str) and f.startswith(LAYOUT_FLAG_PREFIXES))]


def try_fix(
    fix_flags: list[str], runs: int = 10, iterations: int = 20_000_000, cpu: int | None = None, progress: bool = True
) -> dict[str, Any]:
    """Build the slow build and your fix, show both loops' layouts, race them in one interleaved run."""
    bad = not_layout_flags(fix_flags)
    if bad:
        raise PerflabError(f"{bad[0]!r} is not a layout flag; use only {', '.join(LAYOUT_FLAG_PREFIXES)}")
    machine = LAB.probe()
    slow = exercise_slow_build()
    fixed = with_fix(slow, fix_flags)
    built = {v.name: build_variant(EXERCISE_SOURCE, v, EXERCISE_BUILD_DIR) for v in (slow, fixed)}
    times = measure_builds(
        built,
        iterations,
        runs,
        LAB.placement_here([cpu] if cpu is not None else None, machine),
        "slow build vs your fix",
        progress,
    )
    speedup = stats.median(times[slow.name]) / stats.median(times[fixed.name])
    return {
        "layouts": {
            name: layout.render_lines(function_loop(binary, EXERCISE_FUNCTION)) for name, binary in built.items()
        },
        "ns_per_iter": times,
        "speedup": speedup,
    }


# --- the checks ----------------------------------------------------------------------------------------

RACE = Plan(rounds_per_look=6, max_rounds=60, budget_s=40)
ITERATIONS = 20_000_000
KNOWN_FIX = ["-falign-loops=64"]
KNOWN_WRONG_FIX = ["-falign-functions=16"]  # moves the function, not the loop's jump across its line
BOUNDARIES = (16, 32, 64)


def _branch_crosses(loop: layout.Loop, block: int) -> bool:
    """Does the loop-closing jump (with the compare fused to it) straddle a `block`-byte boundary?"""
    return layout.crosses(*loop.branch_span(), block)


@refuses(KNOWN_FIX)
def slow_build_fix(ns: dict) -> list[Check]:
    slow = exercise_slow_build()
    slow_binary = build_variant(EXERCISE_SOURCE, slow, EXERCISE_BUILD_DIR)
    slow_loop = function_loop(slow_binary, EXERCISE_FUNCTION)
    checks = []

    start = ns.get("LOOP_START_IN_LINE")
    expected_start = slow_loop.start % layout.LINE
    checks.append(
        Check(
            "where the slow build's loop starts in its 64-byte line",
            PASSED if start == expected_start else FAILED,
            f"{expected_start} (objdump: loop at {slow_loop.start:#x})",
            shown(start),
        )
    )

    fix = ns.get("FIX_FLAGS")
    valid = isinstance(fix, (list, tuple)) and fix and not not_layout_flags(list(fix))
    checks.append(
        Check(
            "FIX_FLAGS are layout flags only",
            PASSED if valid else FAILED,
            f"a non-empty list of flags starting with {', '.join(LAYOUT_FLAG_PREFIXES)}",
            shown(fix),
        )
    )
    if not valid:
        return checks
    try:
        fixed = with_fix(slow, list(fix))
        fixed_binary = build_variant(EXERCISE_SOURCE, fixed, EXERCISE_BUILD_DIR)
        fixed_loop = function_loop(fixed_binary, EXERCISE_FUNCTION)
    except PerflabError as err:
        checks.append(Check("your fix builds", FAILED, "a build and a loop objdump can find", str(err)))
        return checks

    claim = ns.get("CROSSED_BOUNDARY")
    in_slow = claim in BOUNDARIES and _branch_crosses(slow_loop, claim)
    in_fixed = claim in BOUNDARIES and _branch_crosses(fixed_loop, claim)
    checks.append(
        Check(
            "the boundary you named: crossed in the slow build, not in your fix",
            PASSED if in_slow and not in_fixed else FAILED,
            f"one of {BOUNDARIES} that the slow build's loop-closing jump crosses and your fix's does not",
            f"{shown(claim)}: "
            + (
                "not a boundary size"
                if claim not in BOUNDARIES
                else f"slow build {'crosses' if in_slow else 'does not cross'} it, "
                f"your fix {'still crosses' if in_fixed else 'does not'}"
            ),
        )
    )
    checks.append(_race(slow, slow_binary, fixed_binary))
    return checks


def _race(slow: Variant, slow_binary: Path, fixed_binary: Path) -> Check:
    """Slow build, your fix, a known fix and a known wrong fix, raced until the grade is decided."""
    built = {BASELINE: slow_binary, YOURS: fixed_binary}
    for arm, flags in ((RIGHT, KNOWN_FIX), (WRONG, KNOWN_WRONG_FIX)):
        built[arm] = build_variant(
            EXERCISE_SOURCE, Variant(arm, slow.compiler, slow.flags + tuple(flags)), EXERCISE_BUILD_DIR
        )
    cpu = LAB.placement_here()
    argv = {arm: ["taskset", "-c", str(cpu), str(binary), str(ITERATIONS)] for arm, binary in built.items()}
    return race_fixes(
        argv,
        lambda samples: 1 / stats.median([s["ns_per_iter"] for s in samples]),
        RACE,
        MIN_EFFECT,
        "your fix is faster, measured just now",
        f"at least {MIN_EFFECT:.0%} more iterations per second than the slow build, significantly, "
        "where a fix that moves nothing is not",
        [cpu],
        statistic=stats.harmonic_mean,
    )


# --- the seed's talk, read as evidence ---------------------------------------------------------------------

def alignment_drop() -> tuple[float, float]:
    """How many points of slots the front-end-bound share fell by when only the loop's alignment changed: (least,
    most), over the range the talk gives."""
    talk = recorded.builds()
    (slow_low, slow_high), (aligned_low, aligned_high) = (talk[name]["front_end_bound_percent"]
                                                          for name in (recorded.SLOW_BUILD, recorded.ALIGNED_BUILD))
    return slow_low - aligned_high, slow_high - aligned_low


def _spans() -> dict[str, tuple[float, float]]:
    """The lowest and the highest share the talk saw with each layout."""
    spans: dict[str, tuple[float, float]] = {}
    for build in recorded.builds().values():
        low, high = build["front_end_bound_percent"]
        seen = spans.get(build["layout"], (low, high))
        spans[build["layout"]] = (min(seen[0], low), max(seen[1], high))
    return spans


def loop_crosses(front_end_bound_percent: float) -> bool:
    """Does a share the talk saw belong to a build whose loop crosses a line? Its crossing build's range starts
    above every share it saw with the loop in one line."""
    return front_end_bound_percent >= _spans()["crosses"][0]


def fresh_shares() -> list[list]:
    """Each layout's lowest and highest share, and shares drawn anew between them."""
    rng = random.Random()
    spans = _spans().values()
    return [[end] for span in spans for end in span] + [[round(rng.uniform(*span), 1)] for span in spans]


@calls(my_loop_crosses=fresh_shares)
@refuses(alignment_drop, _spans)
def talk_numbers(ns: Answers) -> list[Check]:
    expected, got = alignment_drop(), ns.get("ALIGNMENT_DROP")
    same = isinstance(got, (tuple, list)) and len(got) == 2 and all(close(g, e) for g, e in zip(got, expected))
    return [Check("how far the front-end-bound share fell when only the alignment changed (least, most), in points",
                  PASSED if same else FAILED, shown(expected), shown(got)),
            function_check(ns, "my_loop_crosses", loop_crosses, 0)]
