"""QEMU: whether it can run here, its version, and the command line that boots a profile's guest."""

from __future__ import annotations

import compileall
import functools
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .. import processes
from ..paths import REPO_ROOT
from . import image as guest_image
from .profiles import kernel_args, machine_args, scratch_disk_args
from .protocol import PORT_NAME

if TYPE_CHECKING:
    from .machine import VM

QEMU = "qemu-system-x86_64"


def qemu_missing() -> str | None:
    """Why QEMU cannot be started here, with how to install it; None when it is on PATH."""
    if shutil.which(QEMU) is None:
        return f"QEMU is missing ({QEMU} not on PATH): run `make lab`, which installs qemu-system-x86"
    return None


def cannot_run_vms() -> str | None:
    """Why this user can boot no guest here (no QEMU, no folder of VMs they may write), with how to fix it."""
    missing = qemu_missing()
    if missing:
        return missing
    runs = guest_image.cache_dir() / "vms"
    nearest = next(folder for folder in (runs, *runs.parents) if folder.exists())
    if not os.access(nearest, os.W_OK):  # e.g. a workshop's learner: the checkout and its VM cache are root's
        return (f"this user cannot write {runs}, where the course's VMs run: the checkout's owner runs the VM "
                "parts (in a workshop, the instructor, as root)")
    return None


def cannot_boot() -> str | None:
    """Why no guest can boot here without building the image first, with how to fix it; None when one can."""
    problem = cannot_run_vms()
    if problem is None and not guest_image.current().exists():
        problem = "the guest image is not built: run `.venv/bin/perflab vm build` (about 2 minutes, once, as root)"
    return problem


@functools.cache
def qemu_version() -> str:
    """One `qemu --version` per process: the trial key and vm.json both need it."""
    done = processes.run([QEMU, "--version"])
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def compile_the_share() -> None:
    """Compile perflab's modules to bytecode beside their sources, for the guests to read.

    A guest imports perflab from the read-only share with PYTHONDONTWRITEBYTECODE (vm/guest/init): without
    bytecode there, every guest process compiles what it imports again, under emulation. In the 8-vCPU guest
    one probe-and-hunt took 28 s longer that way under TCG; here it takes about 0.4 s, and nothing when current.
    Python checks each file's time stamp, so an edited module is compiled again in the guest, not read stale.
    Where the tree is not writable (a shared checkout), the guests compile as they did: quiet=2 hides that."""
    compileall.compile_dir(REPO_ROOT / "perflab", quiet=2)


def bare(name: str) -> list[str]:
    """A QEMU named `name` with no default devices, config file, display or reboot: the arguments after add all."""
    return [QEMU, "-name", name, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]


def qemu_argv(machine: VM, disk: Path, kernel: Path, initrd: Path, accel: str) -> list[str]:
    profile = machine.profile
    append = ["root=/dev/vda", "ro", "console=ttyS0", "init=/usr/local/sbin/perflab-init", "panic=-1", "loglevel=4",
              f"perflab.profile={profile.name}", *kernel_args(profile, accel)]
    return [
        *bare(f"perflab-{profile.name}"), *machine_args(profile, accel),
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", " ".join(append),
        # snapshot=on: the guest's writes go to a temporary overlay, so the cached image never changes
        "-drive", f"file={disk},if=virtio,format=raw,snapshot=on",
        *scratch_disk_args(profile),
        "-fsdev", f"local,id=project,path={REPO_ROOT},security_model=none,readonly=on",
        "-device", "virtio-9p-pci,fsdev=project,mount_tag=perflab",
        "-fsdev", f"local,id=exchange,path={machine.exchange},security_model=none",
        "-device", "virtio-9p-pci,fsdev=exchange,mount_tag=exchange",
        "-device", "virtio-serial-pci",
        "-chardev", f"socket,id=agent,path={machine.agent_socket},server=on,wait=off",
        "-device", f"virtserialport,chardev=agent,name={PORT_NAME}",
        "-chardev", f"file,id=console,path={machine.console_log}", "-serial", "chardev:console",
    ]

