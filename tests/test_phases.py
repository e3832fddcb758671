"""The suite's own two phases (tests/conftest.py): `make test` runs the tests that time nothing two at a time,
then the live ones alone. Each check runs pytest on a small module, as a developer would."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def pytest_run(*args: str) -> subprocess.CompletedProcess:
    """A pytest of its own: not this session's options (PYTEST_ADDOPTS) nor its xdist worker's name."""
    env = {name: value for name, value in os.environ.items()
           if name != "PYTEST_ADDOPTS" and not name.startswith("PYTEST_XDIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=300)


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
