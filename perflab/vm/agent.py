"""The guest agent: runs the host's commands inside the VM and streams their output back.

vm/guest/init starts it as `python3 -m perflab.vm.agent` from the shared project tree.
It serves one command at a time over the virtio-serial port named in protocol.PORT_NAME;
no network is involved. Standard library only: the guest has no virtual environment.
"""

from __future__ import annotations

import fcntl
import os
import platform
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections import deque
from pathlib import Path

from .protocol import PORT_NAME, LineReader, encode, pack, unpack

HOST_GONE_POLL_S = 0.2  # the port reports hang-up until the host connects; check that often


def find_port(sysfs: Path = Path("/sys/class/virtio-ports")) -> Path:
    """The port's device: there is no udev in the guest to make /dev/virtio-ports/<name>."""
    for port in sorted(sysfs.glob("vport*")):
        if (port / "name").read_text().strip() == PORT_NAME:
            return Path("/dev") / port.name
    raise SystemExit(f"perflab agent: no virtio-serial port named {PORT_NAME}")


class Port:
    """The agent's end of the channel: the virtio-serial device in a guest, any byte stream in a test."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.reader = LineReader()
        self.pending: deque[dict] = deque()  # read together with an earlier message, not handled yet

    def send(self, message: dict) -> bool:
        """False when the host has gone away."""
        data = encode(message)
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            return False
        return True

    def read_messages(self) -> list[dict] | None:
        """Messages that arrived, [] if none yet, None if the host is not connected."""
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        except OSError:
            return None
        return self.reader.feed(chunk) if chunk else None

    def wait_for_request(self) -> dict:
        while True:
            while self.pending:
                message = self.pending.popleft()
                if message.get("op") not in ("in", "signal"):  # input for a command that has ended is dropped
                    return message
            readable, _, _ = select.select([self.fd], [], [], 1.0)
            if not readable:
                continue
            messages = self.read_messages()
            if messages is None:
                time.sleep(HOST_GONE_POLL_S)
            else:
                self.pending.extend(messages)

    def take_pending(self) -> list[dict]:
        taken = list(self.pending)
        self.pending.clear()
        return taken


def start(request: dict) -> tuple[int, list[int], subprocess.Popen | None]:
    """Start the command; returns its pid, the fds to read its output from, and the Popen (no pty)."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **request.get("env", {})}
    argv, cwd = request["argv"], request.get("cwd") or "/"
    if request.get("pty"):
        pid, master = pty.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        rows, cols = request.get("rows", 24), request.get("cols", 80)
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        return pid, [master], None
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    return process.pid, [process.stdout.fileno(), process.stderr.fileno()], process


def serve_exec(port: Port, request: dict) -> None:
    rid = request.get("id")
    try:
        pid, outputs, process = start(request)
    except (OSError, KeyError, TypeError) as err:
        port.send({"id": rid, "op": "error", "message": f"cannot start {request.get('argv')}: {err}"})
        return
    stream_of = {fd: ("out" if i == 0 else "err") for i, fd in enumerate(outputs)}
    open_fds = set(outputs)
    host_here = True
    while open_fds:
        for message in port.take_pending():
            if message.get("id") != rid:
                continue
            if message.get("op") == "signal":
                _signal_group(pid, int(message.get("signum", signal.SIGINT)))
            elif message.get("op") == "in" and process is None:
                os.write(outputs[0], unpack(message["data"]))
        readable, _, _ = select.select([*open_fds, port.fd] if host_here else list(open_fds), [], [])
        for fd in readable:
            if fd == port.fd:
                messages = port.read_messages()
                if messages is None:
                    host_here = False  # nobody is listening: stop the command rather than run it blind
                    _signal_group(pid, signal.SIGKILL)
                else:
                    port.pending.extend(messages)
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pty's master reads EIO once the child has gone
                chunk = b""
            if not chunk:
                open_fds.discard(fd)
            elif host_here and not port.send({"id": rid, "op": stream_of[fd], "data": pack(chunk)}):
                host_here = False
                _signal_group(pid, signal.SIGKILL)
    status = process.wait() if process else os.waitpid(pid, 0)[1]
    if process is None:
        os.close(outputs[0])
        status = os.waitstatus_to_exitcode(status)
    port.send({"id": rid, "op": "exit", "code": status if status >= 0 else 128 - status})


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def serve(port: Port, once: bool = False) -> None:
    while True:
        request = port.wait_for_request()
        op = request.get("op")
        if op == "ping":
            port.send({"id": request.get("id"), "op": "pong", "kernel": platform.release(),
                       "uptime_s": float(Path("/proc/uptime").read_text().split()[0])})
        elif op == "exec":
            serve_exec(port, request)
        else:
            port.send({"id": request.get("id"), "op": "error", "message": f"unknown op {op!r}"})
        if once:
            return


def main() -> None:
    path = find_port()
    print(f"perflab agent: serving on {PORT_NAME} ({path})", file=sys.stderr, flush=True)
    serve(Port(os.open(path, os.O_RDWR)))


if __name__ == "__main__":
    main()
