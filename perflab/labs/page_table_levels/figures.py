"""Lab 4's pictures: the cost per fault boot by boot, the relative difference beside the source's, and how many
pages one fault maps."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from ... import stats
from ...plots import distributions
from ...verdict import Verdict
from . import recorded
from .faults import MODES, boot_cost, fault_around, per_fault

FIVE_COLOUR, FOUR_COLOUR = "#d62728", "#1f77b4"


def _runs(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Boots (VM) or runs (native) grouped by paging mode, as '5-level' and '4-level'."""
    if result["kind"] == "vm":
        boots = result["vms"]["boots"]
        return {f"{n}-level": [b for b in boots if b["paging_levels"] == n] for n in (5, 4)}
    grouped = {f"{result['paging_levels']}-level": result["runs"]}
    if result.get("other_boot"):
        grouped[f"{result['other_boot']['paging_levels']}-level"] = result["other_boot"]["runs"]
    return grouped


def cost_figure(result: dict[str, Any], mode: str) -> Figure:
    """Every round's cost per fault in one fault mode, 5-level against 4-level."""
    unit = "instructions" if result["kind"] == "vm" else "ns"
    columns = {levels: [per_fault(s) for run in runs for s in run["samples"] if s["mode"] == mode]
               for levels, runs in _runs(result).items()}
    return distributions(columns, f"{unit} per {mode} fault", f"each round of {mode} faults",
                         centre=stats.mean, centre_ci=stats.mean_ci, centre_name="mean")


def relative_figure(result: dict[str, Any], verdict: Verdict | None) -> Figure:
    """5-level over 4-level: the source's lat_pagefault beside this run's anonymous faults, with their CIs."""
    low, high = recorded.relative_ci_from_summaries()
    rows = [("source, Ice Lake\n(ns per page, 30 boots each)", recorded.relative_difference(), low, high)]
    if verdict is not None and verdict.effect is not None:
        e = verdict.effect
        here = (
            "this run, la57/no5lvl VMs\n(instructions per fault)"
            if result["kind"] == "vm"
            else "this machine\n(ns per fault)"
        )
        rows.append((here, e.value, e.ci_low, e.ci_high))
    figure = Figure(figsize=(7, 1.2 + 0.8 * len(rows)))
    ax = figure.subplots()
    for y, (_label, value, low, high) in enumerate(rows):
        ax.errorbar([100 * value], [y], xerr=[[100 * (value - low)], [100 * (high - value)]], fmt="o", capsize=5,
                    color=FIVE_COLOUR if y else "#555555")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xlabel("5-level over 4-level page tables (%, 95% CI)")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def fault_around_figure(result: dict[str, Any]) -> Figure:
    """Pages mapped per fault, anonymous against file-backed: one fault, one page, or one fault, 16 pages."""
    figure = Figure(figsize=(5, 3))
    ax = figure.subplots()
    samples = [s for runs in _runs(result).values() for run in runs for s in run["samples"]]
    values = [stats.median([fault_around(s) for s in samples if s["mode"] == mode]) for mode in MODES]
    ax.bar(MODES, values, color=[FOUR_COLOUR, "#2ca02c"])
    for x, v in enumerate(values):
        ax.text(x, v, f"{v:.1f}", ha="center", va="bottom")
    ax.set_ylabel("pages per minor fault (ru_minflt)")
    ax.set_title("fault-around maps a file's neighbours at once")
    figure.tight_layout()
    return figure


def boots_figure(result: dict[str, Any]) -> Figure:
    """One point per boot: its cheapest round's cost per anonymous fault, in boot order."""
    figure = Figure(figsize=(7, 3))
    ax = figure.subplots()
    for label, runs in _runs(result).items():
        ax.plot([run["round"] for run in runs], [boot_cost(run) for run in runs], "o",
                color=FIVE_COLOUR if label.startswith("5") else FOUR_COLOUR, label=label)
    ax.set_xlabel("round (a boot of each paging mode)" if result["kind"] == "vm" else "run")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel(("instructions" if result["kind"] == "vm" else "ns") + " per anonymous\nfault (cheapest round)")
    ax.legend()
    ax.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def histogram_figure(histograms: dict[str, dict[str, Any]]) -> Figure | None:
    """funclatency's handle_mm_fault histograms of both kernels, bucket by bucket; None if neither drew one."""
    counts = {levels: {(low, high): count for low, high, count in h["buckets"]}
              for levels, h in histograms.items() if "buckets" in h}
    used = sorted(bucket for by_bucket in counts.values() for bucket, count in by_bucket.items() if count)
    if not used:
        return None
    shown = sorted({bucket for by_bucket in counts.values() for bucket in by_bucket if used[0] <= bucket <= used[-1]})
    figure = Figure(figsize=(7, 3))
    ax = figure.subplots()
    width = 0.4
    for offset, levels in ((-width / 2, "5"), (width / 2, "4")):
        if levels in counts:
            ax.bar([i + offset for i in range(len(shown))], [counts[levels].get(b, 0) for b in shown], width,
                   color=FIVE_COLOUR if levels == "5" else FOUR_COLOUR, label=f"{levels}-level")
    ax.set_xticks(range(len(shown)), [f"{low:,}-\n{high:,}" for low, high in shown], fontsize=8)
    ax.set_xlabel("instructions per handle_mm_fault call (log2 buckets)")
    ax.set_yscale("log")  # the tails are tens of calls beside ten thousand
    ax.set_ylabel("calls (log scale)")
    ax.legend()
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """This run's costs and fault-around, and its difference beside the source's; the source alone if nothing ran."""
    result = verdict.result
    if result is None:
        return [("The source's lat_pagefault, 5-level over 4-level (recorded)", relative_figure({"kind": ""}, None))]
    return [("Cost per anonymous fault, every round", cost_figure(result, "anon")),
            ("Cost per file fault, every round", cost_figure(result, "file")),
            ("One value per boot", boots_figure(result)),
            ("5-level over 4-level, beside the source", relative_figure(result, verdict)),
            ("Pages per fault: fault-around", fault_around_figure(result))] + histogram_panel(result)


def histogram_panel(result: dict[str, Any]) -> list[tuple[str, Any]]:
    figure = histogram_figure(result.get("vms", {}).get("histograms", {}))
    return [("handle_mm_fault under funclatency, one round per kernel", figure)] if figure else []
