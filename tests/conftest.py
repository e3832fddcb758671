"""Shared fixtures: every test writes results, progress and locks into its own temporary folder."""

from __future__ import annotations

import ast
import functools
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Side by side, each worker compiles the labs' variants (a learner's copy, a known fix) into a folder of its own:
# two tests building the same variant at once would write each other's source and binary. Before perflab is
# imported, which reads it once.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["PERFLAB_BUILD_DIR"] = str(REPO / "build" / f"tests-{os.environ['PYTEST_XDIST_WORKER']}")

from perflab.labs import Lab  # noqa: E402
from perflab.results import new_result  # noqa: E402
from perflab.verdict import Verdict  # noqa: E402

FIXTURE_MACHINES = REPO / "tests" / "fixtures" / "machines"
SHARED_C2C = REPO.parent / "shared" / "datasets" / "core-to-core"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("PERFLAB_PROGRESS", str(tmp_path / "progress.txt"))
    monkeypatch.setenv("PERFLAB_WORKSPACE", str(tmp_path / "work"))
    monkeypatch.setenv("PERFLAB_LOCK", str(tmp_path / "measure.lock"))
    monkeypatch.setenv("PERFLAB_TURNS", "")  # the lock file, never the queue of a workshop that is up on this machine
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return tmp_path


