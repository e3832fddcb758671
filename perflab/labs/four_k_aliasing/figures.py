"""Lab 8's pictures: the loop's time at every distance, the stencil's race, the PMU's counts where there are
some, and the source's runs replayed."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from ... import stats
from ...plots import distributions
from ...verdict import Verdict
from . import recorded
from .stencil import ALIGNED, kept
from .sweep import CONTROL, KERNELS, NEAR, SWEEP_MIN_EFFECT, by_distance, classify

SLOW, FAST, SOURCE = "#d62728", "#1f77b4", "#7f7f7f"


def sweep_figure(samples: list[dict[str, Any]]) -> Figure:
    """Each kernel's median time per element at each distance, over the control's, with its 95% CI."""
    kernels = [k for k in KERNELS if any(s["kernel"] == k for s in samples)]
    figure = Figure(figsize=(11, 1.5 + 2.6 * len(kernels)))
    for ax, kernel in zip(figure.subplots(len(kernels), 1, squeeze=False)[:, 0], kernels):
        timings = by_distance(samples, kernel)
        slow = set(classify(timings)["slow"])
        base = stats.median(timings[CONTROL])
        for distance, values in timings.items():
            mid = stats.median(values) / base
            low, high = (v / base for v in stats.bootstrap_ci(values)) if len(values) >= 2 else (mid, mid)
            colour = SLOW if distance in slow else FAST
            ax.errorbar([distance], [mid], yerr=[[mid - low], [high - mid]], fmt="o", markersize=3.5, color=colour,
                        ecolor="lightgrey", elinewidth=0.8)
        ax.axhline(1, color="black", linewidth=0.8)
        ax.axhline(1 + SWEEP_MIN_EFFECT, color="grey", linestyle=":", linewidth=0.8)
        ax.axvline(0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=NEAR, linscale=2)
        ax.set_xlim(CONTROL - 100, -CONTROL)
        ax.set_ylabel("time / control's")
        ax.set_title(f"{kernel} loop, {KERNELS[kernel]}-byte loads and stores: red = slow (significant, "
                     f">= {SWEEP_MIN_EFFECT:.0%} above the control at {CONTROL:+d})", fontsize=9)
        ax.grid(alpha=0.3)
    ax.set_xlabel(f"dst - src modulo 4096, bytes (dst ahead when positive); linear within +-{NEAR}")
    figure.tight_layout()
    return figure


def hunt_figure(per_point: dict[str, float | None], event: str) -> Figure:
    """The PMU's count per stencil point, each arm."""
    figure = Figure(figsize=(7, 2.6))
    ax = figure.subplots()
    arms = [arm for arm, n in per_point.items() if n is not None]
    ax.barh(arms, [per_point[arm] for arm in arms], color=[SLOW if arm == ALIGNED else FAST for arm in arms])
    ax.set_xlabel(f"{event} per stencil point (measured here)")
    figure.tight_layout()
    return figure


def source_figure() -> Figure:
    """The source's himeno runs: MFLOPS against the padding per allocation, and the PMU's alias counts."""
    data = recorded.load()
    figure = Figure(figsize=(11, 3.8))
    runs, events = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    for run in data["runs"]:
        runs.bar(run["padding_bytes"], run["mflops"], width=24, color=SLOW if run["padding_bytes"] == 0 else FAST)
        runs.annotate(f"{run['mflops']:,}", (run["padding_bytes"], run["mflops"]), ha="center", va="bottom", fontsize=8)
    (start, end), (low, high) = data["range"]["padding_bytes"], data["range"]["mflops"]
    runs.fill_between([start, end], low, high, color=FAST, alpha=0.4, label=f"{start}-{end} B: {low:,}-{high:,} MFLOPS")
    runs.set_xlabel("padding per allocation, bytes")
    runs.set_ylabel("himeno MFLOPS (higher is better)")
    runs.set_ylim(0, 1.15 * high)
    runs.legend(fontsize=8, loc="lower right")
    counted = data["alias_events"]
    few_low, few_high = counted["padded_about"]
    events.bar(["no padding", "padded"], [counted["no_padding"] / 1e6, (few_low + few_high) / 2e6],
               yerr=[[0, (few_high - few_low) / 2e6], [0, (few_high - few_low) / 2e6]], capsize=5, color=[SLOW, FAST])
    events.set_ylabel(f"{counted['event']}, millions")
    events.set_title("the PMU's count", fontsize=9)
    figure.suptitle(f"Recorded by the source, not measured here: {data['benchmark']}, one run per padding",
                    fontsize=10)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The sweep, the race, the hunt's counts where there are some, then the source replayed."""
    result = verdict.result
    if result is None:
        return [("The source, replayed", source_figure())]
    _, values = kept(result)
    shown = [("The store->load loop at every distance", sweep_figure(result["sweep"]["samples"])),
             ("The stencil, raced: page-aligned against padded",
              distributions(values, "MFLOPS (higher is better)", "each round of each arm", centre=stats.median,
                            centre_ci=stats.bootstrap_ci, centre_name="median"))]
    counted = result["hunt"]["per_point"]
    if any(n is not None for n in counted.values()):
        shown.append(("The PMU's count", hunt_figure(counted, result["hunt"]["event"])))
    return shown + [("The source, replayed", source_figure())]
