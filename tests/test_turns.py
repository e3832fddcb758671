"""The workshop's measurement queue (perflab.workshop.turns) and its asking side (perflab.turns).

Each test starts the real service on a socket of its own, with a short turn limit, and asks it for turns from
separate processes, as root and as the user nobody (a learner: root's turns have no limit).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import HOLD_A_TURN_AND_THE_LOCK, REPO
from perflab.manifest.labs import find
from perflab.workshop import turns

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

LIMIT_S = 2
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="asking as a learner (the user nobody) needs root to switch "
                                                       "users")

MEASURE = """
import sys, time
from perflab.lock import measurement_lock
with measurement_lock(sys.argv[1]):
    print(sys.argv[1], 'got a turn', time.time(), flush=True)
    time.sleep(float(sys.argv[2]))
"""

@pytest.fixture
def queue(monkeypatch):
    """The service, on a socket in a folder every user can reach, its state folder open too (only the files'
    own modes keep learners out); PERFLAB_TURNS points this process and its children at it."""
    folder = Path(tempfile.mkdtemp(prefix="perflab-turns-"))
    folder.chmod(0o755)
    (folder / "state").mkdir(mode=0o755)
    sock = folder / "turns.sock"
    env = {**os.environ, "PERFLAB_WORKSHOP_DIR": str(folder / "state"), "PERFLAB_TURNS": str(sock),
           "PERFLAB_TURN_LIMIT_S": str(LIMIT_S)}
    service = subprocess.Popen([sys.executable, "-m", "perflab.workshop.turns"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 15
    while not turns._answers(sock):
        assert service.poll() is None and time.monotonic() < deadline, service.stdout.read()
        time.sleep(0.05)
    monkeypatch.setenv("PERFLAB_TURNS", str(sock))
    monkeypatch.setenv("PERFLAB_LOCK", str(folder / "measure.lock"))
    yield folder
    service.terminate()
    service.wait(timeout=10)
    assert not sock.exists(), "the socket outlived the service"
    shutil.rmtree(folder)


def _ask(what: str, hold_s: float, user: str | None = None) -> subprocess.Popen:
    argv = [sys.executable, "-c", MEASURE, what, str(hold_s)]
    if user:
        argv = ["runuser", "-u", user, "--", "env", f"PERFLAB_TURNS={os.environ['PERFLAB_TURNS']}",
                f"PYTHONPATH={REPO}", *argv]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def _finish(process: subprocess.Popen) -> tuple[float, str]:
    """(when it got its turn, its stderr)."""
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return float(out.split()[-1]), err


def test_turns_go_one_at_a_time_in_the_order_asked_and_waiters_see_their_place_and_an_estimate(queue):
    first = _ask("perflab run causal-profiling --quick", 1.5)
    time.sleep(0.5)
    second = _ask("second", 0.2)
    time.sleep(0.5)
    third = _ask("third", 0.2)
    (t1, _), (t2, waited2), (t3, waited3) = _finish(first), _finish(second), _finish(third)
    assert t1 < t2 < t3, "the turns went out of order"
    expected = find("causal-profiling").expected_s.quick  # never measured here: the manifest's estimate, less the
    said = re.search(r"waiting to measure: 1st in line, about (\d+) s \(now: root's perflab run "
                     r"causal-profiling --quick\)", waited2)  # time the turn has run
    assert said and expected - 3 <= int(said.group(1)) <= expected, waited2
    assert "waiting to measure: 2nd in line, no estimate yet" in waited3, waited3


@as_root
def test_a_learners_turn_past_its_limit_is_ended_and_they_are_told_why(queue):
    began = time.monotonic()
    learner = _ask("perflab run loop-alignment --quick", 60, user="nobody")
    _, err = learner.communicate(timeout=60)
    assert learner.returncode != 0 and time.monotonic() - began < LIMIT_S + 10
    assert f"perflab run loop-alignment --quick ran past its turn's limit of {LIMIT_S} s and was ended" in err, err


@as_root
def test_a_learner_holding_a_turn_and_the_lock_file_stalls_no_one_past_the_limit(queue):
    from perflab.errors import PerflabError
    from perflab.lock import measurement_lock

    (queue / "measure.lock").touch(mode=0o666)
    os.chmod(queue / "measure.lock", 0o666)
    hostile = subprocess.Popen(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "env",
            f"PERFLAB_TURNS={os.environ['PERFLAB_TURNS']}",
            f"PERFLAB_LOCK={queue / 'measure.lock'}",
            sys.executable,
            "-c",
            HOLD_A_TURN_AND_THE_LOCK,
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own: killing runuser alone leaves its child holding on
    )
    try:
        assert json.loads(hostile.stdout.readline()) == {"turn": LIMIT_S}
        granted = time.monotonic()
        with pytest.raises(PerflabError, match="another measurement is running \\(nobody's perflab run loop-align"):
            with measurement_lock("a look", wait=False):
                pass
        with measurement_lock("the next in line"):
            waited = time.monotonic() - granted
        assert hostile.poll() is None, "the hostile asker gave up by itself: the test proves nothing"
    finally:
        os.killpg(hostile.pid, signal.SIGKILL)
        hostile.wait()
    assert waited < LIMIT_S + turns.GRACE_S + 2, f"stalled {waited:.1f} s behind a turn limited to {LIMIT_S} s"


@as_root
def test_a_learner_who_asks_many_times_waits_behind_every_other_learners_first_turn(queue):
    holder = _ask("holder", 1.5)
    time.sleep(0.5)
    twice = [_ask("nobody's first", 0.1, user="nobody"), None]
    time.sleep(0.3)
    twice[1] = _ask("nobody's second", 0.1, user="nobody")
    time.sleep(0.3)
    other = _ask("daemon's first", 0.1, user="daemon")
    times = {name: _finish(process)[0] for name, process in
             (("holder", holder), ("first", twice[0]), ("second", twice[1]), ("other", other))}
    assert times["holder"] < times["first"] < times["other"] < times["second"], times


@as_root
def test_only_the_queue_writes_the_durations_file(queue):
    _finish(_ask("perflab run numa-static-data --quick", 0.3))
    durations = queue / "state" / "durations.json"
    assert 0.2 < json.loads(durations.read_text())["perflab run numa-static-data --quick"] < 5
    info = durations.stat()
    assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600
    tamper = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                             f"open({str(durations)!r}, 'a').write('x')"], capture_output=True, text=True)
    assert tamper.returncode != 0 and "Permission denied" in tamper.stderr, tamper.stderr


@as_root
def test_the_turn_holder_names_its_cpus_and_its_turn_still_ends_as_done(queue):
    """The CPUs a measurement names go to the queue mid-turn (it moves the class off them); the turn ends as usual
    and is timed, and a learner's CPUs naming nothing a CPU can be get nothing done."""
    told = """
import sys
from perflab.lock import measurement_lock
from perflab.turns import socket_path, turn
with measurement_lock("perflab run numa-static-data --quick"):
    from perflab import lock
    lock.measuring_on([0])
with turn(socket_path(), "x") as held:
    held.stream.write(b'{"cpus": ["all"]}\\n')
    print(repr(held.stream.readline()))
"""
    asked = subprocess.run(["runuser", "-u", "nobody", "--", "env", f"PERFLAB_TURNS={os.environ['PERFLAB_TURNS']}",
                            f"PYTHONPATH={REPO}", sys.executable, "-c", told], capture_output=True, text=True,
                           cwd=REPO, timeout=60)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == repr(b'{"held_off": ""}\n'), asked.stdout
    assert "perflab run numa-static-data --quick" in json.loads((queue / "state" / "durations.json").read_text())


