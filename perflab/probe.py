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

import ctypes
import errno
import json
import os
import re
import struct
import textwrap
from dataclasses import dataclass, field
from typing import Any

from . import cpuid as cpuid_mod
from .cpulist import format_cpulist, parse_cpulist
from .errors import PerflabError
from .sysfs import SysRoot, default_root

SCHEMA = 1
LIVE_FILE = "perflab-live.json"

CPU_DIR = "/sys/devices/system/cpu"
NODE_DIR = "/sys/devices/system/node"
TRACING_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

# VmallocTotal (kB) is 32 TiB - 1 kB with 4-level page tables and 12.5 PiB - 1 kB
# with 5-level ones (Documentation/arch/x86/x86_64/mm.rst). 1 PiB lies between.
VMALLOC_5LEVEL_KB = 2**40

# Every Machine from probe() has these facts, in this order.
FACT_NAMES = [
    "cpu_model", "vendor", "kernel", "online_cpus", "topology", "packages", "dies", "cores",
    "threads_per_core", "caches", "llc_inclusive", "numa_nodes", "la57_cpu", "paging_levels", "hw_pmu",
    "perf_event_paranoid", "kprobes", "ftrace_tracers", "privileges", "virtualization", "isolcpus",
    "nohz_full", "governor", "turbo",
]

CAP_SYS_ADMIN = 21
CAP_PERFMON = 38

# perf_event_open(2) syscall numbers; the libc has no wrapper.
PERF_EVENT_OPEN_NR = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_ATTR_SIZE_VER0 = 64
PERF_FLAG_FD_CLOEXEC = 8


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
        name_w = max([len("fact")] + [len(n) for n in self.facts])
        value_w = 46
        lines = [f"{'fact':<{name_w}}  {'value':<{value_w}}  source", "-" * (name_w + value_w + 30)]
        pad = " " * (name_w + 2)
        for name, fact in self.facts.items():
            value_lines: list[str] = []
            for line in _show(name, fact.value):
                value_lines += textwrap.wrap(line, value_w, subsequent_indent="  ") or [""]
            lines.append(f"{name:<{name_w}}  {value_lines[0]:<{value_w}}  {fact.source}")
            lines += [pad + v for v in value_lines[1:]]
            if fact.note:
                lines += textwrap.wrap(fact.note, 96, initial_indent=pad + "note: ", subsequent_indent=pad + "      ")
        return "\n".join(lines)


def _distinct(groups) -> list[list[int]]:
    """Distinct non-empty CPU sets, each sorted, ordered by their first CPU."""
    unique = {tuple(sorted(g)) for g in groups if g}
    return [list(g) for g in sorted(unique)]


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
                f"L{level} {kind} {_kib(size)} x{len(same)}, each for {'/'.join(map(str, shared))} CPU(s)"
            )
        return out
    if name == "numa_nodes":
        return [
            f"node {n['node']}: CPUs {format_cpulist(n['cpus']) or 'none'}; distances {' '.join(map(str, n['distances'] or []))}"
            for n in value
        ]
    if name == "governor":
        return [f"{g} on CPUs {format_cpulist(c)}" for g, c in value["governors"].items()] + [
            f"driver {value['driver']}"
        ]
    if name == "la57_cpu":
        return [f"CPUID {_yn(value['cpuid'])}, /proc/cpuinfo flag {_yn(value['cpuinfo'])}"]
    if isinstance(value, dict):  # unknown entries are left out; the note says why
        return [", ".join(f"{k}={_yn(v)}" for k, v in value.items() if v is not None) or "unknown"]
    if isinstance(value, list):
        return [" ".join(map(str, value)) or "none"]
    return [str(value)]


def _yn(v: Any) -> str:
    return "unknown" if v is None else ("yes" if v is True else "no" if v is False else str(v))


def _kib(size: int | None) -> str:
    if size is None:
        return "? KiB"
    return f"{size // 1024} MiB" if size >= 1024 and size % 1024 == 0 else f"{size} KiB"


# ---------------------------------------------------------------------------
# The measurements that need the live machine


