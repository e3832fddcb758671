"""Lab 12: perf record's cost to a workload on every CPU, where perf's threads ran, and the exercises' inputs."""

from __future__ import annotations

import os
import shutil

import pytest

from perflab.labs.profiler_overhead import exercises, recorded, run
from perflab.labs.profiler_overhead.run import ALONE, DEFAULT, affinity_note, overhead, reader_notes
from perflab.labs.profiler_overhead.workload import Arm, perf_arm, run_arm, workload_argv
from perflab.verdict import ALPHA, Effect

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

CAN_PERF = os.geteuid() == 0 and shutil.which("perf") is not None


def test_the_sources_table_replays_as_its_own_ratios():
    replayed = recorded.replay()
    assert replayed["ratios"]["--affinity=cpu"] == [1.00, 1.01]
    assert replayed["judgement"].startswith("on the source's large NUMA server, serial trace writing, default "
                                            "affinity cost x1.27 (x1.29 by /usr/bin/time) and --affinity=cpu x1.00")


def test_a_slowdown_is_judged_round_by_round():
    alone = [100.0 + r % 3 for r in range(16)]
    values = {ALONE: alone, DEFAULT.name: [a * 1.15 for a in alone]}
    verdict, _, effect = overhead(values, DEFAULT, ALPHA)
    assert verdict == "reproduced" and effect.value == pytest.approx(0.15)
    values[DEFAULT.name] = [a * 1.001 for a in alone]
    assert overhead(values, DEFAULT, ALPHA)[0] == "not-reproduced"


def test_the_affinity_note_says_whether_pinning_helped_or_hurt():
    hurt = Effect("the default affinity over --affinity=cpu", -0.27, "slowdown", -0.32, -0.08, 3e-5)
    assert affinity_note("not-reproduced", hurt).startswith("--affinity=cpu made it worse")
    same = Effect("the default affinity over --affinity=cpu", -0.01, "slowdown", -0.05, 0.03, 0.2)
    assert affinity_note("not-reproduced", same).startswith("--affinity=cpu did not help by 5% or more")
    assert affinity_note("reproduced", Effect("x", 0.2, "slowdown", 0.1, 0.3, 1e-4)).startswith("--affinity=cpu helped")


def test_perfs_threads_are_summed_per_cpu_over_runs():
    notes = reader_notes({ALONE: [{}], "perf -F 1000": [{"0": 10_000_000, "1": 30_000_000}, {"1": 40_000_000}],
                          "perf -F 25000": [{}, {}]})
    assert notes == ["perf -F 1000: perf's own threads ran 40.0 ms a run while its workload process existed "
                     "(CPU 0 12%, CPU 1 88%)"]


def test_a_learner_without_root_is_told_perf_record_a_needs_it(monkeypatch):
    monkeypatch.setattr(run.os, "geteuid", lambda: 1000)
    why = run.perf_may_record_all_cpus()
    paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    assert (why is None) == (paranoid <= 0)
    if why:
        assert why.endswith("allows only root: run the lab with sudo")


@pytest.mark.parametrize("options, why", [
    ("-F 1000 -o /etc/passwd", "'-o' is not one of the options"),
    ("-F 1000;id", "';id' is not one of the options"),
    ("-F 100", "give one -F of at least 500"),
    ("--affinity=cpu", "give one -F of at least 500"),
    ("-F 1000 -F 2000", "give one -F of at least 500"),
    (42, "is not a string of perf record options"),
])
def test_the_quiet_options_exercise_takes_only_its_options(options, why):
    with pytest.raises(ValueError, match=why):
        exercises.parse_options(options)


def test_the_quiet_options_exercise_takes_a_frequency_and_the_readers_options():
    assert exercises.parse_options("-F 1000 --affinity=cpu --aio -m 64") == ("-F", "1000", "--affinity=cpu", "--aio",
                                                                             "-m", "64")
    assert exercises.parse_options("--freq=2000") == ("--freq=2000",)


def test_alone_the_workload_reports_its_wall_time_and_no_perf_threads():
    ran = run_arm(Arm(ALONE, None), workload_argv([0], 5))
    assert ran["wall_ns"] > 1e6 and ran["threads_ns"] == {}


@pytest.mark.skipif(not CAN_PERF, reason="perf record -a needs root and perf")
def test_under_perf_the_workload_runs_and_perfs_threads_are_charged_to_cpus(tmp_path):
    ran = run_arm(perf_arm("-F 1000"), workload_argv([0, 1] if os.cpu_count() > 1 else [0], 200))
    assert ran["wall_ns"] > 1e6
    assert ran["threads_ns"] and all(ns >= 0 for ns in ran["threads_ns"].values())


def test_one_samples_cost_is_taken_over_a_second_alone_or_over_the_longer_run_under_perf():
    from perflab.sequential import Race

    alone = [1e9 + r for r in range(8)]
    values = {ALONE: alone, DEFAULT.name: [a * 1.15 for a in alone]}
    saved = {"race": Race([ALONE, DEFAULT.name], values, 0.01).to_json()}
    assert exercises.ns_per_sample(saved) == pytest.approx(0.15 / 25_000 * 1e9)  # 6,000 ns
    assert exercises.ns_per_sample(saved, per_second_alone=False) == pytest.approx(0.15 / 1.15 / 25_000 * 1e9)
