"""The machine probe, on fixture trees of three real machines and on this one."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from perflab import system
from perflab.errors import PerflabError
from perflab.probe import FACT_NAMES, Fact, Machine, probe
from perflab.probe.kernel import bpf
from perflab.sysfs import SysRoot

MACHINES = Path(__file__).parent / "fixtures" / "machines"
R = lambda a, b: list(range(a, b))  # noqa: E731


def machine(name: str) -> Machine:
    return probe(SysRoot(MACHINES / name))


def copy_fixture(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(MACHINES / name, dest, symlinks=True)  # sysfs's links loop, as in the kernel
    return dest


def edit_live(root: Path, change) -> None:
    path = root / "perflab-live.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


EXPECT = {
    "kvm-2vcpu": dict(
        online=[0, 1], packages=1, cores=2, tpc=1,
        smt=[[0], [1]], llc=[[0, 1]], pkgs=[[0, 1]],
        nodes=[{"node": 0, "cpus": [0, 1], "distances": [10]}],
        inclusive=False, la57={"cpuid": True, "cpuinfo": False}, paging=4,
        hypervisor=True, virt="KVM", hw_pmu=False, vendor="GenuineIntel", llc_kib=266240,
    ),
    "intel-2s-smt": dict(
        online=R(0, 64), packages=2, cores=32, tpc=2,
        smt=[[c, c + 32] for c in range(32)], llc=[R(0, 16) + R(32, 48), R(16, 32) + R(48, 64)],
        pkgs=[R(0, 16) + R(32, 48), R(16, 32) + R(48, 64)],
        nodes=[{"node": 0, "cpus": R(0, 16) + R(32, 48), "distances": [10, 21]},
               {"node": 1, "cpus": R(16, 32) + R(48, 64), "distances": [21, 10]}],
        inclusive=False, la57={"cpuid": False, "cpuinfo": False}, paging=4,
        hypervisor=False, virt="bare metal", hw_pmu=True, vendor="GenuineIntel", llc_kib=22528,
    ),
    "amd-chiplet": dict(
        online=R(0, 32), packages=1, cores=16, tpc=2,
        smt=[[c, c + 16] for c in range(16)], llc=[R(0, 8) + R(16, 24), R(8, 16) + R(24, 32)],
        pkgs=[R(0, 32)],
        nodes=[{"node": 0, "cpus": R(0, 32), "distances": [10]}],
        inclusive=False, la57={"cpuid": False, "cpuinfo": False}, paging=4,
        hypervisor=False, virt="bare metal", hw_pmu=True, vendor="AuthenticAMD", llc_kib=32768,
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_fixture_machine(name):
    m, e = machine(name), EXPECT[name]
    assert list(m.facts) == FACT_NAMES
    assert m.online_cpus == e["online"]
    assert (m.value("packages"), m.value("cores"), m.value("threads_per_core")) == (e["packages"], e["cores"], e["tpc"])
    assert m.smt_sibling_groups() == e["smt"]
    assert m.llc_groups() == e["llc"]
    assert m.package_groups() == e["pkgs"]
    assert m.value("numa_nodes") == e["nodes"]
    assert m.value("llc_inclusive") is e["inclusive"]
    assert m.value("la57_cpu") == e["la57"]
    assert m.value("paging_levels") == e["paging"]
    assert m.value("virtualization")["hypervisor"] is e["hypervisor"]
    assert m.value("hw_pmu") is e["hw_pmu"]
    assert m.value("vendor") == e["vendor"]
    s = m.summary()
    assert (s["virtualization"], s["llc_size_kib"], s["numa_nodes"]) == (e["virt"], e["llc_kib"], len(e["nodes"]))
    for fact in m.facts.values():  # unknown always says why
        assert fact.source
        if fact.value is None:
            assert fact.note


def test_llc_groups_of_the_5950x_are_its_two_ccds():
    m = machine("amd-chiplet")
    groups = m.llc_groups()
    assert len(groups) == 2 and all(len(g) == 16 for g in groups)
    assert m.cpu(3)["smt_siblings"] == [3, 19]
    l3 = [c for c in m.caches_of(19) if c["level"] == 3]
    assert l3 == [
        {"level": 3, "type": "Unified", "size_kib": 32768, "cpus": R(0, 8) + R(16, 24), "ways": 16, "line_size": 64}
    ]
    assert 8 not in l3[0]["cpus"]  # CPU 8 is on the other CCD


def test_xeon_per_cpu_view():
    m = machine("intel-2s-smt")
    assert m.cpu(5) == {"package": 0, "die": 0, "core": 8, "smt_siblings": [5, 37], "node": 0}
    assert m.cpu(52)["package"] == 1 and m.cpu(52)["node"] == 1 and m.cpu(52)["smt_siblings"] == [20, 52]
    assert [(c["level"], c["type"], c["size_kib"]) for c in m.caches_of(40)] == [
        (1, "Data", 32), (1, "Instruction", 32), (2, "Unified", 1024), (3, "Unified", 22528)]
    caches = m.value("caches")
    assert sum(c["level"] == 1 and c["type"] == "Data" for c in caches) == 32  # one per core, not per CPU
    assert sum(c["level"] == 3 for c in caches) == 2
    with pytest.raises(PerflabError, match="not online"):
        m.cpu(64)


def test_sources_name_the_file_or_register():
    m = machine("intel-2s-smt")
    assert m.facts["online_cpus"].source == "/sys/devices/system/cpu/online"
    assert m.facts["llc_inclusive"].source.startswith("CPUID leaf 0x4 subleaf 3 EDX bit 1")
    assert machine("amd-chiplet").facts["llc_inclusive"].source.startswith("CPUID leaf 0x8000001d subleaf 3 EDX bit 1")
    assert "perflab-live.json" in m.facts["hw_pmu"].source
    assert m.facts["kernel"].source == "/proc/sys/kernel/osrelease"


def test_environment_facts():
    intel, amd, kvm = machine("intel-2s-smt"), machine("amd-chiplet"), machine("kvm-2vcpu")
    assert intel.value("governor") == {"governors": {"performance": R(0, 64)}, "driver": "intel_pstate"}
    assert amd.value("governor") == {"governors": {"schedutil": R(0, 32)}, "driver": "acpi-cpufreq"}
    assert kvm.value("governor") is None
    assert kvm.facts["governor"].note == "no cpufreq: frequency is managed by the hypervisor or firmware"
    assert intel.value("turbo") is True and intel.facts["turbo"].source.endswith("intel_pstate/no_turbo")
    assert amd.value("turbo") is True and amd.facts["turbo"].source.endswith("cpufreq/boost")
    assert kvm.value("turbo") is None
    assert intel.value("nohz_full") == []  # the file says "(null)"
    assert kvm.value("nohz_full") is None and "NO_HZ_FULL" in kvm.facts["nohz_full"].note
    assert intel.value("isolcpus") == [] and kvm.value("isolcpus") == []
    assert intel.value("kernel") == "4.18.0-513.24.1.el8_9.x86_64"
    assert intel.value("perf_event_paranoid") == 2


def test_tracing_facts():
    intel, amd, kvm = machine("intel-2s-smt"), machine("amd-chiplet"), machine("kvm-2vcpu")
    assert intel.value("kprobes") is True
    assert intel.facts["kprobes"].source == "/sys/kernel/debug/tracing/kprobe_events"
    assert amd.facts["kprobes"].source == "/sys/kernel/tracing/kprobe_events"
    assert "function_graph" in intel.value("ftrace_tracers") and "osnoise" in amd.value("ftrace_tracers")
    assert kvm.value("kprobes") is False and "not mounted" in kvm.facts["kprobes"].note
    assert kvm.value("ftrace_tracers") == [] and "not mounted" in kvm.facts["ftrace_tracers"].note


def test_bpf_facts_say_which_tools_work_without_tracefs(tmp_path):
    """This course's KVM guests: BTF, uprobes and the tools, but no kprobes and no kernel headers."""
    for path in ("sys/kernel/btf/vmlinux", "sys/bus/event_source/devices/uprobe/type", "usr/bin/bpftrace",
                 "usr/sbin/softirqs"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    fact = bpf(SysRoot(tmp_path), "6.18.44")
    assert fact.value == {"btf": True, "uprobes": True, "kprobes": False, "kernel_headers": False, "bpftrace": True,
                          "libbpf_tools": True, "bcc": False}
    assert fact.note.startswith("works: libbpf-tools on tracepoints (softirqs, hardirqs, runqlat), bpftrace on uprobes")
    assert "no kprobes" in fact.note and "bcc's Python tools cannot compile" in fact.note
    (tmp_path / "lib/modules/6.18.44/build").mkdir(parents=True)
    (tmp_path / "sys/bus/event_source/devices/kprobe").mkdir()
    fact = bpf(SysRoot(tmp_path), "6.18.44")
    assert fact.value["kernel_headers"] and fact.value["kprobes"] and "cannot" not in fact.note
    assert machine("kvm-2vcpu").facts["bpf"].note == ("no BPF tool of the course can run here; no kprobes: nothing "
                                                     "attaches to a kernel function (funccount, funclatency on the "
                                                     "kernel); no kernel headers: bcc's Python tools cannot compile "
                                                     "their programs; no BTF: libbpf-tools cannot run")


@pytest.mark.skipif(os.geteuid() != 0, reason="showing tracefs to a user who may not look in it needs root")
def test_a_tracefs_only_root_may_look_in_is_a_fact_for_a_learner_not_a_crash(tmp_path):
    """A mounted tracefs is mode 0700: a learner's probe crashed on PermissionError in a workshop."""
    import subprocess
    import sys
    import tempfile

    from conftest import REPO

    tree = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are 0700: nobody could reach it
    try:
        tree.chmod(0o755)
        (tree / "sys" / "kernel" / "tracing").mkdir(parents=True, mode=0o700)
        (tree / "sys" / "kernel" / "tracing" / "available_tracers").write_text("osnoise nop\n")
        seen = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                               f"from perflab.probe.kernel import tracing; from perflab.sysfs import SysRoot\n"
                               f"print([fact.note for fact in tracing(SysRoot({str(tree)!r}))])"],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.count("tracefs is mounted, but only root may look in it") == 2, seen.stdout
    finally:
        shutil.rmtree(tree)


