"""A VM of a profile and its folder of state: one folder per running VM, and the status of every profile.

A VM's folder (<cache>/vms/<profile>/) holds QEMU's pid and start time, the agent's socket, the serial
console log and the exchange folder shared into the guest as /exchange. Nothing listens on a network:
the guest has no network card and the host side is Unix sockets only. Every transition holds a
flock(2) on <cache>/vms/<profile>.lock, which the kernel drops when its holder dies, so no lock
outlives a crash; a folder whose QEMU has died is cleared by the next command that looks at it.

The rest of the host's side, one concern a module: accel.py (KVM or TCG), qemu.py (QEMU and its command line),
connection.py (the agent's client), boot.py (up, down and a session), commands.py (exec and shell in the guest).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import processes
from ..lock import exclusive
from ..manifest.labs import labs
from . import image as guest_image
from .profiles import Profile, check_name, load, names


@dataclass(frozen=True)
class VM:
    profile: Profile

    @property
    def folder(self) -> Path:
        # check again here: this folder is deleted, so a Profile built by hand must not name a path either
        return guest_image.cache_dir() / "vms" / check_name(self.profile.name)

    @property
    def agent_socket(self) -> Path:
        return self.folder / "agent.sock"

    @property
    def console_log(self) -> Path:
        return self.folder / "console.log"

    @property
    def exchange(self) -> Path:
        return self.folder / "exchange"

    @property
    def info_path(self) -> Path:
        return self.folder / "vm.json"

    def info(self) -> dict:
        try:
            return json.loads(self.info_path.read_text())
        except (OSError, ValueError):
            return {}

    def qemu(self) -> tuple[int, int] | None:
        """QEMU's pid and start time if this VM is running; a dead or reused pid counts as not running."""
        info = self.info()
        pid, started = info.get("pid"), info.get("started")
        return (pid, started) if pid and started is not None and processes.alive(pid, started) else None

    def running(self) -> bool:
        return self.qemu() is not None

    def lock(self):
        """Held by every transition (boot, stop, clearing the folder of a VM that died)."""
        name = self.profile.name
        return exclusive(self.folder.parent / f"{name}.lock", f"another perflab is starting or stopping {name}")

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def vm(name: str) -> VM:
    return VM(load(name))


def status() -> list[dict]:
    """Every profile with its shape and whether its VM runs; clears the folders of VMs that died."""
    shown_by = {name: [lab.name for lab in labs() if name in lab.vm] for name in names()}
    rows = []
    for name in names():
        machine = vm(name)
        info = machine.info() if machine.running() else None
        if info is None and machine.folder.exists():
            with machine.lock():
                if not machine.running():
                    machine.clear()
        rows.append(
            {
                "profile": name,
                "topology": machine.profile.topology(),
                "kernel": machine.profile.kernel,
                "kernel_args": " ".join(machine.profile.kernel_args),
                "description": machine.profile.description,
                "labs": shown_by[name],
                "state": f"running ({info['accel'].upper()}, pid {info['pid']})" if info else "stopped",
            }
        )
    return rows

