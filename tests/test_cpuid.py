"""CPUID decoding on recorded registers, and the helper on this machine."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest

from perflab import cpuid
from perflab.errors import PerflabError

MACHINES = Path(__file__).parent / "fixtures" / "machines"


def recorded(name: str) -> dict:
    return json.loads((MACHINES / name / "perflab-live.json").read_text())["cpuid"]


def leaf(l, s, a, b, c, d):
    return {"leaf": l, "subleaf": s, "eax": a, "ebx": b, "ecx": c, "edx": d}


# Xeon E5-2667 v3 (Haswell-EP, family 6 model 0x3F): 8 cores, 20 MiB 20-way L3 that
# IS inclusive of L1/L2 (leaf 4 subleaf 3 EDX = 0x6: bit 1 inclusive, bit 2 complex indexing).
HASWELL_EP = {"leaves": [
    leaf(0x0, 0, 0x0000000F, 0x756E6547, 0x6C65746E, 0x49656E69),
    leaf(0x1, 0, 0x000306F2, 0x00200800, 0x7FFEFBFF, 0xBFEBFBFF),
    leaf(0x4, 0, 0x3C004121, 0x01C0003F, 0x0000003F, 0x00000000),
    leaf(0x4, 1, 0x3C004122, 0x01C0003F, 0x0000003F, 0x00000000),
    leaf(0x4, 2, 0x3C004143, 0x01C0003F, 0x000001FF, 0x00000000),
    leaf(0x4, 3, 0x3C07C163, 0x04C0003F, 0x00003FFF, 0x00000006),
    leaf(0x4, 4, 0x00000000, 0x00000000, 0x00000000, 0x00000000),
    leaf(0x7, 0, 0x00000000, 0x000037AB, 0x00000000, 0x00000000),
    leaf(0x80000000, 0, 0x80000008, 0, 0, 0),
    leaf(0x80000001, 0, 0x00000000, 0x00000000, 0x00000021, 0x2C100800),
]}


def by_level(decoded: dict) -> dict:
    return {(c["level"], c["type"]): c for c in decoded["caches"]}


def test_haswell_ep_l3_is_inclusive():
    d = cpuid.decode(HASWELL_EP)
    assert (d["vendor"], d["family"], d["model"], d["stepping"]) == ("GenuineIntel", 6, 0x3F, 2)
    caches = by_level(d)
    assert [c["size_kib"] for c in d["caches"]] == [32, 32, 256, 20 * 1024]
    l3 = caches[(3, "Unified")]
    assert (l3["ways"], l3["sets"], l3["line_size"], l3["partitions"]) == (20, 16384, 64, 1)
    assert l3["inclusive"] is True and l3["complex_indexing"] is True
    assert caches[(2, "Unified")]["inclusive"] is False
    assert d["llc_inclusive"] is True
    assert d["hypervisor"] is False and d["hypervisor_vendor"] is None
    assert d["la57"] is False


def test_cascade_lake_sp_l3_is_not_inclusive():
    d = cpuid.decode(recorded("intel-2s-smt"))
    assert (d["family"], d["model"], d["stepping"]) == (6, 0x55, 7)
    assert d["cache_leaf"] == 0x4
    l3 = by_level(d)[(3, "Unified")]
    assert l3["size"] == 22 * 1024 * 1024
    assert l3["inclusive"] is False and l3["complex_indexing"] is True
    assert l3["shared_by"] == 64  # an upper bound on APIC ids, not the 32 CPUs that really share it
    assert by_level(d)[(1, "Data")]["shared_by"] == 2
    assert d["llc_inclusive"] is False


def test_zen3_uses_leaf_8000001d_and_l3_is_a_victim_cache():
    d = cpuid.decode(recorded("amd-chiplet"))
    assert (d["vendor"], d["family"], d["model"]) == ("AuthenticAMD", 0x19, 0x21)
    assert d["cache_leaf"] == 0x8000001D
    caches = by_level(d)
    assert caches[(3, "Unified")]["size_kib"] == 32 * 1024
    assert caches[(3, "Unified")]["shared_by"] == 16  # one CCX: 8 cores x 2 threads
    assert caches[(2, "Unified")]["size_kib"] == 512
    assert caches[(2, "Unified")]["inclusive"] is True  # Zen's L2 holds everything in L1 ...
    assert d["llc_inclusive"] is False  # ... but the L3 does not


def test_kvm_guest_capture():
    d = cpuid.decode(recorded("kvm-2vcpu"))
    assert (d["family"], d["model"]) == (6, 207)
    assert d["hypervisor"] is True
    assert d["hypervisor_signature"] == "KVMKVMKVM" and d["hypervisor_vendor"] == "KVM"
    assert d["la57"] is True  # the CPU has it; the guest kernel does not use it
    assert d["llc"]["level"] == 3


@pytest.mark.parametrize(
    "signature, name",
    [("KVMKVMKVM", "KVM"), ("TCGTCGTCGTCG", "TCG (QEMU emulation)"), ("Microsoft Hv", "Hyper-V"),
     ("VMwareVMware", "VMware"), ("XenVMMXenVMM", "Xen"), ("NewHypervisr", "NewHypervisr")],
)
def test_hypervisor_signatures(signature, name):
    b = signature.encode().ljust(12, b"\0")
    regs = [int.from_bytes(b[i:i + 4], "little") for i in (0, 4, 8)]
    raw = {"leaves": [
        leaf(0, 0, 0xD, 0x756E6547, 0x6C65746E, 0x49656E69),
        leaf(1, 0, 0x000306F2, 0, 1 << 31, 0),
        leaf(0x40000000, 0, 0x40000001, *regs),
    ]}
    d = cpuid.decode(raw)
    assert d["hypervisor_signature"] == signature
    assert d["hypervisor_vendor"] == name


def test_tcg_guest_without_cache_leaves():
    raw = {"leaves": [
        leaf(0, 0, 0xD, 0x68747541, 0x444D4163, 0x69746E65),
        leaf(1, 0, 0x00000663, 0, 1 << 31, 0),
        leaf(4, 0, 0, 0, 0, 0),
        leaf(0x40000000, 0, 0x40000001, 0x54474354, 0x43544743, 0x47435447),
    ]}
    d = cpuid.decode(raw)
    assert d["hypervisor_vendor"] == "TCG (QEMU emulation)"
    assert d["caches"] == [] and d["llc"] is None and d["llc_inclusive"] is None
    assert d["la57"] is None  # leaf 7 was not read


def test_family_and_model_extension_rules():
    # Extended family only counts for base family 0xF; extended model for 6 and 0xF.
    assert cpuid.decode({"leaves": [leaf(1, 0, 0x00A20F10, 0, 0, 0)]})["family"] == 0x19
    assert cpuid.decode({"leaves": [leaf(1, 0, 0x000806C1, 0, 0, 0)]})["model"] == 0x8C
    assert cpuid.decode({"leaves": [leaf(1, 0, 0x00F10510, 0, 0, 0)]})["family"] == 5  # ext. family ignored
    assert cpuid.decode({"leaves": [leaf(1, 0, 0x00F10510, 0, 0, 0)]})["model"] == 1  # ext. model ignored


def test_cache_type_zero_ends_the_list():
    assert cpuid.decode_cache_leaf(0, 0x01C0003F, 0x3F, 0) is None
    assert cpuid.decode_cache_leaf(0x121, 0x01C0003F, 0x3F, 0)["size_kib"] == 32


def test_helper_error_is_refused():
    with pytest.raises(PerflabError):
        cpuid.decode({"error": "not x86"})


def test_not_x86_gives_a_reason(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    raw, why = cpuid.read_cpuid_or_reason()
    assert raw is None and "not x86" in why
    assert cpuid.read_cpuid() is None


@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("cc") is None, reason="needs x86-64 and a C compiler")
def test_helper_on_this_machine():
    raw = cpuid.read_cpuid()
    assert raw is not None
    d = cpuid.decode(raw)
    info = Path("/proc/cpuinfo").read_text()
    assert f"vendor_id\t: {d['vendor']}" in info
    assert f"model\t\t: {d['model']}\n" in info
    assert d["hypervisor"] == (" hypervisor " in info.split("flags", 1)[1].split("\n", 1)[0] + " ")
    leaves = {(e["leaf"], e["subleaf"]) for e in raw["leaves"]}
    assert ((0x40000000, 0) in leaves) == d["hypervisor"]
    assert raw["cpu"] in __import__("os").sched_getaffinity(0)