def test_privileges_and_virtualization():
    kvm, amd = machine("kvm-2vcpu"), machine("amd-chiplet")
    assert kvm.value("privileges") == {"euid": 0, "root": True, "cap_sys_admin": True, "cap_perfmon": True}
    assert amd.value("privileges") == {"euid": 1000, "root": False, "cap_sys_admin": False, "cap_perfmon": False}
    virt = kvm.value("virtualization")
    assert (virt["vendor"], virt["cpuid_signature"]) == ("KVM", "KVMKVMKVM")
    assert virt["dmi_sys_vendor"] is None
    assert machine("intel-2s-smt").value("virtualization")["dmi_product_name"] == "PowerEdge R640"
    assert "as the hypervisor reports it" in kvm.facts["llc_inclusive"].note


def test_capabilities_are_read_bit_by_bit(tmp_path):
    root = copy_fixture("amd-chiplet", tmp_path)
    edit_live(root, lambda d: d.update(cap_eff=f"{1 << 38:016x}"))  # CAP_PERFMON only
    assert probe(SysRoot(root)).value("privileges") == {
        "euid": 1000, "root": False, "cap_sys_admin": False, "cap_perfmon": True}


def test_kvm_la57_is_explained():
    kvm = machine("kvm-2vcpu")
    assert "hides the la57 flag" in kvm.facts["la57_cpu"].note
    assert machine("intel-2s-smt").facts["la57_cpu"].note is None


