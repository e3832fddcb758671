"""Decode raw CPUID registers: vendor, family/model, hypervisor, la57, and the caches.

The C helper `perflab/native/cpuid.c` only executes CPUID and prints the raw
registers as JSON; everything here is pure decoding of those numbers, so it is
tested on recorded register values from machines we do not have.

Raw format (what the helper prints and what fixtures store):
    {"leaves": [{"leaf": 4, "subleaf": 3, "eax": ..., "ebx": ..., "ecx": ..., "edx": ...}, ...]}
read_cpuid() adds "cpu": the CPU the helper was pinned to.

The one thing only CPUID can tell us is whether a cache is *inclusive* of the
levels below it: EDX bit 1 of the deterministic cache parameters leaf
(leaf 4 on Intel, leaf 0x8000001D on AMD). Linux does not export it.
"""

from __future__ import annotations

import json
import os
import platform
from typing import Any

from . import processes
from .errors import PerflabError

LEAF_CACHE_INTEL = 0x4
LEAF_CACHE_AMD = 0x8000001D
LEAF_HYPERVISOR = 0x40000000

CACHE_TYPES = {1: "Data", 2: "Instruction", 3: "Unified"}

# Hypervisor vendor signatures (leaf 0x40000000 EBX, ECX, EDX) and what to call them.
HYPERVISORS = {
    "KVMKVMKVM": "KVM",
    "TCGTCGTCGTCG": "TCG (QEMU emulation)",
    "Microsoft Hv": "Hyper-V",
    "VMwareVMware": "VMware",
    "XenVMMXenVMM": "Xen",
    "VBoxVBoxVBox": "VirtualBox",
    "bhyve bhyve": "bhyve",
    "ACRNACRNACRN": "ACRN",
    "lrpepyh  vr": "Parallels",
}


def _bits(value: int, high: int, low: int) -> int:
    return (value >> low) & ((1 << (high - low + 1)) - 1)


def _text(*registers: int) -> str:
    """Registers holding ASCII, little-endian, in the order given; trailing NULs dropped."""
    return b"".join(r.to_bytes(4, "little") for r in registers).rstrip(b"\0").decode("ascii", "replace")


def regs(raw: dict, leaf: int, subleaf: int = 0) -> dict | None:
    """The {"eax","ebx","ecx","edx"} of one leaf/subleaf in a raw dump, or None if it was not read."""
    for entry in raw.get("leaves", []):
        if entry["leaf"] == leaf and entry["subleaf"] == subleaf:
            return entry
    return None


def hypervisor_name(signature: str | None) -> str | None:
    """"KVMKVMKVM" -> "KVM"; unknown signatures are returned as they are."""
    if signature is None:
        return None
    return HYPERVISORS.get(signature.strip(), signature.strip())


def decode_cache_leaf(eax: int, ebx: int, ecx: int, edx: int) -> dict | None:
    """One subleaf of leaf 4 / 0x8000001D; None for cache type 0 ("no more caches").

    size = ways * partitions * line size * sets (each field is stored minus one).
    """
    kind = _bits(eax, 4, 0)
    if kind == 0:
        return None
    ways = _bits(ebx, 31, 22) + 1
    partitions = _bits(ebx, 21, 12) + 1
    line = _bits(ebx, 11, 0) + 1
    sets = ecx + 1
    size = ways * partitions * line * sets
    return {
        "level": _bits(eax, 7, 5),
        "type": CACHE_TYPES.get(kind, f"type {kind}"),
        "ways": ways,
        "partitions": partitions,
        "line_size": line,
        "sets": sets,
        "size": size,
        "size_kib": size // 1024,
        "shared_by": _bits(eax, 25, 14) + 1,  # max logical CPU ids sharing it (an upper bound)
        "fully_associative": bool(eax & (1 << 9)),
        "inclusive": bool(edx & (1 << 1)),  # "cache is inclusive of lower cache levels"
        "complex_indexing": bool(edx & (1 << 2)),
    }


def _cache_leaf_for(vendor: str, raw: dict) -> int:
    if vendor in ("AuthenticAMD", "HygonGenuine") and regs(raw, LEAF_CACHE_AMD, 0) is not None:
        return LEAF_CACHE_AMD
    return LEAF_CACHE_INTEL


