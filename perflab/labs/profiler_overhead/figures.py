"""Lab 12's pictures: each setting's slowdown of the workload round by round, where perf's own threads ran, and
the source's table replayed."""

from __future__ import annotations

from matplotlib.figure import Figure

from ... import jupyter_figures, stats
from ...sequential import Race
from ...verdict import Verdict
from . import recorded
from .run import ARMS, MIN_EFFECT
from .workload import ALONE

jupyter_figures.enable()  # the figures are bare Figures: make Jupyter draw them as pictures


def slowdown_figure(values: dict[str, list[float]]) -> Figure:
    """Each perf setting's wall time over the workload alone's in the same round, one dot a round."""
    arms = [arm.name for arm in ARMS if arm.name != ALONE]
    figure = Figure(figsize=(9, 3.6))
    ax = figure.subplots()
    for i, arm in enumerate(arms):
        ratios = [a / b for a, b in zip(values[arm], values[ALONE])]
        ax.scatter([i] * len(ratios), ratios, s=12, alpha=0.6)
        ax.hlines(stats.median(ratios), i - 0.3, i + 0.3, color="black")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.axhline(1 + MIN_EFFECT, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xticks(range(len(arms)), [arm.removeprefix("perf ") for arm in arms], fontsize=8)
    ax.set_ylabel("wall time / alone's, same round")
    ax.set_title(f"perf record -a -e cpu-clock, each setting against the workload alone (dotted: +{MIN_EFFECT:.0%})",
                 fontsize=10)
    ax.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def reader_figure(threads_ns: dict[str, list[dict[str, int]]]) -> Figure:
    """perf's own threads' CPU time per run while the workload ran, stacked by the CPU they ran on."""
    arms = [arm for arm, runs in threads_ns.items() if arm != ALONE and runs]
    cpus = sorted({cpu for arm in arms for run in threads_ns[arm] for cpu in run}, key=int)
    figure = Figure(figsize=(9, 3.2))
    ax = figure.subplots()
    bottom = [0.0] * len(arms)
    for cpu in cpus:
        ms = [sum(run.get(cpu, 0) for run in threads_ns[arm]) / len(threads_ns[arm]) / 1e6 for arm in arms]
        ax.barh([a.removeprefix("perf ") for a in arms], ms, left=bottom, label=f"CPU {cpu}")
        bottom = [b + m for b, m in zip(bottom, ms)]
    ax.set_xlabel("ms a run that perf's own threads ran, while its workload process existed")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def source_figure() -> Figure:
    """The source's slowdowns of NAS bt.B.x, one run per setting."""
    replayed = recorded.replay()
    figure = Figure(figsize=(8, 2.6))
    ax = figure.subplots()
    settings = list(replayed["ratios"])
    ax.barh(settings, [replayed["ratios"][s][0] for s in settings], color="#7f7f7f")
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xlim(0.9, 1.35)
    ax.set_xlabel("time / unprofiled time (the source's server, not yours)")
    ax.tick_params(axis="y", labelsize=8)
    figure.tight_layout()
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Figure]]:
    drawn = [("The source's NAS bt.B.x under perf record -a at 25 kHz", source_figure())]
    result = verdict.result
    if result is None or "race" not in result:
        return drawn
    values = Race.from_json(result["race"]).kept_values()
    return [("The workload's slowdown under each perf setting, round by round", slowdown_figure(values)),
            ("Where perf's own threads ran", reader_figure(result["threads_ns"])), *drawn]