def open_cycles_event() -> dict:
    """Try perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES) on ourselves, then close it.

    Only user-space counting is requested (exclude_kernel, exclude_hv), so a
    perf_event_paranoid of 2 does not make a working PMU look absent.
    Returns {"ok": bool | None, "errno": int | None, "error": str | None}.
    """
    machine = os.uname().machine
    nr = PERF_EVENT_OPEN_NR.get(machine)
    if nr is None:
        return {"ok": None, "errno": None, "error": f"perf_event_open syscall number unknown on {machine}"}
    attr = ctypes.create_string_buffer(PERF_ATTR_SIZE_VER0)
    struct.pack_into("=IIQ", attr, 0, PERF_TYPE_HARDWARE, PERF_ATTR_SIZE_VER0, PERF_COUNT_HW_CPU_CYCLES)
    disabled, exclude_kernel, exclude_hv = 1 << 0, 1 << 5, 1 << 6
    struct.pack_into("=Q", attr, 40, disabled | exclude_kernel | exclude_hv)  # the flags bitfield
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(
        ctypes.c_long(nr), attr, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC)
    )
    if fd >= 0:
        os.close(fd)
        return {"ok": True, "errno": None, "error": None}
    err = ctypes.get_errno()
    return {"ok": False, "errno": err, "error": f"{errno.errorcode.get(err, err)}: {os.strerror(err)}"}


def measure_live(root: SysRoot) -> dict:
    """What only the running machine can tell; the shape of perflab-live.json."""
    raw, why = cpuid_mod.read_cpuid_or_reason()
    status = root.read("/proc/self/status") or ""
    cap_eff = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    return {
        "schema": SCHEMA,
        "machine": os.uname().machine,
        "cpuid": raw,
        "cpuid_note": why,
        "perf_cycles": open_cycles_event(),
        "euid": os.geteuid(),
        "cap_eff": cap_eff.group(1) if cap_eff else None,
    }


def _live_inputs(root: SysRoot) -> tuple[dict, str]:
    """(the live measurements, the suffix to put on their sources)."""
    if root.is_live:
        return measure_live(root), ""
    text = root.read("/" + LIVE_FILE)
    if text is None:
        return {"missing": f"{root.path('/' + LIVE_FILE)} is missing"}, f" (from {LIVE_FILE})"
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"missing": f"{root.path('/' + LIVE_FILE)} is not a JSON object"}, f" (from {LIVE_FILE})"
    return data, f" (recorded in {LIVE_FILE})"


# ---------------------------------------------------------------------------
# Reading the kernel files


def _cpulist(root: SysRoot, path: str) -> tuple[list[int] | None, str | None]:
    """(cpus, None) or (None, why not). An empty file or "(null)" is an empty list."""
    text = root.read(path)
    if text is None:
        return None, f"{path} is missing or unreadable"
    if text in ("", "(null)"):
        return [], None
    try:
        return parse_cpulist(text), None
    except PerflabError:
        return None, f"{path} holds {text!r}, not a CPU list"


def online_cpus(root: SysRoot | None = None) -> list[int] | None:
    """The online CPUs alone, without the whole probe (None if unreadable): to refuse a CPU list at once."""
    return _cpulist(root or default_root(), f"{CPU_DIR}/online")[0]


def _cpuinfo(root: SysRoot) -> dict[str, str] | None:
    """The first processor block of /proc/cpuinfo."""
    text = root.read("/proc/cpuinfo")
    if text is None:
        return None
    fields: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, sep, val = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), val.strip())
    return fields


