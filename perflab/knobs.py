"""System knobs: the settings under /sys and /proc that labs change, one small class each.

A knob reads and writes one kernel file through a SysRoot (so tests use a
fixture tree) and knows what its values mean. Nothing writes a knob
directly: perflab.journal.SystemChanges records the old value on disk first,
and restores it however the run ends (see that module).

    available()     the file exists on this kernel
    read()          its value, or None
    write(value)    one write(2); a refusal is a PerflabError saying why
    restore(old)    put back a value the journal kept
"""

from __future__ import annotations

import re
import subprocess
from abc import ABC, abstractmethod
from typing import ClassVar

from .errors import PerflabError
from .sysfs import CPU_DIR, SysRoot, default_root


class Knob(ABC):
    """One kernel setting. `target` names the instance (a CPU policy, a disk, an IRQ); "" for machine-wide ones."""

    kind: ClassVar[str]  # the stable name the journal records
    TARGET: ClassVar[str] = ""  # a regular expression a target must match; "" for machine-wide knobs
    MEANINGS: ClassVar[dict[str, str]] = {}

    def __init__(self, target: str = "", root: SysRoot | None = None):
        target = str(target)
        if (self.TARGET and not re.fullmatch(self.TARGET, target)) or (not self.TARGET and target):
            raise PerflabError(f"{target!r} is not a {self.kind} target (expected {self.TARGET or 'none'})")
        self.target = target
        self.root = root or default_root()

    @property
    @abstractmethod
    def path(self) -> str:
        """The knob's file, relative to the SysRoot."""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.target}".strip()

    def available(self) -> bool:
        return self.root.exists(self.path)

    def read(self) -> str | None:
        return self.root.read(self.path)

    def write(self, value: str) -> None:
        self.root.write(self.path, value + "\n")  # as `echo VALUE >` writes it; every such file takes the newline

    def restore(self, old: str) -> None:
        self.write(old)

    def meaning(self, value: str | None) -> str:
        return self.MEANINGS.get(value or "", "")


class Governor(Knob):
    """A cpufreq policy's governor: `performance` holds the highest frequency; others move it with the load."""

    kind = "governor"
    TARGET = r"policy\d+"

    @property
    def path(self) -> str:
        return f"{CPU_DIR}/cpufreq/{self.target}/scaling_governor"

    def choices(self) -> list[str]:
        return (self.root.read(f"{CPU_DIR}/cpufreq/{self.target}/scaling_available_governors") or "").split()

    def driver(self) -> str | None:
        return self.root.read(f"{CPU_DIR}/cpufreq/{self.target}/scaling_driver")

    def cpus(self) -> list[int]:
        """The CPUs the policy covers (affected_cpus); its own number where that cannot be read."""
        text = self.root.read(f"{CPU_DIR}/cpufreq/{self.target}/affected_cpus")
        try:
            return [int(x) for x in text.split()] if text else [int(self.target[6:])]
        except ValueError:
            return [int(self.target[6:])]


class Turbo(Knob):
    """Turbo (boost): above-nominal clocks that vary with temperature and load, so timings vary too."""

    kind = "turbo"
    NO_TURBO = f"{CPU_DIR}/intel_pstate/no_turbo"
    BOOST = f"{CPU_DIR}/cpufreq/boost"
    # Where a driver has no global switch, policy0's own: the probe reads it, no knob writes it (it covers one policy).
    POLICY_BOOST = f"{CPU_DIR}/cpufreq/policy0/boost"
    # (file, the value that switches turbo off): Intel's inverted switch first, then the generic one.
    FILES = ((NO_TURBO, "1"), (BOOST, "0"))

    def _file(self) -> tuple[str, str]:
        return next(((path, off) for path, off in self.FILES if self.root.exists(path)), self.FILES[-1])

    @property
    def path(self) -> str:
        return self._file()[0]

    @property
    def off(self) -> str:
        return self._file()[1]

    def meaning(self, value: str | None) -> str:
        return "" if value is None else "off" if value == self.off else "on"

    def switch(self) -> tuple[str, int] | None:
        """(the first switch file that holds a number, the number), policy0's last; None where none does."""
        for path in (self.NO_TURBO, self.BOOST, self.POLICY_BOOST):
            value = self.root.read_int(path)
            if value is not None:
                return path, value
        return None


