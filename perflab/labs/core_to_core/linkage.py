"""The advisor's clustering: glitches dropped, SMT siblings matched, and the levels of an average-linkage tree.

perflab/labs/core_to_core/advisor.py explains the method and how its thresholds were chosen and checked.
"""

from __future__ import annotations

import warnings

import numpy as np

from .matrix import LatencyMatrix

GAP_RATIO = 1.3           # a jump of 30% in merge height separates two levels
SMT_MARGIN = 1.25         # a sibling pair's nearest third CPU is this much farther than the pair
SMT_MAJORITY = 0.75       # this share of pairs passing the margin means SMT throughout
STRAGGLERS = 0.1          # a boundary followed, within 10% of its group count in merges, by another is one
                          # boundary: a few slow members (often CPU 0) catching up with their level
TRIANGLE_SLACK = 1.5      # a cell is a glitch when the two CPUs' rows differ (median) by 1.5x the cell
ROW_NOISE = 0.25          # ... plus a quarter of the rows' typical latency, the noise of a measured row


def drop_glitches(m: LatencyMatrix) -> tuple[LatencyMatrix, int]:
    """Ignore cells that break the triangle inequality against most other CPUs.

    If CPUs i and j were really d apart, no CPU k could be much nearer to one
    than to the other: |d(i,k) - d(j,k)| <= d(i,j). A cell far below what the
    rows allow is a measurement glitch, and one glitch must not make two
    distant CPUs look like SMT siblings. Measured rows carry noise that grows
    with distance (cross-socket cells of one pair vary by tens of ns), so the
    rows may also differ by ROW_NOISE of their typical latency.
    """
    ns = m.ns
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: pairs with no third CPU in common
        row_gap = np.nanmedian(np.abs(ns[:, None, :] - ns[None, :, :]), axis=2)
        row_scale = np.nanmedian(np.fmax(ns[:, None, :], ns[None, :, :]), axis=2)
    glitches = np.triu(row_gap > TRIANGLE_SLACK * ns + ROW_NOISE * row_scale, 1)
    if not glitches.any():
        return m, 0
    cleaned = ns.copy()
    cleaned[glitches | glitches.T] = np.nan
    return LatencyMatrix(m.cpus, cleaned, m.source, m.expected_cpus), int(glitches.sum())


def sibling_pairs(ns: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs that behave like SMT siblings: mutually nearest, every third CPU SMT_MARGIN farther.

    Cells are taken fastest first and each CPU joins at most one pair. When
    nearly every pair found this way passes the margin (SMT_MAJORITY), the
    machine has SMT throughout and the few that miss it are siblings blurred
    by noise or a quantised timer's ties: they are kept. Otherwise only the
    passing pairs are siblings (a hybrid part: P-cores with SMT, E-cores without).
    """
    n = len(ns)
    order = np.argsort(np.where(np.isnan(ns), np.inf, ns), axis=None)
    taken: set[int] = set()
    matched, passing = [], []
    for flat in order:
        i, j = divmod(int(flat), n)
        if i >= j or i in taken or j in taken or np.isnan(ns[i, j]):
            continue
        taken |= {i, j}
        matched.append((i, j))
        third = np.delete(ns[[i, j]], [i, j], axis=1)
        if third.size and not np.all(np.isnan(third)) and np.nanmin(third) >= SMT_MARGIN * ns[i, j]:
            passing.append((i, j))
    if matched and len(passing) >= SMT_MAJORITY * len(matched):
        return matched
    return passing


def merge_history(ns: np.ndarray, start: np.ndarray) -> tuple[list[float], list[np.ndarray]]:
    """UPGMA merge heights and, after each merge, every CPU's group label. NaN cells are ignored.

    `start` labels the groups the agglomeration begins from (the sibling pairs).
    """
    n = len(ns)
    measured = ~np.isnan(ns)
    labels = start.copy()
    active = sorted(set(labels.tolist()))
    member = np.zeros((n, n))
    member[labels, np.arange(n)] = 1.0   # row g: the CPUs in group g
    sums = member @ np.where(measured, ns, 0.0) @ member.T
    counts = member @ measured.astype(float) @ member.T
    heights: list[float] = []
    history: list[np.ndarray] = []
    while len(active) > 1:
        idx = np.array(active)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums[np.ix_(idx, idx)] / counts[np.ix_(idx, idx)]
        mean[~np.isfinite(mean)] = np.inf
        np.fill_diagonal(mean, np.inf)
        a, b = divmod(int(np.argmin(mean)), len(idx))
        if not np.isfinite(mean[a, b]):
            break  # the rest was never measured against each other
        keep, gone = idx[a], idx[b]
        sums[keep] += sums[gone]
        sums[:, keep] += sums[:, gone]
        counts[keep] += counts[gone]
        counts[:, keep] += counts[:, gone]
        sums[keep, keep] = counts[keep, keep] = 0
        labels = np.where(labels == gone, keep, labels)
        active.remove(gone)
        heights.append(float(mean[a, b]))
        history.append(labels.copy())
    return heights, history


def boundaries(heights: list[float], n: int) -> list[int]:
    """Merge indices after which a level ends: jumps in height, stragglers folded into their level."""
    jumps = [k for k in range(len(heights) - 1) if heights[k] > 0 and heights[k + 1] / heights[k] >= GAP_RATIO]
    groups_after = [n - 1 - k for k in jumps]  # each merge joins two groups into one
    return [k for i, k in enumerate(jumps)
            if i + 1 == len(jumps) or jumps[i + 1] - k > STRAGGLERS * groups_after[i]]
