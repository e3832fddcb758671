"""Lab 10's two C programs, driven over pipes: the victim chases on request, the neighbour changes mode on request.

Both are runner.Interactive programs, started through perflab.processes, so they die with the lab however it
ends; both also end at the end of their input: when perflab closes its end of their stdin, they report and exit
within one chunk of work.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import PerflabError
from ...runner import Interactive
from ...sysfs import SysRoot, default_root

MODES = ("idle", "compute", "write", "nt-write")


class Victim(Interactive):
    """victim -i: a working set linked once, chased on request."""

    def __init__(self, binary: Path, cpu: int, working_set: int):
        super().__init__([str(binary), "-c", str(cpu), "-w", str(working_set), "-i"], ready="params")

    def chase(self, ms: int) -> dict:
        """One sample: the CPU time per access over `ms` ms, and the share of the CPU the victim got."""
        self.order(str(ms))
        return self.read_until("sample")[-1]


class Neighbour(Interactive):
    """neighbour -i: a buffer touched once, then idle, compute, write or nt-write on request."""

    def __init__(self, binary: Path, cpu: int, buffer_bytes: int):
        super().__init__([str(binary), "-c", str(cpu), "-m", str(buffer_bytes), "-i"], ready="params")

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