def test_hw_pmu_note_says_why():
    kvm = machine("kvm-2vcpu")
    assert kvm.value("hw_pmu") is False
    assert kvm.facts["hw_pmu"].note.startswith("ENOENT")
    assert machine("intel-2s-smt").facts["hw_pmu"].note == "hardware cycle counting works"


def test_hw_pmu_permission_denied_is_not_absence(tmp_path):
    root = copy_fixture("amd-chiplet", tmp_path)
    edit_live(root, lambda d: d.update(perf_cycles={"ok": False, "errno": 13, "error": "EACCES: Permission denied"}))
    fact = probe(SysRoot(root)).facts["hw_pmu"]
    assert fact.value is False and "the PMU may exist" in fact.note


@pytest.mark.parametrize("kb, levels", [(34359738367, 4), (13743895347199, 5)])
def test_paging_levels_from_vmalloc_size(tmp_path, kb, levels):
    root = copy_fixture("intel-2s-smt", tmp_path)
    meminfo = root / "proc" / "meminfo"
    meminfo.write_text(meminfo.read_text().replace("34359738367", str(kb)))
    assert probe(SysRoot(root)).value("paging_levels") == levels


def test_tcg_guest_has_no_cache_leaves(tmp_path):
    root = copy_fixture("kvm-2vcpu", tmp_path)

    def tcg(data):
        leaves = [l for l in data["cpuid"]["leaves"] if l["leaf"] != 4]
        leaves.append({"leaf": 4, "subleaf": 0, "eax": 0, "ebx": 0, "ecx": 0, "edx": 0})
        for l in leaves:
            if l["leaf"] == 0x40000000:
                l.update(ebx=0x54474354, ecx=0x43544743, edx=0x47435447)  # "TCGTCGTCGTCG"
        data["cpuid"]["leaves"] = leaves

    edit_live(root, tcg)
    m = probe(SysRoot(root))
    assert m.value("llc_inclusive") is None
    assert m.facts["llc_inclusive"].note.startswith("TCG guest: CPUID reports no caches")
    assert m.value("virtualization")["vendor"] == "TCG (QEMU emulation)"
    assert m.value("caches") is not None  # sysfs still lists the caches the kernel was told about
    assert "no caches" in m.facts["caches"].note, "the sizes must be flagged as QEMU's, not hardware's"
    assert "emulates no PMU" in m.facts["hw_pmu"].note


