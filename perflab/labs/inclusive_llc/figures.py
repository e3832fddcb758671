"""Lab 2's pictures and panels: the sweep against the prediction, the timeline, the cache simulator, the source's
runs replayed."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from ... import jupyter_figures, stats
from ...verdict import COLOURS, Verdict
from . import cachesim, recorded
from .run import ALONE, label

jupyter_figures.enable()  # source_figure returns a bare Figure; the other panels use pyplot


def sweep_figure(result: dict[str, Any]):
    """The victim's time per access against the aggressor's buffer size, with the prediction drawn in."""
    import matplotlib.pyplot as plt

    ns = result["ns_per_access"]
    fractions = result["params"]["fractions"]
    medians = [stats.median(ns[label(f)]) for f in fractions]
    cis = [stats.bootstrap_ci(ns[label(f)], stats.median) for f in fractions]
    figure, ax = plt.subplots(figsize=(9, 4))
    alone_low, alone_high = stats.bootstrap_ci(ns[ALONE], stats.median)
    ax.axhspan(alone_low, alone_high, color="#c7e9c0", label="victim alone (95% CI)")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.errorbar(fractions, medians, yerr=[[m - lo for m, (lo, _) in zip(medians, cis)],
                                          [hi - m for m, (_, hi) in zip(medians, cis)]],
                fmt="o-", color="#1f77b4", capsize=3, label="beside the aggressor (median, 95% CI)")
    ax.set_xlabel(f"aggressor's buffer, in LLCs ({result['params']['llc_bytes'] >> 20} MiB = 1)")
    ax.set_ylabel("victim: ns per access")
    ax.text(0.01, 0.97, f"prediction: {result['prediction']['expected']} above 1x LLC", transform=ax.transAxes,
            va="top", fontsize=9, backgroundcolor="white")
    ax.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    return figure


def timeline_figure(picture: dict[str, Any]):
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(9, 3))
    ax.axvspan(picture["aggressor_on_ms"], picture["aggressor_off_ms"], color="#fdd0a2",
               label=f"aggressor streaming {picture['size'] >> 20} MiB")
    ax.plot(picture["t_ms"], picture["ns_per_access"], ".", markersize=3, color="#1f77b4")
    ax.set_xlabel("time since the victim started (ms)")
    ax.set_ylabel("victim: ns per access")
    ax.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    return figure


def simulator_figure(geometry: cachesim.Geometry = cachesim.SCALED, fractions=None, passes: int = 3):
    """The simulator's victim: L1 misses per 1000 accesses against the aggressor's size, for each policy."""
    import matplotlib.pyplot as plt

    fractions = fractions or [0.25, 0.5, 0.75, 0.875, 0.9375, 1.0, 1.25, 1.5, 2.0]
    figure, ax = plt.subplots(figsize=(9, 3.5))
    for policy, marker in zip(cachesim.POLICIES, "os^"):
        counts = cachesim.sweep(policy, fractions, geometry, passes)
        ax.plot(fractions, [1000 * c.l1_misses / c.accesses for c in counts.values()], marker=marker, label=policy)
    ax.axvline(cachesim.eviction_threshold(geometry), color="grey", linestyle=":", label="inclusive LLC full")
    ax.set_xlabel("aggressor's buffer, in LLCs")
    ax.set_ylabel("victim L1 misses per 1000 accesses")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def source_figure() -> Figure:
    """The source's runs: the victim's bogo ops/s alone and beside the aggressor, on each machine, with the verdict
    the lab's rule gives them."""
    judged = recorded.replay()
    figure = Figure(figsize=(10, 3.8))
    for ax, (name, found) in zip(figure.subplots(1, len(judged)), judged.items()):
        machine = found["machine"]
        setups = {"alone": machine["alone"],
                  f"beside read64\n({machine['aggressor_bytes']})": machine["beside_aggressor"]}
        for x, rates in enumerate(setups.values()):
            colour = COLOURS[found["verdict"]] if x else "#6e7781"
            ax.scatter([x + 0.06 * (i - (len(rates) - 1) / 2) for i in range(len(rates))], [r / 1e3 for r in rates],
                       color=colour, s=24, zorder=2)
            ax.hlines(stats.median(rates) / 1e3, x - 0.3, x + 0.3, color="black", linewidth=1,
                      label="median" if x == 0 else None)
        ax.set_xticks(range(len(setups)), list(setups))
        ax.set_xlim(-0.7, len(setups) - 0.3)
        ax.set_ylabel("victim: thousand bogo ops/s")
        ax.set_title(f"{name} ({machine['cpu']}), {machine['llc']} LLC:\n{found['verdict']}, time per op "
                     f"{found['effect'].value:+.1%}", fontsize=9)
        ax.legend(fontsize=8, loc="center")
        ax.grid(axis="y", alpha=0.3)
    figure.suptitle("Recorded by the source, not measured here: stress-ng's victim, five runs per setup", fontsize=10)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The sweep and the timeline; where nothing was measured, the simulator and the source's runs."""
    result = verdict.result
    if result is None:
        return [("Simulator: what an inclusive LLC would do", simulator_figure()),
                ("The source's runs, replayed", source_figure())]
    return [("Victim's time per access against the aggressor's buffer size", sweep_figure(result)),
            ("One victim run: alone, beside the largest aggressor, alone again", timeline_figure(result["timeline"]))]


def simulator_panel():
    """Widgets: change the caches' sizes, ways and policy; replay the textbook trace and the sweep."""
    import ipywidgets as widgets

    from ...notebook import show_figure

    style = {"description_width": "initial"}
    trace = widgets.Text(value=cachesim.TEXTBOOK_TRACE, description="trace", style=style)
    l1_lines = widgets.IntSlider(value=2, min=1, max=6, description="L1 lines", style=style)
    llc_lines = widgets.IntSlider(value=4, min=2, max=8, description="LLC lines", style=style)
    policy = widgets.Dropdown(options=cachesim.POLICIES, description="LLC policy", style=style)
    textbook = widgets.interactive_output(
        lambda trace, l1, llc, policy: _print_replay(trace, policy, l1, llc),
        {"trace": trace, "l1": l1_lines, "llc": llc_lines, "policy": policy})
    llc_sets = widgets.IntSlider(value=64, min=8, max=256, step=8, description="LLC sets", style=style)
    llc_ways = widgets.IntSlider(value=16, min=2, max=32, description="LLC ways", style=style)
    victim = widgets.IntSlider(value=32, min=1, max=64, description="victim lines", style=style)
    sweep_output = widgets.interactive_output(
        lambda sets, ways, lines: show_figure(simulator_figure(cachesim.Geometry((8, 8), (sets, ways), lines))),
        {"sets": llc_sets, "ways": llc_ways, "lines": victim})
    return widgets.VBox([widgets.HTML("<b>The textbook trace, one access at a time</b>"),
                         widgets.HBox([trace, policy]), widgets.HBox([l1_lines, llc_lines]), textbook,
                         widgets.HTML("<b>Victim and aggressor, scaled down (L1: 8 sets x 8 ways)</b>"),
                         widgets.HBox([llc_sets, llc_ways, victim]), sweep_output])


def _print_replay(trace: str, policy: str, l1_lines: int, llc_lines: int) -> None:
    try:
        print(cachesim.render_steps(cachesim.replay(trace, policy, l1_lines, llc_lines)))
    except ValueError as err:
        print(err)
