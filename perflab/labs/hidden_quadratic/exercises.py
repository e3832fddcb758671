"""Lab 9's exercises and their checks: predict the crossover, find the quadratic line from a profile, fix it.

The crossover is recomputed from the learner's saved sweep; the line is
checked against export.c's construction (the strcat() in write_csv walks the
whole text for every line); the fix is built, checked for the same text
(digests) at every size, timed afresh at four sizes for its exponent, and
raced at the largest size against the baseline, a known fix and a known wrong
fix (perflab.grading.races) until the grade is decided.
"""

from __future__ import annotations

import random

from ...errors import PerflabError
from ...grading import FAILED, INCONCLUSIVE, PASSED, Check, calls, refuses
from ...grading.answers import saved_result
from ...grading.kernel import CallError, FunctionAnswer
from ...grading.own_code import refused_call
from ...grading.races import BASELINE, RIGHT, WRONG, YOURS, race_fixes
from ...sequential import Plan
from .export import (
    EXPORT_SIZES,
    EXPORT_SOURCE,
    build_export,
    export_argv,
    fit,
    known_fix,
    known_wrong_fix,
    time_versions,
)
from .programs import LOOKUP_SIZES, crossover, lookup_medians
from .run import LAB, MIN_FIX_EFFECT, QUADRATIC_FROM

# --- predict the crossover ----------------------------------------------------------------------------------

def fresh_curves() -> list[list]:
    """Lookup times over LOOKUP_SIZES with a crossover at a random size, one that never crosses, and one where
    binary search wins once at a small size and then loses again (so 'from there on' matters)."""
    rng = random.Random()
    sizes = list(LOOKUP_SIZES)
    cases = []
    for _ in range(3):
        at = rng.randrange(2, len(sizes))
        scan = [2 + 0.4 * n * rng.uniform(0.9, 1.1) for n in sizes]
        search = [scan[i] * (rng.uniform(1.1, 2) if i < at else rng.uniform(0.2, 0.9)) for i in range(len(sizes))]
        cases.append([sizes, scan, search])
    scan = [1 + 0.01 * n for n in sizes]
    cases.append([sizes, scan, [s * 1.5 for s in scan]])
    dip = [s * (0.8 if i in (1, 6, 7, 8, 9, 10, 11, 12) else 1.3) for i, s in enumerate(scan)]
    cases.append([sizes, scan, dip])
    return cases


def _crossover_check(answers) -> Check:
    """The learner's crossover() on fresh curves: a size, or None where the scan never loses, exactly."""
    learner = answers.get("crossover")
    if not isinstance(learner, FunctionAnswer) or learner.module != "__main__":
        return Check("crossover is defined in your notebook", FAILED, "a function written in your notebook",
                     "not defined" if not isinstance(learner, FunctionAnswer) else f"a function from {learner.module}")
    if refused := refused_call(answers.code, "crossover", crossover):
        return Check("crossover is your own", FAILED, "a function written in your notebook, not a call of the answer",
                     refused)
    for arguments, got in zip(answers.inputs["crossover"], learner.results):
        expected = crossover(*arguments)
        if isinstance(got, CallError) or got != expected:
            shown = ", ".join(f"{n}: {a:.3g}/{b:.3g}" for n, a, b in zip(*arguments))
            return Check(f"crossover on fresh curves (n: linear/binary ns) {shown[:120]}...", FAILED, repr(expected),
                         repr(got))
    return Check(
        f"crossover on {len(learner.results)} fresh pairs of curves", PASSED, "matches the reference", "matches"
    )


@calls(crossover=fresh_curves)
def predict_crossover(answers) -> list[Check]:
    checks = [_crossover_check(answers)]
    predicted = answers.get("PREDICTED_CROSSOVER")
    checks.append(Check("your prediction, written before measuring", PASSED if predicted in LOOKUP_SIZES else FAILED,
                        f"one of the sweep's sizes: {', '.join(map(str, LOOKUP_SIZES))}", repr(predicted)))
    saved, provenance = saved_result(answers, "lab.sweep_result()", key="SWEEP")
    checks.append(provenance)
    if saved is None:
        return checks
    medians = lookup_medians(saved["sweep"])
    sizes = sorted(set(medians["linear"]) & set(medians["binary"]))
    expected = crossover(sizes, [medians["linear"][n] for n in sizes], [medians["binary"][n] for n in sizes])
    got = answers.get("MEASURED_CROSSOVER")
    checks.append(Check("the crossover in your sweep", PASSED if got == expected else FAILED,
                        f"{expected} (recomputed from the medians in {answers['SWEEP']['path']})",
                        repr(got)))
    return checks


