"""The probe's facts as a person reads them: `perflab probe`'s table."""

from __future__ import annotations

import textwrap
from typing import Any

from ..cpulist import format_cpulist


def render(facts: dict) -> str:
    """An aligned text table: fact, value, source; notes under the value."""
    name_w = max([len("fact")] + [len(n) for n in facts])
    value_w = 46
    lines = [f"{'fact':<{name_w}}  {'value':<{value_w}}  source", "-" * (name_w + value_w + 30)]
    pad = " " * (name_w + 2)
    for name, fact in facts.items():
        value_lines: list[str] = []
        for line in _show(name, fact.value):
            value_lines += textwrap.wrap(line, value_w, subsequent_indent="  ") or [""]
        lines.append(f"{name:<{name_w}}  {value_lines[0]:<{value_w}}  {fact.source}")
        lines += [pad + v for v in value_lines[1:]]
        if fact.note:
            lines += textwrap.wrap(fact.note, 96, initial_indent=pad + "note: ", subsequent_indent=pad + "      ")
    return "\n".join(lines)


def _show(name: str, value: Any) -> list[str]:
    """Lines that show one fact's value to a person."""
    if value is None:
        return ["unknown"]
    if isinstance(value, bool):
        return ["yes" if value else "no"]
    if name in ("online_cpus", "isolcpus", "nohz_full"):
        return [f"{format_cpulist(value)} ({len(value)} CPUs)" if value else "none"]
    if name == "topology":
        by_pkg: dict[tuple, list[int]] = {}
        for cpu, t in value.items():
            by_pkg.setdefault((t["package"], t["die"]), []).append(int(cpu))
        return [f"package {p} die {d}: CPUs {format_cpulist(c)}" for (p, d), c in sorted(by_pkg.items(), key=str)]
    if name == "caches":
        kinds: dict[tuple, list[dict]] = {}
        for c in value:
            kinds.setdefault((c["level"], c["type"], c["size_kib"]), []).append(c)
        out = []
        for (level, kind, size), same in kinds.items():
            shared = sorted({len(c["cpus"]) for c in same})
            out.append(
                f"L{level} {kind} {kib(size)} x{len(same)}, each for {'/'.join(map(str, shared))} CPU(s)"
            )
        return out
    if name == "numa_nodes":
        return [
            f"node {n['node']}: CPUs {format_cpulist(n['cpus']) or 'none'}; distances "
            f"{' '.join(map(str, n['distances'] or []))}"
            for n in value
        ]
    if name == "governor":
        return [f"{g} on CPUs {format_cpulist(c)}" for g, c in value["governors"].items()] + [
            f"driver {value['driver']}"
        ]
    if name == "la57_cpu":
        return [f"CPUID {yes_no(value['cpuid'])}, /proc/cpuinfo flag {yes_no(value['cpuinfo'])}"]
    if isinstance(value, dict):  # unknown entries are left out; the note says why
        return [", ".join(f"{k}={yes_no(v)}" for k, v in value.items() if v is not None) or "unknown"]
    if isinstance(value, list):
        return [" ".join(map(str, value)) or "none"]
    return [str(value)]


def yes_no(v: Any) -> str:
    return "unknown" if v is None else ("yes" if v is True else "no" if v is False else str(v))


def kib(size: int | None) -> str:
    if size is None:
        return "? KiB"
    return f"{size // 1024} MiB" if size >= 1024 and size % 1024 == 0 else f"{size} KiB"

