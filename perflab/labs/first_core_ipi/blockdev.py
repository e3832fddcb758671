"""The disk under the block part of lab 3: which disk a file is on, its hardware queues, its interrupts.

The reads go to PERFLAB_BLOCK_DEVICE (a block device, or a file on one); in a
VM whose profile gives it a scratch disk (numa2), to that disk; else to a
16 MiB scratch file in the build folder, on the disk that holds the checkout.
The disk is found from the file's device number in
/sys/dev/block; a partition is replaced by the disk it is on.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ...cpulist import parse_cpulist
from ...errors import PerflabError
from ...knobs import disk_irqs
from ...paths import RUN_BUILD_DIR
from ...sysfs import SysRoot
from ...vm.profiles import SCRATCH_SERIAL
from .. import CannotShow

DEVICE_ENV = "PERFLAB_BLOCK_DEVICE"
SCRATCH = RUN_BUILD_DIR / "03-first-core-ipi" / "scratch.bin"
SCRATCH_BYTES = 16 << 20
MIN_BYTES = 1 << 20  # blockread refuses less: random reads need room


@dataclass(frozen=True)
class Disk:
    read_path: str  # what blockread reads with O_DIRECT
    name: str  # vda, sda, nvme0n1
    queues: int  # hardware queues: /sys/block/NAME/mq has one folder per queue
    irqs: tuple[int, ...]  # the MSI vectors of its device


def scratch_disk(root: SysRoot) -> Path | None:
    """The scratch disk a VM profile gives its guest (QEMU's null-co, found by its serial), if this machine has one."""
    for name in root.listdir("/sys/block"):
        if root.read(f"/sys/block/{name}/serial") == SCRATCH_SERIAL:
            return Path("/dev") / name
    return None


def read_path(root: SysRoot) -> Path:
    """PERFLAB_BLOCK_DEVICE if set (checked), else a VM's scratch disk, else the scratch file, written once with
    random bytes."""
    given = os.environ.get(DEVICE_ENV)
    if given:
        path = Path(given)
        try:
            mode = path.stat().st_mode
        except OSError as err:
            raise PerflabError(f"{DEVICE_ENV}={given}: {err.strerror}; give a block device (/dev/vdb) or a file "
                               "on a disk") from None
        if not (stat.S_ISBLK(mode) or stat.S_ISREG(mode)):
            raise PerflabError(f"{DEVICE_ENV}={given} is neither a block device nor a file: give e.g. /dev/vdb")
        return path
    if (disk := scratch_disk(root)) is not None:
        return disk
    if not SCRATCH.exists() or SCRATCH.stat().st_size < SCRATCH_BYTES:
        SCRATCH.parent.mkdir(parents=True, exist_ok=True)
        partial = SCRATCH.with_suffix(".partial")
        with open(partial, "wb") as file:
            file.write(os.urandom(SCRATCH_BYTES))  # random: no filesystem can store it as holes
            file.flush()
            os.fsync(file.fileno())
        partial.replace(SCRATCH)
    return SCRATCH


def disk_name(path: Path, root: SysRoot) -> str:
    """The disk a block device or a file is on (vda for /dev/vda1 or for a file on it)."""
    info = path.stat()
    device = info.st_rdev if stat.S_ISBLK(info.st_mode) else info.st_dev
    major, minor = os.major(device), os.minor(device)
    if major == 0:
        raise CannotShow(f"{path} is on a filesystem without a disk (tmpfs, overlay or 9p): set {DEVICE_ENV} to a "
                         "file on a real disk, or to the disk itself")
    node = root.path(f"/sys/dev/block/{major}:{minor}")
    if not node.exists():
        raise CannotShow(f"{path} is on block device {major}:{minor}, which /sys/dev/block does not list")
    node = node.resolve()
    return node.parent.name if (node / "partition").exists() else node.name


def find_disk(root: SysRoot) -> Disk:
    path = read_path(root)
    name = disk_name(path, root)
    queues = len([q for q in root.listdir(f"/sys/block/{name}/mq") if q.isdigit()])
    return Disk(str(path), name, queues, tuple(disk_irqs(root, name)))


def effective_cpus(root: SysRoot, irq: int) -> list[int]:
    """The CPUs the interrupt is delivered to now (x86 delivers each to one CPU)."""
    text = root.read(f"/proc/irq/{irq}/effective_affinity_list") or root.read(f"/proc/irq/{irq}/smp_affinity_list")
    return parse_cpulist(text) if text else []
