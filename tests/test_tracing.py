"""perf's per-CPU tracepoint counts: the argv, and the CSV of a real `perf stat -a -A` (perf 6.1, 2 CPUs)."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from perflab.sysfs import SysRoot
from perflab.tracing import Tracepoint, chosen_events, parse_per_cpu, perf_stat_argv

CAPTURE = REPO / "tests" / "fixtures" / "perf" / "stat-tracepoints-2cpus.csv"
# The capture's events, in its order: tlb:tlb_flush twice, with and without a filter.
COUNTED = (Tracepoint("call", ("irq_vectors:call_function_entry",)),
           Tracepoint("single", ("irq_vectors:call_function_single_entry",)),
           Tracepoint("remote flush", ("tlb:tlb_flush",), "reason == 1"),
           Tracepoint("any flush", ("tlb:tlb_flush",)),
           Tracepoint("block", ("irq:softirq_entry",), "vec == 4"))


def test_a_real_capture_parses_per_cpu_and_keeps_one_tracepoint_under_two_filters_apart():
    events = {t.label: t.candidates[0] for t in COUNTED}
    counts = parse_per_cpu(CAPTURE.read_text(), COUNTED, events)
    assert counts == {"call": {0: 0, 1: 0}, "single": {0: 3, 1: 1}, "remote flush": {0: 0, 1: 0},
                      "any flush": {0: 15, 1: 14}, "block": {0: 0, 1: 1}}


def test_an_uncounted_cpu_counts_zero_and_a_missing_tracepoint_is_left_out():
    events = {"call": "irq_vectors:call_function_entry", "single": None}
    text = "CPU0,<not counted>,,irq_vectors:call_function_entry,0,0.00,,\nCPU1,7,,irq_vectors:call_function_entry,1,100.00,,\n"
    assert parse_per_cpu(text, COUNTED[:2], events) == {"call": {0: 0, 1: 7}}


def test_the_argv_counts_every_cpu_with_each_filter_after_its_event(tmp_path):
    events = {"call": "irq_vectors:call_function_entry", "single": None, "remote flush": "tlb:tlb_flush"}
    argv = perf_stat_argv(COUNTED[:3], events, tmp_path / "out.csv", ["sleep", "1"])
    assert argv[:6] == ["perf", "stat", "-a", "-A", "-x", ","]
    assert argv[8:] == ["-e", "irq_vectors:call_function_entry", "-e", "tlb:tlb_flush", "--filter", "reason == 1",
                        "--", "sleep", "1"]


def test_the_first_candidate_this_kernel_has_is_chosen(tmp_path: Path):
    folder = tmp_path / "sys" / "kernel" / "tracing"
    folder.mkdir(parents=True)
    (folder / "available_events").write_text("ipi:ipi_raise\ntlb:tlb_flush\n")
    wanted = (Tracepoint("ipi", ("irq_vectors:call_function_entry", "ipi:ipi_raise")),
              Tracepoint("flush", ("tlb:tlb_flush",)), Tracepoint("block", ("irq:softirq_entry",)))
    assert chosen_events(wanted, SysRoot(tmp_path), "/sys/kernel/tracing") == {
        "ipi": "ipi:ipi_raise", "flush": "tlb:tlb_flush", "block": None}
