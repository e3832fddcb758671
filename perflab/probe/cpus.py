"""The CPUs from sysfs: which are online, their topology, caches, NUMA nodes and isolation."""

from __future__ import annotations

import re

from ..cpulist import parse_cpulist
from ..errors import PerflabError
from ..sysfs import CPU_DIR, SysRoot, default_root
from .facts import Fact

NODE_DIR = "/sys/devices/system/node"


def cpulist(root: SysRoot, path: str) -> tuple[list[int] | None, str | None]:
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


def online(root: SysRoot) -> Fact:
    cpus, why = cpulist(root, f"{CPU_DIR}/online")
    return Fact(cpus, f"{CPU_DIR}/online", why)


def online_cpus(root: SysRoot | None = None) -> list[int] | None:
    """The online CPUs alone, without the whole probe (None if unreadable): to refuse a CPU list at once."""
    return cpulist(root or default_root(), f"{CPU_DIR}/online")[0]


def _size_kib(text: str | None) -> int | None:
    """"48K" -> 48, "1M" -> 1024 (sysfs cache sizes)."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*([KMG]?)B?", text.strip(), re.I)
    if not m:
        return None
    return int(m.group(1)) * {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2).upper()]


def cpu_dirs(root: SysRoot) -> list[int]:
    return sorted(int(d[3:]) for d in root.listdir(CPU_DIR) if re.fullmatch(r"cpu\d+", d))


def topology(root: SysRoot, cpus: list[int], node_of: dict[int, int]) -> tuple[Fact, dict[str, Fact]]:
    source = f"{CPU_DIR}/cpuN/topology/{{physical_package_id,die_id,core_id,thread_siblings_list}}"
    topo: dict[str, dict] = {}
    gaps: list[str] = []
    for cpu in cpus:
        base = f"{CPU_DIR}/cpu{cpu}/topology"
        siblings, _ = cpulist(root, f"{base}/thread_siblings_list")
        if siblings is None:
            siblings, _ = cpulist(root, f"{base}/core_cpus_list")
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


def caches(root: SysRoot, cpus: list[int]) -> Fact:
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
            shared, _ = cpulist(root, f"{d}/shared_cpu_list")
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


def numa(root: SysRoot) -> tuple[Fact, dict[int, int]]:
    source = f"{NODE_DIR}/online, nodeN/cpulist, nodeN/distance"
    ids, why = cpulist(root, f"{NODE_DIR}/online")  # node lists use the same syntax
    if ids is None:
        ids = sorted(int(d[4:]) for d in root.listdir(NODE_DIR) if re.fullmatch(r"node\d+", d))
    if not ids:
        return Fact(None, source, f"no NUMA information ({NODE_DIR} missing: kernel without CONFIG_NUMA?)"), {}
    nodes, node_of, gaps = [], {}, []
    for n in ids:
        cpus, _ = cpulist(root, f"{NODE_DIR}/node{n}/cpulist")
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


def isolation(root: SysRoot) -> dict[str, Fact]:
    """The isolcpus and nohz_full facts: CPUs the scheduler or the timer tick leave alone."""
    isol, why = cpulist(root, f"{CPU_DIR}/isolated")
    nohz, why_nohz = cpulist(root, f"{CPU_DIR}/nohz_full")
    if nohz is None and not root.exists(f"{CPU_DIR}/nohz_full"):
        why_nohz = "no nohz_full file: the kernel was built without CONFIG_NO_HZ_FULL"
    return {
        "isolcpus": Fact(isol, f"{CPU_DIR}/isolated", why),
        "nohz_full": Fact(nohz, f"{CPU_DIR}/nohz_full", why_nohz),
    }