def _size_kib(text: str | None) -> int | None:
    """"48K" -> 48, "1M" -> 1024 (sysfs cache sizes)."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*([KMG]?)B?", text.strip(), re.I)
    if not m:
        return None
    return int(m.group(1)) * {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2).upper()]


def _cpu_dirs(root: SysRoot) -> list[int]:
    return sorted(int(d[3:]) for d in root.listdir(CPU_DIR) if re.fullmatch(r"cpu\d+", d))


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


def probe(root: SysRoot | None = None) -> Machine:
    """Describe the machine behind `root` (default: the live one, or PERFLAB_SYSROOT)."""
    root = root or default_root()
    facts: dict[str, Fact] = {}
    live, tag = _live_inputs(root)
    missing_live = live.get("missing")

    # -- CPUID (decoded once, used by several facts) ---------------------
    raw = live.get("cpuid")
    cpuid_note = live.get("cpuid_note") or missing_live
    decoded = None
    if raw:
        try:
            decoded = cpuid_mod.decode(raw)
        except (PerflabError, KeyError, TypeError) as exc:
            cpuid_note = f"CPUID dump unreadable: {exc}"
    elif not cpuid_note:
        cpuid_note = "no CPUID dump"

    # -- identity ------------------------------------------------------
    info = _cpuinfo(root)
    if info is None:
        facts["cpu_model"] = Fact(None, "/proc/cpuinfo", "/proc/cpuinfo is missing or unreadable")
    else:
        model = info.get("model name") or info.get("Model") or info.get("cpu")
        signature = None
        if "cpu family" in info and "model" in info:
            m = int(info["model"]) if info["model"].isdigit() else None
            signature = f"family {info['cpu family']} model {info['model']}" + (f" ({m:#x})" if m is not None else "")
            signature += f" stepping {info.get('stepping', '?')}"
        facts["cpu_model"] = Fact(
            model, "/proc/cpuinfo model name", signature or (None if model else "no model name in /proc/cpuinfo")
        )

    vendor = info.get("vendor_id") if info else None
    if vendor:
        note = None
        if decoded and decoded["vendor"] and decoded["vendor"] != vendor:
            note = f"CPUID leaf 0 says {decoded['vendor']}"
        facts["vendor"] = Fact(vendor, "/proc/cpuinfo vendor_id", note)
    elif decoded and decoded["vendor"]:
        facts["vendor"] = Fact(decoded["vendor"], "CPUID leaf 0" + tag)
    else:
        facts["vendor"] = Fact(None, "/proc/cpuinfo vendor_id", "no vendor_id in /proc/cpuinfo and no CPUID")

    kernel = root.read("/proc/sys/kernel/osrelease")
    facts["kernel"] = Fact(kernel, "/proc/sys/kernel/osrelease", None if kernel else "file missing or unreadable")

    # -- CPUs and topology ---------------------------------------------
    online, why = _cpulist(root, f"{CPU_DIR}/online")
    facts["online_cpus"] = Fact(online, f"{CPU_DIR}/online", why)
    cpus = online if online is not None else _cpu_dirs(root)

    numa, node_of = _numa(root)
    facts_topology, counts = _topology(root, cpus, node_of)
    facts["topology"] = facts_topology
    facts.update(counts)

    # -- caches --------------------------------------------------------
    facts["caches"] = _caches(root, cpus)
    facts["llc_inclusive"] = _llc_inclusive(decoded, cpuid_note, tag)
    facts["numa_nodes"] = numa

    # -- memory --------------------------------------------------------
    flags = info.get("flags", info.get("Features", "")).split() if info else None
    la57 = {"cpuid": decoded["la57"] if decoded else None, "cpuinfo": ("la57" in flags) if flags is not None else None}
    note = None
    if la57["cpuid"] and la57["cpuinfo"] is False:
        note = ("the CPU can do 5-level paging (CPUID) but the kernel runs 4-level page tables, "
                "so it hides the la57 flag in /proc/cpuinfo (see paging_levels)")
    elif la57["cpuid"] is None:
        note = f"CPUID not available: {cpuid_note}"
    facts["la57_cpu"] = Fact(la57, "CPUID leaf 7 ECX bit 16" + tag + "; /proc/cpuinfo flags", note)
    facts["paging_levels"] = _paging_levels(root)

    # -- performance counters and tracing ------------------------------
    facts["hw_pmu"] = _hw_pmu(live, tag, missing_live)
    paranoid = root.read_int("/proc/sys/kernel/perf_event_paranoid")
    facts["perf_event_paranoid"] = Fact(
        paranoid,
        "/proc/sys/kernel/perf_event_paranoid",
        "file missing: the kernel has no perf events" if paranoid is None
        else PARANOID.get(paranoid, "above 2: unprivileged users may not use perf at all (Debian/Ubuntu patch)"),
    )
    facts["kprobes"], facts["ftrace_tracers"] = _tracing(root)
    facts["privileges"] = _privileges(live, tag, missing_live)

    # -- environment ---------------------------------------------------
    facts["virtualization"] = _virtualization(root, decoded, flags, tag)
    if facts["virtualization"].value.get("hypervisor") and facts["topology"].value:
        facts["topology"].note = _join(
            facts["topology"].note, "vCPU topology as the hypervisor presents it: vCPUs need not map to host cores one to one"
        )
    if (facts["virtualization"].value.get("vendor") or "").startswith("TCG"):
        _note_emulated_cpu(facts)
    isol, why = _cpulist(root, f"{CPU_DIR}/isolated")
    facts["isolcpus"] = Fact(isol, f"{CPU_DIR}/isolated", why)
    nohz, why = _cpulist(root, f"{CPU_DIR}/nohz_full")
    if nohz is None and not root.exists(f"{CPU_DIR}/nohz_full"):
        why = "no nohz_full file: the kernel was built without CONFIG_NO_HZ_FULL"
    facts["nohz_full"] = Fact(nohz, f"{CPU_DIR}/nohz_full", why)
    facts["governor"] = _governor(root, cpus)
    facts["turbo"] = _turbo(root)
    return Machine({name: facts[name] for name in FACT_NAMES})


def _note_emulated_cpu(facts: dict[str, Fact]) -> None:
    """Under TCG the sizes and the missing counters are QEMU's, not hardware's: say so where they appear."""
    if facts["caches"].value:
        facts["caches"].note = _join(facts["caches"].note, "TCG guest: QEMU's built-in CPUID table; the emulated CPU "
                                     "has no caches, so no cache effect can be measured here")
    facts["hw_pmu"].note = _join(facts["hw_pmu"].note, "TCG guest: QEMU emulates no PMU, so there are no hardware events")
    llc = facts["llc_inclusive"]
    if llc.value is not None:
        facts["llc_inclusive"] = Fact(None, llc.source, f"TCG guest: QEMU's CPUID table says inclusive={_yn(llc.value)}, "
                                      "but the emulated CPU has no caches to be inclusive or not")


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _topology(root: SysRoot, cpus: list[int], node_of: dict[int, int]) -> tuple[Fact, dict[str, Fact]]:
    source = f"{CPU_DIR}/cpuN/topology/{{physical_package_id,die_id,core_id,thread_siblings_list}}"
    topo: dict[str, dict] = {}
    gaps: list[str] = []
    for cpu in cpus:
        base = f"{CPU_DIR}/cpu{cpu}/topology"
        siblings, _ = _cpulist(root, f"{base}/thread_siblings_list")
        if siblings is None:
            siblings, _ = _cpulist(root, f"{base}/core_cpus_list")
        entry = {
            "package": root.read_int(f"{base}/physical_package_id"),
            "die": root.read_int(f"{base}/die_id"),
            "core": root.read_int(f"{base}/core_id"),
            "smt_siblings": siblings or [],
            "node": node_of.get(cpu),
        }
        missing = [k for k in ("package", "die", "core") if entry[k] is None] + ([] if siblings else ["smt_siblings"])
        if missing:
            gaps.append(f"cpu{cpu}: {', '.join(missing)}")
        topo[str(cpu)] = entry
    note = ("unknown for " + "; ".join(gaps[:4]) + (" ..." if len(gaps) > 4 else "")) if gaps else None
    if not cpus:
        note = "no CPUs found under " + CPU_DIR
    topology = Fact(topo if cpus else None, source, note)

    def count(values, src, what):
        vals = [v for v in values if v is not None]
        if not topo or len(vals) < len(topo):
            return Fact(None, src, f"{what} unknown for some CPUs")
        return Fact(len(set(vals)), src)

    t = list(topo.values())
    counts = {
        "packages": count([x["package"] for x in t], f"{CPU_DIR}/cpuN/topology/physical_package_id", "package id"),
        "dies": count(
            [(x["package"], x["die"]) if x["package"] is not None and x["die"] is not None else None for x in t],
            f"{CPU_DIR}/cpuN/topology/die_id",
            "die id (kernels before 5.2 have no die_id)",
        ),
        "cores": count(
            [tuple(x["smt_siblings"]) if x["smt_siblings"] else None for x in t],
            f"{CPU_DIR}/cpuN/topology/thread_siblings_list",
            "SMT siblings",
        ),
    }
    widths = {len(x["smt_siblings"]) for x in t if x["smt_siblings"]}
    if not widths:
        tpc = Fact(None, f"{CPU_DIR}/cpuN/topology/thread_siblings_list", "SMT siblings unknown")
    elif len(widths) == 1:
        (w,) = widths
        tpc = Fact(w, f"{CPU_DIR}/cpuN/topology/thread_siblings_list",
                   "SMT off or absent: one hardware thread per core" if w == 1 else None)
    else:
        tpc = Fact(max(widths), f"{CPU_DIR}/cpuN/topology/thread_siblings_list",
                   f"not uniform: cores have {sorted(widths)} threads (hybrid CPU or SMT partly off)")
    counts["threads_per_core"] = tpc
    return topology, counts


def _caches(root: SysRoot, cpus: list[int]) -> Fact:
    source = f"{CPU_DIR}/cpuN/cache/indexM/{{level,type,size,shared_cpu_list}}"
    seen: dict[tuple, dict] = {}
    for cpu in cpus:
        base = f"{CPU_DIR}/cpu{cpu}/cache"
        for index in root.listdir(base):
            if not re.fullmatch(r"index\d+", index):
                continue
            d = f"{base}/{index}"
            level = root.read_int(f"{d}/level")
            kind = root.read(f"{d}/type")
            if level is None or kind is None:
                continue
            shared, _ = _cpulist(root, f"{d}/shared_cpu_list")
            shared = shared or [cpu]
            size = _size_kib(root.read(f"{d}/size"))
            entry = {
                "level": level,
                "type": kind,
                "size_kib": int(size) if size is not None else None,
                "cpus": shared,
                "ways": root.read_int(f"{d}/ways_of_associativity"),
                "line_size": root.read_int(f"{d}/coherency_line_size"),
            }
            seen.setdefault((level, kind, tuple(shared)), entry)  # one entry per distinct CPU set
    if not seen:
        return Fact(None, source, "the kernel exposes no cache information here (no cpuN/cache directories)")
    order = {"Data": 0, "Instruction": 1, "Unified": 2}
    caches = sorted(seen.values(), key=lambda c: (c["level"], order.get(c["type"], 3), c["cpus"]))
    return Fact(caches, source)


def _llc_inclusive(decoded: dict | None, cpuid_note: str | None, tag: str) -> Fact:
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
    note = f"L{llc['level']} ({_kib(llc['size_kib'])} per CPUID): {meaning}"
    if decoded["hypervisor"]:
        note += "; as the hypervisor reports it to this guest"
    return Fact(llc["inclusive"], f"CPUID leaf {leaf:#x} subleaf {llc['subleaf']} EDX bit 1" + tag, note)


def _numa(root: SysRoot) -> tuple[Fact, dict[int, int]]:
    source = f"{NODE_DIR}/online, nodeN/cpulist, nodeN/distance"
    ids, why = _cpulist(root, f"{NODE_DIR}/online")  # node lists use the same syntax
    if ids is None:
        ids = sorted(int(d[4:]) for d in root.listdir(NODE_DIR) if re.fullmatch(r"node\d+", d))
    if not ids:
        return Fact(None, source, f"no NUMA information ({NODE_DIR} missing: kernel without CONFIG_NUMA?)"), {}
    nodes, node_of, gaps = [], {}, []
    for n in ids:
        cpus, _ = _cpulist(root, f"{NODE_DIR}/node{n}/cpulist")
        dist_text = root.read(f"{NODE_DIR}/node{n}/distance")
        try:
            distances = [int(x) for x in dist_text.split()] if dist_text else None
        except ValueError:
            distances = None
        if cpus is None or distances is None:
            gaps.append(f"node{n}")
        nodes.append({"node": n, "cpus": cpus or [], "distances": distances})
        for c in cpus or []:
            node_of[c] = n
    note = ("cpulist or distance unreadable for " + ", ".join(gaps)) if gaps else None
    return Fact(nodes, source, note), node_of


def paging_levels_of(meminfo: str) -> int | None:
    """4 or 5 from /proc/meminfo's VmallocTotal line (or the whole file); None if it has none."""
    m = re.search(r"^VmallocTotal:\s*(\d+)\s*kB", meminfo or "", re.M)
    return None if not m else 5 if int(m.group(1)) > VMALLOC_5LEVEL_KB else 4


