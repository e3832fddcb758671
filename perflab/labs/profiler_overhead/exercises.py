"""The profiler-overhead exercises and their checks.

po-cost-per-sample: from their own saved run, the learner works out what one cpu-clock sample at 25 kHz cost
the workload, in ns of each CPU's time; the grader recomputes it from the run's raw rounds.

po-quiet-options: the learner chooses perf record options that profile every CPU for less than 5% of the
workload's time. The grader races the workload alone against it under their options until a 5% slowdown is
shown (failed) or ruled out (passed); at fewer than MIN_HZ samples a second nothing is left to profile.
"""

from __future__ import annotations

import re
from typing import Any

from ... import stats
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, refuses
from ...grading.answers import saved_result
from ...grading.live import busy_check, watched
from ...grading.own_code import typed_in
from ...lock import measurement_lock
from ...sequential import Plan, Race, race
from ...verdict import judge_paired_change
from .run import DEFAULT, LAB, MIN_EFFECT, overhead
from .workload import ALONE, Arm, run_arm, workload_argv

# --- po-cost-per-sample -------------------------------------------------------------------------------------

HZ = 25_000  # the source's frequency, the lab's default perf arm


def measure_here(quick: bool = True) -> dict[str, Any]:
    """The lab's run, saved: the result po-cost-per-sample reads (its file's path in "path")."""
    verdict = LAB.run(quick=quick)
    if verdict.result is None:
        raise RuntimeError(f"the lab measured nothing here: {verdict.reason}")
    return dict(verdict.result, path=verdict.results)


def ns_per_sample(result: dict[str, Any], per_second_alone: bool = True) -> float:
    """What one sample at 25 kHz cost each CPU's workload: the median slowdown a round, over the samples a CPU
    takes in a second of the workload alone (HZ), or, counting the samples of the longer run under perf, in
    1 + slowdown seconds: both readings of the exercise are right, within 5%."""
    values = Race.from_json(result["race"]).kept_values()
    slowdown = stats.median([a / b for a, b in zip(values[DEFAULT.name], values[ALONE])]) - 1
    return slowdown / HZ * 1e9 if per_second_alone else slowdown / ((1 + slowdown) * HZ) * 1e9


@refuses(ns_per_sample, overhead)
def cost_per_sample(ns: Answers) -> list[Check]:
    saved, found = saved_result(ns, "lab.measure_here()")
    checks = [found]
    if saved is None or saved.get("lab") != LAB.name:
        return checks
    got = ns.get("NS_PER_SAMPLE")
    readings = ns_per_sample(saved), ns_per_sample(saved, per_second_alone=False)
    number = isinstance(got, (int, float)) and not isinstance(got, bool)
    close = number and any(abs(got - e) <= 0.05 * abs(e) for e in readings)
    typed = typed_in(ns.code, "NS_PER_SAMPLE")
    checks.append(Check("ns of a CPU's time one 25 kHz sample cost the workload, in your run",
                        PASSED if close and not typed else FAILED,
                        f"{readings[0]:,.0f} (per sample in a second alone) or {readings[1]:,.0f} (over the samples "
                        "of the longer run under perf), within 5%, worked out from your run's rounds",
                        f"{got!r}, typed in: work it out from result" if typed else repr(got)))
    return checks


# --- po-quiet-options ---------------------------------------------------------------------------------------

MIN_HZ = 500  # samples a second on each CPU: fewer, and a one-second profile names nothing below 1%
RACE = Plan(rounds_per_look=8, max_rounds=64, budget_s=60)
# The options a learner may choose; -a, the event and the output are the grader's.
OPTION = re.compile(r"-F\s*\d+|--freq=\d+|--affinity=(sys|node|cpu)|--aio(=\d+)?|-m\s*\d+|--mmap-pages=\d+|-N|-B")


def parse_options(options: Any) -> tuple[str, ...]:
    """The learner's options as perf record arguments; ValueError saying what is wrong."""
    if not isinstance(options, str) or len(options) > 200:
        raise ValueError(f"{options!r} is not a string of perf record options")
    tokens = tuple(options.split())
    joined = re.findall(r"-F \d+|-m \d+|\S+", " ".join(tokens))
    unknown = [t for t in joined if not OPTION.fullmatch(t)]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not one of the options this exercise takes: -F, --affinity=, --aio, "
                         "-m, -N, -B")
    hz = [int(re.sub(r"\D", "", t)) for t in joined if t.startswith(("-F", "--freq"))]
    if len(hz) != 1 or hz[0] < MIN_HZ:
        raise ValueError(f"give one -F of at least {MIN_HZ} samples a second, not {options!r}")
    return tokens


def quiet_options(ns: Answers) -> list[Check]:
    name = "your options profile every CPU for less than 5% of the workload's time, measured just now"
    try:
        options = parse_options(ns.get("PERF_OPTIONS"))
    except ValueError as why:
        return [Check("PERF_OPTIONS: perf record options this exercise takes", FAILED,
                      f"one -F of at least {MIN_HZ}, and any of --affinity=, --aio, -m, -N, -B", str(why))]
    checks = [Check("PERF_OPTIONS: perf record options this exercise takes", PASSED, f"one -F >= {MIN_HZ}",
                    " ".join(options))]
    cpus = LAB.placement_here()
    workload = workload_argv(cpus, LAB.QUICK.million_steps)
    arms = {ALONE: Arm(ALONE, None), "yours": Arm("yours", options)}

    def one_round(_r: int, order: list[str]) -> dict[str, float]:
        return {arm: run_arm(arms[arm], workload)["wall_ns"] for arm in order}

    def judged(values: dict[str, list[float]], alpha: float) -> tuple[str, str, Any]:
        return judge_paired_change("yours over the workload alone", values["yours"], values[ALONE], MIN_EFFECT,
                                   "slowdown", alpha)

    with measurement_lock(f"perflab grade: {name}"), watched(cpus) as seen:
        raced = race(list(arms), one_round, lambda v, a: judged(v, a)[0] != "inconclusive", RACE, ("yours", ALONE),
                     "grading: the workload under your options", progress=False)
    verdict, why, _ = judged(raced.kept_values(), raced.alpha_per_look)
    expected = f"a slowdown of {MIN_EFFECT:.0%} or more ruled out"
    if seen.busy:
        checks.append(busy_check(name, expected, seen, f"as measured beside other programs, not judged: {why}"))
    elif verdict == "not-reproduced":
        checks.append(Check(name, PASSED, expected, why))
    elif verdict == "reproduced":
        checks.append(Check(name, FAILED, expected, why))
    else:
        checks.append(Check(name, INCONCLUSIVE, expected, f"{why}; {raced.undecided('grade again, quieter')}"))
    return checks
