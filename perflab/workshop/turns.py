"""The class's measurement queue: a root-owned service that grants one turn to measure at a time.

`perflab workshop up` starts it (start, below) and `down` stops it (stop). Every measurement of
a learner's asks it for a turn over a unix socket (perflab.turns is the asking side and writes
down the protocol) instead of taking the lock file, which any learner could hold forever. It
knows who asks from the socket's peer credentials, not from what the asker says. It grants:

- one turn at a time, in the order asked, except that a learner's second request waits behind
  every other learner's first, so that asking many times at once gains nothing;
- each turn for at most its lab's budget (labs/manifest.toml, quick or full; a measurement that
  names no lab, UNNAMED_LIMIT_S), and never longer than the class's limit (PERFLAB_TURN_LIMIT_S
  when the instructor set it at `up`, else CLASS_LIMIT_S): the queue decides, from what the
  request names, whatever the asker claims. Root's turns have no limit. At the limit the asker
  ends its own measurement and says why, and the queue takes the turn back GRACE_S later,
  whatever the asker does;
- at most TURNS_PER_MINUTE turns to one learner in any minute: a loop of tiny measurements
  cannot make the others' places in line jitter.

While a turn runs, every other learner's CPU weight is at the least, and once the measurement
names its CPUs, the other learners run on the rest of the machine's, where there is a rest
(perflab.workshop.cgroups).

Each waiter sees their place and an estimate: how long the turns ahead took here (the durations
file, in the workshop's root-only state folder, which only this service writes), or what the
manifest expects of a lab run not yet measured here; and always, where every turn ahead has a
limit, the most it can be.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import PerflabError
from ..lock import REPEAT_PLACE_S, describe_place, estimate_and_bound, manifest_seconds
from ..manifest.labs import lab_named, run_named
from ..processes import alive, start_time
from ..results import write_atomic
from ..turns import DEFAULT_SOCKET
from . import cgroups, roster

GRACE_S = 5  # after the limit, for the asker to end its own measurement and say why
UNNAMED_LIMIT_S = 300  # a grader's race or a helper that names no lab: their plans stop within 60 s
CLASS_LIMIT_S = 600  # no learner's turn longer, whatever its lab's full run may take (lab 4's: 4000 s)
TURNS_PER_MINUTE = 30  # a notebook's cells may each measure; a tight loop of requests may not
ASK_WITHIN_S = 10  # a connection that does not say what it measures by then is closed
START_WITHIN_S = 15


@dataclass(eq=False)
class Request:
    user: str  # as the class sees it: a learner's name, or "the instructor"
    uid: int
    what: str
    rank: int  # how many requests of the same user were in line when it came: a second one waits behind every first
    since: float
    limit: float | None

    def describe(self) -> str:
        return f"{self.user}'s {self.what}"


class Queue:
    def __init__(self, durations: Path, limit_s: float | None, on_turn=None, on_measuring=None):
        self.durations_path = durations
        self.durations = _load(durations)
        self.limit_s = limit_s or CLASS_LIMIT_S
        self.on_turn = on_turn or (lambda holder_uid: None)  # told of each turn's holder, and None when it ends
        self.on_measuring = on_measuring or (lambda holder_uid, cpus: "")  # the holder's CPUs -> what was done
        self.waiting: list[Request] = []
        self.holder: Request | None = None
        self.granted_at = 0.0
        self.granted: dict[int, list[float]] = {}  # uid -> when its turns of the last minute began
        self.changed = asyncio.Event()

    def order(self) -> list[Request]:
        return sorted(self.waiting, key=lambda request: (request.rank, request.since))

    def limit_of(self, what: str, uid: int) -> float | None:
        """The turn's length, from the lab that `what` names, within the class's limit; None (no limit) for root."""
        if uid == 0:
            return None
        run = run_named(what)
        if run:
            budget = run[0].budget_s.of(quick=run[1])
        else:
            lab = lab_named(what)
            budget = lab.budget_s.quick if lab else UNNAMED_LIMIT_S
        return min(budget, self.limit_s)

    def rate_wait(self, uid: int, now: float) -> float:
        """How long the learner must wait before their next turn, having had TURNS_PER_MINUTE in the last minute."""
        recent = [began for began in self.granted.get(uid, []) if now - began < 60]
        self.granted[uid] = recent
        return 0.0 if uid == 0 or len(recent) < TURNS_PER_MINUTE else 60 - (now - recent[0])

    def expected(self, what: str) -> float | None:
        return self.durations.get(what) or manifest_seconds(what)

    def place(self, request: Request) -> str:
        """"2nd in line, about 40 s (now: alice's perflab run ...)", from the turn running and those ahead."""
        order = self.order()
        ahead = order[:order.index(request)]
        estimates, limits = [self.expected(r.what) for r in ahead], [r.limit for r in ahead]
        if self.holder is not None:
            ran = time.monotonic() - self.granted_at
            expected = self.expected(self.holder.what)
            # a turn past what it usually takes has no estimate left, only its limit
            estimates.append(None if expected is None or ran > expected else expected - ran)
            limits.append(None if self.holder.limit is None else max(self.holder.limit + GRACE_S - ran, 0.0))
        return describe_place(len(ahead) + 1, estimate_and_bound(estimates, limits),
                              self.holder.describe() if self.holder else "a turn ending")

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (OSError, ValueError, KeyError, TypeError, asyncio.TimeoutError, asyncio.LimitOverrunError):
            pass  # an asker that left, spoke nonsense or stopped reading: nothing of it stays in line
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = _peer_uid(writer)
        ask = _said(await asyncio.wait_for(reader.readline(), ASK_WITHIN_S))
        what = " ".join(str(ask["what"]).split())[:200]  # one line in the log, whatever the asker sent
        rank = sum(r.uid == uid for r in [*self.waiting, *([self.holder] if self.holder else [])])
        request = Request(_shown_name(uid), uid, what, rank, time.monotonic(), self.limit_of(what, uid))
        if not ask.get("wait", True) and (self.holder or self.waiting):
            await _send(writer, {"busy": (self.holder or self.order()[0]).describe()})
            return
        hearing = asyncio.ensure_future(reader.readline())  # the asker's "done", or its leaving
        self.waiting.append(request)
        try:
            if await self._wait_for_turn(request, writer, hearing):
                await self._hold(request, reader, writer, hearing)
        finally:
            hearing.cancel()
            if request in self.waiting:
                self.waiting.remove(request)
            if self.holder is request:
                self.holder = None
                self.on_turn(None)
            self._changed()

    async def _wait_for_turn(self, request: Request, writer: asyncio.StreamWriter, hearing: asyncio.Future) -> bool:
        said, said_at = "", 0.0
        while (rest := self.rate_wait(request.uid, time.monotonic())) or self.holder is not None \
                or self.order()[0] is not request:
            line = self.place(request) if not rest else (
                f"{request.user} had {TURNS_PER_MINUTE} turns in the last minute: the next in at most {rest:.0f} s")
            if line.split(",")[0] != said.split(",")[0] or time.monotonic() - said_at > REPEAT_PLACE_S:
                await _send(writer, {"waiting": line})
                said, said_at = line, time.monotonic()
            changed = asyncio.ensure_future(self.changed.wait())
            await asyncio.wait({hearing, changed}, timeout=min(REPEAT_PLACE_S, rest or REPEAT_PLACE_S),
                               return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if hearing.done():
                return False  # the asker left the line
        self.waiting.remove(request)
        self.holder, self.granted_at = request, time.monotonic()
        self.granted.setdefault(request.uid, []).append(self.granted_at)
        self.on_turn(request.uid)
        self._changed()
        await _send(writer, {"turn": request.limit})
        print(f"turn: {request.describe()}, limit {request.limit or 'none'}", flush=True)
        return True

    # ANCHOR: hold
    async def _hold(self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    hearing: asyncio.Future) -> None:
        deadline = None if request.limit is None else self.granted_at + request.limit + GRACE_S
        heard = hearing  # the asker's next line: the CPUs it measures on, its "done", or its leaving
        try:
            while True:
                timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                await asyncio.wait({heard}, timeout=timeout if self.holder is request else None)
                if self.holder is request and deadline is not None and time.monotonic() >= deadline:
                    self._take_back(request)  # however much it says, a turn ends at its limit
                if not heard.done():
                    continue
                said = _said(heard.result())
                if "cpus" not in said:
                    break
                done = self._measuring(request, said["cpus"])
                # an asker that does not read the answer loses its turn by its limit, not later
                holding = self.holder is request and deadline is not None
                await asyncio.wait_for(_send(writer, {"held_off": done}),
                                       max(deadline - time.monotonic(), 0.0) if holding else ASK_WITHIN_S)
                heard = asyncio.ensure_future(reader.readline())
        finally:
            heard.cancel()
        if self.holder is not request:
            await asyncio.wait_for(_send(writer, {"over": request.limit}), ASK_WITHIN_S)
        elif said.get("done"):
            self.durations[request.what] = round(time.monotonic() - self.granted_at, 1)  # the next estimate
            write_atomic(self.durations_path, json.dumps(self.durations, indent=1))  # mkstemp: 0600
            await asyncio.wait_for(_send(writer, {"done": True}), ASK_WITHIN_S)
    # ANCHOR_END: hold

    def _take_back(self, request: Request) -> None:
        self.holder = None  # the next in line measures now
        self.on_turn(None)
        self._changed()
        print(f"over: {request.describe()} still measured {time.monotonic() - self.granted_at:.0f} s into its turn",
              flush=True)

    def _measuring(self, request: Request, cpus) -> str:
        """What the queue did about the CPUs the holder measures on: nothing once its turn was taken back."""
        if self.holder is not request or not isinstance(cpus, list) or not cpus \
                or not all(type(cpu) is int and 0 <= cpu < 8192 for cpu in cpus):
            return ""
        return self.on_measuring(request.uid, sorted(set(cpus)))

    async def serve_at(self, path: Path) -> None:
        made = not path.parent.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        if made:
            os.chmod(path.parent, 0o755)  # every learner must reach the socket; the service's umask is 077
        path.unlink(missing_ok=True)
        server = await asyncio.start_unix_server(self.serve, path=str(path))
        os.chmod(path, 0o666)  # every user may ask; only root may replace it, in a folder of root's
        stop = asyncio.Event()
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            asyncio.get_running_loop().add_signal_handler(number, stop.set)
        try:
            await stop.wait()
        finally:
            server.close()
            remove_socket(path, made)


def _said(line: bytes) -> dict:
    """One line of the asker's as a JSON object; {} for an empty line (it left), anything else refused."""
    if not line.strip():
        return {}
    try:
        said = json.loads(line)
    except RecursionError:  # nesting deeper than the parser goes: nonsense, not a traceback in root's log
        raise ValueError("nested too deep") from None
    if not isinstance(said, dict):
        raise ValueError("not a JSON object")
    return said