def _paging_levels(root: SysRoot) -> Fact:
    meminfo = root.read("/proc/meminfo")
    levels = paging_levels_of(meminfo or "")
    if levels is None:
        return Fact(None, "/proc/meminfo VmallocTotal", "/proc/meminfo missing or has no VmallocTotal")
    kb = int(re.search(r"^VmallocTotal:\s*(\d+)", meminfo, re.M).group(1))
    return Fact(levels, "/proc/meminfo VmallocTotal",
                f"VmallocTotal {kb} kB: {'12.5 PiB' if levels == 5 else 'at most 32 TiB'} of vmalloc space "
                f"means {levels}-level page tables")


def _hw_pmu(live: dict, tag: str, missing: str | None) -> Fact:
    source = "perf_event_open(cycles)" + tag
    result = live.get("perf_cycles")
    if not result:
        return Fact(None, source, missing or "not measured")
    if result.get("ok"):
        return Fact(True, source, "hardware cycle counting works")
    if result.get("ok") is None:
        return Fact(None, source, result.get("error"))
    meaning = ERRNO_MEANING.get(result.get("errno"), "")
    return Fact(False, source, _join(result.get("error"), meaning))


def _tracing(root: SysRoot) -> tuple[Fact, Fact]:
    mounts = [d for d in TRACING_DIRS if root.exists(f"{d}/available_tracers")]
    kprobe_files = [f"{d}/kprobe_events" for d in TRACING_DIRS if root.exists(f"{d}/kprobe_events")]
    source_k = " or ".join(f"{d}/kprobe_events" for d in TRACING_DIRS)
    if kprobe_files:
        kprobes = Fact(True, kprobe_files[0])
    elif mounts:
        kprobes = Fact(False, source_k, "tracefs is mounted but has no kprobe_events: kernel without CONFIG_KPROBE_EVENTS")
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


