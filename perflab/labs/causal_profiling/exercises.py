"""The causal-profiling exercise: find the line in ingest.c, fix it, measure; the program and its checks.

By construction (see the solution notebook), ingest.c's main thread is the
pipeline's bottleneck, and most of its time goes to tokenize() calling
block_hash() once per token although the hash is the same for every token.
So the lines worth optimising are block_hash's loop and the call in
tokenize(). inflate_block(), perf's first choice, runs on the reader thread,
which waits for the main thread: making it faster changes nothing.

The learner's version is built and checked for the same digest (correctness)
and raced until decided against the baseline, a known fix, and perf's wrong
fix (speed; perflab.grading.races). If the known fix is not faster either, or
the wrong fix is faster too, this run could not show the effect, and the
grade is inconclusive, not failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...build import compile_variant
from ...errors import PerflabError
from ...grading import FAILED, PASSED, Check, refuses
from ...grading.answers import learner_source_copy
from ...grading.numbers import shown
from ...grading.races import BASELINE, RIGHT, WRONG, YOURS, race_fixes
from ...lock import measurement_lock
from ...paths import REPO_ROOT, RUN_BUILD_DIR, scratch
from ...runner import Config, interleave, run_once
from ...sequential import Plan
from . import coz
from .profilers import DEFINITION, SOURCE_DIR, CozSession, function_of_line, perf_ranking, require_tools
from .run import LAB, MIN_EFFECT

EXERCISE_SOURCE = REPO_ROOT / SOURCE_DIR / "ingest.c"
EXERCISE_BUILD_DIR = RUN_BUILD_DIR / "07-causal-profiling" / "exercise"


def build_exercise(source_text: str, name: str) -> Path:
    """Compile a version of ingest.c (the learner's, or a known one) with the lab's flags."""
    EXERCISE_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    source = EXERCISE_BUILD_DIR / f"{name}.c"
    source.write_text(source_text)
    return compile_variant(SOURCE_DIR, source, EXERCISE_BUILD_DIR / name)


def exercise_argv(binary: Path, cpus: tuple[int, int], blocks: int) -> list[str]:
    return [str(binary), "-n", str(blocks), "-c", f"{cpus[0]},{cpus[1]}"]


def line_numbers(source: str, function: str, pattern: str) -> list[int]:
    """Lines inside `function`'s body that contain `pattern`."""
    return [n for n, code in enumerate(source.splitlines(), 1)
            if pattern in code and function_of_line(source, n) == function and not DEFINITION.match(code)]


def exercise_copy() -> Path:
    """The learner's own copy of ingest.c to edit, under results/ (made from the original the first time)."""
    return learner_source_copy(LAB.name, EXERCISE_SOURCE)


def profile_exercise(seconds: float = 20, progress: bool = True) -> tuple[list[dict[str, Any]], coz.Profile]:
    """perf's ranking and a coz profile of the original ingest.c, as the lab profiles commit.c."""
    require_tools()
    binary = build_exercise(EXERCISE_SOURCE.read_text(), "baseline")
    cpus = LAB.placement_here()
    blocks = max(1, int(seconds * 40))  # about 40 blocks a second, slower under coz
    with measurement_lock(f"perflab {LAB.name} exercise"), scratch("coz") as folder:
        ranking = perf_ranking(exercise_argv(binary, cpus, max(1, blocks // 10)), Path(folder))
        session = CozSession(lambda _: exercise_argv(binary, cpus, blocks), Path(folder), seconds, progress)
        try:
            profile = session.run(seconds)
        finally:
            session.close()
    return ranking, profile


def race_exercise(sources: dict[str, str], rounds: int, blocks: int, progress: bool = True) -> dict[str, list[float]]:
    """Blocks per second of each version of ingest.c, built and raced in one interleaved run."""
    cpus = LAB.placement_here()
    configs = [Config(name, exercise_argv(build_exercise(source, name.replace(" ", "-")), cpus, blocks))
               for name, source in sources.items()]
    with measurement_lock(f"perflab {LAB.name} exercise"):
        runs = interleave(configs, rounds, desc="racing the versions", progress=progress)
    return {name: run.values("blocks_per_s") for name, run in runs.items()}


# --- the checks ----------------------------------------------------------------------------------------

RACE = Plan(rounds_per_look=4, max_rounds=40, budget_s=60)
BLOCKS = 25  # blocks per timed run: about half a second
CHECK_BLOCKS = 6  # blocks for the digest comparison


def critical_lines(source: str) -> list[int]:
    """The lines of ingest.c worth optimising, by the program's construction."""
    return sorted(line_numbers(source, "block_hash", "for (") + line_numbers(source, "block_hash", "MIX(")
                  + line_numbers(source, "tokenize", "block_hash("))


def known_fix(source: str) -> str:
    """The fix: hash the block once per block, not once per token."""
    slow = "    for (int t = 0; t < count; t++)\n        tokens[t] = block_hash(b) ^ b->words[t % WORDS];\n"
    if slow not in source:
        raise PerflabError("ingest.c no longer has the loop the known fix rewrites; update known_fix()")
    return source.replace(slow, "    uint64_t salt = block_hash(b);\n    for (int t = 0; t < count; t++)\n"
                                "        tokens[t] = salt ^ b->words[t % WORDS];\n")


def known_wrong_fix(source: str) -> str:
    """perf's first choice, really made faster: inflate_block builds its table once. Its thread waits for the
    main thread, so the program is no faster; the digest does not change."""
    table = "    uint64_t table[TABLE];\n    for (int i = 0; i < TABLE; i++) {"
    if table not in source:
        raise PerflabError("ingest.c no longer has the table the known wrong fix builds once; update known_wrong_fix()")
    fixed = source.replace(table, "    static uint64_t table[TABLE];\n    static int built;\n"
                                  "    for (int i = 0; i < TABLE && !built; i++) {")
    return fixed.replace("        table[i] = h;\n    }\n", "        table[i] = h;\n    }\n    built = 1;\n", 1)


def _chosen_line(chosen, baseline: str) -> Check:
    lines = critical_lines(baseline)
    expected = ", ".join(f"ingest.c:{n}" for n in lines)
    number = None
    if isinstance(chosen, str) and chosen.rpartition(":")[0].endswith("ingest.c"):
        number = int(chosen.rpartition(":")[2]) if chosen.rpartition(":")[2].isdigit() else None
    return Check("the line worth optimising", PASSED if number in lines else FAILED, f"one of {expected}",
                 shown(chosen) + ("" if number in lines else ": not on the main thread's critical path"))


@refuses(critical_lines, known_fix, known_wrong_fix)
def find_the_line(ns: dict) -> list[Check]:
    baseline = EXERCISE_SOURCE.read_text()
    checks = [_chosen_line(ns.get("CHOSEN_LINE"), baseline)]
    mine = ns.get("MY_SOURCE")
    if not isinstance(mine, str) or mine.strip() == baseline.strip():
        checks.append(Check("your version of ingest.c", FAILED, "the text of your changed ingest.c",
                            "unchanged" if isinstance(mine, str) else repr(type(mine).__name__)))
        return checks
    versions = {BASELINE: baseline, YOURS: mine, RIGHT: known_fix(baseline), WRONG: known_wrong_fix(baseline)}
    try:
        binaries = {name: build_exercise(text, name.replace(" ", "-")) for name, text in versions.items()}
    except PerflabError as err:
        checks.append(Check("your version builds", FAILED, "it compiles with the lab's flags", str(err)))
        return checks
    cpus = LAB.placement_here()
    digests = {name: run_once(exercise_argv(b, cpus, CHECK_BLOCKS))[1][0]["digest"] for name, b in binaries.items()}
    same = digests[YOURS] == digests[BASELINE]
    checks.append(Check("your version computes the same index (digest)", PASSED if same else FAILED,
                        digests[BASELINE], digests[YOURS]))
    if same:
        checks.append(_race(binaries, cpus))
    return checks


def _race(binaries: dict[str, Path], cpus: tuple[int, int]) -> Check:
    """Baseline, your version, the known fix and perf's wrong fix, raced until the grade is decided."""
    argv = {arm: exercise_argv(binary, cpus, BLOCKS) for arm, binary in binaries.items()}
    return race_fixes(argv, lambda samples: samples[0]["blocks_per_s"], RACE, MIN_EFFECT,
                      "your version is faster, measured just now",
                      f"at least {MIN_EFFECT:.0%} more blocks per second than the baseline, significantly, where "
                      "speeding up perf's hottest function (a thread that waits) is not", cpus)
