"""What this machine can show: the probe behind `perflab probe` and every result's metadata.

`probe()` reads kernel files through a `SysRoot` (the live "/" or a fixture tree)
and turns them into named `Fact`s. Each fact carries its value, where it came
from, and a note when the value is unknown or needs explaining. A missing or
unreadable file never crashes the probe: that fact becomes None with a note.

Three things cannot be read from files: the CPUID registers, whether a
hardware cycles event opens, and our euid/capabilities. On the live machine
they are measured (`measure_live`); in a fixture tree they come from
`perflab-live.json` at the fixture's root, which has the same shape as what
`measure_live` returns (that is how `tests/fixtures/make_machines.py capture`
writes it).
"""


from __future__ import annotations

from ..sysfs import SysRoot, default_root
from .cpus import caches, cpu_dirs, isolation, numa, online, online_cpus, topology
from .display import yes_no
from .facts import FACT_NAMES, SCHEMA, Fact, Machine
from .identity import cpu_flags, cpuinfo, decoded_cpuid, identity
from .kernel import (
    bpf,
    governor,
    hw_pmu,
    join,
    la57_cpu,
    llc_inclusive,
    paging_levels,
    paging_levels_of,
    perf_event_paranoid,
    privileges,
    tracing,
    turbo,
    virtualization,
)
from .live import LIVE_FILE, live_inputs, measure_live

__all__ = ["FACT_NAMES", "LIVE_FILE", "SCHEMA", "Fact", "Machine", "cpuinfo", "measure_live", "online_cpus",
           "paging_levels_of", "probe"]


def probe(root: SysRoot | None = None) -> Machine:
    """Describe the machine behind `root` (default: the live one, or PERFLAB_SYSROOT)."""
    root = root or default_root()
    live, tag = live_inputs(root)
    missing_live = live.get("missing")
    decoded, cpuid_note = decoded_cpuid(live)  # decoded once, used by several facts
    info = cpuinfo(root)
    flags = cpu_flags(info)
    facts = identity(root, info, decoded, tag)

    facts["online_cpus"] = online(root)
    cpus = facts["online_cpus"].value
    cpus = cpus if cpus is not None else cpu_dirs(root)
    facts["numa_nodes"], node_of = numa(root)
    facts["topology"], counts = topology(root, cpus, node_of)
    facts.update(counts)
    facts["caches"] = caches(root, cpus)
    facts["llc_inclusive"] = llc_inclusive(decoded, cpuid_note, tag)

    facts["la57_cpu"] = la57_cpu(decoded, flags, cpuid_note, tag)
    facts["paging_levels"] = paging_levels(root)
    facts["hw_pmu"] = hw_pmu(live, tag, missing_live)
    facts["perf_event_paranoid"] = perf_event_paranoid(root)
    facts["kprobes"], facts["ftrace_tracers"] = tracing(root)
    facts["bpf"] = bpf(root, facts["kernel"].value)
    facts["privileges"] = privileges(live, tag, missing_live)

    facts["virtualization"] = virtualization(root, decoded, flags, tag)
    if facts["virtualization"].value.get("hypervisor") and facts["topology"].value:
        facts["topology"].note = join(
            facts["topology"].note,
            "vCPU topology as the hypervisor presents it: vCPUs need not map to host cores one to one",
        )
    if (facts["virtualization"].value.get("vendor") or "").startswith("TCG"):
        _note_emulated_cpu(facts)
    facts.update(isolation(root))
    facts["governor"] = governor(root, cpus)
    facts["turbo"] = turbo(root)
    return Machine({name: facts[name] for name in FACT_NAMES})


def _note_emulated_cpu(facts: dict[str, Fact]) -> None:
    """Under TCG the sizes and the missing counters are QEMU's, not hardware's: say so where they appear."""
    if facts["caches"].value:
        facts["caches"].note = join(facts["caches"].note, "TCG guest: QEMU's built-in CPUID table; the emulated CPU "
                                     "has no caches, so no cache effect can be measured here")
    facts["hw_pmu"].note = join(
        facts["hw_pmu"].note, "TCG guest: QEMU emulates no PMU, so there are no hardware events"
    )
    llc = facts["llc_inclusive"]
    if llc.value is not None:
        facts["llc_inclusive"] = Fact(
            None,
            llc.source,
            f"TCG guest: QEMU's CPUID table says inclusive={yes_no(llc.value)}, "
            "but the emulated CPU has no caches to be inclusive or not",
        )

