"""Shared fixtures: every test writes results, progress and locks into its own temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURE_MACHINES = REPO / "tests" / "fixtures" / "machines"
SHARED_C2C = REPO.parent / "shared" / "datasets" / "core-to-core"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("PERFLAB_PROGRESS", str(tmp_path / "progress.txt"))
    monkeypatch.setenv("PERFLAB_WORKSPACE", str(tmp_path / "work"))
    monkeypatch.setenv("PERFLAB_LOCK", str(tmp_path / "measure.lock"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return tmp_path


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `perflab ARGS` as a learner would, in a fresh process."""
    return subprocess.run([sys.executable, "-m", "perflab", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})


@pytest.fixture(scope="session")
def every_lab_quick(tmp_path_factory) -> tuple[dict, Path]:
    """`perflab run all --quick --json`, once for the whole session: (its JSON, the results folder it wrote)."""
    import json

    folder = tmp_path_factory.mktemp("run-all")
    env = {"PERFLAB_RESULTS": str(folder / "results"), "PERFLAB_LOCK": str(folder / "measure.lock"),
           "PERFLAB_PROGRESS": str(folder / "progress.txt"), "PERFLAB_WORKSPACE": str(folder / "work")}
    done = run_cli("run", "all", "--quick", "--json", env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), folder / "results"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item: browser fixtures save a screenshot when the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