class NumaBalancing(Knob):
    """Automatic NUMA balancing: the kernel migrates pages toward the node that touches them."""

    kind = "numa_balancing"
    MEANINGS = {"0": "off", "1": "on: pages follow their users", "2": "memory tiering"}

    @property
    def path(self) -> str:
        return "/proc/sys/kernel/numa_balancing"


class RqAffinity(Knob):
    """Where a disk's block completions run, relative to the CPU that submitted the I/O."""

    kind = "rq_affinity"
    TARGET = r"[A-Za-z0-9_.:-]+"
    MEANINGS = {"0": "where the interrupt lands", "1": "the first CPU of the submitter's group",
                "2": "the submitting CPU itself"}

    @property
    def path(self) -> str:
        return f"/sys/block/{self.target}/queue/rq_affinity"


class IrqAffinity(Knob):
    """The CPUs an interrupt may be delivered to."""

    kind = "irq_affinity"
    TARGET = r"\d+"

    @property
    def path(self) -> str:
        return f"/proc/irq/{self.target}/smp_affinity_list"

    def meaning(self, value: str | None) -> str:
        effective = self.root.read(f"/proc/irq/{self.target}/effective_affinity_list")
        return f"delivered to CPU {effective} (effective_affinity_list)" if effective else ""

    def write(self, value: str) -> None:
        try:
            super().write(value)
        except PerflabError as err:
            raise PerflabError(f"{err} (a managed interrupt, as NVMe queues have, cannot be moved: its "
                               "driver spreads them over the CPUs itself)") from None


class TracefsMount(Knob):
    """tracefs at /sys/kernel/tracing: perf's tracepoints and the kernel's tracers need it mounted.

    Journaled like a kernel setting, so a run that mounted it unmounts it again.
    """

    kind = "tracefs_mount"
    MOUNT_POINT = "/sys/kernel/tracing"
    MEANINGS = {"unmounted": "tracefs not mounted", "mounted": f"tracefs mounted at {MOUNT_POINT}"}

    @property
    def path(self) -> str:
        return self.MOUNT_POINT

    def available(self) -> bool:
        return self.read() is not None

    def read(self) -> str | None:
        """"mounted", "unmounted", or None when the kernel has no tracefs."""
        if self.root.exists(f"{self.MOUNT_POINT}/available_events"):
            return "mounted"
        filesystems = self.root.read("/proc/filesystems") or ""
        return "unmounted" if "tracefs" in filesystems.split() else None

    def write(self, value: str) -> None:
        if not self.root.is_live:
            raise PerflabError(f"{self.label}: mounting works only on the live machine, not in {self.root.root}")
        commands = {"mounted": ["mount", "-t", "tracefs", "nodev", self.MOUNT_POINT],
                    "unmounted": ["umount", self.MOUNT_POINT]}
        if value not in commands:
            raise PerflabError(f"{self.label}: the value is mounted or unmounted, not {value!r}")
        run_as_root(commands[value], "mounting", "util-linux")


class TracerSetting(Knob):
    """One setting of the kernel's tracer in tracefs: which tracer runs, where, for how long, when it stops."""

    kind = "tracer"
    TARGET = r"current_tracer|tracing_on|events/osnoise/enable|osnoise/(cpus|period_us|runtime_us|stop_tracing_us)"

    @property
    def path(self) -> str:
        return f"{TracefsMount.MOUNT_POINT}/{self.target}"


