"""Lab 5, numa-static-data: the program's arms and bad input, the model, the hunt and its grader, placement."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perflab.build import ensure_built
from perflab.grading import FAILED, PASSED, Answers
from perflab.labs.numa_static_data import hunt as hunting
from perflab.labs.numa_static_data.model import cap_mops, decide, fit, predict, throughput_mops
from perflab.labs.numa_static_data.program import SOURCE_DIR, Settings, binary, launches, run_arm, write_costs
from perflab.labs.numa_static_data.recorded import slow_fraction, source_cap
from tests.conftest import run_cli

TINY = Settings(1, 1, 1, ops=20_000, repeats=2)


def test_every_arm_runs_and_reports_its_placement():
    program = binary()
    for arm in ("none", "read", "write", "check", "padded"):
        ran = run_arm(program, [0, 1], arm, 4, TINY)
        assert ran["arm"] == arm and ran["mops"] > 0 and len(ran["samples"]) == 2
    done = subprocess.run([str(program), "-c", "0,1", "-a", "none", "-n", "10", "-r", "1", "-m", "0"],
                          capture_output=True, text=True, check=True)
    placement = next(json.loads(line) for line in done.stdout.splitlines() if '"placement"' in line)
    assert placement["symbol"] == "shared_sentinel" and placement["node"] == 0 and placement["moved_to"] == 0


def test_write_costs_give_one_value_per_run_in_rotated_order(monkeypatch):
    """What the cap-model notebook shows with its spread: every run's value, no write rate always first."""
    ran = []
    monkeypatch.setattr("perflab.labs.numa_static_data.program.run_arm",
                        lambda program, cpus, arm, k, settings: ran.append((arm, k, settings.ops)) or {"ns_per_op": k})
    assert write_costs([0, 1], (1, 8), rounds=3, ops=1000, repeats=2) == {1: [1, 1, 1], 8: [8, 8, 8]}
    assert [k for _, k, _ in ran] == [1, 8, 8, 1, 1, 8] and {(arm, ops) for arm, _, ops in ran} == {("write", 1000)}


