"""The memcpy-variant exercises and their checks.

memcpy-predict: the learner names the variant glibc picked here and the sizes where another variant beat it;
both are recomputed from the raw samples of their own saved run, never taken from its notes.

memcpy-tune: a program makes millions of 16-byte copies; the learner chooses GLIBC_TUNABLES for it. The
choice is raced against the default, a known fix (the ssse3 mask) and a known wrong fix (a tunable glibc
ignores: the default's own code) with perflab.grading.races: where the known fix is not faster either, this
machine cannot grade it and the grade is inconclusive, not failed.
"""

from __future__ import annotations

import re
from typing import Any

from ... import stats
from ...build import ensure_built
from ...grading import FAILED, PASSED, Answers, Check, refuses
from ...grading.answers import saved_result
from ...grading.races import race_fixes
from ...lock import measurement_lock
from ...runner import run_once
from ...sequential import Plan, Race
from .run import LAB
from .speedups import compare, winners_by_size, wins
from .variants import (
    CONTROL_TUNABLES,
    MASKS,
    SOURCE_DIR,
    argv_under,
    from_json,
    function_name,
    resolved,
    short,
    tunables_of,
)

# --- memcpy-predict -----------------------------------------------------------------------------------------


def measure_here(quick: bool = True) -> dict[str, Any]:
    """The lab's run, saved: the result the memcpy-predict exercise reads (its file's path in "path")."""
    verdict = LAB.run(quick=quick)
    if verdict.result is None:
        raise RuntimeError(f"the lab measured nothing here: {verdict.reason}")
    return dict(verdict.result, path=verdict.results)


def figures_of(result: dict[str, Any]) -> list[tuple[str, Any]]:
    """The lab's figures of a result measure_here returned."""
    verdict = LAB.verdict_of(LAB.probe(), result)
    verdict.result = result
    return LAB.figures(verdict)


def lost_sizes(result: dict[str, Any]) -> list[int]:
    """The sizes where a variant beat the default in this run, from its raw samples."""
    raced = Race.from_json(result["race"])
    arms = [v.arm for v in from_json(result["variants"])]
    return sorted({c.size for c in wins(compare(raced.kept_values(), arms, result["params"]["sizes"],
                                                raced.alpha_per_look))})


@refuses(lost_sizes, compare, wins, winners_by_size)
def predict(ns: Answers) -> list[Check]:
    saved, found = saved_result(ns, "lab.measure_here()")
    checks = [found]
    if saved is None or saved.get("lab") != LAB.name:
        return checks
    default = from_json(saved["variants"])[0].function
    named = ns.get("DEFAULT_VARIANT")
    same = isinstance(named, str) and named.strip().removeprefix("__memcpy_") == short(default)
    checks.append(Check("the memcpy glibc picked here, by glibc's name", PASSED if same else FAILED, default,
                        repr(named)))
    expected, got = lost_sizes(saved), ns.get("LOSES_AT")
    right = isinstance(got, list) and sorted(got) == expected
    checks.append(Check("the sizes where a variant beat the default in your run, in bytes", PASSED if right else FAILED,
                        repr(expected), repr(got)))
    return checks


# --- memcpy-tune --------------------------------------------------------------------------------------------

COPY_SIZE = 16  # bytes: where this course's machine found the default slowest against the SSE variants
KNOWN_FIX = tunables_of(MASKS[-1])  # ssse3 on the course's machine
RACE = Plan(rounds_per_look=10, max_rounds=200, budget_s=40)
MIN_EFFECT = 0.10
# One or more glibc.cpu tunables, colon-separated, as GLIBC_TUNABLES takes them: nothing else reaches the program.
TUNABLES = re.compile(r"glibc\.cpu\.[a-z0-9_.]+=[A-Za-z0-9_,+-]+(:glibc\.cpu\.[a-z0-9_.]+=[A-Za-z0-9_,+-]+)*")


def copies_argv(tunables: str, cpu: int, blocks: int = 5) -> list[str]:
    """The program of the exercise: copy_sweep at COPY_SIZE alone, under these tunables ("" for none)."""
    return argv_under(tunables, [str(ensure_built(SOURCE_DIR, "copy_sweep")), "-s", str(COPY_SIZE), "-b",
                                 str(blocks), "-C", str(cpu)])


def variant_under(tunables: str) -> str:
    """The memcpy the program gets under these tunables, by glibc's name."""
    library, offset = resolved(ensure_built(SOURCE_DIR, "copy_sweep"), valid_tunables(tunables))
    return function_name(library, offset)


def valid_tunables(tunables: Any) -> str:
    if tunables != "" and not (isinstance(tunables, str) and len(tunables) <= 300 and TUNABLES.fullmatch(tunables)):
        raise ValueError(f"{tunables!r} is not a GLIBC_TUNABLES of glibc.cpu tunables, like "
                         f"'{KNOWN_FIX.split('=')[0]}=-AVX512F'")
    return tunables


def ns_per_copy(samples: list[dict[str, Any]]) -> float:
    return samples[0]["ns_per_copy"]


def try_tunables(tunables: str, rounds: int = 10, cpu: int | None = None) -> dict[str, float]:
    """The default against your tunables, interleaved: the median ns per 16-byte copy of each."""
    cpu = LAB.placement_here([cpu] if cpu is not None else None)
    arms = {"default": "", "yours": valid_tunables(tunables)}
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    with measurement_lock(f"perflab {LAB.name} try_tunables"):
        for r in range(rounds):
            for arm in (list(arms) if r % 2 else list(arms)[::-1]):
                times[arm].append(ns_per_copy(run_once(copies_argv(arms[arm], cpu))[1]))
    return {f"{arm}, ns per copy": stats.median(values) for arm, values in times.items()}


@refuses(KNOWN_FIX)
def tune(ns: Answers) -> list[Check]:
    tunables = ns.get("TUNABLES")
    try:
        valid_tunables(tunables)
    except ValueError as why:
        return [Check("TUNABLES is a GLIBC_TUNABLES value of glibc.cpu tunables", FAILED, "e.g. "
                      f"{KNOWN_FIX}", str(why))]
    checks = [Check("TUNABLES is a GLIBC_TUNABLES value of glibc.cpu tunables", PASSED, "glibc.cpu.NAME=VALUE",
                    repr(tunables))]
    cpu = LAB.placement_here()
    argv = {"baseline": copies_argv("", cpu), "yours": copies_argv(tunables, cpu),
            "known fix": copies_argv(KNOWN_FIX, cpu), "known wrong fix": copies_argv(CONTROL_TUNABLES, cpu)}
    checks.append(race_fixes(argv, lambda samples: 1 / ns_per_copy(samples), RACE, MIN_EFFECT,
                             f"your tunables make {COPY_SIZE}-byte copies faster, measured just now",
                             f"at least {MIN_EFFECT:.0%} more copies per second than the default, significantly, "
                             f"where {CONTROL_TUNABLES} (ignored: the default's own code) is not",
                             LAB.watched_cpus(cpu)))
    return checks
