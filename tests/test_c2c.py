"""The pinning advisor on real recorded matrices (../shared), on the shipped ones, and on synthetic cases."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_C2C
from perflab.cpulist import parse_cpulist
from perflab.errors import PerflabError
from perflab.labs.core_to_core.advisor import analyze
from perflab.labs.core_to_core.figures import heatmap, latency_histogram
from perflab.labs.core_to_core.matrix import LatencyMatrix, from_result, load
from perflab.labs.core_to_core.placement import best_pipeline, pipeline_cost
from perflab.paths import DATA_DIR

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
@pytest.mark.parametrize("prefix", ["intel-xeon-platinum-8375c", "dual-intel-xeon-gold-6242", "dual-intel-xeon-cpu-e5-2680-v4",
                                    "amd-epyc-7r13", "amd-ryzen-9-5950x", "amd-ryzen-threadripper-3960x", "intel-core-i7-6700k"])
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


@pytest.mark.parametrize("text, fragment", [("\n12,\n13,x,\n", "line 3"), ("\n12,\n13,-4,\n", "line 3"), ("\n12,14,\n", "line 2")])
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
