"""Lab 10's pictures: the victim's time per access beside each neighbour mode, and the neighbour's memory use
against its memory traffic."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from ... import plots, stats
from ...sequential import Race
from ...verdict import Verdict
from .measure import SETS, arm
from .programs import MODES

GIB = 1 << 30


def victim_figures(result: dict[str, Any]) -> list[tuple[str, Figure]]:
    """One strip plot per working set: every sample beside every mode, medians with their 95% CI."""
    kept = Race.from_json(result["race"]).kept_values()
    shown = []
    for working_set, where in zip(SETS, ("beyond the LLC", "inside its L2")):
        samples = {f"{mode} neighbour": kept[arm(working_set, mode)] for mode in MODES}
        shown.append((f"The {working_set} victim ({where}) beside each neighbour",
                      plots.distributions(samples, "victim: ns per access (its CPU time)", centre=stats.median,
                                          centre_ci=stats.bootstrap_ci, centre_name="median")))
    return shown


def rss_figure(result: dict[str, Any]) -> Figure:
    """Left: what `top` shows of each process (RSS). Right: what the neighbour did to memory in each mode."""
    figure = Figure(figsize=(9, 3.5))
    left, right = figure.subplots(1, 2)
    rss = {name: stats.median(values) / GIB for name, values in result["rss_bytes"].items()}
    left.barh(list(rss), list(rss.values()), color="#8c8c8c")
    left.set_xlabel("resident memory, GiB (the same in every mode)")
    periods = result["neighbour_periods"]
    gbps = [stats.median([p["gb_per_s"] for p in periods[m]]) if periods[m] else 0.0 for m in MODES]
    right.bar(MODES, gbps, color=["#c7e9c0", "#9ecae1", "#fd8d3c", "#e6550d"])
    right.set_ylabel("neighbour's stores, GB/s (median)")
    for x, value in enumerate(gbps):
        right.annotate(f"{value:.1f}", (x, value), ha="center", va="bottom", fontsize=8)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    result = verdict.result
    if result is None or "race" not in result:
        return []
    return [*victim_figures(result), ("The neighbour: its RSS never changes, its traffic does", rss_figure(result))]
