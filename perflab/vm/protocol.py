"""The host and the guest agent talk over one virtio-serial port in JSON lines.

Host to guest: {"id", "op": "ping"}; {"id", "op": "exec", "argv", "env", "cwd", "pty"};
during an exec {"op": "in", "data"} (pty only) and {"op": "signal", "signum"}.
Guest to host: {"id", "op": "pong", ...}; {"id", "op": "out"|"err", "data"} while the command
runs; {"id", "op": "exit", "code"} once it ends; {"id", "op": "error", "message"}.
Bytes travel base64-encoded. Every reply carries its request's id, so a host that reconnects
can skip what an earlier, interrupted session left in the port.

Standard library only: the guest imports this file from the shared project tree.
"""

from __future__ import annotations

import base64
import json

PORT_NAME = "org.perflab.agent"


def encode(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def pack(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unpack(text: str) -> bytes:
    return base64.b64decode(text)


class LineReader:
    """Splits a byte stream into JSON messages; a line that is not JSON is skipped, not fatal."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[dict]:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        messages = []
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                messages.append(message)
        return messages
