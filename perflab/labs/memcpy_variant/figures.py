"""Lab 11's pictures: ns per copy against size for every variant, each variant's speed-up over the default at
every size with its wins marked, and the source's call counts replayed."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from ... import jupyter_figures, stats
from ...sequential import Race
from ...verdict import Verdict
from . import recorded
from .speedups import MIN_EFFECT, SMALL, arm_key, compare, medians_by_size, size_text, wins
from .variants import CONTROL, DEFAULT, from_json

jupyter_figures.enable()  # the figures are bare Figures: make Jupyter draw them as pictures

DEFAULT_COLOUR, LOSES = "black", "#fde0dd"


def sizes_figure(arms: list[str], sizes: list[int], values: dict[str, list[float]], lost: list[int]) -> Figure:
    """Median ns per copy, one line per variant: small copies on a linear scale (where the variants differ by a
    few ns), every size on a log scale; the sizes where the default lost are shaded."""
    figure = Figure(figsize=(11, 4.4))
    small, every = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.4]})
    medians = medians_by_size(values, arms, sizes)
    for ax, shown in ((small, [s for s in sizes if s <= SMALL]), (every, sizes)):
        for size in lost:
            ax.axvspan(size / 2 ** 0.5, size * 2 ** 0.5, color=LOSES, zorder=0)
        for arm, line in medians.items():
            style = {"color": DEFAULT_COLOUR, "linewidth": 2.4, "zorder": 3} if arm == DEFAULT else \
                {"linestyle": ":" if arm == CONTROL else "-", "linewidth": 1.2}
            ax.plot(shown, line[:len(shown)], marker="o", markersize=3, label=arm, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(shown, [size_text(s).replace(" ", "\n") for s in shown], fontsize=7)
        ax.set_xlabel("bytes per memcpy call")
        ax.grid(alpha=0.3, which="both")
    small.set_ylim(bottom=0)
    small.set_ylabel("ns per call (median of the rounds)")
    small.set_title(f"small copies, up to {size_text(SMALL)} (judged)", fontsize=10)
    every.set_yscale("log")
    every.set_title("every size; shaded: a variant beat the default there", fontsize=10)
    every.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    return figure


def speedup_figure(arms: list[str], sizes: list[int], values: dict[str, list[float]],
                   won: set[tuple[str, int]]) -> Figure:
    """Each variant's median speed-up over the default, round by round, at every size; a star where it won."""
    rivals = [a for a in arms if a != DEFAULT]
    grid = np.array([[stats.median([d / v for d, v in zip(values[arm_key(DEFAULT, s)], values[arm_key(a, s)])])
                      for s in sizes] for a in rivals])
    figure = Figure(figsize=(10, 1.4 + 0.42 * len(rivals)))
    ax = figure.subplots()
    image = ax.imshow(grid, cmap="RdBu", norm=TwoSlopeNorm(1.0, min(0.5, grid.min()), max(2.0, grid.max())),
                      aspect="auto")
    for i, arm in enumerate(rivals):
        for j, size in enumerate(sizes):
            mark = "*" if (arm, size) in won else ""
            ax.text(j, i, f"{grid[i, j]:.2f}{mark}", ha="center", va="center", fontsize=6.5)
    ax.set_yticks(range(len(rivals)), rivals, fontsize=8)
    ax.set_xticks(range(len(sizes)), [size_text(s).replace(" ", "\n") for s in sizes], fontsize=7)
    ax.axvline(sum(s <= SMALL for s in sizes) - 0.5, color="grey", linewidth=1)
    ax.set_title(f"speed-up over the default (its time / the variant's, median of the rounds)\n* = at least "
                 f"{MIN_EFFECT:.0%} faster, significant, against the control too; judged up to {size_text(SMALL)} "
                 "(left of the line)", fontsize=9)
    figure.colorbar(image, ax=ax, label="x faster than the default")
    figure.tight_layout()
    return figure


def source_figure() -> Figure:
    """The source's calls per variant, one funccount of 5 s on each system."""
    data = recorded.load()
    figure = Figure(figsize=(8, 2.8))
    ax = figure.subplots()
    rows = [(f"{s['name']} (glibc {s['glibc']}): {name}", calls) for s in data["systems"]
            for name, calls in s["calls"].items()]
    ax.barh([r[0] for r in rows][::-1], [r[1] for r in rows][::-1], color="#7f7f7f")
    ax.set_xlabel("calls in 5 s (funccount, the source's machines, not yours)")
    ax.tick_params(axis="y", labelsize=8)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Figure]]:
    result = verdict.result
    drawn = [("The source's memcpy calls per variant, before and after its upgrade", source_figure())]
    if result is None or "race" not in result:
        return drawn
    raced = Race.from_json(result["race"])
    arms, sizes, values = [v.arm for v in from_json(result["variants"])], list(result["params"]["sizes"]), \
        raced.kept_values()
    won = {(c.arm, c.size) for c in wins(compare(values, arms, sizes, raced.alpha_per_look))}
    return [("ns per memcpy call against size, every variant",
             sizes_figure(arms, sizes, values, sorted({size for _, size in won}))),
            ("Each variant's speed-up over the default, size by size", speedup_figure(arms, sizes, values, won)),
            *drawn]
