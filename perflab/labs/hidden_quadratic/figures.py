"""Lab 9's pictures: lookups against n, the race at n=16, the expiry pass on log-log axes, and flame graphs."""

from __future__ import annotations

import zlib
from typing import Any

from ... import stats
from ...plots import distributions
from ...sequential import Race
from ...verdict import Verdict
from .programs import FLOW_SIZES, LOOKUP_SIZES, SMALL_N, STRUCTURES, arm, crossover, lookup_medians
from .run import exponent

COLOURS = {"linear": "#1f77b4", "binary": "#d62728", "tree": "#2ca02c", "list": "#9467bd",
           "quadratic": "#d62728", "fixed": "#1f77b4"}


def sweep_figure(samples: list[dict[str, Any]]):
    """ns per lookup against n for the four structures, log-log, each median with its 95% CI; the crossover marked."""
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(9, 4.5))
    for structure in STRUCTURES:
        by_n: dict[int, list[float]] = {}
        for s in samples:
            if s["structure"] == structure:
                by_n.setdefault(s["n"], []).append(s["ns_per_lookup"])
        sizes = sorted(by_n)
        medians = [stats.median(by_n[n]) for n in sizes]
        cis = [stats.bootstrap_ci(by_n[n]) if len(by_n[n]) >= 2 else (m, m) for n, m in zip(sizes, medians)]
        ax.errorbar(sizes, medians, yerr=[[m - lo for m, (lo, _) in zip(medians, cis)],
                                          [hi - m for m, (_, hi) in zip(medians, cis)]],
                    marker="o", markersize=4, capsize=2, color=COLOURS[structure], label=structure)
    medians = lookup_medians(samples)
    sizes = [n for n in LOOKUP_SIZES if n in medians.get("linear", {}) and n in medians.get("binary", {})]
    at = crossover(sizes, [medians["linear"][n] for n in sizes], [medians["binary"][n] for n in sizes])
    if at:
        ax.axvline(at, color="grey", linestyle="--")
        ax.text(at, 0.97, f" crossover: n={at}", transform=ax.get_xaxis_transform(), va="top", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (keys)")
    ax.set_ylabel("ns per lookup (median, 95% CI)")
    ax.legend(title="structure")
    ax.grid(alpha=0.3, which="both")
    figure.tight_layout()
    return figure


def scaling_figure(values: dict[str, list[float]]):
    """Each expiry pass against n on log-log axes, every round a dot, with the fitted line and its exponent."""
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(8, 4.5))
    for version in ("quadratic", "fixed"):
        for n in FLOW_SIZES:
            times = values[arm(version, n)]
            ax.scatter([n * (1 + 0.04 * ((i * 0.618) % 1 - 0.5)) for i in range(len(times))], [t / 1e3 for t in times],
                       s=8, alpha=0.4, color=COLOURS[version])
        fit = exponent(values, version, 0.95)
        ax.plot(FLOW_SIZES, [fit.prefactor * n ** fit.exponent / 1e3 for n in FLOW_SIZES], color=COLOURS[version],
                label=f"{version}: n^{fit.exponent:.2f} (95% CI {fit.low:.2f} to {fit.high:.2f})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(FLOW_SIZES, [str(n) for n in FLOW_SIZES])
    ax.set_xlabel("flows in the table (n)")
    ax.set_ylabel("µs per expiry pass")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    figure.tight_layout()
    return figure


# ANCHOR: flame
def flame_graph(folded: dict[str, int], title: str = "", min_share: float = 0.005):
    """A flame graph from folded stacks: each frame a box as wide as its share of the samples, its callees
    stacked on it, siblings in alphabetical order (the order means nothing, the width everything)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    total = sum(folded.values())
    tree: dict[str, Any] = {}
    for stack, count in folded.items():
        node = tree
        for frame in stack.split(";"):
            child = node.setdefault(frame, {"count": 0, "children": {}})
            child["count"] += count
            node = child["children"]
    depth = max(len(stack.split(";")) for stack in folded)
    figure, ax = plt.subplots(figsize=(11, 0.6 + 0.28 * depth))

    def draw(children: dict[str, Any], x: float, level: int) -> None:
        for name in sorted(children):
            width = children[name]["count"] / total
            if width >= min_share:
                hue = (
                    0.8 - 0.5 * (zlib.crc32(name.encode()) % 100) / 100
                )  # warm colours, the same for a name in every run
                ax.add_patch(
                    Rectangle((x, level), width, 0.95, facecolor=(1, hue, 0.2), edgecolor="white", linewidth=0.5)
                )
                if width > 0.04:
                    label = f"{name} {width:.0%}"
                    ax.text(x + 0.003, level + 0.45, label[:int(width * 150)], va="center", fontsize=7)
                draw(children[name]["children"], x, level + 1)
            x += width

    draw(tree, 0.0, 0)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, depth)
    ax.set_yticks([])
    ax.set_xlabel(f"share of {total} samples (perf record -g, cpu-clock); callers below, callees above")
    ax.set_title(title, fontsize=10)
    figure.tight_layout()
    return figure
# ANCHOR_END: flame


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The sweep, the race at n=16, the expiry pass's scaling, and both versions' flame graphs."""
    result = verdict.result
    if result is None:
        return []
    kept = Race.from_json(result["race"]).kept_values()
    shown = [
        ("Looking a key up four ways, against n", sweep_figure(result["sweep"])),
        (f"The race at n={SMALL_N}: linear scan against binary search",
         distributions({k: kept[arm(k, SMALL_N)] for k in ("linear", "binary")}, "ns per lookup",
                       centre=stats.median, centre_ci=stats.bootstrap_ci, centre_name="median")),
        ("The expiry pass against the table's size, log-log", scaling_figure(kept)),
    ]
    for version, profile in (result["profiles"] or {}).items():
        shown.append((f"Flame graph: the {version} expiry pass at n={FLOW_SIZES[-1]}", flame_graph(profile)))
    return shown