def decode(raw: dict) -> dict:
    """Decode a raw dump into plain facts (JSON-serialisable).

    Keys: vendor, max_basic_leaf, max_extended_leaf, family, model, stepping,
    hypervisor (leaf 1 ECX bit 31), hypervisor_signature, hypervisor_vendor,
    la57 (leaf 7 ECX bit 16; None if leaf 7 was not read), cache_leaf,
    caches (list of decode_cache_leaf dicts, in subleaf order), llc (the
    highest-level cache or None) and llc_inclusive (True/False/None).
    """
    if "error" in raw:
        raise PerflabError(f"CPUID helper reported: {raw['error']}")
    out: dict[str, Any] = {}
    r0 = regs(raw, 0)
    out["vendor"] = _text(r0["ebx"], r0["edx"], r0["ecx"]) if r0 else None
    out["max_basic_leaf"] = r0["eax"] if r0 else None

    r1 = regs(raw, 1)
    if r1:
        eax = r1["eax"]
        base_family, base_model = _bits(eax, 11, 8), _bits(eax, 7, 4)
        family = base_family + (_bits(eax, 27, 20) if base_family == 0xF else 0)
        model = base_model + (_bits(eax, 19, 16) << 4 if base_family in (0x6, 0xF) else 0)
        out.update(family=family, model=model, stepping=_bits(eax, 3, 0))
        out["hypervisor"] = bool(r1["ecx"] & (1 << 31))
    else:
        out.update(family=None, model=None, stepping=None, hypervisor=None)

    rh = regs(raw, LEAF_HYPERVISOR) if out["hypervisor"] else None
    out["hypervisor_signature"] = _text(rh["ebx"], rh["ecx"], rh["edx"]) if rh else None
    out["hypervisor_vendor"] = hypervisor_name(out["hypervisor_signature"])

    r7 = regs(raw, 7)
    out["la57"] = bool(r7["ecx"] & (1 << 16)) if r7 else None

    rx = regs(raw, 0x80000000)
    out["max_extended_leaf"] = rx["eax"] if rx else None

    leaf = _cache_leaf_for(out["vendor"] or "", raw)
    caches = []
    for subleaf in range(64):
        r = regs(raw, leaf, subleaf)
        if r is None:
            break
        cache = decode_cache_leaf(r["eax"], r["ebx"], r["ecx"], r["edx"])
        if cache is None:
            break
        cache["subleaf"] = subleaf
        caches.append(cache)
    out["cache_leaf"] = leaf
    out["caches"] = caches
    llc = max(caches, key=lambda c: c["level"]) if caches else None
    out["llc"] = llc
    out["llc_inclusive"] = llc["inclusive"] if llc else None
    return out


def read_cpuid_or_reason() -> tuple[dict | None, str | None]:
    """Run the helper: (raw dump, None) or (None, why it could not be read)."""
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64", "i686", "i386"):
        return None, f"not x86 ({machine}): CPUID does not exist here"
    from .build import ensure_built  # late import: decoding must not need a compiler

    try:
        binary = ensure_built("perflab/native", "cpuid")
    except PerflabError as exc:
        return None, f"CPUID helper not built: {exc}"
    # Leaf 1 EBX holds the APIC id of the CPU that ran the helper: pin it to the
    # first CPU we may use, so the same machine always gives the same dump.
    cpu = min(os.sched_getaffinity(0))
    done = processes.run([str(binary)], timeout=30, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    if done.returncode != 0:
        return None, f"{binary} exited with {done.returncode}: {done.stderr.strip()}"
    try:
        raw = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None, f"{binary} printed something that is not JSON"
    if "error" in raw:
        return None, f"CPUID helper: {raw['error']}"
    raw["cpu"] = cpu
    return raw, None


def read_cpuid() -> dict | None:
    """The raw CPUID dump of this machine, or None (not x86, or no compiler to build the helper).

    Use read_cpuid_or_reason() to learn why it is None.
    """
    return read_cpuid_or_reason()[0]
