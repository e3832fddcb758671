"""Lab 9: folding perf's stacks, the crossover, the judgement on known inputs, the programs, a real quick run, the
figures from a saved result, and the exercises' checks."""

from __future__ import annotations

import subprocess

import pytest

from perflab.build import ensure_built
from perflab.grading import FAILED, INCONCLUSIVE, PASSED
from perflab.labs.hidden_quadratic import LAB, exercises, export, profile, programs
from perflab.labs.hidden_quadratic import run as lab
from perflab.labs.hidden_quadratic.figures import figures, flame_graph
from perflab.probe import Fact, Machine
from perflab.results import load
from perflab.runner import run_once
from perflab.verdict import VERDICTS, Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

# `perf script -F comm,ip,sym` of three samples: two in bit_ffs_at, one in an interrupt on top of it, and a
# frame perf could not name.
SCRIPT = """flows 
\t            1b18 bit_ffs_at
\t            1c98 expire_quadratic
\t            1567 main
\t           27304 __libc_start_main_impl (inlined)

flows 
\t            1b36 bit_ffs_at
\t            1c98 expire_quadratic
\t            1567 main
\t           27304 __libc_start_main_impl (inlined)

flows 
\tffffffff8226dbf9 handle_softirqs
\t            1b36 bit_ffs_at
\t            1c98 expire_quadratic
\t            1567 main
\t           27304 __libc_start_main_impl (inlined)

flows 
\t               0 [unknown]
\t            1a30 fill
"""


def test_fold_puts_the_root_first_and_counts_samples_per_stack():
    folded = profile.fold(SCRIPT)
    assert folded == {"__libc_start_main_impl;main;expire_quadratic;bit_ffs_at": 2,
                      "__libc_start_main_impl;main;expire_quadratic;bit_ffs_at;handle_softirqs": 1,
                      "fill;[unknown]": 1}
    assert profile.share(folded, "bit_ffs_at") == 0.75, "inclusive: the interrupt on top counts"
    assert profile.self_share(folded, "bit_ffs_at") == 0.5
    assert profile.hottest(folded) == ("bit_ffs_at", 0.5)
    assert profile.fold("") == {} and profile.share({}, "main") == 0.0


@pytest.mark.parametrize("linear, binary, expected", [
    ([1, 2, 4, 8], [2, 3, 3, 3], 4), ([1, 2, 4, 8], [2, 1, 5, 3], 8), ([1, 1, 1, 1], [2, 2, 2, 2], None),
    ([4, 4, 4, 4], [1, 1, 1, 1], 1),
])
def test_crossover_is_where_binary_search_wins_from_then_on(linear, binary, expected):
    assert programs.crossover([1, 2, 4, 8], linear, binary) == expected


def _race_values(scan_ns=10.0, search_ns=20.0, exponent=2.0, fixed_ns_per_flow=5.0, rounds=12):
    """Race values with a known answer: a little scatter, the same in every arm."""
    wobble = [1 + 0.01 * ((i * 7) % 5 - 2) for i in range(rounds)]
    values = {programs.arm("linear", programs.SMALL_N): [scan_ns * w for w in wobble],
              programs.arm("binary", programs.SMALL_N): [search_ns * w for w in wobble]}
    for n in programs.FLOW_SIZES:
        values[programs.arm("quadratic", n)] = [0.001 * n ** exponent * w for w in wobble]
        values[programs.arm("fixed", n)] = [fixed_ns_per_flow * n * w for w in wobble]
    return values


def test_judge_race_reproduces_when_all_three_hold():
    verdict, reason, effect = lab.judge_race(_race_values())
    assert verdict == "reproduced" and effect.value == pytest.approx(2, abs=0.01) and "n^2.00" in reason


@pytest.mark.parametrize("changed, failed", [
    ({"search_ns": 10.0}, "scan"),  # binary search as fast as the scan at n=16
    ({"exponent": 1.0, "fixed_ns_per_flow": 0.001}, "exponent, fix"),  # a linear pass, and nothing left to fix
])
def test_judge_race_names_what_this_machine_did_not_show(changed, failed):
    verdict, reason, _ = lab.judge_race(_race_values(**changed))
    assert verdict == "not-reproduced" and reason.startswith(f"not shown here ({failed})")


def test_judge_race_is_inconclusive_on_too_few_noisy_rounds():
    values = _race_values(rounds=3)
    values[programs.arm("linear", programs.SMALL_N)] = [10, 30, 15]
    assert lab.judge_race(values)[0] == "inconclusive"


def _machine(vendor="GenuineIntel", pmu=False, virtualization=None):
    caches = [{"level": 1, "type": "Data", "size_kib": 48, "cpus": [0], "line_size": 64},
              {"level": 1, "type": "Instruction", "size_kib": 32, "cpus": [0], "line_size": 128},
              {"level": 2, "type": "Unified", "size_kib": 2048, "cpus": [0], "line_size": 64}]
    return Machine({"online_cpus": Fact([0], "test"), "caches": Fact(caches, "test"), "vendor": Fact(vendor, "test"),
                    "hw_pmu": Fact(pmu, "test"), "virtualization": Fact(virtualization or {}, "test")})


