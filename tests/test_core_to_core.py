"""Lab 1: the pingpong benchmark, the lab pipeline and its verdict on this machine; and its pinning advisor on
real recorded matrices (../shared), on the shipped ones, and on synthetic cases."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_C2C, run_cli
from perflab import results
from perflab.build import ensure_built
from perflab.cpulist import parse_cpulist
from perflab.errors import PerflabError
from perflab.labs.core_to_core import LAB
from perflab.labs.core_to_core import run as lab
from perflab.labs.core_to_core.advisor import analyze
from perflab.labs.core_to_core.figures import figures, heatmap, latency_histogram
from perflab.labs.core_to_core.matrix import LatencyMatrix, from_result, load
from perflab.labs.core_to_core.placement import best_pipeline, pipeline_cost
from perflab.paths import DATA_DIR
from perflab.probe import probe
from perflab.runner import Run
from perflab.sequential import Race

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

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


# --- the pinning advisor (perflab c2c) on recorded and synthetic matrices ---------------------------------

needs_shared = pytest.mark.skipif(not SHARED_C2C.is_dir(), reason="../shared/datasets/core-to-core is absent (only in "
                                                                  "the course's own checkouts)")


def shared(prefix: str) -> LatencyMatrix:
    return load(next(SHARED_C2C.glob(f"{prefix}*.csv")))


def level(analysis, name):
    return next(
        (groups for groups, info in zip(analysis["levels"], analysis["level_info"]) if info["name"] == name), None
    )


def assert_valid(analysis):
    """Every grouping covers every CPU exactly once, finer levels nest in coarser ones."""
    cpus = sorted(analysis["cpus"])
    for groups in analysis["levels"]:
        assert sorted(c for g in groups for c in g) == cpus
    for finer, coarser in itertools.pairwise(analysis["levels"]):
        for group in finer:
            assert any(set(group) <= set(c) for c in coarser)
    json.dumps(analysis)


@needs_shared
@pytest.mark.parametrize("prefix, n", [("intel-xeon-platinum-8375c", 128), ("dual-intel-xeon-gold-6242", 64),
                                       ("dual-intel-xeon-cpu-e5-2680-v4", 56), ("amd-epyc-7r13", 192)])
def test_two_socket_files_split_into_two_sockets(prefix, n):
    analysis = analyze(shared(prefix))
    assert_valid(analysis)
    sockets = analysis["levels"][-1]
    assert analysis["level_info"][-1]["name"] == "socket"
    assert sorted(len(g) for g in sockets) == [n // 2, n // 2]


@needs_shared
@pytest.mark.parametrize("prefix", ["intel-xeon-platinum-8375c", "dual-intel-xeon-gold-6242",
                                    "dual-intel-xeon-cpu-e5-2680-v4", "amd-epyc-7r13", "amd-ryzen-9-5950x",
                                    "amd-ryzen-threadripper-3960x", "intel-core-i7-6700k"])
def test_smt_siblings_are_found(prefix):
    m = shared(prefix)
    analysis = analyze(m)
    assert_valid(analysis)
    smt = level(analysis, "SMT siblings")
    assert smt and all(len(g) == 2 for g in smt)
    for a, b in smt:  # a sibling is its CPU's nearest neighbour
        row = [m.latency(a, c) for c in m.cpus if c != a]
        assert m.latency(a, b) == pytest.approx(np.nanmin(row))


@needs_shared
def test_chiplets_are_found():
    ryzen = analyze(shared("amd-ryzen-9-5950x"))
    assert level(ryzen, "shared-cache cluster") == [
        list(range(0, 8)) + list(range(16, 24)),
        list(range(8, 16)) + list(range(24, 32)),
    ]
    threadripper = analyze(shared("amd-ryzen-threadripper-3960x"))
    ccx = level(threadripper, "shared-cache cluster")
    assert len(ccx) == 8 and all(len(g) == 6 for g in ccx)
    epyc = analyze(shared("amd-epyc-7r13"))
    assert [len(g) for g in level(epyc, "shared-cache cluster")] == [16] * 12
    assert any("half" in n for n in epyc["notes"]), "the socket guess on this file is explained"


@needs_shared
def test_other_vendors_and_meshes_stay_honest():
    apple = analyze(shared("apple-m1-pro"))
    assert apple["levels"] == [[[0, 1], [2, 3, 4], [5, 6, 7]]]
    alder = analyze(shared("intel-core-i9-12900k"))
    assert [len(g) for g in level(alder, "SMT siblings")].count(2) == 8, "8 P-cores with SMT, E-cores alone"
    for prefix in ("aws-graviton3", "intel-xeon-w9-3475x"):
        analysis = analyze(shared(prefix))
        assert_valid(analysis)
        assert level(analysis, "SMT siblings") is None and level(analysis, "socket") is None
        assert any("without a clear boundary" in n for n in analysis["notes"])
    altra = analyze(shared("dual-ampere-altra"))
    pairs = level(altra, "shared-cache cluster")
    assert len(pairs) == 40 and all(len(g) == 2 for g in pairs), "Neoverse N1 cores sit in pairs on one mesh node"
    assert level(altra, "SMT siblings") is None, "68-97 ns inside a pair is no SMT hand-over"


HELD_OUT = Path(__file__).parent / "fixtures" / "c2c-held-out"
HELD_OUT_TOPOLOGY = json.loads((HELD_OUT / "topology.json").read_text())


@pytest.mark.parametrize("name", sorted(HELD_OUT_TOPOLOGY))
def test_held_out_matrices_give_their_documented_levels(name):
    """Matrices the thresholds were not chosen on: every documented level, and no other, is recovered."""
    documented = HELD_OUT_TOPOLOGY[name]
    analysis = analyze(load(HELD_OUT / name))
    assert_valid(analysis)
    expected = [sorted(parse_cpulist(group) for group in level.split()) for level in documented["levels"]]
    assert analysis["levels"] == expected, documented["documented"]
    has_smt = bool(expected) and all(len(group) == 2 for group in expected[0]) and "threads" in documented["documented"]
    assert (level(analysis, "SMT siblings") is not None) == has_smt


@needs_shared
def test_every_shared_file_gives_a_valid_analysis():
    for path in sorted(SHARED_C2C.glob("*.csv")):
        analysis = analyze(load(path))
        assert_valid(analysis)
        assert analysis["recommended_pairs"], path.name


def test_shipped_data_works_without_shared():
    files = sorted((DATA_DIR / "c2c").glob("*.csv"))
    assert len(files) == 2 and (DATA_DIR / "c2c" / "LICENSE-MIT").exists()
    xeon = analyze(load(DATA_DIR / "c2c" / "dual-intel-xeon-gold-6242-2-8ghz-by-concyclics.csv"))
    crossing = {tuple(p["cpus"]): p["crosses"] for p in xeon["sequential_pairs"]}
    assert crossing[(15, 16)] == "socket" and crossing[(3, 4)] is None
    best = xeon["recommended_pairs"][0]["cpus"]
    assert best[1] - best[0] != 32, "the first recommendation is not an SMT pair"


def synthetic(clusters: int, per: int, within: float, between: float, noise: float, seed: int = 0) -> LatencyMatrix:
    rng = np.random.default_rng(seed)
    n = clusters * per
    ns = np.where((np.arange(n)[:, None] // per) == (np.arange(n)[None, :] // per), within, between)
    ns = ns * rng.uniform(1 - noise, 1 + noise, (n, n))
    ns = (ns + ns.T) / 2
    np.fill_diagonal(ns, np.nan)
    return LatencyMatrix(list(range(n)), ns, "synthetic")


def test_synthetic_two_clusters_with_noise_and_gaps():
    m = synthetic(2, 6, 20, 80, 0.15)
    assert analyze(m)["levels"] == [[list(range(6)), list(range(6, 12))]]
    holes = m.ns.copy()
    holes[0, 7] = holes[7, 0] = holes[2, 3] = holes[3, 2] = np.nan
    analysis = analyze(LatencyMatrix(m.cpus, holes, "holes"))
    assert analysis["levels"] == [[list(range(6)), list(range(6, 12))]]
    assert any("not measured" in n for n in analysis["notes"])


def test_one_outlier_cell_does_not_merge_clusters():
    m = synthetic(2, 8, 20, 80, 0.05)
    ns = m.ns.copy()
    ns[0, 15] = ns[15, 0] = 5.0  # one absurdly fast cell across the boundary
    assert analyze(LatencyMatrix(m.cpus, ns, "outlier"))["levels"] == [[list(range(8)), list(range(8, 16))]]


def test_tiny_matrices():
    two = LatencyMatrix([3, 5], np.array([[np.nan, 60.0], [60.0, np.nan]]), "two")
    analysis = analyze(two)
    assert analysis["levels"] == [] and analysis["recommended_pairs"][0]["cpus"] == [3, 5]
    assert any("no structure" in n for n in analysis["notes"])
    one = LatencyMatrix([0], np.array([[np.nan]]), "one")
    assert analyze(one)["levels"] == [] and analyze(one)["recommended_pairs"] == []


def test_partial_csv(tmp_path):
    full = synthetic(2, 4, 20, 80, 0.0)
    rows = [
        ",".join("" if j >= i else f"{full.ns[i, j]:.1f}" for j in range(8)) for i in range(8)
    ]  # as the tool writes
    partial = tmp_path / "partial.csv"
    partial.write_text("\n".join(rows[:6]) + "\n")
    m = load(partial)
    assert m.cpus == list(range(6)) and m.expected_cpus == 8
    analysis = analyze(m)
    assert any("partial" in n for n in analysis["notes"])
    assert analysis["levels"] == [[[0, 1, 2, 3], [4, 5]]]


def test_nan_cells_are_read_as_not_measured_and_said_so(tmp_path):
    full = synthetic(2, 3, 20, 80, 0.0)
    rows = [",".join("nan" if (i, j) == (4, 1) else "" if j >= i else f"{full.ns[i, j]:.1f}" for j in range(6))
            for i in range(6)]
    (tmp_path / "one-nan.csv").write_text("\n".join(rows) + "\n")
    m = load(tmp_path / "one-nan.csv")
    assert np.isnan(m.latency(4, 1)) and m.measured_fraction == pytest.approx(14 / 15)
    assert any("not measured (empty, nan or null cells)" in n for n in analyze(m)["notes"])


def test_a_matrix_half_measured_loads_and_one_less_is_refused(tmp_path):
    rows = ["", "50", "50,", ",50,"]  # 4 CPUs, 3 of their 6 pairs measured
    (tmp_path / "half.csv").write_text("\n".join(rows) + "\n")
    assert load(tmp_path / "half.csv").measured_fraction == 0.5
    (tmp_path / "less.csv").write_text("\n".join(rows[:-1] + [",,"]) + "\n")
    with pytest.raises(PerflabError, match="only 2 of its 6 pairs of CPUs are measured"):
        load(tmp_path / "less.csv")


@pytest.mark.parametrize("text, fragment", [("\n12,\n13,x,\n", "line 3"), ("\n12,\n13,-4,\n", "line 3"),
                                            ("\n12,14,\n", "line 2")])
def test_malformed_csv_names_the_line(tmp_path, text, fragment):
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(PerflabError, match=fragment):
        load(bad)


def test_result_json_round_trip():
    m = synthetic(2, 3, 20, 80, 0.1)
    again = from_result({"matrix": m.to_json()})
    assert again.cpus == m.cpus and np.allclose(again.ns, m.ns, equal_nan=True)
    with pytest.raises(PerflabError, match="no matrix"):
        from_result({"runs": []})


def test_best_pipeline_matches_brute_force():
    m = synthetic(3, 4, 20, 90, 0.2, seed=3)
    smt = [[0, 1], [4, 5]]
    chain, cost = best_pipeline(m, 3, smt)
    brute = min((pipeline_cost(m, p), p) for p in itertools.permutations(m.cpus, 3)
                if not any(set(s) <= set(p) for s in smt))
    assert cost == pytest.approx(brute[0])


def test_plots_build_for_a_two_socket_matrix():
    m = load(DATA_DIR / "c2c" / "dual-intel-xeon-gold-6242-2-8ghz-by-concyclics.csv")
    analysis = analyze(m)
    figure = heatmap(m, analysis)
    assert len(figure.axes[0].patches) == sum(len(g) for g in analysis["levels"])
    assert latency_histogram(m, analysis).axes[0].patches
