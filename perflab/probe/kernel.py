"""What the kernel offers the labs: paging levels, performance counters, tracing, privileges, the LLC's
inclusiveness from CPUID, virtualization, frequency governors and turbo."""

from __future__ import annotations

import errno
import re

from ..knobs import Turbo, governor_settings
from ..sysfs import SysRoot
from .display import kib
from .facts import Fact

TRACING_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

# VmallocTotal (kB) is 32 TiB - 1 kB with 4-level page tables and 12.5 PiB - 1 kB
# with 5-level ones (Documentation/arch/x86/x86_64/mm.rst). 1 PiB lies between.
VMALLOC_5LEVEL_KB = 2**40


CAP_SYS_ADMIN = 21
CAP_PERFMON = 38


PARANOID = {
    -1: "no restrictions",
    0: "unprivileged users may measure anything but raw tracepoints",
    1: "unprivileged users may count kernel and user, but not CPU-wide",
    2: "unprivileged users may count user space of their own processes only",
}


ERRNO_MEANING = {
    errno.ENOENT: "the kernel offers no hardware cycles event here (typical of a VM without a virtual PMU): "
    "counter-based labs will fall back to time",
    errno.EOPNOTSUPP: "a PMU exists but cannot count cycles in this mode",
    errno.EACCES: "not allowed (perf_event_paranoid or missing CAP_PERFMON): the PMU may exist; run as root to check",
    errno.EPERM: "not allowed (perf_event_paranoid or missing CAP_PERFMON): the PMU may exist; run as root to check",
    errno.ENOSYS: "the kernel was built without perf events",
    errno.ENODEV: "no PMU for this event on this CPU",
}


def join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def llc_inclusive(decoded: dict | None, cpuid_note: str | None, tag: str) -> Fact:
    if decoded is None:
        return Fact(None, "CPUID leaf 4 / 0x8000001D EDX bit 1" + tag, f"CPUID not available: {cpuid_note}")
    leaf = decoded["cache_leaf"]
    if not decoded["caches"]:
        note = f"CPUID leaf {leaf:#x} reports no caches"
        if decoded["hypervisor_vendor"] and decoded["hypervisor_vendor"].startswith("TCG"):
            note = "TCG guest: CPUID reports no caches (the CPU is emulated; there is no real cache to ask about)"
        elif decoded["hypervisor"]:
            note += " (the hypervisor hides them)"
        return Fact(None, f"CPUID leaf {leaf:#x} EDX bit 1" + tag, note)
    llc = decoded["llc"]
    meaning = (
        "lines evicted from it are also evicted from every core's L1/L2"
        if llc["inclusive"]
        else "it does not hold copies of every line in L1/L2 (non-inclusive or victim cache)"
    )
    note = f"L{llc['level']} ({kib(llc['size_kib'])} per CPUID): {meaning}"
    if decoded["hypervisor"]:
        note += "; as the hypervisor reports it to this guest"
    return Fact(llc["inclusive"], f"CPUID leaf {leaf:#x} subleaf {llc['subleaf']} EDX bit 1" + tag, note)


def la57_cpu(decoded: dict | None, flags: list[str] | None, cpuid_note: str | None, tag: str) -> Fact:
    """Can the CPU do 5-level paging (CPUID), and does the kernel show it (the la57 flag)?"""
    la57 = {"cpuid": decoded["la57"] if decoded else None, "cpuinfo": ("la57" in flags) if flags is not None else None}
    note = None
    if la57["cpuid"] and la57["cpuinfo"] is False:
        note = ("the CPU can do 5-level paging (CPUID) but the kernel runs 4-level page tables, "
                "so it hides the la57 flag in /proc/cpuinfo (see paging_levels)")
    elif la57["cpuid"] is None:
        note = f"CPUID not available: {cpuid_note}"
    return Fact(la57, "CPUID leaf 7 ECX bit 16" + tag + "; /proc/cpuinfo flags", note)


def paging_levels_of(meminfo: str) -> int | None:
    """4 or 5 from /proc/meminfo's VmallocTotal line (or the whole file); None if it has none."""
    m = re.search(r"^VmallocTotal:\s*(\d+)\s*kB", meminfo or "", re.M)
    return None if not m else 5 if int(m.group(1)) > VMALLOC_5LEVEL_KB else 4


