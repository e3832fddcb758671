"""Lab 2: the cache simulator on hand-worked cases, the victim and the aggressor for real, the verdict, the
source's runs replayed, the exercises."""

from __future__ import annotations

import math
import subprocess

import pytest

from conftest import REPO, run_cli
from perflab import results, stats
from perflab.build import ensure_built
from perflab.errors import PerflabError
from perflab.grading import FAILED, PASSED, Answers
from perflab.grading.kernel import FunctionAnswer
from perflab.labs import CannotShow
from perflab.labs.inclusive_llc import LAB, cachesim, programs, recorded, stress_ng
from perflab.labs.inclusive_llc import exercises as checks
from perflab.labs.inclusive_llc import run as lab
from perflab.labs.inclusive_llc.figures import figures, source_figure
from perflab.probe import Fact, Machine, probe
from perflab.sequential import Race
from perflab.verdict import Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

# --- the simulator, against traces worked by hand ------------------------------------------------------


def levels(steps):
    return [s.level for s in steps]


def test_lru_set_evicts_the_least_recently_used_line():
    cache = cachesim.Cache(sets=1, ways=2)
    assert cache.insert(1) is None and cache.insert(2) is None
    assert cache.touch(1)
    assert cache.insert(3) == 2
    assert cache.contents() == [1, 3]


def test_lines_map_to_sets_by_line_number():
    cache = cachesim.Cache(sets=2, ways=1)
    cache.insert(0)
    assert cache.insert(1) is None  # the other set
    assert cache.insert(2) == 0  # same set as 0, one way


def test_textbook_trace_inclusive_back_invalidates_a():
    # L1 2 lines, LLC 4 lines. The L1 hits on `a` never reach the LLC, so when `e`
    # misses, `a` is the LLC's oldest line: evicted there, and taken out of the L1.
    steps = cachesim.replay("abacade", "inclusive")
    assert levels(steps) == ["memory", "memory", "L1", "memory", "L1", "memory", "memory"]
    assert [s.back_invalidated for s in steps] == [[], [], [], [], [], [], ["a"]]
    assert steps[-1].llc == ["b", "c", "d", "e"] and steps[-1].l1 == ["d", "e"]


def test_textbook_trace_non_inclusive_leaves_the_l1_alone():
    steps = cachesim.replay("abacade", "non-inclusive")
    assert not any(s.back_invalidated for s in steps)
    assert steps[-1].llc == ["b", "c", "d", "e"]


def test_a_three_line_l1_keeps_a_unless_the_llc_is_inclusive():
    # After a b a c a d the L1 holds c a d. `e` evicts c from the L1 (its oldest line)
    # but the inclusive LLC also evicts a, so the final `a` goes to memory.
    inclusive = cachesim.replay("abacadea", "inclusive", l1_lines=3)
    assert inclusive[6].l1 == ["c", "d", "e"] and inclusive[-1].level == "memory"
    non_inclusive = cachesim.replay("abacadea", "non-inclusive", l1_lines=3)
    assert non_inclusive[6].l1 == ["a", "d", "e"] and non_inclusive[-1].level == "L1"
    exclusive = cachesim.replay("abacadea", "exclusive", l1_lines=3)
    assert exclusive[-1].level == "L1"


def test_exclusive_llc_holds_only_what_the_l1_evicted():
    steps = cachesim.replay("abacadea", "exclusive")
    assert steps[1].llc == []  # fills go to the L1 only
    assert steps[3].llc == ["b"]  # c pushed b out of the L1, into the LLC
    assert steps[6].llc == ["b", "c", "a"]
    assert steps[-1].level == "LLC" and "a" not in steps[-1].llc  # a hit moves the line up