# --- find the quadratic line ------------------------------------------------------------------------------------

def strcat_lines(source: str) -> list[int]:
    """The line of write_csv() that makes it quadratic, by export.c's construction."""
    return [number for number, code in enumerate(source.splitlines(), 1) if code.strip().startswith("strcat(text,")]


@refuses(strcat_lines)
def find_the_line(answers) -> list[Check]:
    lines = strcat_lines(EXPORT_SOURCE.read_text())
    chosen = answers.get("QUADRATIC_LINE")
    file, _, number = chosen.rpartition(":") if isinstance(chosen, str) else ("", "", "")
    right = file.endswith("export.c") and number.isdigit() and int(number) in lines
    caller = answers.get("CALLER")
    return [Check("the line that makes the export quadratic", PASSED if right else FAILED,
                  f"one of {', '.join(f'export.c:{n}' for n in lines)}", repr(chosen)),
            Check("the function of export.c under which the flame graph's widest tower stands",
                  PASSED if caller == "write_csv" else FAILED, "its name, as the flame graph shows it", repr(caller))]


# --- fix it -----------------------------------------------------------------------------------------------------

FIT_ROUNDS = 8
RACE = Plan(rounds_per_look=4, max_rounds=40, budget_s=60)


def _exponent(times: dict[int, list[float]]) -> Check:
    found = fit(times)
    status = PASSED if found.high < QUADRATIC_FROM else FAILED if found.low > QUADRATIC_FROM else INCONCLUSIVE
    return Check("your version's scaling exponent, measured just now", status,
                 f"below {QUADRATIC_FROM}, with its 95% interval (linear work: about 1)",
                 f"n^{found.exponent:.2f} (95% CI {found.low:.2f} to {found.high:.2f}) over n = "
                 f"{', '.join(map(str, EXPORT_SIZES))}")


@refuses(known_fix, known_wrong_fix)
def fix(answers) -> list[Check]:
    baseline = EXPORT_SOURCE.read_text()
    mine = answers.get("MY_SOURCE")
    if not isinstance(mine, str) or mine.strip() == baseline.strip():
        return [Check("your version of export.c", FAILED, "the text of your changed export.c",
                      "unchanged" if isinstance(mine, str) else repr(type(mine).__name__))]
    try:
        times, digests = time_versions({BASELINE: baseline, YOURS: mine}, FIT_ROUNDS, progress=False)
    except PerflabError as err:
        return [Check("your version builds and runs", FAILED, "it compiles with the lab's flags and runs", str(err))]
    same = digests[YOURS] == digests[BASELINE]
    checks = [Check("your version writes the same text (digests at every size)", PASSED if same else FAILED,
                    str(digests[BASELINE]), str(digests[YOURS]))]
    if not same:
        return checks
    checks.append(_exponent(times[YOURS]))
    versions = {BASELINE: baseline, YOURS: mine, RIGHT: known_fix(baseline), WRONG: known_wrong_fix(baseline)}
    cpu = LAB.placement_here()
    argv = {arm: export_argv(build_export(text, arm.replace(" ", "-")), (EXPORT_SIZES[-1],), cpu)
            for arm, text in versions.items()}
    checks.append(race_fixes(argv, lambda samples: 1 / samples[0]["ns_per_text"], RACE, MIN_FIX_EFFECT,
                             f"your version is faster at n={EXPORT_SIZES[-1]}, measured just now",
                             f"at least {MIN_FIX_EFFECT + 1:.0f}x the baseline's rate, significantly, where making "
                             "the formatting faster (the known wrong fix) is not", LAB.watched_cpus(cpu)))
    return checks

