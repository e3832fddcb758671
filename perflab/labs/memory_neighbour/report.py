"""Lab 10's notes on a result: the timings of every arm, the controls, the neighbour's bandwidth beside its RSS."""

from __future__ import annotations

from typing import Any

from ... import stats
from ...sequential import Race
from .measure import SETS, arm
from .programs import MODES

MIB = 1 << 20
LOW_CPU_SHARE = 0.9  # a victim that got less of its CPU than this shared it with other programs
STEADY = 1.01  # an RSS that moved less than 1% between readings stayed where it was
STORES = {"write": "plain stores", "nt-write": "non-temporal stores"}


def slowdown(ns: dict[str, list[float]], name: str, reference: str) -> str:
    """The median slowdown of `name` against `reference`, with its bootstrap interval."""
    ratio = stats.median(ns[name]) / stats.median(ns[reference]) - 1
    low, high = stats.bootstrap_ratio_ci(ns[reference], ns[name], statistic=stats.median)
    return f"{ratio:+.1%} (95% CI {low - 1:+.1%} to {high - 1:+.1%})"


def size(n: int) -> str:
    return f"{n / MIB:,.0f} MiB" if n >= MIB else f"{n // 1024} KiB"


# ANCHOR: rss_note
def rss_note(result: dict[str, Any]) -> str:
    """What `top` would have said of the processes: their RSS, against what the neighbour did with its memory."""
    rss = {name: stats.median(values) for name, values in result["rss_bytes"].items()}
    ram = result["params"]["ram_bytes"]
    neighbours = [values for name, values in result["rss_bytes"].items() if name.startswith("neighbour")]
    low, high = sum(min(v) for v in neighbours), sum(max(v) for v in neighbours)
    held = (
        f"stayed at {size(int(high))}" if high <= STEADY * low else f"went from {size(int(low))} to {size(int(high))}"
    )
    gbps = {STORES[m]: stats.median([p["gb_per_s"] for p in result["neighbour_periods"][m]]) for m in STORES
            if result["neighbour_periods"][m]}
    shown = ", ".join(f"{size(int(v))}" + (f" ({v / ram:.1%} of RAM)" if ram else "") + f" {name}"
                      for name, v in sorted(rss.items(), key=lambda kv: -kv[1]))
    streamed = " and ".join(f"{g:.1f} GB/s of {kind}" for kind, g in gbps.items())
    return (f"resident memory (VmRSS, what top shows): {shown}. The neighbour's {held} whether it was idle, "
            f"computing or writing {streamed}: its RSS says nothing of what it does to the memory controller")
# ANCHOR_END: rss_note


def medians_note(ns: dict[str, list[float]]) -> list[str]:
    return [f"{s} victim, median ns per access (CPU time) beside the neighbour: "
            + ", ".join(f"{m} {stats.median(ns[arm(s, m)]):.1f}" for m in MODES) for s in SETS]


def measured_notes(result: dict[str, Any]) -> list[str]:
    """Where it ran, every arm's median, the controls, the neighbour's bandwidth, RSS, and what to distrust."""
    params = result["params"]
    ns = Race.from_json(result["race"]).kept_values()
    cpus = ",".join(map(str, params["neighbour_cpus"]))
    notes = [
        result["prediction"]["text"],
        f"victim on CPU {params['victim_cpu']}: a far working set of {size(params['far_bytes'])} (twice the LLC or "
        f"more) and a near one of {size(params['near_bytes'])} (half its L2); neighbour(s) on CPU {cpus} with "
        f"{size(params['neighbour_bytes'])} of buffer",
        *medians_note(ns),
        "the near victim beside the streaming neighbour vs the computing one: "
        f"{slowdown(ns, arm('near', 'write'), arm('near', 'compute'))} "
        "(the control: inside its L2 it never asks the memory controller)",
        f"the far victim beside non-temporal stores vs the computing neighbour: "
        f"{slowdown(ns, arm('far', 'nt-write'), arm('far', 'compute'))} (stores that bypass the caches: "
        "memory traffic without evicting the victim's lines from the LLC)",
        f"what a busy CPU next door costs without memory traffic, computing vs idle neighbour: far victim "
        f"{slowdown(ns, arm('far', 'compute'), arm('far', 'idle'))}, near victim "
        f"{slowdown(ns, arm('near', 'compute'), arm('near', 'idle'))}",
        rss_note(result),
    ]
    if result["mbm_gb_per_s"]:
        notes.append("resctrl's mbm_total_bytes, the whole machine: " + ", ".join(
            f"{m} {stats.median(v):.1f} GB/s" for m, v in result["mbm_gb_per_s"].items()))
    shares = [s for values in result["victim_cpu_share"].values() for s in values]
    if shares and stats.median(shares) < LOW_CPU_SHARE:
        notes.append(f"the victim got a median {stats.median(shares):.0%} of its CPU: other programs ran there "
                     "too; its time per access counts only its own CPU time, but they also used its caches")
    for name in (arm("far", "compute"), arm("far", "write")):
        notes += [f"{name}: {w}" for w in stats.instability_warnings(ns[name], "victim samples")]
    return notes