def test_tcg_guest_with_made_up_cache_leaves_is_not_believed(tmp_path):
    root = copy_fixture("kvm-2vcpu", tmp_path)

    def tcg(data):
        for leaf in data["cpuid"]["leaves"]:
            if leaf["leaf"] == 0x40000000:
                leaf.update(ebx=0x54474354, ecx=0x43544743, edx=0x47435447)  # "TCGTCGTCGTCG"

    edit_live(root, tcg)
    m = probe(SysRoot(root))
    assert m.value("llc_inclusive") is None
    assert "QEMU's CPUID table says inclusive=" in m.facts["llc_inclusive"].note


def test_governor_turbo_and_isolation_changes(tmp_path):
    root = copy_fixture("intel-2s-smt", tmp_path)
    cpu = root / "sys/devices/system/cpu"
    (cpu / "intel_pstate/no_turbo").write_text("1\n")
    (cpu / "cpufreq/policy3/scaling_governor").write_text("powersave\n")
    (cpu / "isolated").write_text("8-15,40-47\n")
    m = probe(SysRoot(root))
    assert m.value("turbo") is False
    assert m.value("governor")["governors"]["powersave"] == [3]
    assert m.facts["governor"].note == "mixed governors"
    assert m.value("isolcpus") == R(8, 16) + R(40, 48)
    assert m.summary()["isolcpus"] == "8-15,40-47"
    assert m.summary()["governor"] == "performance,powersave"


def test_missing_files_give_notes_not_crashes(tmp_path):
    root = copy_fixture("kvm-2vcpu", tmp_path)
    for rel in ("proc/cpuinfo", "proc/meminfo", "perflab-live.json", "sys/devices/system/node",
                "sys/devices/system/cpu/cpu1/cache", "sys/devices/system/cpu/cpu1/topology/core_id"):
        path = root / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    m = probe(SysRoot(root))
    assert m.online_cpus == [0, 1]
    for name in ("cpu_model", "numa_nodes", "paging_levels", "hw_pmu", "privileges", "llc_inclusive"):
        assert m.value(name) is None, name
    assert "/proc/cpuinfo" in m.facts["cpu_model"].note
    assert "perflab-live.json is missing" in m.facts["hw_pmu"].note
    assert "VmallocTotal" in m.facts["paging_levels"].note
    assert "cpu1: core" in m.facts["topology"].note and m.cpu(1)["core"] is None
    assert m.value("cores") == 2  # counted from the SMT sibling lists, which are still there
    assert m.facts["la57_cpu"].value == {"cpuid": None, "cpuinfo": None}
    assert [c["cpus"] for c in m.value("caches")] == [[0], [0], [0], [0, 1]]  # cpu0's view survives
    assert m.value("virtualization")["hypervisor"] is None
    json.dumps(m.to_json())