def test_victim_is_evicted_only_when_the_aggressor_fills_its_sets():
    geometry = cachesim.Geometry()  # LLC 64 sets x 16 ways, victim 32 lines: one per set
    assert cachesim.eviction_threshold(geometry) == 15 / 16
    fits = cachesim.victim_aggressor("inclusive", 15 * 64, geometry)  # 15 aggressor lines per set
    assert fits.back_invalidated == 0 and fits.l1_misses == 0
    full = cachesim.victim_aggressor("inclusive", 16 * 64, geometry)
    assert full.back_invalidated == 32 * 3  # every victim line, once per aggressor pass
    for policy in ("non-inclusive", "exclusive"):
        assert cachesim.victim_aggressor(policy, 2 * 16 * 64, geometry).l1_misses == 0


def test_simulator_refuses_bad_input():
    with pytest.raises(ValueError, match="unknown LLC policy"):
        cachesim.Hierarchy((1, 2), (1, 4), "mostly-inclusive")
    with pytest.raises(ValueError, match="letters"):
        cachesim.replay("a,b", "inclusive")
    with pytest.raises(ValueError, match="at least one set"):
        cachesim.Cache(0, 4)


def test_render_steps_is_a_table():
    text = cachesim.render_steps(cachesim.replay("abacade", "inclusive"))
    assert text.splitlines()[0].startswith("access") and text.splitlines()[-1].split()[-1] == "a"


# --- choosing CPUs, predicting, judging ---------------------------------------------------------------

def one_cpu_machine() -> Machine:
    return Machine({"online_cpus": Fact([0], "t"), "topology": Fact({"0": {"package": 0, "die": 0, "core": 0,
                    "smt_siblings": [0], "node": 0}}, "t"),
                    "caches": Fact([{"level": 3, "type": "Unified", "size_kib": 8192, "cpus": [0]}], "t")})


def test_pair_shares_the_llc_but_not_a_core():
    machine = checks.described_machine()
    pair = LAB.choose_cpus(machine)
    victim, aggressor = pair.victim_cpu, pair.aggressor_cpu
    assert any(victim in g and aggressor in g for g in machine.llc_groups())
    assert aggressor not in machine.cpu(victim)["smt_siblings"]
    assert victim != 0
    with pytest.raises(CannotShow, match="share an LLC"):
        LAB.choose_cpus(machine, [3, 19])  # SMT siblings
    with pytest.raises(CannotShow, match="share an LLC"):
        LAB.choose_cpus(machine, [3, 11])  # different sockets
    with pytest.raises(PerflabError, match="not online|offline|online"):
        LAB.choose_cpus(machine, [3, 64])
    with pytest.raises(CannotShow):
        LAB.choose_cpus(one_cpu_machine())


def test_cpus_that_cannot_pair_are_a_one_line_error():
    done = run_cli("run", "inclusive-llc", "-C", "0")
    assert done.returncode != 0 and "share an LLC" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_described_l3_decodes_as_an_inclusive_20_mib_20_way_cache():
    l3 = checks._described_llc()
    assert (l3["level"], l3["size_kib"], l3["ways"], l3["inclusive"]) == (3, 20480, 20, True)


def test_prediction_follows_cpuid():
    assert lab.predict(checks.described_machine())["expected"] == "slowdown"
    assert lab.predict(Machine({"llc_inclusive": Fact(False, "t")}))["expected"] == "no slowdown"
    assert lab.predict(Machine())["expected"] == "unknown"


def test_outcome_compares_prediction_and_measurement():
    assert lab.outcome("no slowdown", "not-reproduced").startswith("as predicted")
    assert lab.outcome("slowdown", "reproduced").startswith("as predicted")
    assert "snoop filter" in lab.outcome("no slowdown", "reproduced")
    assert lab.outcome("slowdown", "not-reproduced").startswith("NOT as predicted")
    assert "cannot settle" in lab.outcome("slowdown", "inconclusive")


def test_judge_on_synthetic_runs():
    small, large = lab.label(lab.FRACTIONS[0]), lab.label(lab.FRACTIONS[-1])
    base = [1.70, 1.71, 1.69, 1.72, 1.70, 1.71, 1.70, 1.69, 1.71, 1.70]
    assert lab.judge_sweep({small: base, large: [x * 1.10 for x in base]})[0] == "reproduced"
    assert lab.judge_sweep({small: base, large: list(reversed(base))})[0] == "not-reproduced"