def paging_levels(root: SysRoot) -> Fact:
    meminfo = root.read("/proc/meminfo")
    levels = paging_levels_of(meminfo or "")
    if levels is None:
        return Fact(None, "/proc/meminfo VmallocTotal", "/proc/meminfo missing or has no VmallocTotal")
    kb = int(re.search(r"^VmallocTotal:\s*(\d+)", meminfo, re.M).group(1))
    return Fact(levels, "/proc/meminfo VmallocTotal",
                f"VmallocTotal {kb} kB: {'12.5 PiB' if levels == 5 else 'at most 32 TiB'} of vmalloc space "
                f"means {levels}-level page tables")


def hw_pmu(live: dict, tag: str, missing: str | None) -> Fact:
    source = "perf_event_open(cycles)" + tag
    result = live.get("perf_cycles")
    if not result:
        return Fact(None, source, missing or "not measured")
    if result.get("ok"):
        return Fact(True, source, "hardware cycle counting works")
    if result.get("ok") is None:
        return Fact(None, source, result.get("error"))
    meaning = ERRNO_MEANING.get(result.get("errno"), "")
    return Fact(False, source, join(result.get("error"), meaning))


def perf_event_paranoid(root: SysRoot) -> Fact:
    paranoid = root.read_int("/proc/sys/kernel/perf_event_paranoid")
    return Fact(
        paranoid,
        "/proc/sys/kernel/perf_event_paranoid",
        "file missing: the kernel has no perf events" if paranoid is None
        else PARANOID.get(paranoid, "above 2: unprivileged users may not use perf at all (Debian/Ubuntu patch)"),
    )


def tracing(root: SysRoot) -> tuple[Fact, Fact]:
    mounts = [d for d in TRACING_DIRS if root.exists(f"{d}/available_tracers")]
    hidden = [d for d in TRACING_DIRS if root.hidden(d)]
    if hidden and not mounts:
        unseen = "tracefs is mounted, but only root may look in it: probe as root to see "
        return (Fact(None, f"{hidden[0]}/kprobe_events", unseen + "its kprobes"),
                Fact(None, f"{hidden[0]}/available_tracers", unseen + "its tracers"))
    kprobe_files = [f"{d}/kprobe_events" for d in TRACING_DIRS if root.exists(f"{d}/kprobe_events")]
    source_k = " or ".join(f"{d}/kprobe_events" for d in TRACING_DIRS)
    if kprobe_files:
        kprobes = Fact(True, kprobe_files[0])
    elif mounts:
        kprobes = Fact(False, source_k, "tracefs is mounted but has no kprobe_events: kernel without "
                                        "CONFIG_KPROBE_EVENTS")
    else:
        kprobes = Fact(False, source_k, "tracefs is not mounted, so kprobes cannot be used or seen; "
                       "`mount -t tracefs nodev /sys/kernel/tracing` and probe again")
    if not mounts:
        tracers = Fact([], " or ".join(f"{d}/available_tracers" for d in TRACING_DIRS),
                       "tracefs not mounted: no ftrace tracers available")
    else:
        path = f"{mounts[0]}/available_tracers"
        text = root.read(path)
        if text is None:
            tracers = Fact(None, path, "exists but unreadable: reading it needs root")
        else:
            tracers = Fact(text.split(), path)
    return kprobes, tracers


# Where Debian installs each BPF front end; libbpf-tools' softirqs stands for the whole package.
BPF_TOOLS = {"bpftrace": "/usr/bin/bpftrace", "libbpf_tools": "/usr/sbin/softirqs", "bcc": "/usr/sbin/funccount-bpfcc"}


def bpf(root: SysRoot, release: str | None) -> Fact:
    """Which BPF tracing this kernel and this machine's tools allow, and what each lab can use of it.

    Read without tracefs: the perf PMUs kprobe and uprobe exist when the kernel has kprobe and uprobe events."""
    value = {"btf": root.exists("/sys/kernel/btf/vmlinux"),
             "uprobes": root.exists("/sys/bus/event_source/devices/uprobe"),
             "kprobes": root.exists("/sys/bus/event_source/devices/kprobe"),
             "kernel_headers": root.exists("/sys/kernel/kheaders.tar.xz")
             or bool(release and root.exists(f"/lib/modules/{release}/build")),
             **{tool: root.exists(path) for tool, path in BPF_TOOLS.items()}}
    works = []
    if value["libbpf_tools"] and value["btf"]:
        works.append("libbpf-tools on tracepoints (softirqs, hardirqs, runqlat)")
    if value["bpftrace"] and value["uprobes"]:
        works.append("bpftrace on uprobes (lab 11 counts memcpy's variants)")
    cannot = []
    if not value["kprobes"]:
        cannot.append("no kprobes: nothing attaches to a kernel function (funccount, funclatency on the kernel)")
    if not value["kernel_headers"]:
        cannot.append("no kernel headers: bcc's Python tools cannot compile their programs")
    if not value["btf"]:
        cannot.append("no BTF: libbpf-tools cannot run")
    note = "; ".join([f"works: {', '.join(works)}" if works else "no BPF tool of the course can run here", *cannot])
    return Fact(value, "/sys/kernel/btf/vmlinux; /sys/bus/event_source/devices/{uprobe,kprobe}; "
                       "/sys/kernel/kheaders.tar.xz or /lib/modules/RELEASE/build; " + ", ".join(BPF_TOOLS.values()),
                note)


