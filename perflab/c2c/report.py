"""The pinning advisor's findings as text for a terminal."""

from __future__ import annotations

from typing import Any

from ..cpulist import format_cpulist

MAX_GROUPS_SHOWN = 8


def render_analysis(analysis: dict[str, Any]) -> str:
    lines = [f"{analysis['source']}: {len(analysis['cpus'])} CPUs"]
    if analysis["levels"]:
        lines.append("structure, finest to coarsest:")
    for number, (groups, info) in enumerate(zip(analysis["levels"], analysis["level_info"]), 1):
        sizes = sorted({len(g) for g in groups})
        size = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        lines.append(f"  {number}. {info['name']}: {len(groups)} groups of {size} CPUs "
                     f"(within: median {info['within_ns']['median']:.0f} ns; "
                     f"between: median {info['between_ns']['median']:.0f} ns)")
        shown = "  ".join(format_cpulist(g) for g in groups[:MAX_GROUPS_SHOWN])
        more = f"  ... (+{len(groups) - MAX_GROUPS_SHOWN})" if len(groups) > MAX_GROUPS_SHOWN else ""
        lines.append(f"     {shown}{more}")
    lines.append("pin two communicating threads to:")
    for pair in analysis["recommended_pairs"]:
        lines.append(f"  CPUs {pair['cpus'][0]},{pair['cpus'][1]}: {pair['one_way_ns']:.0f} ns one way - {pair['why']}")
    misleading = [p for p in analysis["sequential_pairs"] if p["crosses"]]
    if misleading:
        lines.append("neighbours in numbering that are far apart:")
        for pair in sorted(misleading, key=lambda p: -p["one_way_ns"])[:MAX_GROUPS_SHOWN]:
            lines.append(f"  CPUs {pair['cpus'][0]},{pair['cpus'][1]}: {pair['one_way_ns']:.0f} ns, "
                         f"crosses a {pair['crosses']} boundary (CPU {pair['cpus'][0]}'s nearest other core: {pair['vs_best_ns']:.0f} ns)")
    lines += [f"note: {note}" for note in analysis["notes"]]
    return "\n".join(lines)
