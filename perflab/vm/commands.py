"""Commands in a running guest, over its agent: one command with its output streamed back, or a login shell."""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import termios
import threading
import tty
import uuid
from contextlib import contextmanager

from ..errors import PerflabError
from ..lock import exclusive
from .connection import AgentConnection
from .machine import VM
from .protocol import pack, unpack

STOP_LOOK_S = 0.5  # seconds between a stoppable command's looks at its stop event
GUEST_ENV = {"PYTHONPATH": "/perflab", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/root", "LANG": "C.UTF-8"}


def execute(machine: VM, argv: list[str], stdout=None, stderr=None, env: dict | None = None,
            cwd: str = "/perflab", stop: threading.Event | None = None) -> int:
    """Run argv in the guest, streaming its output to the given binary files; return its exit code.

    Ctrl-C is passed on to the guest command as SIGINT; a second Ctrl-C kills it. stop: set by another thread,
    it kills the command and raises PerflabError within STOP_LOOK_S.
    """
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    request = {"op": "exec", "argv": argv, "cwd": cwd, "env": {**GUEST_ENV, **(env or {})}}
    with _command_slot(machine), _connected(machine) as agent:
        rid = request["id"] = uuid.uuid4().hex
        agent.send(request)
        interrupts = 0
        while True:
            try:
                message = agent.receive(None if stop is None else STOP_LOOK_S)
            except KeyboardInterrupt:
                interrupts += 1
                agent.send({"id": rid, "op": "signal", "signum": signal.SIGINT if interrupts == 1 else signal.SIGKILL})
                continue
            if stop is not None and stop.is_set():
                agent.send({"id": rid, "op": "signal", "signum": signal.SIGKILL})
                raise PerflabError(f"the command in {machine.profile.name} was stopped, as asked")
            if message is None or message.get("id") != rid:
                continue
            op = message.get("op")
            if op in ("out", "err"):
                target = stdout if op == "out" else stderr
                target.write(unpack(message["data"]))
                target.flush()
            elif op == "exit":
                if interrupts:
                    raise KeyboardInterrupt
                return int(message["code"])
            elif op == "error":
                raise PerflabError(f"the guest could not run the command: {message.get('message')}")


def interactive_shell(machine: VM) -> int:
    """A login shell in the guest on this terminal (raw mode), over the agent's pty support."""
    if not sys.stdin.isatty():
        raise PerflabError("`perflab vm shell` needs a terminal; in scripts use `perflab vm run PROFILE -- COMMAND`")
    size = shutil.get_terminal_size()
    request = {"op": "exec", "argv": ["/bin/bash", "-l"], "cwd": "/perflab", "pty": True,
               "rows": size.lines, "cols": size.columns,
               "env": {**GUEST_ENV, "TERM": os.environ.get("TERM", "xterm")}}
    saved = termios.tcgetattr(sys.stdin)
    with _command_slot(machine), _connected(machine) as agent:
        rid = request["id"] = uuid.uuid4().hex
        agent.send(request)
        tty.setraw(sys.stdin, termios.TCSANOW)  # not TCSAFLUSH: keep what was typed ahead
        try:
            while True:
                # One read from the socket can bring several messages (the last output and the exit, say): while
                # some wait in `pending`, look without blocking, or the exit would wait for input that never comes.
                readable, _, _ = select.select([sys.stdin, agent.sock], [], [], 0 if agent.pending else None)
                if sys.stdin in readable:
                    agent.send({"id": rid, "op": "in", "data": pack(os.read(sys.stdin.fileno(), 4096))})
                if agent.sock in readable or agent.pending:
                    message = agent.receive(0.1)
                    if message is None or message.get("id") != rid:
                        continue
                    if message.get("op") in ("out", "err"):
                        sys.stdout.buffer.write(unpack(message["data"]))
                        sys.stdout.buffer.flush()
                    elif message.get("op") == "exit":
                        return int(message["code"])
                    elif message.get("op") == "error":
                        raise PerflabError(f"the guest could not start a shell: {message.get('message')}")
        finally:
            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


@contextmanager
def _connected(machine: VM):
    if not machine.running():
        raise PerflabError(f"{machine.profile.name} is not running: start it with `perflab vm up "
                           f"{machine.profile.name}`")
    agent = AgentConnection(machine.agent_socket)
    try:
        yield agent
    finally:
        agent.close()


def _command_slot(machine: VM):
    """The agent serves one command at a time; a second caller waits for the first."""
    return exclusive(machine.folder / "command.lock", f"another command is running in {machine.profile.name}")

