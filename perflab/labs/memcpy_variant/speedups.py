"""Lab 11's judgement: at which sizes another variant beats the default, round by round.

Every arm copies every size once a round, so each size gives each variant a paired ratio per round:
the default's ns per copy over the variant's (above 1: the variant is faster). A variant beats the default
at a size when that ratio is at least 1 + MIN_EFFECT significantly, and the same holds against the
control (the default's own code, in another process under a tunable glibc ignores): a win has to hold
against two separate measurements of the default, not one unlucky arm. The error rate is split
(Bonferroni) over every variant and size judged, so that many comparisons do not find a win by chance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ... import stats
from ...verdict import Effect, judge_paired_change
from .variants import CONTROL, DEFAULT

MIN_EFFECT = 0.10  # a variant must copy at least 10% faster: the control stayed within 6% of the default
SMALL = 256  # bytes: the verdict is on copies up to this size, where the source's slowdown was


def arm_key(arm: str, size: int) -> str:
    """The race's arm for one variant at one size."""
    return f"{arm} @ {size} B"


def size_text(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Comparison:
    """One variant against the default at one size: its effect, and whether it won (against the control too)."""

    arm: str
    size: int
    verdict: str  # the paired judge's against the default
    effect: Effect
    beats_control: bool | None  # None: no control arm here


# ANCHOR: compare
def compare(values: dict[str, list[float]], arms: list[str], sizes: list[int], alpha: float) -> list[Comparison]:
    """Every variant other than the default and the control, at every size up to SMALL."""
    rivals = [a for a in arms if a not in (DEFAULT, CONTROL)]
    judged = [s for s in sizes if s <= SMALL]
    split = alpha / max(1, len(rivals) * len(judged))
    comparisons = []
    for size in judged:
        default = values[arm_key(DEFAULT, size)]
        for arm in rivals:
            mine = values[arm_key(arm, size)]
            verdict, _, effect = judge_paired_change(f"{arm} over the default at {size_text(size)}", default, mine,
                                                     MIN_EFFECT, "speed-up", split)
            beats_control = None
            if CONTROL in arms:
                beats_control = judge_paired_change("", values[arm_key(CONTROL, size)], mine, MIN_EFFECT,
                                                    alpha=split)[0] == "reproduced"
            comparisons.append(Comparison(arm, size, verdict, effect, beats_control))
    return comparisons


# ANCHOR_END: compare


def wins(comparisons: list[Comparison]) -> list[Comparison]:
    """The comparisons a variant won: faster than the default and, where there is one, than the control."""
    return [c for c in comparisons if c.verdict == "reproduced" and c.beats_control is not False]


# ANCHOR: decide
def decide(comparisons: list[Comparison]) -> tuple[str, Comparison]:
    """reproduced when a variant wins at some size; not-reproduced when every speed-up of MIN_EFFECT is ruled out;
    else inconclusive. With it, the comparison to report: the largest win, else the least ruled out."""
    won = wins(comparisons)
    if won:
        return "reproduced", max(won, key=lambda c: c.effect.value)
    closest = max(comparisons, key=lambda c: c.effect.ci_high)
    if all(c.verdict == "not-reproduced" for c in comparisons):
        return "not-reproduced", closest
    return "inconclusive", closest


# ANCHOR_END: decide


def band(sizes: list[int]) -> str:
    """[16, 32] -> '16 B to 32 B'; [8, 32] -> '8 B, 32 B' (the sizes are powers of two)."""
    spans: list[list[int]] = []
    for size in sorted(sizes):
        if spans and size == 2 * spans[-1][1]:
            spans[-1][1] = size
        else:
            spans.append([size, size])
    return ", ".join(size_text(a) if a == b else f"{size_text(a)} to {size_text(b)}" for a, b in spans)


def winners_by_size(comparisons: list[Comparison]) -> dict[int, list[str]]:
    """size -> the variants that won there, fastest first."""
    found: dict[int, list[Comparison]] = {}
    for c in wins(comparisons):
        found.setdefault(c.size, []).append(c)
    return {size: [c.arm for c in sorted(cs, key=lambda c: -c.effect.value)] for size, cs in sorted(found.items())}


def medians_by_size(values: dict[str, list[float]], arms: list[str], sizes: list[int]) -> dict[str, Any]:
    """{arm: [median ns per copy at each size]}: the figure's lines."""
    return {arm: [stats.median(values[arm_key(arm, s)]) for s in sizes] for arm in arms}