PERF_CSV = """# started on Sat Nov 21 08:00:00 2026

12345678,,L1-dcache-load-misses,1000000,100.00,,
<not supported>,,LLC-loads,0,100.00,,
2.50,msec,task-clock,2500000,100.00,0.999,CPUs utilized
"""


def test_perf_stat_csv_is_parsed():
    assert programs.parse_perf_stat(PERF_CSV) == {
        "L1-dcache-load-misses": 12345678.0,
        "LLC-loads": None,
        "task-clock": 2.5,
    }


def test_victim_counted_by_perf_stat_for_real():
    # Hardware events need a PMU; the wrapping is the same with a software event.
    victim = ensure_built(lab.SOURCE_DIR, "victim")
    values, counts = programs.run_victim(
        programs.victim_argv(victim, probe().online_cpus[-1], 16384, 20), ["task-clock"]
    )
    # CPU time, not wall time: on a loaded machine the 20 ms victim gets less of it, so only "counted" is certain
    assert values and 0 < counts["task-clock"] < 1000


def test_a_victim_whose_warm_up_outlasts_its_run_still_times_one_sample():
    """A 1 ms victim's warm-up alone takes longer: it gave no timed sample, and on a busy machine a quick run's
    victim so failed the whole lab ("need at least 1 sample to compute a median", llc-predict's notebook)."""
    victim = ensure_built(lab.SOURCE_DIR, "victim")
    values, _ = programs.run_victim(programs.victim_argv(victim, probe().online_cpus[-1], 16384, 1), [])
    assert len(values) == 1 and values[0] > 0


# --- the benchmarks, for real -------------------------------------------------------------------------

