"""Pictures of a latency matrix: a heatmap with the recovered groups outlined, and a histogram."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .. import inline
from .matrix import LatencyMatrix

inline.enable()

MAX_TICKS = 32


def cluster_order(m: LatencyMatrix, analysis: dict[str, Any] | None) -> list[int]:
    """CPU ids ordered so that every group of every level is contiguous (coarsest level first)."""
    if not analysis or not analysis["levels"]:
        return list(m.cpus)
    def key(cpu: int) -> tuple:
        return tuple(next(i for i, g in enumerate(groups) if cpu in g) for groups in reversed(analysis["levels"])) + (cpu,)
    return sorted(m.cpus, key=key)


def heatmap(m: LatencyMatrix, analysis: dict[str, Any] | None = None, ax=None) -> Figure:
    """The matrix in ns, CPUs reordered by cluster, each level's groups outlined (coarser: thicker)."""
    order = cluster_order(m, analysis)
    index = [m.index(c) for c in order]
    values = m.ns[np.ix_(index, index)]
    if ax is None:
        size = 4 + min(len(order), 128) / 16
        figure = Figure(figsize=(size + 1.2, size))
        ax = figure.subplots()
    figure = ax.figure
    image = ax.imshow(values, cmap="viridis", interpolation="nearest")
    figure.colorbar(image, ax=ax, label="one-way latency (ns)")
    step = max(1, -(-len(order) // MAX_TICKS))
    ticks = list(range(0, len(order), step))
    ax.set_xticks(ticks, [str(order[i]) for i in ticks], rotation=90, fontsize=7)
    ax.set_yticks(ticks, [str(order[i]) for i in ticks], fontsize=7)
    ax.set_xlabel("CPU")
    ax.set_ylabel("CPU")
    if analysis:
        position = {cpu: i for i, cpu in enumerate(order)}
        for depth, groups in enumerate(analysis["levels"]):
            for group in groups:
                first, last = min(position[c] for c in group), max(position[c] for c in group)
                ax.add_patch(_outline(first - 0.5, last - first + 1, 0.6 + 1.2 * depth))
    ax.set_title(m.source or "core-to-core latency")
    return figure


def _outline(start: float, width: float, linewidth: float):
    from matplotlib.patches import Rectangle

    return Rectangle((start, start), width, width, fill=False, edgecolor="white", linewidth=linewidth)


def latency_histogram(m: LatencyMatrix, analysis: dict[str, Any] | None = None, ax=None) -> Figure:
    """How pair latencies spread, with each level's boundary marked: the gaps are the structure."""
    if ax is None:
        figure = Figure(figsize=(7, 3))
        ax = figure.subplots()
    figure = ax.figure
    values = [ns for _, _, ns in m.pairs()]
    ax.hist(values, bins=min(80, max(10, len(values) // 4)), color="#4a6a8a")
    for info in (analysis or {}).get("level_info", []):
        ax.axvline(info["within_ns"]["max"], color="#d62728", linestyle="--", linewidth=1)
        ax.annotate(info["name"], (info["within_ns"]["max"], ax.get_ylim()[1] * 0.9), rotation=90,
                    fontsize=8, ha="right", va="top", color="#d62728")
    ax.set_xlabel("one-way latency (ns)")
    ax.set_ylabel("CPU pairs")
    ax.set_title("Pair latencies; dashed: the slowest pair inside each level's groups")
    return figure
