"""A machine as the probe describes it: named facts, each with its value, its source and a note."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..cpulist import format_cpulist
from ..errors import PerflabError

SCHEMA = 1

# Every Machine from probe() has these facts, in this order.
FACT_NAMES = [
    "cpu_model", "vendor", "kernel", "online_cpus", "topology", "packages", "dies", "cores",
    "threads_per_core", "caches", "llc_inclusive", "numa_nodes", "la57_cpu", "paging_levels", "hw_pmu",
    "perf_event_paranoid", "kprobes", "ftrace_tracers", "bpf", "privileges", "virtualization", "isolcpus",
    "nohz_full", "governor", "turbo",
]


@dataclass
class Fact:
    value: Any  # JSON-serialisable
    source: str  # the file, register or call it came from
    note: str | None = None  # why it is unknown, or what it means

    def to_json(self) -> dict:
        return {"value": self.value, "source": self.source, "note": self.note}


@dataclass
class Machine:
    facts: dict[str, Fact] = field(default_factory=dict)

    def value(self, name: str, default: Any = None) -> Any:
        fact = self.facts.get(name)
        return default if fact is None or fact.value is None else fact.value

    def cpu_family(self) -> int | None:
        """The CPU family /proc/cpuinfo reports (cpu_model's note says it): 6 for Intel's cores, 25 for AMD's
        Zen 3 and Zen 4; None where it says none (another architecture, a recorded machine without it)."""
        fact = self.facts.get("cpu_model")
        found = re.match(r"family (\d+) ", fact.note or "") if fact else None
        return int(found[1]) if found else None

    def emulated(self) -> bool:
        """QEMU's TCG runs this machine: every instruction recompiled, no caches or core distances of its own."""
        return (self.value("virtualization", {}).get("vendor") or "").startswith("TCG")

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "facts": {name: f.to_json() for name, f in self.facts.items()}}

    @classmethod
    def from_json(cls, data: dict) -> Machine:
        if data.get("schema") != SCHEMA:
            raise PerflabError(
                f"machine description has schema {data.get('schema')!r}, this perflab reads schema {SCHEMA}; "
                "run `perflab probe` again to record a new one"
            )
        return cls({name: Fact(f["value"], f["source"], f.get("note")) for name, f in data["facts"].items()})

    # -- topology helpers ------------------------------------------------

    @property
    def online_cpus(self) -> list[int]:
        return list(self.value("online_cpus", []))

    def cpu(self, cpu: int) -> dict:
        """{"package", "die", "core", "smt_siblings": [...], "node"} of one online CPU."""
        entry = self.value("topology", {}).get(str(cpu))
        if entry is None:
            raise PerflabError(
                f"CPU {cpu} is not online on this machine (online: {format_cpulist(self.online_cpus)}); "
                "pick CPUs from `perflab probe`"
            )
        return dict(entry)

    def caches_of(self, cpu: int) -> list[dict]:
        """The caches `cpu` uses, L1 first: [{"level", "type", "size_kib", "cpus": [...]}, ...]."""
        return [dict(c) for c in self.value("caches", []) if cpu in c["cpus"]]

    def llc_groups(self) -> list[list[int]]:
        """CPU sets that share a last-level cache; [] if the kernel exposes no cache information."""
        caches = self.value("caches", [])
        if not caches:
            return []
        top = max(c["level"] for c in caches)
        return _distinct(c["cpus"] for c in caches if c["level"] == top)

    def smt_sibling_groups(self) -> list[list[int]]:
        """CPU sets that are hardware threads of one core ([[0], [1]] without SMT)."""
        return _distinct(t["smt_siblings"] for t in self.value("topology", {}).values() if t["smt_siblings"])

    def package_groups(self) -> list[list[int]]:
        """CPU sets on one physical package (socket)."""
        groups: dict[Any, list[int]] = {}
        for cpu, t in self.value("topology", {}).items():
            groups.setdefault(t["package"], []).append(int(cpu))
        return _distinct(groups.values())

    # -- presentation ---------------------------------------------------

    def summary(self) -> dict:
        """Short metadata for result files."""
        caches = self.value("caches", [])
        llc = max(caches, key=lambda c: c["level"]) if caches else None
        virt = self.value("virtualization", {})
        if virt.get("hypervisor") is False:
            virtualization = "bare metal"
        else:
            virtualization = virt.get("vendor") or ("unknown hypervisor" if virt.get("hypervisor") else None)
        governors = self.value("governor", {}).get("governors", {})
        isol = self.value("isolcpus")
        return {
            "cpu_model": self.value("cpu_model"),
            "vendor": self.value("vendor"),
            "online_cpus": format_cpulist(self.online_cpus),
            "packages": self.value("packages"),
            "cores": self.value("cores"),
            "threads_per_core": self.value("threads_per_core"),
            "llc_size_kib": llc["size_kib"] if llc else None,
            "llc_inclusive": self.value("llc_inclusive"),
            "numa_nodes": len(self.value("numa_nodes")) if self.value("numa_nodes") is not None else None,
            "kernel": self.value("kernel"),
            "virtualization": virtualization,
            "governor": ",".join(sorted(governors)) or None,
            "turbo": self.value("turbo"),
            "isolcpus": format_cpulist(isol) if isol is not None else None,
            "hw_pmu": self.value("hw_pmu"),
        }

    def render(self) -> str:
        """An aligned text table: fact, value, source; notes under the value."""
        from .display import render

        return render(self.facts)


def _distinct(groups) -> list[list[int]]:
    """Distinct non-empty CPU sets, each sorted, ordered by their first CPU."""
    unique = {tuple(sorted(g)) for g in groups if g}
    return [list(g) for g in sorted(unique)]

