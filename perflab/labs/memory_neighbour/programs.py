"""Lab 10's two C programs, driven over pipes: the victim chases on request, the neighbour changes mode on request.

Both are started through perflab.processes, so they die with the lab however it ends, and both also end at
the end of their input: when perflab closes its end of their stdin, they report and exit within one chunk of
work.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from ... import processes
from ...errors import PerflabError
from ...sysfs import SysRoot, default_root

ANSWER_TIMEOUT_S = 120
MODES = ("idle", "compute", "write", "nt-write")


class Program:
    """One of the lab's programs in interactive mode (-i): orders on stdin, JSON lines on stdout."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.process: subprocess.Popen | None = None
        self.params: dict = {}

    def __enter__(self):
        self.process = processes.start(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, bufsize=1)
        try:
            self.params = self.read_until("params")[-1]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        assert self.process is not None
        try:
            self.process.stdin.close()  # its end of input: it reports and exits by itself
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        processes.stop(self.process, grace=5)  # whatever is left of it; forgets it either way

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def order(self, text: str) -> None:
        assert self.process is not None
        self.process.stdin.write(f"{text}\n")
        self.process.stdin.flush()

    def read_until(self, kind: str) -> list[dict]:
        """Every record up to and including the first of `kind`."""
        assert self.process is not None
        records, deadline = [], time.monotonic() + ANSWER_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                error = self.process.stderr.read().strip() or f"exit code {self.process.wait()}"
                raise PerflabError(f"{Path(self.argv[0]).name} stopped: {error}")
            records.append(json.loads(line))
            if records[-1]["type"] == kind:
                return records
        raise PerflabError(f"{Path(self.argv[0]).name} did not answer in {ANSWER_TIMEOUT_S} s: is its CPU overloaded?")


class Victim(Program):
    """victim -i: a working set linked once, chased on request."""

    def __init__(self, binary: Path, cpu: int, working_set: int):
        super().__init__([str(binary), "-c", str(cpu), "-w", str(working_set), "-i"])

    def chase(self, ms: int) -> dict:
        """One sample: the CPU time per access over `ms` ms, and the share of the CPU the victim got."""
        self.order(str(ms))
        return self.read_until("sample")[-1]


class Neighbour(Program):
    """neighbour -i: a buffer touched once, then idle, compute, write or nt-write on request."""

    def __init__(self, binary: Path, cpu: int, buffer_bytes: int):
        super().__init__([str(binary), "-c", str(cpu), "-m", str(buffer_bytes), "-i"])

    def switch(self, mode: str) -> dict:
        """Run `mode` from now on (it answers once it has started); return the period that just ended."""
        if mode not in MODES:
            raise PerflabError(f"the neighbour has no mode {mode!r}: {', '.join(MODES)}")
        self.order(mode)
        return next(r for r in self.read_until("ready") if r["type"] == "period")


# ANCHOR: rss
def rss_bytes(pid: int, root: SysRoot | None = None) -> int | None:
    """The process's resident set (VmRSS in /proc/PID/status), what `ps` and `top` show; None once it is gone."""
    for line in ((root or default_root()).read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None
# ANCHOR_END: rss


def ram_bytes(root: SysRoot | None = None) -> int | None:
    """MemTotal from /proc/meminfo."""
    for line in ((root or default_root()).read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None
