"""The verdict's test, and the model: what one shared write costs, and the cap it puts on a whole machine."""

from __future__ import annotations

from ... import stats
from ...verdict import ALPHA, Effect, judge_change

MIN_EFFECT = 0.10  # check-before-write at least 10% faster than the unconditional write


# ANCHOR: decide
def decide(values: dict[str, list[float]], alpha: float = ALPHA) -> tuple[str, Effect]:
    """Is check-before-write (the fix) faster than the unconditional write, machine-wide, by MIN_EFFECT?"""
    verdict, _, effect = judge_change("check-before-write vs unconditional write, machine-wide ops/s",
                                      values["write"], values["check"], MIN_EFFECT, stats.median, alpha=alpha)
    return verdict, effect
# ANCHOR_END: decide


def fit(k1: float, ns1: float, k2: float, ns2: float) -> tuple[float, float]:
    """(base, per_write) in ns from two write rates, with ns per operation = base + per_write / K:
    each thread writes the shared line once every K operations, and each write waits per_write ns."""
    per_write = (ns1 - ns2) / (1 / k1 - 1 / k2)
    return ns1 - per_write / k1, per_write


def predict(base: float, per_write: float, k: float) -> float:
    """ns per operation, per thread, at one shared write every k operations."""
    return base + per_write / k


def cap_mops(per_write: float, writes_per_op: float) -> float:
    """Machine-wide million operations per second that one line can serve, however many cores: its writes
    happen one after another, each holding the line per_write ns (the source's model: ~2,000 cycles at 3 GHz, 3
    writes per query)."""
    return 1000 / (per_write * writes_per_op)


def throughput_mops(threads: int, base: float, per_write: float, k: float) -> float:
    """The model's machine-wide throughput: each thread at its private pace (base), until the line's cap."""
    return min(threads * 1000 / base, cap_mops(per_write, 1 / k))