# A learner who does not play by the rules: holds the lock file (PERFLAB_LOCK) and a turn of the workshop's queue
# (PERFLAB_TURNS), never says it is done, and prints what the queue granted.
HOLD_A_TURN_AND_THE_LOCK = """
import fcntl, json, os, socket, sys, time
fcntl.flock(os.open(os.environ["PERFLAB_LOCK"], os.O_RDWR | os.O_CREAT, 0o666), fcntl.LOCK_EX)
asker = socket.socket(socket.AF_UNIX)
asker.connect(os.environ["PERFLAB_TURNS"])
asker.sendall(json.dumps({"what": "perflab run loop-alignment --quick"}).encode() + b"\\n")
print(asker.makefile().readline().strip(), flush=True)
time.sleep(600)
"""


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `perflab ARGS` as a learner would, in a fresh process."""
    return subprocess.run([sys.executable, "-m", "perflab", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})


# Rounds per race in the tests that run whole labs to check their plumbing (every cell runs, every figure draws,
# the verdict reads back): a race stops at 2 rounds, the fewest an interval takes, decided or not. Deciding is what
# the verdict-stability benchmarks and each lab's own real-run test measure. 10 rounds took the notebooks and
# `run all` 1.6 times as long here (135 s against 86 s for `run all` alone) and asserted nothing more.
RUNS_FOR_PLUMBING = "2"


@functools.cache  # asked once per test that runs a lab, at every collection: each lab's package parsed once
def changes_the_machine(lab: str) -> bool:
    """Whether a run of the lab may change this machine's settings (rq_affinity, tracefs, NUMA balancing): the lab
    contract has every change go through perflab.journal.SystemChanges, so a lab whose package names it
    (`from ...journal import SystemChanges`, or `journal.SystemChanges`)."""
    from perflab.paths import LAB_PACKAGES, lab_package

    return any(isinstance(node, ast.alias) and node.name == "SystemChanges"
               or isinstance(node, ast.Attribute) and node.attr == "SystemChanges"
               for path in (LAB_PACKAGES / lab_package(lab)).rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text())))


def lab_run_marks(lab: str) -> list:
    """The marks of a test that runs the whole lab: on the lab-runs worker, one after another as the measurement
    lock has them outside the tests, if the lab changes the machine (a killed run's restore must not meet another
    live run of it); on any worker if it does not."""
    return [pytest.mark.xdist_group("lab-runs")] if changes_the_machine(lab) else []


def without_guest_image(folder: Path) -> dict[str, str]:
    """The environment of a machine with no guest image: a lab that boots VMs says so in seconds instead of
    booting them (minutes under TCG). Its real boots are tested by the slow VM tests, so the tests that run
    every lab or every grader stay the same length whether or not the image is built yet."""
    return {"PERFLAB_VM_CACHE": str(folder / "no-vm-images")}


@pytest.fixture(scope="session", autouse=True)
def guest_image_in_background(request):
    """Start building the guest image (about 2 minutes, as root) while the fast tests run, when slow tests
    will need it and it is not built: the VM tests then wait on the build's lock instead of building."""
    from perflab.vm import image

    wanted = any("guest_image" in getattr(item, "fixturenames", ()) for item in request.session.items)
    # Side by side (pytest-xdist), the first worker builds and the others' VM tests wait on the build's lock.
    first_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"
    if not wanted or not first_worker or os.geteuid() != 0 or image.current().exists():
        yield
        return
    log = Path(tempfile.gettempdir()) / "perflab-test-image-build.log"
    with log.open("w") as out:
        # At the lowest CPU and I/O priority: the tests that measure meanwhile keep the machine.
        build = subprocess.Popen(
            ["nice", "-n", "19", "ionice", "-c", "3", sys.executable, "-m", "perflab", "vm", "build"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
            start_new_session=True,
        )
    yield
    if build.poll() is None:  # the session ended first (a -k run, say): stop mmdebstrap and apt too
        os.killpg(build.pid, signal.SIGTERM)
        build.wait()


@pytest.fixture(scope="session")
def guest_image():
    """The course's guest image, for the tests that boot it: waited for while guest_image_in_background builds
    it, built here otherwise. These tests run after the others (pytest_collection_modifyitems), so that a worker
    has other tests to run while the image builds."""
    from perflab.vm import image

    if not image.current().exists() and os.geteuid() != 0:
        pytest.skip("the guest image is not built and building it needs root: run `sudo perflab vm build`")
    return image.ensure(progress=False)


@pytest.fixture(scope="session")
def numa2_up(guest_image):
    """The two-socket VM, booted once (about 25 s under TCG) for every test that runs something in it.

    Its tests run last and one after another (pytest_collection_modifyitems), so it is up only while they run,
    and a lab run with `--vm numa2` finds it up and leaves it up, as a learner's `perflab vm up numa2` would."""
    from perflab.vm import machine

    done = run_cli("vm", "up", "numa2", timeout=900)
    assert done.returncode == 0, done.stderr
    yield machine.vm("numa2")
    down = run_cli("vm", "down", "numa2")
    assert down.returncode == 0 and not machine.vm("numa2").running(), down.stderr


def pytest_addoption(parser):
    parser.addoption(
        "--phase", choices=("all", "parallel", "live"), default="all",
        help="which tests this session runs: all; only those not marked live (`make test` runs them side by side "
             "with -n 3); or only the live ones (run alone, after: they measure this machine)",
    )


def pytest_configure(config):
    """Tests side by side (pytest-xdist's -n) are only those that time nothing: a live test beside another one
    would measure its neighbour."""
    if getattr(config.option, "numprocesses", None) and config.getoption("phase") != "parallel":
        raise pytest.UsageError("-n runs tests side by side, which only the tests that time nothing may: add "
                                "--phase parallel, then run --phase live without -n (as `make test` does)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Keep this session's phase, and order it.

    When the tests run side by side, those that boot the course's VMs (named by profile: two tests cannot both
    boot `default`) or run the labs that change the machine go to one worker each (lab_run_marks): numa2 boots
    once, and `run all` runs once, beside the other runs of those labs (test_notebooks, test_kill_9) rather than
    at the same time (pytest-xdist starts the biggest group first). The tests that share numa2 go last, so it is
    up only from then on; in the other group those that boot the guest image go after those that do not, so that
    it builds meanwhile on a fresh machine.
    The tests of no group run on the third worker from the start, and on the others once their group is done:
    the slow ones first, those that boot the image (Vagrant's, 200 s) before the others, so that short ones fill
    the end (the sort is stable). On a fresh machine the third worker so starts by waiting for the image's
    build, while the two groups keep both CPUs busy; Vagrant's test left to the end kept one CPU idle for two
    minutes."""
    phase = config.getoption("phase")
    if phase != "all":
        in_phase = {True: [], False: []}
        for item in items:
            in_phase[(item.get_closest_marker("live") is not None) == (phase == "live")].append(item)
        config.hook.pytest_deselected(items=in_phase[False])
        items[:] = in_phase[True]
    for item in items:
        for fixture, group in (("numa2_up", "vms"), ("every_lab_quick", "lab-runs")):
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    def order(item) -> tuple[bool, bool, bool, bool]:
        boots_image = "guest_image" in getattr(item, "fixturenames", ())
        return ("numa2_up" in getattr(item, "fixturenames", ()),
                boots_image and item.get_closest_marker("xdist_group") is not None,
                item.get_closest_marker("slow") is None,
                not boots_image)

    items.sort(key=order)


def pytest_sessionfinish(session, exitstatus):
    """A phase with nothing to run (`make test PYTEST_ARGS=tests/test_stats.py` has no live test) passes."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.getoption("phase") != "all":
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(scope="session")
def every_lab_quick(tmp_path_factory) -> tuple[dict, Path]:
    """`perflab run all --quick --runs 2 --json`, once for the whole session: (its JSON, the results folder it
    wrote)."""
    import json

    folder = tmp_path_factory.mktemp("run-all")
    env = {"PERFLAB_RESULTS": str(folder / "results"), "PERFLAB_LOCK": str(folder / "measure.lock"),
           "PERFLAB_PROGRESS": str(folder / "progress.txt"), "PERFLAB_WORKSPACE": str(folder / "work"),
           **without_guest_image(folder)}
    done = run_cli("run", "all", "--quick", "--runs", RUNS_FOR_PLUMBING, "--json", env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), folder / "results"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item: browser fixtures save a screenshot when the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


class StubLab(Lab):
    """The smallest lab: the skeleton around it is what a test of the run's machinery tests."""

    name = "core-to-core"
    QUICK = FULL = None

    def choose_cpus(self, machine, cpus):
        return None

    def watched_cpus(self, placement):
        return []

    def measure(self, machine, placement, settings, progress):
        return new_result(self.name, "stub", {}, {})

    def judge(self, machine, result):
        return Verdict(self.name, "inconclusive", "a stub")