def test_prediction_comes_from_the_probe():
    text = lab.prediction(_machine())
    assert "GenuineIntel core" in text and "64-byte lines" in text and "2048 KiB L2" in text and "timing only" in text
    assert "perf stat" in lab.prediction(_machine(pmu=True))
    emulated = lab.prediction(_machine(virtualization={"vendor": "TCGTCGTCGTCG"}))
    assert "part 1 cannot show here" in emulated and "exponent near 2" in emulated


@pytest.mark.parametrize("program, args", [
    ("lookup", ["-s", "0"]), ("lookup", ["-k", "hash"]), ("lookup", ["-t", "0"]),
    ("flows", ["-n", "12x"]), ("flows", ["-v", "cubic"]), ("export", ["-n", "-5"]),
])
def test_the_programs_reject_bad_input_with_one_line(program, args):
    binary = ensure_built(programs.SOURCE_DIR, program)
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "{" not in done.stdout, args


def test_both_expiry_passes_free_the_same_flows():
    binary = ensure_built(programs.SOURCE_DIR, "flows")
    _, samples = run_once(programs.flows_argv(binary, (100, 3000), programs.VERSIONS, 0.1, 0, LAB.placement_here()))
    freed = {(s["version"], s["n"]): s["freed"] for s in samples}
    assert freed[("quadratic", 100)] == freed[("fixed", 100)] > 0
    assert freed[("quadratic", 3000)] == freed[("fixed", 3000)] > 1000


def test_a_real_quick_run_ends_in_a_verdict_whose_figures_draw_from_the_saved_result():
    verdict = LAB.run(quick=True, progress=False)
    assert verdict.verdict in VERDICTS and verdict.results
    saved = load(verdict.results)
    assert {s["structure"] for s in saved["sweep"]} == set(programs.STRUCTURES)
    again = LAB.verdict_of(LAB.probe(), saved)
    assert again.verdict == verdict.verdict, "the verdict is judged from the saved result alone"
    titles = [title for title, _ in figures(Verdict(LAB.name, verdict.verdict, "", result=saved))]
    assert titles[:3] == [
        "Looking a key up four ways, against n",
        "The race at n=16: linear scan against binary search",
        "The expiry pass against the table's size, log-log",
    ]
    if saved["profiles"]:
        assert len(titles) == 5 and profile.share(saved["profiles"]["quadratic"], "expire_quadratic") > 0.5


def test_a_flame_graph_draws_one_box_per_frame_wide_enough():
    figure = flame_graph(profile.fold(SCRIPT), "known stacks")
    boxes = figure.axes[0].patches
    assert len(boxes) == 7, "libc, main, expire, bit_ffs_at, the softirq on top, fill and [unknown]"
    assert max(box.get_width() for box in boxes) == 0.75


def test_find_the_line_accepts_only_the_strcat():
    line = exercises.strcat_lines(export.EXPORT_SOURCE.read_text())
    assert len(line) == 1
    right = {c.name: c.status for c in exercises.find_the_line({"QUADRATIC_LINE": f"export.c:{line[0]}",
                                                               "CALLER": "write_csv"})}
    assert set(right.values()) == {PASSED}
    wrong = exercises.find_the_line({"QUADRATIC_LINE": f"export.c:{line[0] - 1}", "CALLER": "__strcat_avx2"})
    assert [c.status for c in wrong] == [FAILED, FAILED]


def test_the_crossover_exercise_draws_curves_the_reference_can_answer():
    cases = exercises.fresh_curves()
    answers = [programs.crossover(*case) for case in cases]
    assert answers[3] is None and answers[4] == 256, "a curve that never crosses, one that wins early at n=8"
    assert all(a in programs.LOOKUP_SIZES for a in answers[:3])


@pytest.mark.parametrize("exponent, status", [(1.0, PASSED), (2.0, FAILED)])
def test_the_fix_is_graded_by_its_exponent(exponent, status):
    times = {n: [1e-3 * n ** exponent * (1 + 0.02 * i) for i in range(6)] for n in export.EXPORT_SIZES}
    assert exercises._exponent(times).status == status


def test_an_exponent_too_uncertain_to_grade_is_inconclusive():
    times = {n: [n ** 1.5 * f for f in (0.5, 2.0)] for n in export.EXPORT_SIZES}
    assert exercises._exponent(times).status == INCONCLUSIVE


def test_the_known_fixes_write_the_same_text_and_only_one_is_linear():
    source = export.EXPORT_SOURCE.read_text()
    times, digests = export.time_versions({"baseline": source, "known fix": export.known_fix(source),
                                           "known wrong fix": export.known_wrong_fix(source)}, rounds=2, progress=False)
    assert digests["baseline"] == digests["known fix"] == digests["known wrong fix"]
    assert export.fit(times["known fix"]).exponent < lab.QUADRATIC_FROM < export.fit(times["baseline"]).exponent
