"""Lab 3's pictures: interrupts per operation on the bystander, its gaps, where block completions ran,
and the original case's counts."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from ... import stats
from ...plots import distributions
from ...verdict import Verdict
from . import irqtime, noise, oslat, recorded
from .completions import MODES, plan_from_json, predicted_cpu
from .run import OPERATIONS, ROWS, gaps_per_op, per_op

SHARED_COLOUR, SEPARATE_COLOUR = "#d62728", "#1f77b4"


def _mean_and_error(values: list[float]) -> tuple[float, float]:
    low, high = stats.mean_ci(values) if len(values) >= 2 else (values[0], values[0])
    mean = stats.mean(values)
    return mean, max(mean - low, high - mean)


def interrupts_figure(result: dict[str, Any]) -> Figure:
    """For each operation: CAL and TLB interrupts per operation on the victim, same process against another."""
    victim, samples = result["params"]["victim"], result["bystander"]["samples"]
    figure = Figure(figsize=(11, 3.4))
    axes = figure.subplots(1, len(OPERATIONS), sharey=True)
    for ax, op in zip(axes, OPERATIONS):
        for offset, process, colour in ((-0.2, "shared", SHARED_COLOUR), (0.2, "separate", SEPARATE_COLOUR)):
            bars = [_mean_and_error(per_op(samples, op, process, row, victim)) for row in ROWS]
            ax.bar([i + offset for i in range(len(ROWS))], [m for m, _ in bars], 0.4,
                   yerr=[e for _, e in bars], capsize=4, color=colour,
                   label="victim in the aggressor's process" if process == "shared" else "victim in another process")
        ax.set_xticks(range(len(ROWS)), ROWS)
        ax.set_title(op)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(f"interrupts on CPU {victim}\nper aggressor operation (mean, 95% CI)")
    axes[-1].legend(fontsize=8)
    figure.tight_layout()
    return figure


def gaps_figure(result: dict[str, Any]) -> Figure:
    """The victim's gaps per 1,000 aggressor operations, round by round."""
    samples = result["bystander"]["samples"]
    rounds = {f"{op}, {'same process' if process == 'shared' else 'other process'}":
              [1000 * g for g in gaps_per_op(samples, op, process)]
              for op in OPERATIONS for process in ("shared", "separate")}
    return distributions(rounds, f"victim's gaps over {samples[0]['threshold_ns'] / 1000:g} us per 1,000 operations",
                         centre=stats.mean, centre_ci=stats.mean_ci, centre_name="mean")