@pytest.mark.parametrize("argv, message", [
    (["-c", "0", "-a", "write"], "at least two CPUs"),
    (["-c", "0,1", "-a", "write", "-k", "0"], "at least 1"),
    (["-c", "0,1", "-a", "sometimes"], "unknown arm"),
    (["-c", "0,x", "-a", "write"], "bad CPU list"),
    (["-c", "0,1", "-a", "none", "-m", "99"], "node"),
])
def test_the_program_refuses_bad_input_in_one_line(argv, message):
    done = subprocess.run([str(binary()), *argv], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["-C", "1"], "two or more different CPUs"),
    (["-C", "0,4095"], "not online"),
    (["-o", "part=placement"], "needs two NUMA nodes"),
])
def test_the_lab_refuses_bad_input_in_one_line(args, message):
    done = run_cli("run", "numa-static-data", "--quick", *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_model_recovers_what_made_the_data():
    base, per_write = fit(1, predict(12.0, 30.0, 1), 8, predict(12.0, 30.0, 8))
    assert base == pytest.approx(12.0) and per_write == pytest.approx(30.0)
    assert cap_mops(30.0, 1) == pytest.approx(1000 / 30)
    assert throughput_mops(1, 12.0, 30.0, 8) == pytest.approx(1000 / 12)  # one core: its own pace
    assert throughput_mops(64, 12.0, 30.0, 8) == pytest.approx(8000 / 30)  # many: the line's cap
    assert source_cap() == pytest.approx(500_000)
    assert slow_fraction() == pytest.approx((0.32, 16 / 45))


def test_decide_tells_a_fix_from_noise():
    write = [40.0, 41, 39, 42, 40, 41, 39, 40, 41, 40]
    assert decide({"write": write, "check": [v * 2.5 for v in write]}, 0.05)[0] == "reproduced"
    assert decide({"write": write, "check": [v * 1.001 for v in write]}, 0.05)[0] == "not-reproduced"


def test_two_real_nodes_add_the_remote_arm_and_judge_it():
    """The path only real NUMA hardware takes (numa2 under TCG skips the race): the remote arm homes the
    global's page on the other node, and its effect against the local write arm is in the verdict's notes."""
    from perflab.labs.numa_static_data.run import LAB, REMOTE, SPARSE, Placement, arm_argv, race_arms
    from perflab.sequential import Race

    two_nodes = Placement([0, 1], {0: [0, 1], 1: [2, 3]}, emulated=False)
    assert race_arms(two_nodes)[-1] == REMOTE and REMOTE not in race_arms(Placement([0, 1], {}, emulated=False))
    assert arm_argv(Path("p"), two_nodes, "write", TINY)[-2:] == ["-m", "0"], "the line on the threads' node"
    assert arm_argv(Path("p"), two_nodes, REMOTE, TINY)[-2:] == ["-m", "1"], "the line on the other node"

    def judged(remote_mops: float):
        rounds = [1 + 0.01 * (r % 3) for r in range(10)]
        mops = {"none": 100, "read": 99, "write": 40, "check": 98, "padded": 97, SPARSE: 80, REMOTE: remote_mops}
        race = Race(list(mops), {arm: [m * f for f in rounds] for arm, m in mops.items()}, 0.01, looks=2,
                    stopped="decided")
        result = {"numa_balancing": "0", "params": {"cpus": [0, 1], "nodes": two_nodes.nodes, "emulated": False},
                  "coherence": {"race": race.to_json(), "samples": []}}
        verdict = LAB.judge(None, result)
        return verdict, next(n for n in verdict.notes if n.startswith("write arm, line on the threads' node"))

    verdict, note = judged(remote_mops=20)
    assert verdict.verdict == "reproduced" and ": reproduced, the line's page on the other node" in note, note
    assert "the threads share the first NUMA node" in " ".join(verdict.notes)
    assert ": not reproduced, a remote cost of 10% or more is ruled out" in judged(remote_mops=40)[1]


def test_launches_predict_first_touch_then_policy():
    planned = launches({0: [0, 1], 1: [2, 3]})
    assert [p["expected"] for p in planned] == [0, 1, 0, 0]
    assert planned[2]["launcher"][:2] == ("numactl", "--membind=0") and planned[3]["move_to"] == 0


def test_the_hunt_finds_the_one_global_written_on_every_lookup():
    program = ensure_built(SOURCE_DIR, "hunt")
    found = {g.name: g for g in hunting.globals_of(program)}
    assert {"lru_sentinel", "stat_hits", "bucket_keys", "config_name"} <= set(found)
    assert found["bucket_keys"].section == ".bss" and found["config_name"].section == ".data"
    counts = hunting.count_writes([str(program), "-c", "0,1", "-n", "5000"], list(found.values()))
    assert hunting.hot_globals(counts, 2 * 5000) == ["lru_sentinel"]
    assert 10_000 <= counts["lru_sentinel"] <= 10_100


def test_the_hunt_grader_passes_only_the_built_answer(tmp_path, monkeypatch):
    from perflab.labs.numa_static_data import exercises

    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path))
    monkeypatch.setattr(exercises, "EXERCISE_BUILD_DIR", tmp_path / "build")
    exercises.hunt_binary()
    record = json.loads(exercises.hunt_record().read_text())
    right = next(name for name in exercises.HOT_CANDIDATES if exercises._digest(name) == record["hot_sha256"])
    wrong = next(name for name in exercises.HOT_CANDIDATES if name != right)
    assert all(c.status == PASSED for c in exercises.hunt(Answers({"HOT_GLOBAL": right, "WRITES_PER_LOOKUP": 1.0}, {})))
    graded = exercises.hunt(Answers({"HOT_GLOBAL": wrong, "WRITES_PER_LOOKUP": 2.0}, {}))
    assert [c.status for c in graded] == [FAILED, FAILED]


def test_the_known_fixes_still_apply_to_hunt_c():
    from perflab.labs.numa_static_data.exercises import HUNT_SOURCE, known_fix, known_wrong_fix

    source = HUNT_SOURCE.read_text()
    assert "if (*hot != 0) *hot = 0;" in known_fix(source)
    assert "aligned(128)" in known_wrong_fix(source) and known_wrong_fix(source) != source


@pytest.mark.slow
def test_placement_in_numa2_follows_first_touch_and_the_result_comes_back(numa2_up, isolated_state):
    """The two-node VM (TCG): every launch's page lands where first touch and policy say, and the result the
    guest saved is copied into the host's results/ with the VM and the guest's probe in it."""
    done = run_cli("run", "numa-static-data", "-o", "part=placement", "--vm", "numa2", "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = json.loads(done.stdout)
    assert verdict["verdict"] == "reproduced", verdict
    assert sum("as predicted" in note for note in verdict["notes"]) == 4
    assert verdict["vm"]["profile"] == "numa2" and verdict["vm"]["accel"] in ("kvm", "tcg")
    path = Path(verdict["results"])
    assert path.is_relative_to(isolated_state / "results") and path.is_file()
    saved = json.loads(path.read_text())
    assert saved["vm"] == {k: v for k, v in verdict["vm"].items() if k != "copied"}
    assert len(saved["guest_probe"]["facts"]["numa_nodes"]["value"]) == 2
    assert saved["machine"] != {}  # the guest's own summary, as every result has
