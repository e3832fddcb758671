"""Lab 10, memory-neighbour: sizes and CPUs from the probe, what watches the memory controller, the judgement and
the notes on known inputs, the exercises' references, the programs for real, and a real quick run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from perflab.build import ensure_built
from perflab.grading import FAILED, PASSED, Answers
from perflab.grading.kernel import FunctionAnswer
from perflab.grading.live import Watched
from perflab.labs import CannotShow
from perflab.labs.memory_neighbour import LAB, monitors, programs
from perflab.labs.memory_neighbour import exercises as checks
from perflab.labs.memory_neighbour.figures import figures
from perflab.labs.memory_neighbour.measure import ARMS, SOURCE_DIR, arm
from perflab.labs.memory_neighbour.report import rss_note
from perflab.labs.memory_neighbour.run import judge_stream, predict, working_sets
from perflab.labs.memory_neighbour.suspects import three_processes
from perflab.probe import Fact, Machine
from perflab.sequential import Race
from perflab.sysfs import SysRoot
from perflab.verdict import Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

GIB, MIB = 1 << 30, 1 << 20


def machine_of(cpus: int, smt: bool = False, llc_kib: int = 32768, l2_kib: int = 1024) -> Machine:
    """`cpus` CPUs on one node; with smt, CPU n and n + cpus/2 share a core, as Linux numbers them."""
    half = cpus // 2
    topology = {str(c): {"package": 0, "die": 0, "core": c % half if smt else c, "node": 0,
                         "smt_siblings": sorted({c % half, c % half + half}) if smt else [c]} for c in range(cpus)}
    caches = [{"level": 2, "type": "Unified", "size_kib": l2_kib, "cpus": [c]} for c in range(cpus)]
    caches.append({"level": 3, "type": "Unified", "size_kib": llc_kib, "cpus": list(range(cpus))})
    return Machine({"online_cpus": Fact(list(range(cpus)), "t"), "topology": Fact(topology, "t"),
                    "caches": Fact(caches, "t")})


# --- sizes and CPUs ---------------------------------------------------------------------------------------

def test_the_far_set_is_twice_the_llc_and_the_near_set_half_the_l2():
    assert working_sets(machine_of(2, llc_kib=480 << 10, l2_kib=2048), 1, 24 * GIB) == (960 * MIB, 1 * MIB)
    assert working_sets(machine_of(2, llc_kib=32 << 10), 1, 24 * GIB)[0] == 256 * MIB, "never less than 256 MiB"
    assert working_sets(machine_of(2, llc_kib=480 << 10), 1, 4 * GIB)[0] == 512 * MIB, "at most an eighth of RAM"
    assert working_sets(Machine({"caches": Fact([], "t")}), 0, 24 * GIB) == (GIB, 256 << 10), "no caches shown"


def test_the_neighbour_gets_another_core_and_the_victim_avoids_cpu_0():
    placement = LAB.choose_cpus(machine_of(8, smt=True), None)
    assert placement.victim_cpu == 7 and placement.neighbour_cpus == (0,)
    assert LAB.choose_cpus(machine_of(4, smt=True), None).neighbour_cpus == (0,), "CPU 1 is CPU 3's sibling"
    assert LAB.choose_cpus(machine_of(8), [3, 0, 1, 0]).neighbour_cpus == (0, 1), "-C: the victim, then neighbours"
    assert LAB.watched_cpus(LAB.choose_cpus(machine_of(8), [3, 0, 1])) == [3, 0, 1]
    with pytest.raises(CannotShow, match="two different CPUs"):
        LAB.choose_cpus(machine_of(8), [2, 2])
    with pytest.raises(CannotShow, match="one CPU"):
        LAB.choose_cpus(machine_of(1), None)


# --- what watches the memory controller -----------------------------------------------------------------

def write(root, path: str, text: str) -> None:
    file = root / path.lstrip("/")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_resctrl_bandwidth_is_read_from_the_default_groups_domains(tmp_path):
    write(tmp_path, "/sys/fs/resctrl/info/L3_MON/mon_features", "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n")
    write(tmp_path, "/sys/fs/resctrl/mon_data/mon_L3_00/mbm_total_bytes", "1000\n")
    write(tmp_path, "/sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "234\n")
    root = SysRoot(tmp_path)
    files = monitors.mbm_files(root)
    assert len(files) == 2 and monitors.read_mbm(files, root) == 1234
    write(tmp_path, "/sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "Unavailable\n")
    assert monitors.read_mbm(files, root) is None
    write(tmp_path, "/sys/fs/resctrl/info/L3_MON/mon_features", "llc_occupancy\n")
    assert monitors.mbm_files(root) == [], "cache monitoring alone counts no bandwidth"


def test_the_uncore_command_names_the_events_the_kernel_lists(tmp_path):
    for box in (0, 1):
        write(tmp_path, f"/sys/bus/event_source/devices/uncore_imc_{box}/events/cas_count_read", "event=0x04\n")
        write(tmp_path, f"/sys/bus/event_source/devices/uncore_imc_{box}/events/cas_count_write", "event=0x04\n")
    write(tmp_path, "/sys/bus/event_source/devices/uncore_imc_free_running_0/type", "20\n")
    write(tmp_path, "/sys/bus/event_source/devices/cpu/type", "4\n")
    found = monitors.monitors(SysRoot(tmp_path))
    assert found["uncore"] == {"uncore_imc": ["uncore_imc_0", "uncore_imc_1", "uncore_imc_free_running_0"]}
    assert "uncore_imc/cas_count_read/,uncore_imc/cas_count_write/" in found["text"]
    assert found["mbm_files"] == []
    nothing = monitors.monitors(SysRoot(tmp_path / "empty"))
    assert nothing["text"].startswith("nothing here watches the memory controller")


def test_rss_and_ram_are_read_from_proc(tmp_path):
    write(tmp_path, "/proc/42/status", "Name:\tneighbour\nVmPeak:\t 1050000 kB\nVmRSS:\t 1048576 kB\n")
    write(tmp_path, "/proc/meminfo", "MemTotal:       24683520 kB\nMemFree: 1 kB\n")
    root = SysRoot(tmp_path)
    assert programs.rss_bytes(42, root) == GIB and programs.rss_bytes(43, root) is None
    assert programs.ram_bytes(root) == 24683520 * 1024


# --- the judgement and the notes on known inputs ------------------------------------------------------

BASE = [400.0, 404, 398, 402, 401, 399, 403, 400, 397, 405, 401, 400]


def synthetic_result(factor: float, near_factor: float = 1.0) -> dict:
    """A result as measure() returns it: the far victim `factor` slower beside plain stores."""
    values = {a: list(BASE) if a.startswith("far") else [b / 50 for b in BASE] for a in ARMS}
    values[arm("far", "write")] = [b * factor for b in BASE]
    values[arm("near", "write")] = [b / 50 * near_factor for b in BASE]
    race = Race(ARMS, values, 0.05 / 8, looks=3, stopped="decided", seconds=20.0)
    periods = {m: [{"seconds": 1.0, "bytes": int(g * 1e9), "gb_per_s": g, "steps_per_ns": 0.0}] * 3
               for m, g in (("idle", 0.0), ("compute", 0.0), ("write", 9.5), ("nt-write", 14.0))}
    return {"params": {"victim_cpu": 1, "neighbour_cpus": [0], "far_bytes": 960 * MIB, "near_bytes": MIB,
                       "neighbour_bytes": GIB, "ram_bytes": 24 * GIB},
            "prediction": {"text": "expect a slowdown", "expected": "slowdown"}, "race": race.to_json(),
            "neighbour_periods": periods, "mbm_gb_per_s": {}, "victim_cpu_share": {a: [1.0] * 12 for a in ARMS},
            "rss_bytes": {"far victim": [962 * MIB] * 12, "near victim": [4 * MIB] * 12,
                          "neighbour on CPU 0": [1026 * MIB] * 12}}


def test_judge_on_known_inputs():
    assert LAB.judge(Machine(), synthetic_result(1.20)).verdict == "reproduced"
    assert LAB.judge(Machine(), synthetic_result(1.0)).verdict == "not-reproduced"
    assert LAB.judge(Machine(), synthetic_result(1.05)).verdict == "not-reproduced", "a victim 5% slower: not a flood"
    noisy = synthetic_result(1.0)
    noisy["race"]["values"][arm("far", "write")] = [b * f for b, f in zip(BASE, [0.8, 1.3] * 6)]
    assert LAB.judge(Machine(), noisy).verdict == "inconclusive"
    assert judge_stream(Race.from_json(synthetic_result(1.2)["race"]).kept_values())[2].value == pytest.approx(
        0.2, abs=0.01
    )


def test_the_notes_put_rss_beside_bandwidth_and_the_near_victim_as_the_control():
    verdict = LAB.judge(Machine(), synthetic_result(1.20, near_factor=1.0))
    notes = "\n".join(verdict.notes)
    assert "the near victim beside the streaming neighbour vs the computing one: +0.0%" in notes
    assert "1,026 MiB (4.2% of RAM) neighbour on CPU 0" in notes
    assert ("stayed at 1,026 MiB whether it was idle, computing or writing 9.5 GB/s of plain stores and 14.0 GB/s "
            "of non-temporal stores") in rss_note(synthetic_result(1.2))
    growing = synthetic_result(1.2)
    growing["rss_bytes"]["neighbour on CPU 0"] = [2 * MIB] + [1026 * MIB] * 11
    assert "went from 2 MiB to 1,026 MiB" in rss_note(growing)
    shared = synthetic_result(1.2)
    shared["victim_cpu_share"] = {a: [0.5] * 12 for a in ARMS}
    assert any("median 50% of its CPU" in n for n in LAB.judge(Machine(), shared).notes)


def test_figures_from_a_saved_result():
    verdict = Verdict(LAB.name, "reproduced", "r", result=synthetic_result(1.2))
    assert [title.split(" (")[0] for title, _ in figures(verdict)] == [
        "The far victim", "The near victim", "The neighbour: its RSS never changes, its traffic does"]


# --- the exercises' references and checks --------------------------------------------------------------

def test_bandwidth_is_the_counters_rise_over_its_time():
    assert checks.bandwidth_gbps([[1.0, 5e9], [1.5, 6e9], [3.0, 9e9]]) == pytest.approx(2.0)
    rows = [{"name": "big", "rss_bytes": 8 * GIB, "readings": [[0, 9e12], [1, 9e12 + 1e8]]},
            {"name": "flood", "rss_bytes": GIB, "readings": [[0, 5], [2, 5 + 2e10]]}]
    assert checks.flood_suspect(rows) == "flood"


def test_made_up_processes_never_make_the_largest_rss_the_flood():
    import random

    for seed in range(200):
        rows = checks.made_up_processes(random.Random(seed))
        assert checks.flood_suspect(rows) != max(rows, key=lambda p: p["rss_bytes"])["name"]


def test_naming_the_largest_rss_fails_and_says_so():
    rows = [{"name": "big", "rss_bytes": 8 * GIB, "readings": [[0, 0], [1, 1e8]]},
            {"name": "flood", "rss_bytes": GIB, "readings": [[0, 0], [1, 1e10]]}]
    own = ["def flood_suspect(processes):\n    return max(processes, key=lambda p: p['rss_bytes'])['name']"]
    answers = Answers(
        {"flood_suspect": FunctionAnswer("__main__", "flood_suspect", ["big"])}, {"flood_suspect": [[rows]]}, own
    )
    check = checks.names_check(answers, "flood_suspect")
    assert check.status == FAILED and "the largest RSS is 'big'" in check.expected
    answers = Answers(
        {"flood_suspect": FunctionAnswer("__main__", "flood_suspect", ["flood"])}, {"flood_suspect": [[rows]]}, own
    )
    assert checks.names_check(answers, "flood_suspect").status == PASSED
    assert checks.names_check(Answers(answers, answers.inputs), "flood_suspect").got == (
        "no `def flood_suspect(...)` in your notebook")


def test_the_model_counts_a_plain_store_twice():
    assert checks.predicted_write_slowdown(0.10, 10.0, 5.0) == pytest.approx(0.10)


# --- the programs, for real ----------------------------------------------------------------------------

def bench(program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ensure_built(SOURCE_DIR, program)), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("program, args, message", [
    ("victim", ["-w", "1M"], "give the CPU"),
    ("victim", ["-c", "0", "-w", "64"], "128 bytes to 64 GiB"),
    ("victim", ["-c", "4095", "-w", "1M"], "cannot pin to CPU 4095"),
    ("neighbour", ["-c", "0", "-m", "1M"], "2 MiB or more"),
    ("neighbour", ["-c", "0", "-m", "4M"], "-d SECONDS"),
    ("neighbour", ["-c", "0", "-m", "4M", "-w", "read", "-d", "1"], "unknown mode 'read'"),
])
def test_bad_input_is_one_line_and_exit_2(program, args, message):
    done = bench(program, *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_programs_obey_orders_and_report():
    cpu = LAB.probe().online_cpus[-1]
    with programs.Neighbour(ensure_built(SOURCE_DIR, "neighbour"), cpu, 8 * MIB) as neighbour, \
            programs.Victim(ensure_built(SOURCE_DIR, "victim"), cpu, 64 << 10) as victim:
        assert neighbour.switch("write")["mode"] == "idle"
        time.sleep(0.05)
        period = neighbour.switch("compute")
        assert period["mode"] == "write" and period["bytes"] >= 2 * MIB and period["gb_per_s"] > 0
        assert neighbour.switch("idle")["steps_per_ns"] > 0
        sample = victim.chase(20)
        assert sample["ns_per_access"] > 0 and 0 < sample["cpu_share"] <= 1.05
        assert programs.rss_bytes(neighbour.pid) >= 8 * MIB
        processes = [neighbour.process, victim.process]
    assert all(p.returncode == 0 for p in processes)


KILLED_PARENT = """
import sys, time
from perflab.build import ensure_built
from perflab.labs.memory_neighbour import programs
streamer = programs.Neighbour(ensure_built("labs/10-memory-neighbour", "neighbour"), int(sys.argv[1]), 8 << 20).__enter__()
streamer.switch("write")
print(streamer.pid, flush=True)
time.sleep(600)
"""


def test_the_neighbour_dies_with_perflab_even_by_kill_9():
    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT, str(LAB.probe().online_cpus[-1])],
                              stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while "zombie" not in _state(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    survived = "zombie" not in _state(pid)
    if survived:
        os.kill(pid, signal.SIGKILL)  # a failed test leaves nothing streaming
    assert not survived, "the neighbour outlived perflab"


def _state(pid: int) -> str:
    """Its state line; "zombie" once it is gone, as for one that ended and awaits its (killed) parent's reaper."""
    try:
        return next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:")).lower()
    except (OSError, StopIteration):
        return "zombie"


