"""Lab 1's pictures: a latency matrix as a heatmap with the recovered groups outlined, its histogram,
and the lab's figures of a verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ... import stats
from ...plots import distributions
from ...verdict import Verdict
from .advisor import analyze
from .matrix import LatencyMatrix, from_result, load
from .run import RECORDED_EXAMPLE

MAX_TICKS = 32
MAX_PAIRS_DRAWN = 6  # more pairs than this: too many rows to draw each pair's samples round by round


def cluster_order(m: LatencyMatrix, analysis: dict[str, Any] | None) -> list[int]:
    """CPU ids ordered so that every group of every level is contiguous (coarsest level first)."""
    if not analysis or not analysis["levels"]:
        return list(m.cpus)
    def key(cpu: int) -> tuple:
        return tuple(next(i for i, g in enumerate(groups) if cpu in g) for groups in reversed(analysis["levels"])) + (
            cpu,
        )
    return sorted(m.cpus, key=key)


def heatmap(m: LatencyMatrix, analysis: dict[str, Any] | None = None, ax=None) -> Figure:
    """The matrix in ns, CPUs reordered by cluster, each level's groups outlined (coarser: thicker).

    A lab about CPU numbering must not reorder them silently: the axes say when they are not in numbering order.
    """
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
    axis = "CPU" if order == sorted(order) else "CPU, in sibling and cluster order (not Linux numbering)"
    ax.set_xlabel(axis)
    ax.set_ylabel(axis)
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


def _round_distributions(result: dict[str, Any]) -> Figure:
    by_round: dict[str, list[float]] = {}
    for run in result["runs"]:
        for s in run["samples"]:
            if not s.get("warmup"):
                by_round.setdefault(f"CPUs {run['label']}, round {s['round'] + 1}", []).append(s["one_way_ns"])
    return distributions(by_round, "one-way latency (ns)", centre=stats.median, centre_ci=stats.bootstrap_ci,
                         centre_name="median")


def figures(verdict: Verdict) -> list[tuple[str, Figure]]:
    """The measured heatmap, each pair round by round, the A/B throughput, and a recorded example if nothing showed."""
    shown: list[tuple[str, Figure]] = []
    result = verdict.result
    if result is not None:
        matrix = from_result(result, source=f"measured here: {result['machine'].get('cpu_model', '')}")
        shown.append(("Measured one-way latency between CPUs (ns)", heatmap(matrix, result.get("analysis"))))
        if 0 < len(result["runs"]) <= MAX_PAIRS_DRAWN:
            shown.append(("Every sample of each pair, round by round: a moving pair has no stable distance",
                          _round_distributions(result)))
        if "rates" in result:
            seq, best = result["pairs"]["sequential"], result["pairs"]["best"]
            rates = {f"sequential {seq[0]},{seq[1]}": result["rates"]["sequential"],
                     f"best {best[0]},{best[1]}": result["rates"]["best"]}
            shown.append(
                ("Message-passing throughput, interleaved runs", distributions(rates, "round trips per second"))
            )
    if verdict.verdict == "cannot-show":
        recorded = load(RECORDED_EXAMPLE)
        shown.append(("Recorded: AMD Ryzen 9 5950X (two CCDs, SMT)", heatmap(recorded, analyze(recorded))))
    return shown
