"""Lab 8: the model and the statistics on known inputs, the expectation and the PMU event from the probe, the
programs' layouts and bad input, the source replayed, the figures from a result, a real quick run, the exercises."""

from __future__ import annotations

import json
import subprocess

import pytest

from perflab.build import ensure_built
from perflab.grading import FAILED, PASSED, Answers
from perflab.labs import find
from perflab.labs.four_k_aliasing import LAB, exercises, hunt, recorded, stencil, sweep
from perflab.labs.four_k_aliasing.figures import figures, source_figure
from perflab.labs.four_k_aliasing.run import expectation
from perflab.paths import lab_package
from perflab.probe import Fact, Machine
from perflab.runner import run_records
from perflab.sequential import Race
from perflab.verdict import Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side


def machine(vendor: str, family: int | None, pmu: bool = False, model: str = "Some CPU") -> Machine:
    note = f"family {family} model 1 (0x1) stepping 0" if family is not None else None
    return Machine({"vendor": Fact(vendor, "test"), "cpu_model": Fact(model, "test", note), "hw_pmu": Fact(pmu, "test"),
                    "online_cpus": Fact([0, 1], "test")})


def test_a_lab_whose_name_starts_with_a_digit_has_a_package_python_can_import():
    assert lab_package("4k-aliasing") == "four_k_aliasing" and lab_package("loop-alignment") == "loop_alignment"
    assert find("4k-aliasing").package == "perflab.labs.four_k_aliasing" and find("4k-aliasing").load() is LAB


# --- the sweep ----------------------------------------------------------------------------------------------

def test_distances_are_fine_near_zero_and_coarse_around_the_page():
    for width in sweep.KERNELS.values():
        found = sweep.distances(width)
        assert sweep.CONTROL in found and all(-2048 <= d <= 2047 and d % width == 0 for d in found)
        assert set(range(-sweep.NEAR, sweep.NEAR + 1, width)) <= set(found) and 1536 in found


def _timings(slow: dict[int, float], n: int = 15) -> dict[int, list[float]]:
    """0.25 ns per element at every distance but the slow ones, with a little deterministic jitter."""
    return {d: [0.25 * slow.get(d, 1.0) * (1 + 0.003 * ((i * 7 + d) % 5)) for i in range(n)]
            for d in sweep.distances(8)}


def test_classify_finds_the_slow_distances_against_the_control():
    found = sweep.classify(_timings({8: 1.2, 16: 1.17, 24: 1.08, 32: 1.02}))
    assert found["slow"] == [8, 16, 24], "32 is 2% above the control: below the 5% worth calling slow"
    assert found["slowest"] == 8 and found["ratios"]["8"] == pytest.approx(1.2, rel=0.01)
    assert sweep.ranges(found["slow"], 8) == "+8..+24" and sweep.ranges([-64, 8, 16, 256], 8) == "-64, +8..+16, +256"


def test_classify_with_too_few_rounds_calls_nothing_slow():
    assert sweep.classify(_timings({8: 1.5}, n=3))["slow"] == [], "3 rounds cannot pass a test corrected for 78"


# --- the stencil race and the verdict -------------------------------------------------------------------------

def _result(aligned: list[float], padded: list[float], padding: int = 64) -> dict:
    arms = [stencil.ALIGNED, stencil.padded(padding)]
    race = Race(arms, {arms[0]: aligned, arms[1]: padded}, alpha_per_look=0.05 / 12, looks=3, stopped="decided")
    samples = [{"kernel": "scalar", "distance": d, "ns_per_element": v, "round": i}
               for d, values in _timings({8: 1.2, 16: 1.2}).items() for i, v in enumerate(values)]
    return {"params": {"cpu": 1}, "prediction": "Intel, family 6: expect it",
            "sweep": {"samples": samples, "notes": [], "meta": {}},
            "stencil": {"padding": padding, "race": race.to_json(),
                        "page_offsets": {arms[0]: {"p": 0, "wrk2": 0}, arms[1]: {"p": 0, "wrk2": 3 * padding}}},
            "hunt": {"event": None, "why": hunt.NO_PMU, "per_point": {}}}


def _spread(centre: float, n: int = 20) -> list[float]:
    return [centre * (1 + 0.01 * ((i * 3) % 7 - 3)) for i in range(n)]