FLOOD_UNREAD = """
import socket, sys, threading, time
with socket.socket(socket.AF_UNIX) as asker:
    asker.connect(sys.argv[1])
    asker.sendall(b'{"what": "perflab run numa-static-data --quick"}\\n')
    print(asker.makefile("rb").readline().decode().strip(), flush=True)
    threading.Thread(target=asker.sendall, args=(b'{"cpus": [0]}\\n' * 60000,), daemon=True).start()
    time.sleep(60)  # reading none of the answers
"""


@as_root
def test_a_holder_that_names_cpus_without_reading_the_answers_loses_its_turn_at_its_limit(queue):
    hostile = subprocess.Popen(["runuser", "-u", "nobody", "--", sys.executable, "-c", FLOOD_UNREAD,
                                os.environ["PERFLAB_TURNS"]], stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(hostile.stdout.readline()) == {"turn": LIMIT_S}
        granted = time.time()
        got, _ = _finish(_ask("next in line", 0.1))
        assert got - granted < LIMIT_S + turns.GRACE_S + 3, f"the flood held the turn {got - granted:.0f} s"
    finally:
        hostile.kill()
        hostile.wait()


def test_a_line_that_is_not_one_json_object_is_refused_without_a_traceback():
    assert turns._said(b"") == {} and turns._said(b'{"done": true}\n') == {"done": True}
    for nonsense in (b"[" * 30000 + b"]" * 30000, b'"string"\n', b"[1]\n", b"{"):
        with pytest.raises(ValueError):
            turns._said(nonsense)


def test_a_queue_killed_but_not_yet_reaped_is_not_running():
    from perflab.processes import start_time
    from perflab.workshop import roster

    ended = subprocess.Popen(["true"])
    started = start_time(ended.pid)
    time.sleep(0.3)  # ended, not waited for: a zombie, as a killed queue is until its parent reaps it
    try:
        workshop = roster.Workshop("127.0.0.1", 1, 2, 3, 4, "t", "t", "h", turns_pid=ended.pid, turns_started=started)
        assert started and not turns.running(workshop)
    finally:
        ended.wait()


def test_the_queue_moves_no_one_for_a_holder_whose_turn_is_over_or_whose_cpus_are_not_cpus(tmp_path):
    asked = []
    queue = turns.Queue(tmp_path / "durations.json", None, on_measuring=lambda uid, cpus: asked.append(cpus) or "x")
    holder = turns.Request("ana", 1000, "perflab run inclusive-llc --quick", 0, 0.0, 120.0)
    queue.holder = holder
    cpus_that_are_not = ([], "0", [True], [True, -1], [1.5], [9999])
    assert [queue._measuring(holder, cpus) for cpus in cpus_that_are_not] == [""] * len(cpus_that_are_not)
    assert queue._measuring(holder, [3, 1, 1]) == "x" and asked == [[1, 3]]
    queue.holder = None  # taken back at its limit
    assert queue._measuring(holder, [0]) == "" and asked == [[1, 3]]


def test_each_turn_is_limited_by_its_labs_budget_within_the_class_limit_and_roots_by_none(tmp_path):
    limits = turns.Queue(tmp_path / "durations.json", None)
    assert limits.limit_of("perflab run inclusive-llc", 1000) == find("inclusive-llc").budget_s.full
    assert limits.limit_of("perflab run inclusive-llc --quick", 1000) == find("inclusive-llc").budget_s.quick
    assert limits.limit_of("perflab grade: llc-predict", 1000) == find("inclusive-llc").budget_s.quick
    assert limits.limit_of("your fix is faster, measured just now", 1000) == turns.UNNAMED_LIMIT_S
    assert limits.limit_of("perflab run inclusive-llc", 0) is None
    assert turns.Queue(tmp_path / "durations.json", 30.0).limit_of("perflab run inclusive-llc", 1000) == 30.0
    # what a learner's raw request names decides its turn, and never beyond the class's limit: lab 4's full run
    assert find("page-table-levels").budget_s.full > turns.CLASS_LIMIT_S
    assert limits.limit_of("perflab run page-table-levels", 1000) == turns.CLASS_LIMIT_S
    assert turns.Queue(tmp_path / "d.json", 5000.0).limit_of("perflab run page-table-levels", 1000) == \
        find("page-table-levels").budget_s.full  # the instructor raised it


def test_a_learner_who_asks_in_a_loop_waits_once_they_had_a_minutes_turns(tmp_path):
    queue = turns.Queue(tmp_path / "durations.json", None)
    queue.granted[1000] = [100.0 + i for i in range(turns.TURNS_PER_MINUTE)]
    assert queue.rate_wait(1000, 130.0) == pytest.approx(30.0)  # the oldest of them leaves the minute at 160 s
    assert queue.rate_wait(1000, 160.5) == 0.0 and len(queue.granted[1000]) == turns.TURNS_PER_MINUTE - 1
    assert queue.rate_wait(1001, 130.0) == 0.0 and queue.rate_wait(0, 130.0) == 0.0


def test_every_wait_says_at_most_how_long_and_no_estimate_once_a_turn_overran(tmp_path):
    from perflab.lock import estimate_and_bound

    assert estimate_and_bound([30.0, 12.0], [120.0, 60.0]) == "about 42 s, at most 180 s"
    assert estimate_and_bound([30.0, None], [120.0, 60.0]) == "no estimate yet, at most 180 s"
    assert estimate_and_bound([30.0], [None]) == "about 30 s"  # root's turn has no limit to promise
    queue = turns.Queue(tmp_path / "durations.json", None)
    queue.durations["perflab run inclusive-llc --quick"] = 5.0
    holder = turns.Request("ana", 1000, "perflab run inclusive-llc --quick", 0, 0.0, 120.0)
    waiter = turns.Request("bo", 1001, "x", 0, 1.0, 300.0)
    queue.holder, queue.granted_at, queue.waiting = holder, time.monotonic() - 100, [waiter]  # 95 s past its 5
    assert queue.place(waiter).startswith("1st in line, no estimate yet, at most 25 s (now: ana's perflab run ")


def test_a_queue_that_does_not_answer_is_one_line(tmp_path, monkeypatch):
    from perflab.errors import PerflabError
    from perflab.lock import measurement_lock

    with socket.socket(socket.AF_UNIX) as gone:
        gone.bind(str(tmp_path / "turns.sock"))  # a socket no one listens on, as a killed queue leaves it
    monkeypatch.setenv("PERFLAB_TURNS", str(tmp_path / "turns.sock"))
    with pytest.raises(PerflabError, match="queue .* does not answer .*`perflab workshop up` starts it again"):
        with measurement_lock("test"):
            pass
