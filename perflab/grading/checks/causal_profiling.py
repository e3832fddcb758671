"""Checks for the causal-profiling exercise: find the line in ingest.c, fix it, measure.

By construction (see the solution notebook), ingest.c's main thread is the
pipeline's bottleneck, and most of its time goes to tokenize() calling
block_hash() once per token although the hash is the same for every token.
So the lines worth optimising are block_hash's loop and the call in
tokenize(). inflate_block(), perf's first choice, runs on the reader thread,
which waits for the main thread: making it faster changes nothing.

The learner's version is built and checked for the same digest (correctness)
and raced against the baseline and a known fix in one interleaved run
(speed). If the known fix is not faster either, this run could not show the
effect, and the grade is inconclusive, not failed.
"""

from __future__ import annotations

from ... import stats
from ...errors import PerflabError
from ...labs import causal_profiling as lab
from ...probe import probe
from ...runner import run_once
from ...verdict import judge_change
from .. import FAILED, INCONCLUSIVE, PASSED, Check

ROUNDS = 8  # interleaved rounds of the race
BLOCKS = 25  # blocks per timed run: about half a second
CHECK_BLOCKS = 6  # blocks for the digest comparison


def critical_lines(source: str) -> list[int]:
    """The lines of ingest.c worth optimising, by the program's construction."""
    return sorted(lab.line_numbers(source, "block_hash", "for (") + lab.line_numbers(source, "block_hash", "MIX(")
                  + lab.line_numbers(source, "tokenize", "block_hash("))


def known_fix(source: str) -> str:
    """The fix: hash the block once per block, not once per token."""
    slow = "    for (int t = 0; t < count; t++)\n        tokens[t] = block_hash(b) ^ b->words[t % WORDS];\n"
    if slow not in source:
        raise PerflabError("ingest.c no longer has the loop the known fix rewrites; update known_fix()")
    return source.replace(slow, "    uint64_t salt = block_hash(b);\n    for (int t = 0; t < count; t++)\n"
                                "        tokens[t] = salt ^ b->words[t % WORDS];\n")


def _chosen_line(chosen, baseline: str) -> Check:
    lines = critical_lines(baseline)
    expected = ", ".join(f"ingest.c:{n}" for n in lines)
    number = None
    if isinstance(chosen, str) and chosen.rpartition(":")[0].endswith("ingest.c"):
        number = int(chosen.rpartition(":")[2]) if chosen.rpartition(":")[2].isdigit() else None
    return Check("the line worth optimising", PASSED if number in lines else FAILED, f"one of {expected}",
                 repr(chosen) + ("" if number in lines else ": not on the main thread's critical path"))


def find_the_line(ns: dict) -> list[Check]:
    baseline = lab.EXERCISE_SOURCE.read_text()
    checks = [_chosen_line(ns.get("CHOSEN_LINE"), baseline)]
    mine = ns.get("MY_SOURCE")
    if not isinstance(mine, str) or mine.strip() == baseline.strip():
        checks.append(Check("your version of ingest.c", FAILED, "the text of your changed ingest.c",
                            "unchanged" if isinstance(mine, str) else repr(type(mine).__name__)))
        return checks
    versions = {"baseline": baseline, "yours": mine, "known fix": known_fix(baseline)}
    try:
        binaries = {name: lab.build_exercise(text, name.replace(" ", "-")) for name, text in versions.items()}
    except PerflabError as err:
        checks.append(Check("your version builds", FAILED, "it compiles with the lab's flags", str(err)))
        return checks
    cpus = lab.choose_cpus(probe())
    digests = {name: run_once(lab.exercise_argv(b, cpus, CHECK_BLOCKS))[1][0]["digest"] for name, b in binaries.items()}
    same = digests["yours"] == digests["baseline"]
    checks.append(Check("your version computes the same index (digest)", PASSED if same else FAILED,
                        digests["baseline"], digests["yours"]))
    if same:
        checks.append(_race(versions))
    return checks


def _race(versions: dict[str, str]) -> Check:
    """Baseline, your version and the known fix, interleaved: is yours significantly faster?"""
    rates = lab.race_exercise(versions, ROUNDS, BLOCKS, progress=False)
    mine, mine_reason, _ = judge_change("yours vs baseline", rates["baseline"], rates["yours"], lab.MIN_EFFECT,
                                        stats.median)
    known, known_reason, _ = judge_change("known fix vs baseline", rates["baseline"], rates["known fix"],
                                          lab.MIN_EFFECT, stats.median)
    name = "your version is faster, measured just now"
    expected = f"at least {lab.MIN_EFFECT:.0%} more blocks per second than the baseline, significantly"
    if mine == "reproduced":
        return Check(name, PASSED, expected, mine_reason)
    if known != "reproduced":
        return Check(name, INCONCLUSIVE, expected, f"{mine_reason}; but the known fix was not faster either "
                     f"({known_reason}): this run could not show it; grade again on a quieter machine")
    if mine == "inconclusive":
        return Check(name, INCONCLUSIVE, expected, f"{mine_reason}; grade again")
    return Check(name, FAILED, expected, f"{mine_reason}: did you speed up a thread that waits? "
                 f"(the known fix was faster: {known_reason})")
