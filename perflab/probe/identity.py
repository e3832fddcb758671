"""Which CPU and kernel this is: /proc/cpuinfo (the project's one reader of it), CPUID, the kernel's release."""

from __future__ import annotations

from .. import cpuid
from ..errors import PerflabError
from ..sysfs import SysRoot
from .facts import Fact


def cpuinfo(root: SysRoot) -> dict[str, str] | None:
    """The first processor block of /proc/cpuinfo, field by field; None when it cannot be read."""
    text = root.read("/proc/cpuinfo")
    if text is None:
        return None
    fields: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, sep, val = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), val.strip())
    return fields


def cpu_flags(info: dict[str, str] | None) -> list[str] | None:
    """The CPU's feature flags (`Features` on Arm); None without /proc/cpuinfo."""
    return info.get("flags", info.get("Features", "")).split() if info else None


def decoded_cpuid(live: dict) -> tuple[dict | None, str | None]:
    """(the live inputs' CPUID dump decoded, or None; why it is missing or unreadable)."""
    raw = live.get("cpuid")
    cpuid_note = live.get("cpuid_note") or live.get("missing")
    decoded = None
    if raw:
        try:
            decoded = cpuid.decode(raw)
        except (PerflabError, KeyError, TypeError) as exc:
            cpuid_note = f"CPUID dump unreadable: {exc}"
    elif not cpuid_note:
        cpuid_note = "no CPUID dump"
    return decoded, cpuid_note


def identity(root: SysRoot, info: dict[str, str] | None, decoded: dict | None, tag: str) -> dict[str, Fact]:
    """The cpu_model, vendor and kernel facts."""
    kernel = root.read("/proc/sys/kernel/osrelease")
    return {"cpu_model": _cpu_model(info), "vendor": _vendor(info, decoded, tag),
            "kernel": Fact(kernel, "/proc/sys/kernel/osrelease", None if kernel else "file missing or unreadable")}


def _cpu_model(info: dict[str, str] | None) -> Fact:
    if info is None:
        return Fact(None, "/proc/cpuinfo", "/proc/cpuinfo is missing or unreadable")
    model = info.get("model name") or info.get("Model") or info.get("cpu")
    signature = None
    if "cpu family" in info and "model" in info:
        m = int(info["model"]) if info["model"].isdigit() else None
        signature = f"family {info['cpu family']} model {info['model']}" + (f" ({m:#x})" if m is not None else "")
        signature += f" stepping {info.get('stepping', '?')}"
    return Fact(model, "/proc/cpuinfo model name", signature or (None if model else "no model name in /proc/cpuinfo"))


def _vendor(info: dict[str, str] | None, decoded: dict | None, tag: str) -> Fact:
    vendor = info.get("vendor_id") if info else None
    if vendor:
        note = None
        if decoded and decoded["vendor"] and decoded["vendor"] != vendor:
            note = f"CPUID leaf 0 says {decoded['vendor']}"
        return Fact(vendor, "/proc/cpuinfo vendor_id", note)
    if decoded and decoded["vendor"]:
        return Fact(decoded["vendor"], "CPUID leaf 0" + tag)
    return Fact(None, "/proc/cpuinfo vendor_id", "no vendor_id in /proc/cpuinfo and no CPUID")
