"""What `perflab workshop up` checks before it changes anything, and `down` after: the port, the tools,
that learners can run the course from this checkout, the turn limit the instructor set; the processes a
workshop started that are still running.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from ..errors import PerflabError
from ..paths import REPO_ROOT
from . import roster

PROXY = REPO_ROOT / ".tools" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"

def require_free(ip: str, port: int) -> None:
    if not 0 < port < 65536:
        raise PerflabError(f"--port {port}: give a TCP port between 1 and 65535")
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the proxy binds: TIME_WAIT is no obstacle
        try:
            probe.bind((ip, port))
        except OSError as err:
            raise PerflabError(f"cannot listen on {ip}:{port} ({err.strerror}): choose another --port, or stop what "
                               "uses it (`ss -ltnp` names it)") from None


def turn_limit() -> float | None:
    given = os.environ.get("PERFLAB_TURN_LIMIT_S")
    try:
        limit = float(given) if given else None
    except ValueError:
        limit = -1.0
    if limit is not None and not 0 < limit < 1e6:
        raise PerflabError(f"PERFLAB_TURN_LIMIT_S={given}: give the seconds every learner's turn to measure may take, "
                           "or leave it unset for each lab's budget")
    return limit


def listening(ip: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1" if ip in ("0.0.0.0", "") else ip, port)) == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def require_tools() -> None:
    for tool, fix in ((roster.VENV_BIN / "jupyterhub", "make python"), (PROXY, "make proxy")):
        if not tool.exists():
            raise PerflabError(f"{tool.name} is missing: run `{fix}` (or `make lab`, which does all set-up)")


def require_learners_can_run_the_course() -> None:
    """Learners run the course as their own users: every folder above the checkout must let them in."""
    done = subprocess.run(["runuser", "-u", "nobody", "--", str(roster.VENV_BIN / "python"), "-c", "import perflab"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        blocked = next((str(p) for p in [REPO_ROOT, *REPO_ROOT.parents] if not os.stat(p).st_mode & 0o001), None)
        where = f"{blocked} is closed to other users" if blocked else (done.stderr.strip().splitlines() or ["?"])[-1]
        raise PerflabError(f"learners could not run the course from {REPO_ROOT} ({where}): put the checkout "
                           "where every user can read it (e.g. /opt/perflab) and run `make lab` there")


def require_learners_can_reach(queue: Path) -> None:
    """Every learner's measurement asks the queue: its socket must answer a user who is not root."""
    done = subprocess.run(["runuser", "-u", "nobody", "--", str(roster.VENV_BIN / "python"), "-c",
                           "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", str(queue)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        closed = next((str(p) for p in queue.parents if p.exists() and not os.stat(p).st_mode & 0o001), None)
        why = f"{closed} is closed to other users" if closed else (done.stderr.strip().splitlines() or ["?"])[-1]
        raise PerflabError(f"learners could not reach the measurement queue {queue} ({why}): set PERFLAB_TURNS to a "
                           "socket in a folder every user can enter, or `chmod 755` that folder")


def started_by(state: Path) -> list[int]:
    """The processes that carry the mark of the workshop kept in `state` (roster.MARK) in their environment."""
    mark = f"{roster.MARK}={state}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return found