def bench(program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ensure_built(lab.SOURCE_DIR, program)), *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("program, args, message", [
    ("victim", [], "give the CPU"),
    ("victim", ["-c", "0", "-w", "12Q"], "suffixes"),
    ("victim", ["-c", "0", "-w", "64"], "128 bytes to 1 GiB"),
    ("victim", ["-c", "0", "-n", "7"], "multiple of 8"),
    ("victim", ["-c", "4095"], "cannot pin to CPU 4095"),
    ("aggressor", ["-c", "0"], "buffer size"),
    ("aggressor", ["-c", "0", "-s", "10"], "less than one line"),
])
def test_bad_input_is_one_line_and_exit_2(program, args, message):
    done = bench(program, *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_aggressor_obeys_orders_and_is_always_stopped():
    aggressor = ensure_built(lab.SOURCE_DIR, "aggressor")
    with programs.Aggressor(aggressor, 0, 4 << 20) as streamer:
        streamer.stream(4 << 20)
        period = streamer.stream(0)
        assert period["bytes"] == 4 << 20 and period["gb_per_s"] > 0
        process = streamer.process
    assert process.returncode == 0
    with pytest.raises(RuntimeError), programs.Aggressor(aggressor, 0, 1 << 20) as streamer:
        process = streamer.process
        raise RuntimeError("a learner's Ctrl-C or any error")
    assert process.returncode is not None, "no aggressor left streaming"
    with pytest.raises(PerflabError, match="outside 64 bytes"), programs.Aggressor(aggressor, 0, 1 << 20) as streamer:
        streamer.stream(8 << 20)


def test_short_real_run_writes_one_result():
    verdict = LAB.run(quick=True, runs=3, progress=False)
    assert verdict.verdict in ("reproduced", "not-reproduced", "inconclusive")
    result = results.load(verdict.results)
    assert set(result["ns_per_access"]) == {lab.ALONE, *map(lab.label, LAB.QUICK.fractions)}
    assert all(len(v) == 3 for v in result["ns_per_access"].values())
    assert result["timeline"]["aggressor_on_ms"] < result["timeline"]["aggressor_off_ms"]
    assert result["prediction"]["expected"] in ("slowdown", "no slowdown", "unknown")
    assert [title for title, _ in figures(verdict)]


def test_stress_ng_side_by_side_for_real():
    with pytest.raises(PerflabError, match="at least 2 runs"):
        stress_ng.stress_ng_side_by_side(runs=1)
    stress = stress_ng.stress_ng_side_by_side(quick=True, runs=2, progress=False)
    assert all(len(v) == 2 and v[0] > 0 for v in stress["bogo_ops_per_s"].values())
    assert "--vm-method" in stress["params"]["commands"][0]
    leftover = subprocess.run(["pgrep", "-f", "stress-ng --vm"], capture_output=True, text=True)
    assert leftover.stdout == "", "the stress-ng aggressor was stopped"


def test_bogo_rate_is_read_from_stress_ng_yaml():
    assert (
        stress_ng.parse_bogo_rate("metrics:\n    - stressor: vm\n      bogo-ops-per-second-real-time: 87181.81\n")
        == 87181.81
    )
    with pytest.raises(PerflabError, match="no bogo-ops"):
        stress_ng.parse_bogo_rate("metrics: []\n")


# --- the source's runs, replayed ------------------------------------------------------------------------

def test_the_source_s_runs_load_five_per_setup_on_two_machines():
    data = recorded.load()
    assert "jabperf.com" in data["source"]
    assert [(m["name"], m["llc"]) for m in data["machines"]] == [("Haswell", "inclusive, 20 MB"),
                                                                  ("Cascade Lake", "non-inclusive, 25 MB")]
    assert all(len(m["alone"]) == len(m["beside_aggressor"]) == 5 for m in data["machines"])
    assert data["machines"][0]["alone"][0] == 70175.86 and data["machines"][1]["beside_aggressor"][-1] == 90746.03


def test_the_replay_finds_the_haswell_slowed_and_the_cascade_lake_not():
    judged = recorded.replay()
    haswell, cascade = judged["Haswell"], judged["Cascade Lake"]
    assert (haswell["verdict"], cascade["verdict"]) == ("reproduced", "not-reproduced")
    assert haswell["effect"].value == pytest.approx(70151.86 / 68450.44 - 1)  # the medians, as time per op
    assert haswell["effect"].ci_low > lab.MIN_EFFECT > cascade["effect"].ci_high
    assert haswell["effect"].p_value == pytest.approx(haswell["p_floor"]), "every run beside slower than every alone"
    assert "could never reach" in recorded.replay_text()


def test_the_floor_under_p_is_every_run_of_one_setup_beyond_the_other():
    assert recorded.p_floor(5, 5) == pytest.approx(0.0122, abs=1e-4)
    assert stats.mann_whitney_u([3, 1, 2, 5, 4], [7, 6, 10, 8, 9])[1] == pytest.approx(recorded.p_floor(5, 5))
    assert recorded.race_alpha() < recorded.p_floor(5, 5) < 0.05
    assert checks.fewest_runs(0.05) == 4 and checks.fewest_runs(recorded.race_alpha()) == 7


def test_the_source_figure_is_labelled_recorded_and_drawn_where_nothing_was_measured():
    figure = source_figure()
    assert figure._suptitle.get_text().startswith("Recorded by the source, not measured here")
    assert [ax.get_title().splitlines()[1].split(",")[0] for ax in figure.axes] == ["reproduced", "not-reproduced"]
    titles = [title for title, _ in figures(Verdict(LAB.name, "cannot-show", ""))]
    assert titles == ["Simulator: what an inclusive LLC would do", "The source's runs, replayed"]


def _judged(slowdown: float) -> Verdict:
    """The lab's verdict on a made-up sweep whose largest aggressor slows the victim by `slowdown`."""
    small, large = lab.label(lab.FRACTIONS[0]), lab.label(lab.FRACTIONS[-1])
    base = [1.70, 1.71, 1.69, 1.72, 1.70, 1.71, 1.70, 1.69, 1.71, 1.70]
    raced = Race([lab.ALONE, small, large], {lab.ALONE: base, small: base, large: [x * slowdown for x in base]}, 0.05)
    machine = Machine({})
    params = {"llc": {"level": 3, "size_kib": 20480, "cpus": [0, 1]}, "victim_cpu": 1, "aggressor_cpu": 0,
              "working_set": 16384, "llc_bytes": 20 << 20, "events": []}
    return LAB.judge(machine, {"race": raced.to_json(), "ns_per_access": raced.kept_values(), "params": params,
                               "aggressor_gb_per_s": {}, "prediction": lab.predict(machine)})


def test_a_machine_that_does_not_show_it_is_pointed_to_the_source_s_runs():
    assert _judged(1.0).verdict == "not-reproduced" and lab.REPLAYED in _judged(1.0).notes[-1]
    assert _judged(1.1).verdict == "reproduced" and not any(lab.REPLAYED in n for n in _judged(1.1).notes)
    assert lab.REPLAYED in LAB.CANNOT_SHOW


# --- the exercises ------------------------------------------------------------------------------------

def test_evictions_on_the_described_l3_follow_its_ways():
    # 20 ways: a victim line leaves 19, so 0.95 of the L3 still fits and 1.0 does not.
    assert checks.simulated_evictions("inclusive", 20) == {0.5: False, 0.75: False, 0.9: False, 0.95: False,
                                                           1.0: True, 1.5: True}
    assert not any(checks.simulated_evictions("non-inclusive", 20).values())


def test_noisy_neighbour_rejects_the_noisy_socket_and_the_interrupt_core():
    answers = {"SAME_SOCKET_CPU": 0, "SAME_SOCKET_RISK": "back-invalidation", "RISK_IF_NON_INCLUSIVE": "none"}
    assert all(c.status == PASSED for c in checks.noisy_neighbour({**answers, "LATENCY_CPU": 9}))
    for wrong in (5, 24, 19, 99):  # noisy socket, the interrupts' sibling, the noisy core's sibling, no such CPU
        first = checks.noisy_neighbour({**answers, "LATENCY_CPU": wrong})[0]
        assert first.status == FAILED, wrong
    assert checks.noisy_neighbour({**answers, "LATENCY_CPU": 9, "SAME_SOCKET_CPU": 19})[1].status == FAILED
    assert checks.noisy_neighbour({**answers, "LATENCY_CPU": 9, "SAME_SOCKET_RISK": "none"})[2].status == FAILED


def _five_runs_answers(p_floor, fewest_runs) -> Answers:
    inputs = {"my_p_floor": checks.fresh_arm_sizes(), "my_fewest_runs": checks.fresh_levels()}
    return Answers({name: FunctionAnswer("__main__", name, [function(*a) for a in inputs[name]])
                    for name, function in (("my_p_floor", p_floor), ("my_fewest_runs", fewest_runs))},
                   inputs, ["def my_p_floor(n_alone, n_beside):\n    pass", "def my_fewest_runs(alpha):\n    pass"])


def test_five_runs_checks_the_floor_and_the_fewest_runs_on_fresh_inputs():
    right = checks.five_runs(_five_runs_answers(recorded.p_floor, checks.fewest_runs))
    assert [c.status for c in right] == [PASSED, PASSED]
    exact = checks.five_runs(_five_runs_answers(lambda a, b: 2 / math.comb(a + b, a), lambda alpha: 5))
    assert [c.status for c in exact] == [FAILED, FAILED], "the exact test's floor is not the lab's test's"


def test_lab_folder_has_the_usual_files():
    folder = REPO / lab.SOURCE_DIR
    assert {p.name for p in folder.iterdir()} >= {"Makefile", "README.md", "example-output.txt", "lab.ipynb",
                                                   "victim.c", "aggressor.c"}
