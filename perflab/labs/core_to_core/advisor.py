"""The pinning advisor: recover a machine's structure from its core-to-core latencies.

Method, in two steps:

1. SMT siblings are a matching, not a threshold: two CPUs are siblings when
   they are each other's nearest CPU and every third CPU is at least
   SMT_MARGIN times farther from both. The test is local to each pair, so it
   holds when one machine's sibling latencies vary twofold (a 7950X measured
   5 and 11 ns, next to cores at 14 ns), which a global threshold cannot.
2. Coarser levels come from average-linkage agglomeration (UPGMA) of the
   sibling pairs, with the latency as distance. Each merge has a height, the
   mean latency between the two groups it joins. Within a level (an L3
   cluster, a socket) the heights grow slowly; from one level to the next
   they jump. So every jump of GAP_RATIO or more in the sorted heights is a
   boundary, and the grouping just below it is a level. Average linkage, not
   single linkage, so that a few noisy cells cannot pull two groups together.

The first advisor cut every level at a jump in merge height, with thresholds
chosen on the twelve matrices in ../shared. On 21 matrices it had not seen
(tests/fixtures/c2c-held-out) it lost the SMT level twice: the 7950X's
quantised timer, and a Sandy Bridge pair whose real 9 ns cell was dropped as
a glitch because cross-socket cells vary by tens of ns. Hence the matching
and ROW_NOISE (in linkage.py, with the other thresholds). Across all 33
matrices, the mutually nearest pairs of every SMT machine have a margin of
1.4 or more, those of every machine without SMT 1.05 or less, except the
Ampere Altra's core pairs (1.6): a real level, which the naming step does
not call SMT (68-97 ns inside a pair).

Names are inferred from latency alone, which cannot tell a socket from a
chiplet for certain: the notes say so, and on a machine you measured the lab
checks the levels against the probe's topology.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ...cpulist import format_cpulist
from .linkage import boundaries, drop_glitches, merge_history, sibling_pairs
from .matrix import LatencyMatrix

SEPARATION = 1.3          # a level's groups must be this much closer inside than between
SOCKET_NS = 100.0         # a split costing this much one way is typical of a socket interconnect
UNIFORM_SPREAD = 1.3      # max/min latency below this: no boundary worth naming
RECOMMENDED = 3
MAX_GROUPS_SHOWN = 8       # groups and pairs listed per level in the text report


def _groups(m: LatencyMatrix, labels: np.ndarray) -> list[list[int]]:
    by_label: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(int(label), []).append(m.cpus[i])
    return sorted(sorted(g) for g in by_label.values())


def _within_between(m: LatencyMatrix, groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    group_of = {cpu: g for g, members in enumerate(groups) for cpu in members}
    same = np.array([[group_of[a] == group_of[b] for b in m.cpus] for a in m.cpus])
    upper = np.triu(np.ones_like(same, dtype=bool), 1) & ~np.isnan(m.ns)
    return m.ns[upper & same], m.ns[upper & ~same]


def _other_half(m: LatencyMatrix, groups: list[list[int]]) -> list[list[int]] | None:
    """Two halves, when one cohesive group holds exactly half the CPUs and the rest has no structure.

    The rest's groups are then as far from each other as from the half: seen
    on a two-socket EPYC whose second socket's L3 clusters are all far apart.
    """
    largest = max(groups, key=len)
    rest = [g for g in groups if g is not largest]
    if len(groups) < 3 or 2 * len(largest) != len(m.cpus):
        return None
    index = {cpu: i for i, cpu in enumerate(m.cpus)}
    def median_between(xs, ys):
        return float(np.nanmedian(m.ns[np.ix_([index[c] for c in xs], [index[c] for c in ys])]))
    among_rest = [median_between(a, b) for a, b in itertools.combinations(rest, 2)]
    to_half = [median_between(g, largest) for g in rest]
    if min(among_rest) < 0.85 * float(np.median(to_half)):
        return None
    return sorted([sorted(largest), sorted(c for g in rest for c in g)])


def _name(groups: list[list[int]], within: np.ndarray, between: np.ndarray, finest: bool, coarsest: bool) -> str:
    sizes = [len(g) for g in groups]
    paired = sum(s for s in sizes if s == 2)
    if finest and max(sizes) == 2 and 2 * paired >= sum(sizes) and np.median(within) < 0.5 * np.median(between):
        return "SMT siblings"
    if coarsest and 2 <= len(groups) <= 8 and len(set(sizes)) == 1 and np.median(between) >= SOCKET_NS:
        return "socket"
    return "shared-cache cluster"


def _stats(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return {"median": None, "min": None, "max": None}
    return {"median": float(np.median(values)), "min": float(values.min()), "max": float(values.max())}


def find_levels(m: LatencyMatrix) -> tuple[list[list[list[int]]], list[dict[str, Any]], list[str]]:
    """Groupings from finest to coarsest, a description of each, and notes."""
    notes: list[str] = []
    start = np.arange(len(m.cpus))
    pairs = sibling_pairs(m.ns)
    for i, j in pairs:
        start[j] = i
    heights, history = merge_history(m.ns, start)
    candidates = [_groups(m, start)] if len(pairs) >= 2 else []
    groups_at_start = len(set(start.tolist()))
    for k in boundaries(heights, groups_at_start):
        groups = _groups(m, history[k])
        if 1 < len(groups) < len(m.cpus):
            candidates.append(groups)
    if candidates and (halves := _other_half(m, candidates[-1])):
        candidates[-1] = halves
        notes.append("the coarsest split pairs a tight half with a half whose clusters are as far from each other "
                     "as from the first half; read it as two sockets only if the probe agrees")
    levels, info = [], []
    for groups in candidates:
        within, between = _within_between(m, groups)
        if within.size and between.size and np.median(between) >= SEPARATION * np.median(within):
            levels.append(groups)
            info.append({"groups": len(groups), "within_ns": _stats(within), "between_ns": _stats(between),
                         "boundary_ns": float(np.median(between))})
    for i, (groups, entry) in enumerate(zip(levels, info)):
        within, between = _within_between(m, groups)
        entry["name"] = _name(groups, within, between, finest=i == 0, coarsest=i == len(levels) - 1)
    return levels, info, notes


def _sibling_of(levels, info) -> dict[int, set[int]]:
    smt = next((g for g, i in zip(levels, info) if i["name"] == "SMT siblings"), [])
    return {cpu: set(group) - {cpu} for group in smt for cpu in group}


def recommend(m: LatencyMatrix, siblings: dict[int, set[int]]) -> list[dict[str, Any]]:
    """The fastest pairs on different cores, then the fastest SMT pair with its caveat."""
    pairs = sorted(m.pairs(), key=lambda p: p[2])
    cores = [p for p in pairs if p[1] not in siblings.get(p[0], set())]
    shown = [
        {"cpus": [a, b], "one_way_ns": ns, "why": "among the fastest pairs on separate cores"}
        for a, b, ns in cores[:RECOMMENDED]
    ]
    if shown and len(m.cpus) == 2:
        shown[0]["why"] = "the only pair"
    smt = [p for p in pairs if p[1] in siblings.get(p[0], set())]
    if smt:
        a, b, ns = smt[0]
        shown.append({"cpus": [a, b], "one_way_ns": ns,
                      "why": "SMT siblings: the fastest hand-over, but both threads share one core's execution units"})
    return shown


def sequential(m: LatencyMatrix, levels, info, siblings) -> list[dict[str, Any]]:
    """Neighbours in numbering: how far apart they really are, and which boundary they cross."""
    out = []
    for a, b in itertools.pairwise(m.cpus):
        ns = m.latency(a, b)
        if math.isnan(ns):
            continue
        crosses = None
        for groups, entry in zip(levels, info):
            if entry["name"] != "SMT siblings" and not any(a in g and b in g for g in groups):
                crosses = entry["name"]
        partners = [m.latency(a, c) for c in m.cpus if c != a and c not in siblings.get(a, set())]
        out.append({"cpus": [a, b], "one_way_ns": ns, "crosses": crosses,
                    "vs_best_ns": float(np.nanmin(partners))})
    return out


def analyze(m: LatencyMatrix) -> dict[str, Any]:
    """Levels (finest to coarsest), recommended pairs, misleading neighbours and honest notes."""
    notes = []
    if m.expected_cpus:
        notes.append(f"partial matrix: {len(m.cpus)} of {m.expected_cpus} CPUs measured")
    if m.measured_fraction < 1:
        notes.append(f"{1 - m.measured_fraction:.0%} of the pairs were not measured (empty, nan or null cells); "
                     "they are left out")
    if len(m.cpus) < 3:
        notes.append(f"only {len(m.cpus)} CPUs ({format_cpulist(m.cpus)}): no structure can be recovered from one pair")
        levels, info = [], []
    else:
        m, glitches = drop_glitches(m)
        if glitches:
            notes.append(f"{glitches} cell(s) broke the triangle inequality against most CPUs and were ignored "
                         "as measurement glitches")
        levels, info, found = find_levels(m)
        notes += found
        values = np.array([ns for _, _, ns in m.pairs()])
        if not levels:
            spread = values.max() / values.min() if values.size and values.min() > 0 else math.inf
            notes.append(
                f"latencies run from {values.min():.0f} to {values.max():.0f} ns without a clear boundary"
                + (" (nearly uniform)" if spread < UNIFORM_SPREAD else " (a mesh or ring: distance grows gradually)")
            )
        else:
            notes.append("level names come from latency alone: 'socket' marks a split costing over "
                         f"{SOCKET_NS:.0f} ns one way; a chiplet boundary can look the same")
    siblings = _sibling_of(levels, info)
    return {"source": m.source, "cpus": list(m.cpus), "levels": levels, "level_info": info,
            "recommended_pairs": recommend(m, siblings), "sequential_pairs": sequential(m, levels, info, siblings),
            "notes": notes}


def render_analysis(analysis: dict[str, Any]) -> str:
    """The advisor's findings as text for a terminal."""
    lines = [f"{analysis['source']}: {len(analysis['cpus'])} CPUs"]
    if analysis["levels"]:
        lines.append("structure, finest to coarsest:")
    for number, (groups, info) in enumerate(zip(analysis["levels"], analysis["level_info"]), 1):
        sizes = sorted({len(g) for g in groups})
        size = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        lines.append(f"  {number}. {info['name']}: {len(groups)} groups of {size} CPUs "
                     f"(within: median {info['within_ns']['median']:.0f} ns; "
                     f"between: median {info['between_ns']['median']:.0f} ns)")
        shown = "  ".join(format_cpulist(g) for g in groups[:MAX_GROUPS_SHOWN])
        more = f"  ... (+{len(groups) - MAX_GROUPS_SHOWN})" if len(groups) > MAX_GROUPS_SHOWN else ""
        lines.append(f"     {shown}{more}")
    lines.append("pin two communicating threads to:")
    for pair in analysis["recommended_pairs"]:
        lines.append(f"  CPUs {pair['cpus'][0]},{pair['cpus'][1]}: {pair['one_way_ns']:.0f} ns one way - {pair['why']}")
    misleading = [p for p in analysis["sequential_pairs"] if p["crosses"]]
    if misleading:
        lines.append("neighbours in numbering that are far apart:")
        for pair in sorted(misleading, key=lambda p: -p["one_way_ns"])[:MAX_GROUPS_SHOWN]:
            lines.append(
                f"  CPUs {pair['cpus'][0]},{pair['cpus'][1]}: {pair['one_way_ns']:.0f} ns, "
                f"crosses a {pair['crosses']} boundary (CPU {pair['cpus'][0]}'s nearest other core: "
                f"{pair['vs_best_ns']:.0f} ns)"
            )
    lines += [f"note: {note}" for note in analysis["notes"]]
    return "\n".join(lines)
