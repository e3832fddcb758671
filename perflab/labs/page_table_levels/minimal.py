"""Lab 4's quick guests: the guest image's own kernel with an initramfs of two static programs, both modes at once.

A quick run needs one number per paging mode, the instructions of one anonymous fault. The Debian guest of the full
run spends most of its boot on its userspace and the agent. Here the kernel starts labs/04-page-table-levels/init.c
as PID 1 from a cpio of its own; init runs the fault program, prints to the serial console and powers the VM off.
The CPU, memory and clock are the icount profiles' (la57-icount, no5lvl-icount). Under -icount the guest's clock
counts instructions, so a guest counts the same whether or not another runs beside it: both modes boot at once, on
the host's CPUs. `nokaslr` and `norandmaps`: every boot of a mode lays out the kernel and the program's mappings
the same way, so its boots count alike (here to 0.03 instructions a fault; with either layout random, boots
differed by up to 18, more than the fifth level's cost). The full run keeps both random, as real machines boot.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ... import processes
from ...errors import PerflabError
from ...journal import signals_end_the_process
from ...paths import scratch
from ...vm import image as guest_image
from ...vm.profiles import Profile, load, machine_args
from ...vm.qemu import bare
from .faults import Settings
from .guests import PROFILES, read_boot, static_build

KERNEL_ARGS = ["console=ttyS0", "quiet", "loglevel=1", "panic=-1", "nokaslr", "norandmaps", "rdinit=/init"]
BOOT_TIMEOUT_S = 180  # about 15 s here under TCG; a host busy with other work is slower, a hung guest never ends


# ANCHOR: initramfs
def newc(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """A cpio archive in the kernel's initramfs format ("newc"): (path, mode, data, device) per entry, in order.

    Each entry is a header of 13 hex fields, its path NUL-ended and its data, each padded to 4 bytes."""
    def padded(blob: bytes) -> bytes:
        return blob + b"\0" * (-len(blob) % 4)

    archive = b""
    for number, (path, mode, data, device) in enumerate([*entries, ("TRAILER!!!", 0, b"", 0)], 1):
        fields = (number, mode, 0, 0, 1, 0, len(data), 0, 0, device >> 8, device & 0xFF, len(path) + 1, 0)
        archive += padded(b"070701" + "".join(f"{field:08X}" for field in fields).encode() + path.encode() + b"\0")
        archive += padded(data)
    return archive
# ANCHOR_END: initramfs


def initramfs(folder: Path) -> Path:
    """The guests' initramfs, written in `folder`: init and faults (built static here), and the folders they use."""
    built = static_build().parent  # init beside faults, static too: libc6-dev's libc.a
    directory, program = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o755
    entries = [("dev", directory, b"", 0), ("dev/console", stat.S_IFCHR | 0o600, b"", os.makedev(5, 1)),
               ("proc", directory, b"", 0), ("tmp", stat.S_IFDIR | 0o1777, b"", 0),
               *((name, program, (built / name).read_bytes(), 0) for name in ("init", "faults"))]
    path = folder / "initramfs.cpio"
    path.write_bytes(newc(entries))
    return path


def qemu_argv(profile: Profile, kernel: Path, initrd: Path, console: Path, settings: Settings) -> list[str]:
    """QEMU's command line for a minimal guest of the profile: its CPU, memory and clock, no disk, no agent."""
    append = [*KERNEL_ARGS, *profile.kernel_args, "--", str(settings.pages), str(settings.fault_rounds)]
    return [*bare(f"perflab-quick-{profile.name}"), *machine_args(profile, "tcg"), "-kernel", str(kernel),
            "-initrd", str(initrd), "-append", " ".join(append),
            "-chardev", f"file,id=console,path={console}", "-serial", "chardev:console"]


def boot_both(settings: Settings, high: bool) -> dict[int, dict[str, Any]]:
    """Boot one minimal guest per paging mode, side by side, and read what each printed: levels -> its boot.
    high: keep the rounds hinted above 2^47, which every minimal guest runs after its measured rounds."""
    image = guest_image.current()
    with scratch("quick-guests") as folder_name, signals_end_the_process(), ExitStack() as files:
        folder, running, started = Path(folder_name), {}, time.monotonic()
        initrd, profiles = initramfs(folder), {levels: load(name) for levels, name in PROFILES.items()}
        try:
            for levels, profile in profiles.items():
                argv = qemu_argv(profile, image.kernel(profile.kernel), initrd, folder / f"{levels}.log", settings)
                errors = files.enter_context((folder / f"{levels}.err").open("w"))
                running[levels] = processes.start(argv, stdout=errors, stderr=errors)
            seconds = {levels: _wait(levels, process, started, folder) for levels, process in running.items()}
        finally:
            for process in running.values():
                processes.stop(process, signal.SIGKILL)
        return {levels: {**read_boot(levels, (folder / f"{levels}.log").read_text(errors="replace"), high=high),
                         "guest": "minimal", "boot_seconds": seconds[levels], "accel": "tcg",
                         "icount": bool(profiles[levels].icount)}
                for levels in running}


def _wait(levels: int, process: subprocess.Popen, started: float, folder: Path) -> float:
    """Seconds from the first QEMU's start to this one's end: the guest powers itself off when it is done."""
    try:
        code = process.wait(max(BOOT_TIMEOUT_S - (time.monotonic() - started), 0.1))
    except subprocess.TimeoutExpired:
        raise PerflabError(f"the quick {levels}-level guest did not finish within {BOOT_TIMEOUT_S} s; its console "
                           f"ended with: {_last_lines(folder / f'{levels}.log')}") from None
    if code != 0:
        raise PerflabError(f"QEMU exited with {code} booting the quick {levels}-level guest: "
                           f"{_last_lines(folder / f'{levels}.err')}")
    return round(time.monotonic() - started, 1)


def _last_lines(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()][-3:]
    return " | ".join(lines) or "(nothing)"
