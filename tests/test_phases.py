"""The suite's own two phases (tests/conftest.py): `make test` runs the tests that time nothing side by side,
then the live ones alone. Each check runs pytest on a small module, as a developer would."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

from conftest import REPO, changes_the_machine
from perflab.manifest.labs import labs

SUITE_TIME = REPO / "benchmarks" / "suite_time.py"


def own_env() -> dict[str, str]:
    """This environment, less this session's options (PYTEST_ADDOPTS) and its xdist worker's name."""
    return {name: value for name, value in os.environ.items()
            if name != "PYTEST_ADDOPTS" and not name.startswith("PYTEST_XDIST")}


def pytest_run(*args: str) -> subprocess.CompletedProcess:
    """A pytest of its own."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, cwd=REPO, env=own_env(), timeout=300)


def collected(*args: str) -> set[str]:
    done = pytest_run("--collect-only", "-q", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_the_phases_split_a_module_between_them_and_lose_no_test():
    module = "tests/test_first_core_ipi.py"  # unit tests beside real runs marked live
    everything = collected(module)
    live, parallel = collected("--phase", "live", module), collected("--phase", "parallel", module)
    assert live and parallel and not live & parallel and live | parallel == everything
    assert f"{module}::test_a_quick_run_here_measures_both_arms_and_puts_rq_affinity_back" in live


def test_the_labs_that_change_the_machine_are_told_apart():
    """Their whole-lab tests share the lab-runs worker (conftest.lab_run_marks); other labs' go to any worker. A new
    lab that changes the machine fails here until it is listed: it then runs one at a time with these."""
    changing = {lab.name for lab in labs() if lab.ready and changes_the_machine(lab.name)}
    assert changing == {"first-core-ipi", "numa-static-data", "memcpy-variant"}  # rq_affinity, NUMA balancing, tracefs


def test_side_by_side_is_refused_outside_the_parallel_phase():
    for phase in ([], ["--phase", "all"], ["--phase", "live"]):
        done = pytest_run("-n", "2", *phase, "--collect-only", "-q", "tests/test_stats.py")
        assert done.returncode == 4, done.stdout + done.stderr
        assert "-n runs tests side by side, which only the tests that time nothing may" in done.stderr
    assert pytest_run("-n", "2", "--phase", "parallel", "--collect-only", "-q", "tests/test_stats.py").returncode == 0


def test_a_phase_with_nothing_to_run_passes():
    """`make test PYTEST_ARGS=tests/test_stats.py`: no live test there, and the live phase is not a failure."""
    done = pytest_run("--phase", "live", "-q", "tests/test_stats.py")
    assert done.returncode == 0 and "deselected" in done.stdout, done.stdout + done.stderr


def test_the_suite_time_benchmark_runs_each_phase_as_make_test_does():
    makefile = (REPO / "Makefile").read_text()
    phases = runpy.run_path(str(SUITE_TIME))["PHASES"]
    for phase, args in phases.items():
        assert f"-m pytest {' '.join(args)} $(PYTEST_ARGS)" in makefile, phase


def test_the_suite_time_benchmark_records_every_test_of_the_phase_it_ran(tmp_path):
    """benchmarks/suite_time.py, on one small module: a record per test with its worker, the phase's machine shares,
    the JSON it saves; and its bad input, one line and exit 2, saving nothing."""
    env = {**own_env(), "PERFLAB_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, str(SUITE_TIME), "--phase", "parallel", "--json", "--",
                           "-p", "no:cacheprovider", "tests/test_cpuid.py"], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["version"] == 1 and record["machine"] and [p["phase"] for p in record["phases"]] == ["parallel"]
    assert record["tests"] and all(t["test"].startswith("tests/test_cpuid.py::") for t in record["tests"])
    assert all(t["worker"].startswith("gw") and t["wall_s"] >= 0 for t in record["tests"])
    assert len(record["tests"]) == len(collected("tests/test_cpuid.py"))
    shares = record["phases"][0]["machine"]
    assert set(shares) == {"busy", "idle", "steal"} and abs(sum(shares.values()) - 1) < 1e-9
    saved = list((tmp_path / "benchmarks").glob("suite-time-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text()) == record
    for bad in (["--top", "0"], ["--phase", "both-at-once"], ["--help"]):
        refused = subprocess.run([sys.executable, str(SUITE_TIME), *bad], capture_output=True, text=True, cwd=REPO,
                                 env={**env, "PERFLAB_RESULTS": str(tmp_path / "untouched")}, timeout=60)
        assert (refused.returncode, refused.stderr.count("\n")) == ((0, 0) if bad == ["--help"] else (2, 1)), bad
    assert not (tmp_path / "untouched").exists(), "bad input or --help ran or saved something"