@pytest.mark.parametrize("aligned, padded, expected", [
    (_spread(830), _spread(1624), "reproduced"),
    (_spread(5000), _spread(5020), "not-reproduced"),
])
def test_judge_decides_from_the_race_and_says_what_it_expected_and_found(aligned, padded, expected):
    verdict = LAB.judge(machine("GenuineIntel", 6), _result(aligned, padded))
    assert verdict.verdict == expected and verdict.effect.name.startswith("padding 64 B per allocation")
    assert verdict.notes[0] == "expected from the probe, before measuring: Intel, family 6: expect it"
    assert any("scalar loop" in n and "+8..+16" in n for n in verdict.notes) and hunt.NO_PMU in verdict.notes


def test_a_padding_of_whole_pages_is_named_as_changing_nothing():
    verdict = LAB.judge(machine("GenuineIntel", 6), _result(_spread(5000), _spread(5000), padding=4096))
    assert any("whole number of pages" in n for n in verdict.notes)


def test_expectation_comes_from_vendor_and_family_never_the_model_name():
    intel = expectation(machine("GenuineIntel", 6))
    assert "3.6.8.2" in intel and "x2" in intel
    assert expectation(machine("GenuineIntel", 6, model="AMD EPYC (a hypervisor's name)")) == intel
    assert "Zen 4 guest" in expectation(machine("AuthenticAMD", 25)) and "2-20%" in expectation(
        machine("AuthenticAMD", 25)
    )
    assert "has not measured this family" in expectation(machine("AuthenticAMD", 23))
    assert "no expectation" in expectation(machine("ARM", None))


# --- the hunt -------------------------------------------------------------------------------------------------

def test_the_event_is_named_by_the_probe_and_perf():
    assert hunt.alias_event(machine("GenuineIntel", 6, pmu=False)) == (None, hunt.NO_PMU)
    event, why = hunt.alias_event(machine("AuthenticAMD", 25, pmu=True), listed="ld_blocks.address_alias")
    assert event is None and "timing only" in why
    listed = "cycles ld_blocks.address_alias ld_blocks.store_forward"
    assert hunt.alias_event(machine("GenuineIntel", 6, pmu=True), listed)[0] == "ld_blocks.address_alias"
    listed += " ld_blocks_partial.address_alias"
    assert hunt.alias_event(machine("GenuineIntel", 6, pmu=True), listed)[0] == "ld_blocks_partial.address_alias"
    assert hunt.alias_event(machine("GenuineIntel", 6, pmu=True), "cycles")[0] is None


def test_perf_stat_output_is_parsed_and_an_uncounted_event_is_none():
    text = "# started\n217799413,,ld_blocks_partial.address_alias:u,1000,100.00,,\n"
    assert hunt.parse_perf_stat(text, "ld_blocks_partial.address_alias") == 217799413
    assert hunt.parse_perf_stat("<not counted>,,ld_blocks.address_alias,0,0.00,,", "ld_blocks.address_alias") is None
    note = hunt.hunt_note({"why": "perf counts x", "per_point": {"page-aligned": 1.0, "padded 64 B": None}})
    assert "page-aligned 1.000" in note and "padded 64 B not counted" in note


# --- the programs ---------------------------------------------------------------------------------------------

def _layout(program: str, *args: str) -> dict:
    records = run_records([str(ensure_built(sweep.SOURCE_DIR, program)), *args])
    return next(r for r in records if r["type"] == "layout")["page_offsets"]


def test_the_arena_pads_each_allocation_once_more_than_the_last():
    assert set(_layout("stencil", "-p", "0", "-n", "1", "-s", "1").values()) == {0}
    padded = _layout("stencil", "-p", "64", "-n", "1", "-s", "1")
    assert [padded[m] for m in ("p", "bnd", "wrk1", "wrk2", "a", "b", "c")] == [0, 64, 128, 192, 256, 320, 384]
    assert _layout("emphasis", "-o", "4096", "-n", "1", "-s", "1") == {"in": 0, "out": 0}, "a page changes no low bit"
    assert _layout("emphasis", "-o", "4100", "-n", "1", "-s", "1") == {"in": 0, "out": 4}