async def _send(writer: asyncio.StreamWriter, message: dict) -> None:
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()


def _peer_uid(writer: asyncio.StreamWriter) -> int:
    credentials = writer.get_extra_info("socket").getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[1]


def _shown_name(uid: int) -> str:
    """A learner's name as the class knows it; anyone else by their login, so root's runs are not the instructor's."""
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"user {uid}"
    return roster.learner_of(user) if user.startswith(roster.PREFIX) else user


def _load(path: Path) -> dict[str, float]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {what: seconds for what, seconds in found.items() if isinstance(seconds, (int, float))}


def remove_socket(path: Path, with_folder: bool) -> None:
    path.unlink(missing_ok=True)
    if with_folder:
        try:
            path.parent.rmdir()
        except OSError:
            pass  # not empty: not only ours


def require_none_at(path: Path) -> None:
    if _answers(path):
        raise PerflabError(f"a measurement queue already answers at {path}: another workshop is up on this machine; "
                           "end it first, or set PERFLAB_TURNS to another socket path")


def start(workshop: roster.Workshop) -> tuple[int, int]:
    """Start the service as root, detached from the instructor's terminal; (pid, its start time) once it answers."""
    path = Path(workshop.turns)
    folder = roster.state_folder()
    log = os.open(folder / "turns.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    env = {**os.environ, "PERFLAB_WORKSHOP_DIR": str(folder), roster.MARK: str(folder), "PERFLAB_TURNS": str(path),
           "PERFLAB_TURN_LIMIT_S": str(workshop.turn_limit_s or "")}
    process = subprocess.Popen([str(roster.VENV_BIN / "python"), "-m", "perflab.workshop.turns"], cwd=folder, env=env,
                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               umask=0o077)
    os.close(log)
    deadline = time.monotonic() + START_WITHIN_S
    while not _answers(path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            said = (folder / "turns.log").read_text(errors="replace").strip().splitlines() or ["no output"]
            raise PerflabError(f"the measurement queue did not start: {said[-1][-300:]}")
        time.sleep(0.1)
    return process.pid, start_time(process.pid) or 0


def running(workshop: roster.Workshop) -> bool:
    """Whether the queue `up` started still runs (by its pid and start time: a reused pid is not the queue)."""
    pid, started = workshop.turns_pid, workshop.turns_started
    return bool(pid and started) and alive(pid, started)  # a killed queue its parent has not reaped is not


def stop(pid: int | None, started: int | None, path: Path) -> list[str]:
    """SIGTERM the service (SIGKILL if it lingers), checking it is still the process that was started; the socket
    goes too, and its folder when it is the default one (after a kill -9 nothing else removes them)."""
    done = []
    if pid and started and alive(pid, started):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid, started):
            os.kill(pid, signal.SIGKILL)
        done.append(f"stopped the measurement queue (pid {pid})")
    remove_socket(path, with_folder=path.parent == DEFAULT_SOCKET.parent)
    return done


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(str(path)) == 0