def _privileges(live: dict, tag: str, missing: str | None) -> Fact:
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


def _virtualization(root: SysRoot, decoded: dict | None, flags: list[str] | None, tag: str) -> Fact:
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


def _governor(root: SysRoot, cpus: list[int]) -> Fact:
    base = f"{CPU_DIR}/cpufreq"
    policies = [p for p in root.listdir(base) if re.fullmatch(r"policy\d+", p)]
    governors: dict[str, list[int]] = {}
    drivers: set[str] = set()
    if policies:
        source = f"{base}/policyN/{{scaling_governor,scaling_driver,affected_cpus}}"
        for p in sorted(policies, key=lambda p: int(p[6:])):
            gov = root.read(f"{base}/{p}/scaling_governor")
            drv = root.read(f"{base}/{p}/scaling_driver")
            text = root.read(f"{base}/{p}/affected_cpus")
            try:
                members = [int(x) for x in text.split()] if text else [int(p[6:])]
            except ValueError:
                members = [int(p[6:])]
            if gov:
                governors.setdefault(gov, []).extend(members)
            if drv:
                drivers.add(drv)
    else:
        source = f"{CPU_DIR}/cpuN/cpufreq/{{scaling_governor,scaling_driver}}"
        for cpu in cpus:
            gov = root.read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor")
            drv = root.read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_driver")
            if gov:
                governors.setdefault(gov, []).append(cpu)
            if drv:
                drivers.add(drv)
    if not governors:
        return Fact(None, source, "no cpufreq: frequency is managed by the hypervisor or firmware")
    value = {
        "governors": {g: sorted(set(c)) for g, c in sorted(governors.items())},
        "driver": ",".join(sorted(drivers)) or None,
    }
    return Fact(value, source, "mixed governors" if len(governors) > 1 else None)


def _turbo(root: SysRoot) -> Fact:
    no_turbo = root.read_int(f"{CPU_DIR}/intel_pstate/no_turbo")
    if no_turbo is not None:
        return Fact(no_turbo == 0, f"{CPU_DIR}/intel_pstate/no_turbo", f"no_turbo={no_turbo} (inverted)")
    for path in (f"{CPU_DIR}/cpufreq/boost", f"{CPU_DIR}/cpufreq/policy0/boost"):
        boost = root.read_int(path)
        if boost is not None:
            return Fact(boost == 1, path)
    return Fact(None, f"{CPU_DIR}/intel_pstate/no_turbo or {CPU_DIR}/cpufreq/boost",
                "neither file exists: turbo is decided by the hypervisor or firmware")
