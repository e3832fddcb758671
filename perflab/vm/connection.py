"""The host's side of a guest's agent (perflab/vm/agent.py is the guest's): one connection over its Unix socket."""

from __future__ import annotations

import socket
import time
import uuid
from collections import deque
from pathlib import Path

from ..errors import PerflabError
from .protocol import LineReader, encode

GONE = "the guest went away (QEMU stopped, or the guest crashed)"


class AgentConnection:
    """One connection to a running guest's agent."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except OSError as err:
            self.sock.close()
            raise PerflabError(f"cannot reach the guest agent at {path}: {err}") from None
        self.reader = LineReader()
        self.pending: deque[dict] = deque()

    def close(self) -> None:
        self.sock.close()

    def send(self, message: dict) -> None:
        self.sock.settimeout(5.0)  # receive() leaves its own timeout behind
        try:
            self.sock.sendall(encode(message))
        except TimeoutError:
            raise PerflabError("the guest stopped taking input (QEMU hangs, or the guest is frozen)") from None
        except (ConnectionResetError, BrokenPipeError):
            raise PerflabError(GONE) from None

    def receive(self, timeout: float | None) -> dict | None:
        """The next message, or None when `timeout` passes first. Raises PerflabError if the guest hangs up."""
        if self.pending:
            return self.pending.popleft()
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:  # QEMU dropped the connection with our ping unread, as it can while booting
            raise PerflabError(GONE) from None
        if not chunk:
            raise PerflabError(GONE)
        self.pending.extend(self.reader.feed(chunk))
        return self.pending.popleft() if self.pending else None


def ping(agent: AgentConnection, within: float) -> dict | None:
    """Send a ping and wait up to `within` seconds for its pong (older pongs are skipped)."""
    rid = uuid.uuid4().hex
    agent.send({"id": rid, "op": "ping"})
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        message = agent.receive(left)
        if message and message.get("id") == rid and message.get("op") == "pong":
            return message
    return None