def block_figure(result: dict[str, Any]) -> Figure:
    """For each rq_affinity mode: BLOCK softirqs and CAL per 1,000 reads on every CPU, the predicted CPU marked."""
    plan, samples = plan_from_json(result["block"]["plan"]), result["block"]["samples"]  # measured: not Skipped
    cpus = sorted(int(c) for c in samples[0]["block"])
    figure = Figure(figsize=(11, 3.4))
    axes = figure.subplots(1, len(MODES), sharey=True)
    for ax, mode in zip(axes, MODES):
        chosen = [s for s in samples if s["mode"] == mode]
        reads = sum(s["reads"] for s in chosen)
        for offset, counter, colour in ((-0.2, "block", "#6a3d9a"), (0.2, "cal", "#ff7f00")):
            ax.bar([i + offset for i in range(len(cpus))],
                   [1000 * sum(s[counter][str(c)] for s in chosen) / reads for c in cpus], 0.4, color=colour,
                   label="BLOCK softirqs" if counter == "block" else "CAL (function-call IPIs)")
        labels = [f"CPU {c}" + ("\nIRQ" if c == plan.irq_cpu else "") + ("\nreads" if c == plan.submitter else "")
                  for c in cpus]
        ax.set_xticks(range(len(cpus)), labels, fontsize=8)
        ax.set_title(f"rq_affinity={mode}: predicted CPU {predicted_cpu(mode, plan)}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("per 1,000 reads")
    axes[-1].legend(fontsize=8)
    figure.tight_layout()
    return figure


def tracepoints_figure(counted: dict[str, Any]) -> Figure:
    """One heatmap per tracepoint: each workload (rows) on each CPU (columns), per operation or read."""
    runs = counted["runs"]
    labels = list(runs[0]["counts"])
    cpus = sorted(int(c) for c in runs[0]["counts"][labels[0]])
    columns = min(2, len(labels))  # two across: four side by side shrink to unreadable in a notebook
    rows = -(-len(labels) // columns)
    figure = Figure(figsize=(4.6 * columns, rows * (0.45 * len(runs) + 1.3)))
    axes = figure.subplots(rows, columns, sharey=True, squeeze=False).flat
    grids = {label: [[run["counts"][label][str(c)] / run["times"] for c in cpus] for run in runs] for label in labels}
    top = max(1.0, *(value for grid in grids.values() for row in grid for value in row))  # one scale for all
    for ax, label in zip(axes, labels):
        ax.imshow(grids[label], cmap="Reds", vmin=0, vmax=top, aspect="auto")
        for y, row in enumerate(grids[label]):
            for x, value in enumerate(row):
                ax.text(x, y, f"{value:.2f}", ha="center", va="center", fontsize=9,
                        color="white" if value > top / 2 else "black")
        ax.set_xticks(range(len(cpus)), [f"CPU {c}" for c in cpus], fontsize=9)
        ax.set_yticks(range(len(runs)), [f"per {run['workload']}" for run in runs], fontsize=9)
        ax.set_title(f"{label}\n({counted['events'][label]})", fontsize=9)
    for unused in axes:  # an odd number of tracepoints leaves one panel empty
        unused.set_visible(False)
    figure.tight_layout()
    return figure


def noise_figure(hunted: dict[str, Any], shown: int = 6) -> Figure:
    """What osnoise named on the interrupt's CPU, per second of its runtime: reading against nothing reading."""
    samples = hunted["samples"]
    sources = sorted({s for sample in samples for s in sample["sources"]},
                     key=lambda s: -stats.mean(noise.rates(samples, "reading", s) or [0.0]))[:shown]
    figure = Figure(figsize=(9, 0.45 * len(sources) + 1.4))
    ax = figure.subplots()
    for offset, arm, colour, label in (
        (-0.2, "reading", SHARED_COLOUR, f"CPU {hunted['reader']} reads {hunted['disk']}"),
        (0.2, "idle", SEPARATE_COLOUR, "nothing reads"),
    ):
        bars = [_mean_and_error(noise.rates(samples, arm, s)) for s in sources]
        ax.barh([i + offset for i in range(len(sources))], [m for m, _ in bars], 0.4, xerr=[e for _, e in bars],
                capsize=3, color=colour, label=label)
    ax.set_yticks(range(len(sources)), sources, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(f"times per second of osnoise's runtime on CPU {hunted['cpu']} (mean, 95% CI)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    return figure


def oslat_figure(timed: dict[str, Any]) -> Figure:
    """oslat's histogram on the interrupt's CPU, passes per second in each microsecond bucket: reading against idle."""
    samples = timed["samples"]
    buckets = sorted({us for s in samples for us, _ in s["histogram"] if us >= oslat.GAP_US})
    figure = Figure(figsize=(9, 3.4))
    ax = figure.subplots()
    for offset, arm, colour, label in ((-0.2, "reading", SHARED_COLOUR, f"CPU {timed['reader']} reads {timed['disk']}"),
                                       (0.2, "idle", SEPARATE_COLOUR, "nothing reads")):
        chosen = [s for s in samples if s["arm"] == arm]
        seconds = sum(s["seconds"] for s in chosen)
        passes = {us: sum(n for s in chosen for bucket, n in s["histogram"] if bucket == us) for us in buckets}
        ax.bar([us + offset for us in buckets], [passes[us] / seconds for us in buckets], 0.4, color=colour,
               label=label)
    ax.set_yscale("log")
    ax.set_xticks(buckets[::2], [f"{us}+" if us == buckets[-1] else str(us) for us in buckets[::2]], fontsize=8)
    ax.set_xlabel(
        f"one pass of oslat's loop on CPU {timed['cpu']}, us (an undisturbed pass takes under {oslat.GAP_US})"
    )
    ax.set_ylabel("passes per second (log scale)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def irq_time_figure(timed: dict[str, Any]) -> Figure:
    """bpftrace's share of each CPU's time in hard interrupts and softirqs, reading against idle: bars the mean,
    dots the rounds."""
    windows = [s for s in timed["samples"] if "irq_time" in s]
    figure = Figure(figsize=(9, 3.2))
    axes = figure.subplots(1, 2, sharey=True)
    for ax, kind, title in ((axes[0], "hard", "hard interrupts"), (axes[1], "soft", "softirqs")):
        for offset, arm, colour in ((-0.2, "reading", SHARED_COLOUR), (0.2, "idle", SEPARATE_COLOUR)):
            cpus = (timed["cpu"], timed["reader"])
            shares = [[100 * irqtime.in_irq(s["irq_time"], cpu, kind) for s in windows if s["arm"] == arm]
                      for cpu in cpus]
            ax.bar([i + offset for i in range(len(cpus))], [stats.mean(v) for v in shares], 0.4, color=colour,
                   label=f"CPU {timed['reader']} reads {timed['disk']}" if arm == "reading" else "nothing reads")
            for i, values in enumerate(shares):
                ax.plot([i + offset] * len(values), values, "k.", markersize=3)
        ax.set_xticks([0, 1], [f"CPU {timed['cpu']}\n(the disk's interrupt)", f"CPU {timed['reader']}\n(the reader)"])
        ax.set_title(f"time in {title}, per CPU (bpftrace)", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("% of the CPU's time")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    return figure


def original_case_figure(data: dict[str, Any] | None = None) -> Figure:
    """The original case's CAL and TLB rows: the hot CPU's count against the range the report gives for the others."""
    data = data or recorded.load()
    figure = Figure(figsize=(9, 3.2))
    axes = figure.subplots(1, 2)
    for ax, row in zip(axes, ("CAL", "TLB")):
        found = recorded.observation(row, data)
        ax.bar([0], [found["hot_count"]], color=SHARED_COLOUR)
        ax.bar([1], [found["others_max"] - found["others_min"]], bottom=[found["others_min"]], color="#bbbbbb")
        ax.set_yscale("log")
        ax.set_xticks([0, 1], [f"CPU {found['hot_cpu']}", "every other CPU\n(range reported)"])
        ax.set_title(
            f"{row}: {found['hot_count']:,} against {found['others_min']:,}-{found['others_max']:,}", fontsize=9
        )
        ax.set_ylabel(f"{row} count ({found['file']}, log scale)")
    figure.text(0.01, 0.01, "source: " + data["source"].split(",")[0] + ", JabPerf (counts as reported)", fontsize=7)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    return figure


def figures(verdict: Verdict) -> list[tuple[str, Any]]:
    """The bystander's interrupts and gaps and the block sweep if it ran; the original case if nothing ran."""
    result = verdict.result
    if result is None:
        return [("The original case: one CPU takes the interrupts (recorded)", original_case_figure())]
    shown = [("Interrupts on the bystander per aggressor operation", interrupts_figure(result)),
             ("The bystander's gaps in its own timeline", gaps_figure(result))]
    if result["block"]["samples"]:
        shown.append(("Where block completions ran, per rq_affinity mode", block_figure(result)))
    if result.get("tracepoints", {}).get("runs"):
        shown.append(("The same interrupts as perf's tracepoints name them, on every CPU",
                      tracepoints_figure(result["tracepoints"])))
    timed = result.get("oslat", {})
    if timed.get("samples"):
        shown.append((f"What a spinning thread on CPU {timed['cpu']} sees: oslat's loop times", oslat_figure(timed)))
    if any("irq_time" in s for s in timed.get("samples", [])):
        shown.append(("Where the disk's interrupts took the time: each CPU's share in them, by bpftrace",
                      irq_time_figure(timed)))
    hunted = result.get("noise", {})
    if hunted.get("samples"):
        shown.append((f"What osnoise named on CPU {hunted['cpu']}, the disk's interrupt's CPU", noise_figure(hunted)))
    elif "skipped" in hunted:
        shown.append(("What osnoise named on the disk's interrupt's CPU: recorded in the wide VM under TCG, not "
                      "measured here", noise_figure(recorded.load_hunt()["hunt"])))
    return shown
