"""Lab 1 for real on this machine: the pingpong benchmark, the lab pipeline, its verdict."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import run_cli
from perflab import results
from perflab.build import ensure_built
from perflab.errors import PerflabError
from perflab.labs.core_to_core import LAB
from perflab.labs.core_to_core import run as lab
from perflab.labs.core_to_core.advisor import analyze
from perflab.labs.core_to_core.figures import figures, heatmap
from perflab.labs.core_to_core.matrix import from_result, load
from perflab.probe import probe
from perflab.runner import Run
from perflab.sequential import Race

ONLINE = sorted(os.sched_getaffinity(0))
needs_two_cpus = pytest.mark.skipif(len(ONLINE) < 2, reason="this machine has one usable CPU: no pair to measure")


@pytest.fixture(scope="module")
def pingpong():
    return ensure_built(lab.SOURCE_DIR, "pingpong")


@needs_two_cpus
@pytest.mark.parametrize("mode", ["cas", "two-lines"])
def test_pingpong_prints_meta_then_samples(pingpong, mode):
    a, b = ONLINE[:2]
    done = subprocess.run([str(pingpong), "-C", f"{a},{b}", "-m", mode, "-r", "200", "-s", "5", "-w", "2"],
                          capture_output=True, text=True, timeout=60, check=True)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records[0]["type"] == "meta" and "-O2" in records[0]["cflags"]
    samples = records[1:]
    assert [s["warmup"] for s in samples] == [True, True, False, False, False, False, False]
    for s in samples:
        assert s["cpus"] == [a, b] and s["mode"] == mode
        assert s["one_way_ns"] == pytest.approx(s["elapsed_ns"] / 200 / 2, rel=1e-3)
        assert 1 < s["one_way_ns"] < 100_000


@pytest.mark.parametrize("args, message", [
    (["-C", "0,0"], "two different CPUs"),
    (["-C", "0"], "-C takes two CPUs"),
    (["-C", "0,1", "-m", "fast"], "-m takes cas or two-lines"),
    ([], "needs two CPUs"),
])
def test_pingpong_bad_arguments(pingpong, args, message):
    done = subprocess.run([str(pingpong), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and message in done.stderr


def test_stability_note_flags_a_moving_pair():
    assert lab.stability_note("0,1", [50.0, 52.0, 49.0]) is None
    note = lab.stability_note("0,1", [50.0, 170.0, 52.0])
    assert "from 50 to 170 ns" in note and "virtual machine" in note


def test_round_medians_group_by_round():
    run = Run("0,1", [], samples=[
        {"round": 0, "one_way_ns": 10.0}, {"round": 0, "one_way_ns": 12.0, "warmup": True},
        {"round": 1, "one_way_ns": 30.0}, {"round": 1, "one_way_ns": 34.0},
    ])
    assert lab.round_medians(run) == [10.0, 32.0]


def test_pick_pairs_prefers_the_crossing_neighbours():
    analysis = {
        "sequential_pairs": [
            {"cpus": [0, 1], "one_way_ns": 20.0, "crosses": None},
            {"cpus": [1, 2], "one_way_ns": 90.0, "crosses": "socket"},
        ],
        "recommended_pairs": [{"cpus": [0, 3], "one_way_ns": 18.0}],
    }
    assert lab.pick_pairs(analysis) == ((1, 2), (0, 3))


def test_relation_on_recorded_topologies():
    from conftest import FIXTURE_MACHINES
    from perflab.sysfs import SysRoot

    xeon = probe(SysRoot(FIXTURE_MACHINES / "intel-2s-smt"))
    assert lab.relation(xeon, 0, 32) == "smt-siblings"
    assert lab.relation(xeon, 0, 1) == "same-llc"
    assert lab.relation(xeon, 0, 16) == "different-socket"
    ryzen = probe(SysRoot(FIXTURE_MACHINES / "amd-chiplet"))
    assert lab.relation(ryzen, 7, 8) == "different-llc"


def test_recorded_example_is_computed_from_data():
    text = lab.recorded_example()
    assert "5950X" in text and "boundary" in text


def test_choose_cpus_refuses_offline_ids():
    machine = probe()
    with pytest.raises(PerflabError, match="not online"):
        LAB.choose_cpus(machine, [max(machine.online_cpus) + 1000])


@needs_two_cpus
def test_quick_run_ends_in_a_verdict_with_raw_results(isolated_state):
    done = run_cli("run", "core-to-core", "--quick", "--json")
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["lab"] == "core-to-core"
    assert verdict["verdict"] in ("reproduced", "not-reproduced", "inconclusive", "cannot-show")
    assert verdict["reason"]
    saved = results.load(verdict["results"])
    assert saved["machine"]["cpu_model"] and lab.raw_samples(saved)
    if len(ONLINE) == 2:
        assert verdict["verdict"] == "cannot-show"
        assert "95% CI" in verdict["reason"] and "range" in verdict["reason"], "the one pair comes with its spread"
        assert "5950X" in " ".join(verdict["notes"]), "a small machine is pointed to recorded data"
        matrix = from_result(saved)
        assert matrix.cpus == ONLINE and matrix.latency(*ONLINE) > 0


@needs_two_cpus
def test_compare_pairs_measures_both_configurations(isolated_state):
    """The A/B machinery, run on the one pair there is (both directions), so it runs here too."""
    machine = probe()
    a, b = ONLINE[:2]
    result = lab.compare_pairs(machine, (a, b), (b, a), LAB.QUICK, progress=False)
    raced = result["race"]
    assert len(result["rates"]["sequential"]) == len(result["rates"]["best"]) <= LAB.QUICK.compare_runs
    assert raced["stopped"] in ("decided", "rounds", "budget") and raced["looks"] >= 1
    summary = lab.rate_summary(result["rates"]["best"])
    assert summary["ci_low"] <= summary["harmonic_mean"] <= summary["ci_high"]


def test_figures_for_a_recorded_matrix_result(isolated_state):
    """The lab draws its heatmap from a result in memory, here one made from recorded data."""
    from perflab.verdict import Verdict

    recorded = load(lab.RECORDED_EXAMPLE)
    result = results.new_result(LAB.name, "matrix", {"cpu_model": "recorded"}, {})
    result.update(matrix=recorded.to_json(), analysis=analyze(recorded), runs=[])
    shown = figures(Verdict(LAB.name, "cannot-show", "test", result=result))
    assert [title for title, _ in shown][0].startswith("Measured one-way latency")
    assert len(shown) == 2, (
        "heatmap and the recorded example; a 32-CPU matrix has too many pairs to draw round by round"
    )


def test_heatmap_says_when_its_cpus_are_not_in_numbering_order():
    """A lab about CPU numbering: the reordered axes (the 5950X's siblings 0,16 side by side) say so."""
    recorded = load(lab.RECORDED_EXAMPLE)
    reordered = heatmap(recorded, analyze(recorded)).axes[0]
    assert [t.get_text() for t in reordered.get_xticklabels()][:2] == ["0", "16"]
    assert "not Linux numbering" in reordered.get_xlabel() and "not Linux numbering" in reordered.get_ylabel()
    numbered = heatmap(recorded).axes[0]  # no structure recovered: the CPUs stay in numbering order
    assert numbered.get_xlabel() == numbered.get_ylabel() == "CPU"


def test_recovered_levels_agree_with_the_probe_on_a_5950x():
    """The advisor, from latencies alone, finds what the probe reads from sysfs on the same CPU model."""
    from conftest import FIXTURE_MACHINES
    from perflab.sysfs import SysRoot

    ryzen = probe(SysRoot(FIXTURE_MACHINES / "amd-chiplet"))
    recorded = load(lab.RECORDED_EXAMPLE)
    notes = lab.topology_agreement(analyze(recorded), ryzen, recorded.cpus)
    assert any("matches the SMT siblings (probe)" in n for n in notes), notes
    assert any("matches the shared LLC (probe)" in n for n in notes), notes


def test_run_on_a_many_core_machine_races_the_crossing_pair(monkeypatch, isolated_state):
    """The lab's 3+ CPU path, with the 5950X's recorded matrix and rates standing in for measurements here."""
    import random

    from conftest import FIXTURE_MACHINES
    from perflab.sysfs import SysRoot

    ryzen = probe(SysRoot(FIXTURE_MACHINES / "amd-chiplet"))
    recorded = load(lab.RECORDED_EXAMPLE)
    raced = {}

    def fake_matrix(machine, cpus, settings, mode="cas", progress=True, wait=True):
        result = results.new_result(LAB.name, "matrix", machine.summary(), {"cpus": cpus})
        result.update(matrix=recorded.subset(cpus).to_json(), runs=[], notes=[])
        return result

    def fake_compare(machine, sequential, best, settings, progress=True, wait=True):
        raced.update(sequential=sequential, best=best)
        rng = random.Random(7)
        rates = {"sequential": [rng.gauss(5.9e6, 0.1e6) for _ in range(30)],
                 "best": [rng.gauss(6.4e6, 0.1e6) for _ in range(30)]}
        race = Race(["sequential", "best"], rates, alpha_per_look=0.05 / 6, looks=6, stopped="rounds")
        return {"rates": rates, "race": race.to_json()}

    monkeypatch.setattr(LAB, "probe", lambda: ryzen)
    monkeypatch.setattr(lab, "measure_matrix", fake_matrix)
    monkeypatch.setattr(lab, "compare_pairs", fake_compare)
    monkeypatch.setattr(LAB, "watched_cpus", lambda placement: [])  # nothing measured: no neighbour can matter
    verdict = LAB.run(quick=True, progress=False)
    crossing = {tuple(p["cpus"]) for p in analyze(recorded)["sequential_pairs"] if p["crosses"]}
    assert raced["sequential"] in crossing, "the naive pair is neighbours that cross a boundary"
    assert raced["best"] not in crossing
    assert verdict.verdict == "reproduced" and verdict.effect.value > 0.05
    assert any("matches the shared LLC (probe)" in n for n in verdict.notes)
    saved = results.load(verdict.results)
    assert saved["summary"]["best"]["harmonic_mean"] > saved["summary"]["sequential"]["harmonic_mean"]
