"""Placing a pipeline of communicating threads on CPUs, scored by a latency matrix.

A message in an N-stage pipeline crosses N-1 hops, stage k to stage k+1, so
the placement's cost is the sum of those hops' one-way latencies. Busy stages
should not share a physical core, so SMT siblings are kept apart.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

from .matrix import LatencyMatrix


def pipeline_cost(m: LatencyMatrix, placement: Sequence[int]) -> float:
    """Sum of one-way latencies of consecutive stages (NaN if a hop was not measured)."""
    return sum(m.latency(a, b) for a, b in itertools.pairwise(placement))


def shares_a_core(placement: Sequence[int], smt_groups: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """The pairs of stages in `placement` that are SMT siblings of each other."""
    core_of = {cpu: i for i, group in enumerate(smt_groups) for cpu in group}
    return [(a, b) for a, b in itertools.combinations(placement, 2)
            if a in core_of and core_of.get(a) == core_of.get(b)]


def best_pipeline(m: LatencyMatrix, stages: int, smt_groups: Sequence[Sequence[int]] = ()) -> tuple[list[int], float]:
    """The cheapest chain of `stages` distinct CPUs, no two on one core.

    A beam search: every CPU starts a chain, and each step keeps the `beam`
    cheapest partial chains. Not guaranteed optimal, but on real matrices the
    cheap chains share a cluster, so it finds the optimum (the tests compare
    it with brute force); plain greedy can strand a chain at a cluster edge.
    """
    beam = 64
    chains = [([cpu], 0.0) for cpu in m.cpus]
    for _ in range(stages - 1):
        grown = []
        for chain, cost in chains:
            for cpu in m.cpus:
                hop = m.latency(chain[-1], cpu)
                if cpu in chain or math.isnan(hop) or shares_a_core(chain + [cpu], smt_groups):
                    continue
                grown.append((chain + [cpu], cost + hop))
        chains = sorted(grown, key=lambda c: c[1])[:beam]
    if not chains:
        return [], math.nan
    return chains[0]