class TraceBuffer(Knob):
    """The tracer's ring buffer in tracefs: writing `emptied` empties it (a truncating write of `trace`).

    Journaled like a setting, so that every write under /sys goes through the journal; nothing is put back.
    """

    kind = "trace_buffer"
    MEANINGS = {"kept": "what the tracer recorded", "emptied": "emptied for a new trace"}

    @property
    def path(self) -> str:
        return f"{TracefsMount.MOUNT_POINT}/trace"

    def read(self) -> str | None:
        return "kept" if self.available() else None

    def write(self, value: str) -> None:
        if value != "emptied":
            raise PerflabError(f"{self.label}: the buffer can only be emptied, not set to {value!r}")
        self.root.write(self.path, "")

    def restore(self, old: str) -> None:
        """A trace once emptied is gone: nothing to put back."""


def run_as_root(argv: list[str], doing: str, package: str, passing: tuple[int, ...] = (0,)) -> int:
    """Run a system command that changes the machine and return its exit code, one of `passing`; any other
    failure is one line that says why and what to do."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise PerflabError(f"{argv[0]} is missing: install Debian's {package} package") from None
    if done.returncode not in passing:
        message = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PerflabError(f"{' '.join(argv[:1] + argv[-1:])} failed: {message}; {doing} needs root: run as root "
                           "or with sudo")
    return done.returncode


KNOBS: dict[str, type[Knob]] = {k.kind: k for k in (Governor, Turbo, NumaBalancing, RqAffinity, IrqAffinity,
                                                    TracefsMount, TracerSetting, TraceBuffer)}


def governors(root: SysRoot) -> list[Governor]:
    policies = [p for p in root.listdir(f"{CPU_DIR}/cpufreq") if re.fullmatch(Governor.TARGET, p)]
    return [Governor(p, root) for p in sorted(policies, key=lambda p: int(p[6:]))]


def governor_settings(root: SysRoot, cpus: list[int]) -> tuple[str, list[tuple[str | None, str | None, list[int]]]]:
    """(where they were read, [(governor, driver, the CPUs it covers)]): one a cpufreq policy, or one a CPU on
    kernels without policies."""
    policies = governors(root)
    if policies:
        return (f"{CPU_DIR}/cpufreq/policyN/{{scaling_governor,scaling_driver,affected_cpus}}",
                [(policy.read(), policy.driver(), policy.cpus()) for policy in policies])
    return (f"{CPU_DIR}/cpuN/cpufreq/{{scaling_governor,scaling_driver}}",
            [(root.read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor"),
              root.read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_driver"), [cpu]) for cpu in cpus])


def disks(root: SysRoot) -> list[str]:
    """Block devices backed by hardware (or a virtual device): loop, ram and zram have no `device`."""
    return [d for d in root.listdir("/sys/block") if root.exists(f"/sys/block/{d}/device")]


def disk_irqs(root: SysRoot, disk: str) -> list[int]:
    """A disk's interrupts: the MSI vectors of the device above it in sysfs (its PCI function)."""
    top = root.path("/").resolve()
    device = root.path(f"/sys/block/{disk}/device").resolve()
    while root.path("/sys/devices").resolve() in device.parents:
        vectors = f"/{device.relative_to(top)}/msi_irqs"
        if root.exists(vectors):
            return sorted(int(name) for name in root.listdir(vectors) if name.isdigit())
        device = device.parent
    return []


def used_by_labs(root: SysRoot | None = None) -> list[Knob]:
    """Every knob a lab may change or a run may depend on, as far as this machine has it."""
    root = root or default_root()
    found: list[Knob] = [*governors(root), Turbo(root=root), NumaBalancing(root=root), TracefsMount(root=root)]
    for disk in disks(root):
        found.append(RqAffinity(disk, root))
        found += [IrqAffinity(str(irq), root) for irq in disk_irqs(root, disk)]
    return [knob for knob in found if knob.available()]
