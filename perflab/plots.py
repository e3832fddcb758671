"""Plots shared by the labs. Each function returns a matplotlib Figure and never calls show().

Importing this module makes a bare Figure show as a picture in Jupyter (perflab.jupyter_figures), for the labs'
figures too: those that build Figures without pyplot import their plots from here."""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from . import jupyter_figures, stats

jupyter_figures.enable()


def distributions(
    samples: dict[str, Sequence[float]],
    unit: str,
    title: str = "",
    centre=stats.harmonic_mean,
    centre_ci=stats.harmonic_mean_ci,
    centre_name: str = "harmonic mean",
) -> Figure:
    """Every sample as a dot, per configuration, with the centre and its 95% CI as a bar.

    Dots, not only a box: a learner should see the spread and the outliers, not a number.
    """
    figure = Figure(figsize=(7, 1.2 + 0.9 * len(samples)))
    ax = figure.subplots()
    low_edge, high_edge = stats.plot_range([v for values in samples.values() for v in values])
    beyond = 0
    for row, values in enumerate(samples.values()):
        jitter = [row + 0.25 * ((i * 0.618) % 1 - 0.5) for i in range(len(values))]
        shown = [min(max(v, low_edge), high_edge) for v in values]
        clipped = [v != s for v, s in zip(values, shown)]
        beyond += sum(clipped)
        ax.scatter([s for s, c in zip(shown, clipped) if not c], [j for j, c in zip(jitter, clipped) if not c],
                   s=12, alpha=0.5)
        ax.scatter([s for s, c in zip(shown, clipped) if c], [j for j, c in zip(jitter, clipped) if c],
                   s=30, marker="x", color="black")
        mid = centre(values)
        if len(values) >= 2:
            low, high = centre_ci(values)
            ax.errorbar([mid], [row + 0.38], xerr=[[mid - low], [high - mid]], fmt="o", color="black", capsize=4)
        ax.annotate(f"{centre_name} {mid:,.0f}", (mid, row + 0.45), ha="center", va="bottom", fontsize=8)
    ax.set_yticks(range(len(samples)), list(samples))
    ax.set_ylim(-0.5, len(samples) - 0.2)
    ax.set_xlim(low_edge, high_edge)
    ax.set_xlabel(unit + (f"  (x: {beyond} outlier{'s' if beyond > 1 else ''} drawn at the edge)" if beyond else ""))
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def topology(machine) -> Figure:
    """Sockets, last-level-cache groups and cores as nested boxes, CPU ids inside.

    Drawn from the probe, so the learner sees which CPU numbers share what
    before measuring anything.
    """
    packages = machine.package_groups()
    llcs = machine.llc_groups() or packages
    cores = machine.smt_sibling_groups() or [[c] for c in machine.online_cpus]
    figure = Figure(figsize=(min(16, 1.5 + 0.5 * len(cores) + 0.4 * len(llcs)), 2.6))
    ax = figure.subplots()
    x = 0.0
    for package in packages:
        start = x
        for llc in [g for g in llcs if set(g) <= set(package)] or [package]:
            llc_start = x
            for core in [c for c in cores if set(c) <= set(llc)]:
                ax.add_patch(_box(x + 0.05, 0.2, 0.8, 0.9, "#dbe9f6"))
                for i, cpu in enumerate(core):  # SMT siblings stacked inside their core's box
                    ax.text(x + 0.45, 0.65 + 0.25 * ((len(core) - 1) / 2 - i), str(cpu), ha="center", va="center",
                            fontsize=8 if len(cores) <= 32 else 6)
                x += 1.0
            ax.add_patch(_box(llc_start - 0.05, 0.05, x - llc_start, 1.3, "none", "#1f77b4"))
            ax.text(llc_start, 1.22, "shared LLC", fontsize=7, color="#1f77b4")
            x += 0.3
        ax.add_patch(_box(start - 0.15, -0.1, x - start, 1.75, "none", "black"))
        ax.text(start - 0.1, 1.5, f"package {machine.cpu(package[0])['package']}", fontsize=8)
        x += 0.6
    ax.set_xlim(-0.3, x)
    ax.set_ylim(-0.2, 1.8)
    ax.axis("off")
    ax.set_title("Topology from the probe: boxes are cores, numbers are Linux CPU ids")
    return figure


def _box(x, y, w, h, face, edge="#4a6a8a"):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", facecolor=face, edgecolor=edge)