def privileges(live: dict, tag: str, missing: str | None) -> Fact:
    source = "geteuid(), /proc/self/status CapEff" + tag
    euid = live.get("euid")
    cap = live.get("cap_eff")
    if euid is None and cap is None:
        return Fact(None, source, missing or "not measured")
    try:
        caps = int(cap, 16) if cap else None
    except ValueError:
        caps = None
    value = {
        "euid": euid,
        "root": euid == 0 if euid is not None else None,
        "cap_sys_admin": bool(caps >> CAP_SYS_ADMIN & 1) if caps is not None else None,
        "cap_perfmon": bool(caps >> CAP_PERFMON & 1) if caps is not None else None,
    }
    note = None if caps is not None else "CapEff unknown (/proc/self/status unreadable)"
    return Fact(value, source, note)


def virtualization(root: SysRoot, decoded: dict | None, flags: list[str] | None, tag: str) -> Fact:
    hv_type = root.read("/sys/hypervisor/type")
    dmi_vendor = root.read("/sys/class/dmi/id/sys_vendor")
    dmi_product = root.read("/sys/class/dmi/id/product_name")
    sources = []
    if decoded is not None and decoded["hypervisor"] is not None:
        hypervisor = decoded["hypervisor"]
        sources.append("CPUID leaf 1 ECX bit 31, leaf 0x40000000" + tag)
    elif flags is not None:
        hypervisor = "hypervisor" in flags
        sources.append("/proc/cpuinfo hypervisor flag")
    else:
        hypervisor = None
    vendor = decoded["hypervisor_vendor"] if decoded else None
    if vendor is None and hv_type:
        vendor = hv_type.capitalize() if hv_type == "xen" else hv_type
    sources += ["/sys/hypervisor/type", "/sys/class/dmi/id/{sys_vendor,product_name}"]
    value = {
        "hypervisor": hypervisor,
        "vendor": vendor,
        "cpuid_signature": decoded["hypervisor_signature"] if decoded else None,
        "sys_hypervisor_type": hv_type,
        "dmi_sys_vendor": dmi_vendor,
        "dmi_product_name": dmi_product,
    }
    if hypervisor is None:
        note = "unknown: no CPUID and no /proc/cpuinfo flags"
    elif not hypervisor:
        note = "bare metal: no hypervisor bit in CPUID"
    elif vendor and vendor.startswith("TCG"):
        note = "TCG guest: the CPU is emulated in software; timings say little about real hardware"
    else:
        note = (f"{vendor or 'unknown'} guest: vCPUs are host threads the host may preempt; "
                "expect noise and missing hardware features")
    if hypervisor and dmi_vendor is None:
        note += "; no DMI tables (a microVM such as Firecracker, or DMI not exposed)"
    return Fact(value, "; ".join(sources), note)


def governor(root: SysRoot, cpus: list[int]) -> Fact:
    source, settings = governor_settings(root, cpus)
    governors: dict[str, list[int]] = {}
    drivers: set[str] = set()
    for gov, drv, members in settings:
        if gov:
            governors.setdefault(gov, []).extend(members)
        if drv:
            drivers.add(drv)
    if not governors:
        return Fact(None, source, "no cpufreq: frequency is managed by the hypervisor or firmware")
    value = {
        "governors": {g: sorted(set(c)) for g, c in sorted(governors.items())},
        "driver": ",".join(sorted(drivers)) or None,
    }
    return Fact(value, source, "mixed governors" if len(governors) > 1 else None)


def turbo(root: SysRoot) -> Fact:
    found = Turbo(root=root).switch()
    if found is None:
        return Fact(None, f"{Turbo.NO_TURBO} or {Turbo.BOOST}",
                    "neither file exists: turbo is decided by the hypervisor or firmware")
    path, value = found
    if path == Turbo.NO_TURBO:
        return Fact(value == 0, path, f"no_turbo={value} (inverted)")
    return Fact(value == 1, path)