def _class_and_holder(uid: int | None) -> tuple[roster.Workshop, str | None] | None:
    """The workshop set up here and the login of the turn's holder (None for none), or None when there is no
    class to hold off (no workshop, or a holder whose user is gone)."""
    try:
        workshop = roster.load()
        holder = None if uid is None else pwd.getpwuid(uid).pw_name
    except (PerflabError, KeyError):
        return None
    return None if workshop is None else (workshop, holder)


def hold_the_others_off(uid: int | None) -> None:
    """While a turn runs, every other learner's CPU weight at the least (perflab.workshop.cgroups); all normal
    again when it ends, and when the queue starts (one killed mid-turn left them low)."""
    if (found := _class_and_holder(uid)) is not None:
        workshop, holder = found
        cgroups.yield_to(holder, [roster.system_user(name) for name in workshop.learners])


def hold_the_others_off_cpus(uid: int, cpus: list[int]) -> str:
    """Once the holder names the CPUs it measures on: every other learner off them, where the machine has CPUs to
    spare (perflab.workshop.cgroups.hold_off); what was done, in a line for the measurer."""
    if (found := _class_and_holder(uid)) is None:
        return ""
    workshop, holder = found
    # a learner with CPUs of their own stays on them: moved, they would land on a classmate's
    movable = [roster.system_user(name) for name in workshop.learners if name not in workshop.cpus]
    return cgroups.hold_off(holder, movable, cpus)


def main() -> None:
    limit = os.environ.get("PERFLAB_TURN_LIMIT_S")
    queue = Queue(roster.state_dir() / "durations.json", float(limit) if limit else None, hold_the_others_off,
                  hold_the_others_off_cpus)
    hold_the_others_off(None)
    print(f"perflab workshop's measurement queue, pid {os.getpid()}, at {os.environ['PERFLAB_TURNS']}", flush=True)
    asyncio.run(queue.serve_at(Path(os.environ["PERFLAB_TURNS"])))


if __name__ == "__main__":
    sys.exit(main())