@pytest.mark.parametrize("program, args", [
    ("alias_sweep", ["-d", "12"]), ("alias_sweep", ["-k", "vector", "-d", "8"]), ("alias_sweep", ["-d", "4096"]),
    ("alias_sweep", ["-k", "fma"]), ("alias_sweep", ["-d", "1,,2"]), ("stencil", ["-n", "0"]),
    ("stencil", ["-p", "-64"]), ("emphasis", ["-o", "99999999"]), ("emphasis", ["-x"]),
])
def test_the_programs_refuse_bad_input_in_one_line(program, args):
    done = subprocess.run([str(ensure_built(sweep.SOURCE_DIR, program)), *args], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and not done.stdout, args


# --- the source, replayed -------------------------------------------------------------------------------------

def test_the_source_is_replayed_from_its_own_numbers():
    found = recorded.replay()
    assert found["aligned"] == 830.995 and found["padded"] == [1624.3, 1643, 1692]
    assert found["speedup"] == pytest.approx((1624.3 / 830.995 - 1, 1692 / 830.995 - 1))
    assert found["padded_spread"] == pytest.approx(1692 / 1624.3 - 1)
    assert found["events_ratio"] == pytest.approx((217799413 / 19e6, 217799413 / 18e6))
    assert "one run of the page-aligned arm gives no interval" in found["judgement"]


def test_figures_from_a_result_in_memory_and_the_source_alone():
    verdict = Verdict(LAB.name, "reproduced", "", result=_result(_spread(830), _spread(1624)))
    titles = [title for title, _ in figures(verdict)]
    assert titles == ["The store->load loop at every distance", "The stencil, raced: page-aligned against padded",
                      "The source, replayed"]
    counted = _result(_spread(830), _spread(1624))
    counted["hunt"] = {
        "event": "ld_blocks.address_alias",
        "why": "",
        "per_point": {"page-aligned": 1.0, "padded 64 B": 0.1},
    }
    assert "The PMU's count" in [title for title, _ in figures(Verdict(LAB.name, "reproduced", "", result=counted))]
    assert [title for title, _ in figures(Verdict(LAB.name, "cannot-show", ""))] == ["The source, replayed"]
    assert source_figure().axes[0].get_xlabel() == "padding per allocation, bytes"


# --- the exercises --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("distance, width, back, expected", [
    (8, 8, 1, True), (16, 8, 1, False), (16, 8, 2, True), (0, 8, 8, False), (-8, 8, 8, False),
    (12, 8, 1, True), (4092, 8, 1, False), (64, 32, 2, True), (64, 32, 1, False), (4100, 4, 1, True),
])
def test_the_model_of_a_false_match(distance, width, back, expected):
    assert exercises.meets_a_store(distance, width, back) is expected


def test_stores_back_needed_explains_the_slow_distances_or_says_none():
    assert exercises.stores_back_needed([8, 16, 24], 8) == 3 and exercises.stores_back_needed([], 8) == 0
    assert exercises.stores_back_needed([-64], 8) is None, "no number of stores ahead makes dst behind src slow"


def test_predict_checks_the_function_and_the_stores_back_from_the_saved_sweep():
    result = exercises.sweep_here(rounds=2, progress=False)
    inputs = {"meets_a_store": exercises.fresh_cases()}
    wrong = Answers({"result": result, "STORES_BACK": {"scalar": -1}}, inputs)
    assert [c.status for c in exercises.predict(wrong)] == [FAILED, PASSED, FAILED]
    assert json.loads(open(result["path"]).read())["sweep"]["samples"], "the sweep is saved with its samples"


def test_fix_offsets_checks_the_layout_before_it_races():
    checks = exercises.fix_offsets({"OFFSET": "64", "CHANGES_NOTHING": 4096})
    assert [c.status for c in checks] == [FAILED, PASSED], "a string is no offset: no race is started"
    checks = exercises.fix_offsets({"OFFSET": -1, "CHANGES_NOTHING": 2048})
    assert [c.status for c in checks] == [FAILED, FAILED]


def test_run_lab_quick_gives_a_verdict_and_saves_one_file(isolated_state):
    verdict = LAB.run(quick=True, progress=False)
    assert verdict.verdict in ("reproduced", "not-reproduced", "inconclusive")
    saved = list((isolated_state / "results" / "4k-aliasing").glob("*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["prediction"] == verdict.result["prediction"]
    assert [title for title, _ in figures(verdict)][0] == "The store->load loop at every distance"


def test_the_padding_comes_from_the_command_line_as_text():
    from perflab.errors import PerflabError

    assert LAB._options({"padding": "4096"}) == {"padding": "4096"} and LAB._options({}) == {"padding": "64"}
    with pytest.raises(PerflabError, match="padding must be one of 64, 32, 2048, 4096"):
        LAB._options({"padding": "100"})