def test_three_processes_measured_here_name_the_streamer():
    machine = LAB.probe()
    rows, roles = three_processes(machine.online_cpus[-1], machine.online_cpus[0])
    streamer = next(name for name, role in roles.items() if role == "streamer")
    assert checks.flood_suspect(rows) == streamer
    assert max(rows, key=lambda p: p["rss_bytes"])["name"] != streamer


def test_a_real_quick_run_keeps_every_arm_and_the_rss():
    verdict = LAB.run(quick=True, runs=2, progress=False)
    result = verdict.result
    assert verdict.verdict in ("reproduced", "not-reproduced", "inconclusive")
    assert set(result["race"]["values"]) == set(ARMS) and all(len(v) == 2 for v in result["race"]["values"].values())
    assert result["neighbour_periods"]["write"][0]["bytes"] > 0
    assert {name.split(" on ")[0] for name in result["rss_bytes"]} == {"far victim", "near victim", "neighbour"}
    assert [title for title, _ in figures(verdict)]


@pytest.mark.parametrize("write_slowdown, busy, status", [
    (0.10, [], PASSED), (0.01, [], PASSED), (0.30, [], "inconclusive"),
    (0.10, ["other programs ran on CPU 1 for 30% of it (stress-ng-cpu (pid 7))"], "inconclusive"),
])
def test_the_model_is_checked_against_a_fresh_race(monkeypatch, write_slowdown, busy, status):
    fresh = synthetic_result(1 + write_slowdown)
    fresh["race"]["values"][arm("far", "nt-write")] = [b * 1.10 for b in BASE]  # +10% at 14 GB/s
    fresh["neighbour_periods"]["write"] = [{"seconds": 1.0, "bytes": 7 * 10**9, "gb_per_s": 7.0, "steps_per_ns": 0.0}]
    if write_slowdown == 0.01:  # nothing beside non-temporal stores either: the model predicts nothing
        fresh["race"]["values"][arm("far", "nt-write")] = list(BASE)
    monkeypatch.setattr(checks, "fresh_race", lambda: (fresh, Watched(busy)))
    inputs = checks.model_inputs()
    answers = Answers(
        {
            "predict_write_slowdown": FunctionAnswer(
                "__main__", "predict_write_slowdown", [checks.predicted_write_slowdown(*i) for i in inputs]
            )
        },
        {"predict_write_slowdown": inputs},
        ["def predict_write_slowdown(*args):\n    return 0.0"],
    )
    found = checks.predict_slowdown(answers)
    assert [c.status for c in found] == [PASSED, status], found[-1].render()
    assert all(phrase in found[-1].got for phrase in busy)  # a race beside a neighbour names it


def test_the_prediction_says_what_a_vm_and_the_monitors_change():
    nothing = {"text": "nothing here watches the memory controller"}
    bare = predict(machine_of(8), nothing)["text"]
    guest = predict(Machine({**machine_of(2).facts, "virtualization": Fact({"hypervisor": True}, "t")}), nothing)[
        "text"
    ]
    assert "8 CPU(s). Nothing here watches" in bare and "less than 10%" not in bare
    assert "one streaming vCPU may cost the victim less than 10%" in guest