def test_online_file_missing_falls_back_to_cpu_dirs(tmp_path):
    root = copy_fixture("amd-chiplet", tmp_path)
    (root / "sys/devices/system/cpu/online").unlink()
    m = probe(SysRoot(root))
    assert m.value("online_cpus") is None and "online" in m.facts["online_cpus"].note
    assert m.value("cores") == 16 and len(m.llc_groups()) == 2


def test_empty_tree_probes(tmp_path):
    m = probe(SysRoot(tmp_path))
    assert list(m.facts) == FACT_NAMES
    for name, fact in m.facts.items():
        if fact.value is None:
            assert fact.note, name
    assert m.online_cpus == [] and m.llc_groups() == [] and m.smt_sibling_groups() == []
    assert m.summary()["online_cpus"] == ""
    assert "unknown" in m.render()


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_json_round_trip(name):
    m = machine(name)
    data = json.loads(json.dumps(m.to_json()))
    assert data["schema"] == 1
    again = Machine.from_json(data)
    assert again.facts == m.facts
    assert again.summary() == m.summary() and again.llc_groups() == m.llc_groups()


def test_from_json_refuses_other_schemas():
    with pytest.raises(PerflabError, match="schema"):
        Machine.from_json({"schema": 99, "facts": {}})


def test_render_is_an_aligned_table():
    m = machine("intel-2s-smt")
    text = m.render()
    lines = text.splitlines()
    assert lines[0].split() == ["fact", "value", "source"]
    value_col = lines[0].index("value")
    source_col = lines[0].index("source")
    for name in FACT_NAMES:
        row = next(l for l in lines if l.startswith(name + " "))
        assert row[value_col - 1] == " " and row[value_col] != " "
        assert row[source_col:] == m.facts[name].source
    assert "L3 Unified 22 MiB x2, each for 32 CPU(s)" in text
    assert "note: bare metal" in text


def test_fact_and_value_default():
    m = Machine({"turbo": Fact(None, "x", "why")})
    assert m.value("turbo", "dflt") == "dflt" and m.value("absent") is None


def load_make_machines():
    spec = importlib.util.spec_from_file_location("make_machines", MACHINES.parent / "make_machines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_synthetic_fixtures_are_what_the_script_writes(tmp_path, monkeypatch):
    make = load_make_machines()
    monkeypatch.setattr(make, "MACHINES", tmp_path)
    make.synth()
    for name in ("intel-2s-smt", "amd-chiplet"):
        assert tree(tmp_path / name) == tree(MACHINES / name), f"{name}: rerun make_machines.py synth"


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_fixtures_hold_only_files_the_probe_and_the_knobs_read(name):
    root = MACHINES / name
    used: set[str] = set()

    class Recording(SysRoot):
        def read(self, path):
            text = super().read(path)
            if text is not None:
                used.add(path.lstrip("/"))
            return text

        def exists(self, path):
            found = super().exists(path)
            if found:
                used.add(path.lstrip("/"))
            return found

        def listdir(self, path):
            entries = super().listdir(path)
            used.update(f"{path.lstrip('/')}/{entry}" for entry in entries)
            return entries

    probe(Recording(root))
    system.show(Recording(root))
    assert {str(p.resolve().relative_to(root.resolve())) for p in map(root.joinpath, tree(root))} - \
        {str(root.joinpath(u).resolve().relative_to(root.resolve())) for u in used} == set()


# -- this machine ----------------------------------------------------------


def test_live_probe(monkeypatch):
    monkeypatch.delenv("PERFLAB_SYSROOT", raising=False)
    m = probe(None)
    assert m.online_cpus, m.facts["online_cpus"].note
    assert set(os.sched_getaffinity(0)) <= set(m.online_cpus)
    assert m.value("kernel") == os.uname().release
    assert isinstance(m.value("hw_pmu"), bool)
    assert m.value("privileges")["euid"] == os.geteuid()
    assert sorted(c for g in m.smt_sibling_groups() for c in g) == m.online_cpus
    data = json.loads(json.dumps(m.to_json()))
    assert Machine.from_json(data).to_json() == m.to_json()
    assert all(name in m.render() for name in FACT_NAMES)
