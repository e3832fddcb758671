"""Each learner in a cgroup of their own: a CPU weight, a memory limit and a process limit.

A learner's runaway loop, memory leak or fork bomb then slows or stops only that learner. While
one measures, the queue lowers every other learner's CPU weight to the least the kernel takes
(yield_to), so a busy classmate outside the queue gives the CPUs up to the measurement instead of
sharing them; and once the measurement names its CPUs, where the machine has others to spare and
a cpuset controller, the queue moves every other learner onto those others (hold_off), so a
classmate's loop never runs on a measured CPU at all.

cgroup v2 where the unified hierarchy has the cpu, memory and pids controllers (a Debian server
with systemd), else the v1 hierarchies of those three (this project's CI guest); neither: no
limits, and `up` says so. The groups are made and removed through the accounts journal.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from ..cpulist import format_cpulist, parse_cpulist
from ..errors import PerflabError
from ..knobs import Knob
from ..sysfs import SysRoot, default_root

CGROUP = "/sys/fs/cgroup"
GROUP = "perflab-workshop"
PROCESSES_MAX = 1024  # a JupyterLab, its kernels and a lab's threads use about 100
MEMORY_SHARE = 0.5  # of the machine's memory, at most, for any one learner
END_WITHIN_S = 10.0


@dataclass(frozen=True)
class Layout:
    """Where one learner's group lives and which files hold its limits."""

    folders: tuple[str, ...]  # the hierarchies' folders for this workshop (v2: one; v1: cpu, memory, pids)
    cpu: str  # the weight's file and its normal and yielding values
    normal: str
    yielding: str
    memory: str
    version: int


V2 = Layout((f"{CGROUP}/{GROUP}",), "cpu.weight", "100", "1", "memory.max", 2)
V1 = Layout(tuple(f"{CGROUP}/{c}/{GROUP}" for c in ("cpu", "memory", "pids")), "cpu.shares", "1024", "2",
            "memory.limit_in_bytes", 1)


def layout(root: SysRoot) -> Layout | None:
    """The cgroup layout this machine offers learners, or None when it has no cpu, memory and pids controllers."""
    if {"cpu", "memory", "pids"} <= set((root.read(f"{CGROUP}/cgroup.controllers") or "").split()):
        return V2
    if all(root.exists(f"{CGROUP}/{c}/cgroup.procs") for c in ("cpu", "memory", "pids")):
        return V1
    return None


def cpuset_folder(root: SysRoot, found: Layout) -> str | None:
    """The workshop's folder in the hierarchy with the cpuset controller, or None when this machine has none."""
    if found.version == 2:
        return found.folders[0] if "cpuset" in (root.read(f"{CGROUP}/cgroup.subtree_control") or "").split() else None
    return f"{CGROUP}/cpuset/{GROUP}" if root.exists(f"{CGROUP}/cpuset/cgroup.procs") else None


def describe(root: SysRoot | None = None) -> str:
    """One line for `up`: what each learner's group holds them to, or why there is none."""
    root = root or default_root()
    found = layout(root)
    if found is None:
        return ("Learners share the machine without limits: it has no cpu, memory and pids cgroup controllers "
                f"(neither {CGROUP}/cgroup.controllers nor the v1 hierarchies list them).")
    cpus = (", and they move off the CPUs it measures on where there are others to spare" if cpuset_folder(root, found)
            else "; this machine has no cpuset controller to move them off the measured CPUs")
    return (f"Each learner in a cgroup of their own (v{found.version}): an equal CPU weight, at most "
            f"{_memory_limit(root) >> 20} MiB and {PROCESSES_MAX} processes; while one measures, "
            f"the others' CPU weight drops to the least{cpus}.")


class LearnerCgroup(Knob):
    """A workshop learner's cgroup, with its limits: journaled, so `down` removes exactly the groups `up` made."""

    kind = "learner_cgroup"
    TARGET = r"perflab-[a-z][a-z0-9-]{0,23}"
    MEANINGS = {"absent": "no group", "present": "the learner's cgroup: CPU weight, memory and process limits"}

    @property
    def layout(self) -> Layout:
        found = layout(self.root)
        if found is None:
            raise PerflabError(f"{self.label}: this machine has no cpu, memory and pids cgroup controllers")
        return found

    @property
    def path(self) -> str:
        return f"{self.layout.folders[0]}/{self.target}"

    @property
    def folders(self) -> tuple[str, ...]:
        """The workshop's folders in every hierarchy a learner's group has, the cpuset's last where there is one."""
        found = self.layout
        cpuset = cpuset_folder(self.root, found)
        return found.folders + ((cpuset,) if cpuset and cpuset not in found.folders else ())

    def available(self) -> bool:
        return layout(self.root) is not None

    def read(self) -> str | None:
        return "present" if self.root.exists(self.path) else "absent"

    def write(self, value: str) -> None:
        if value == "present":
            self._make()
        elif value == "absent":
            self._remove()
        else:
            raise PerflabError(f"{self.label}: the value is present or absent, not {value!r}")

    def _make(self) -> None:
        found = self.layout
        cpuset = cpuset_folder(self.root, found)
        for folder in self.folders:
            self.root.path(folder).mkdir(mode=0o755, exist_ok=True)
            if found.version == 2:  # the workshop's group hands the controllers down to the learners'
                self.root.write(f"{folder}/cgroup.subtree_control", "+cpu +memory +pids" + (" +cpuset" * bool(cpuset)))
            elif folder == cpuset:  # a v1 cpuset group takes no process before it has CPUs and memory nodes
                _inherit_cpuset(self.root, folder)
            self.root.path(f"{folder}/{self.target}").mkdir(mode=0o755, exist_ok=True)
            if found.version == 1 and folder == cpuset:
                _inherit_cpuset(self.root, f"{folder}/{self.target}")
        self.root.write(self._file(found.cpu), found.normal)
        self.root.write(self._file(found.memory), str(_memory_limit(self.root)))
        self.root.write(self._file("pids.max"), str(PROCESSES_MAX))

    def _remove(self) -> None:
        """End what still runs in the group (rmdir refuses a group with a process), then remove it."""
        deadline = time.monotonic() + END_WITHIN_S
        for folder in self.folders:
            group = f"{folder}/{self.target}"
            while self.root.exists(group):
                pids = [int(pid) for pid in (self.root.read(f"{group}/cgroup.procs") or "").split()]
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    self.root.path(group).rmdir()
                except OSError as err:
                    if time.monotonic() > deadline:
                        raise PerflabError(f"{self.label}: cannot remove {group} ({err.strerror}): processes "
                                           f"{pids} are still in it; run `perflab workshop down` again") from None
                    time.sleep(0.05)
            try:
                self.root.path(folder).rmdir()  # the workshop's own group, once its last learner's is gone
            except OSError:
                pass

    def _file(self, name: str) -> str:
        """The limit's file, in whichever hierarchy holds it."""
        return next(f"{folder}/{self.target}/{name}" for folder in self.folders
                    if self.root.exists(f"{folder}/{self.target}/{name}"))


def _inherit_cpuset(root: SysRoot, group: str) -> None:
    parent = group.rsplit("/", 1)[0]
    for name in ("cpuset.cpus", "cpuset.mems"):
        root.write(f"{group}/{name}", (root.read(f"{parent}/{name}") or "").strip())


def _memory_limit(root: SysRoot) -> int:
    meminfo = dict(line.split(":", 1) for line in (root.read("/proc/meminfo") or "").splitlines() if ":" in line)
    total_kib = int(meminfo.get("MemTotal", "0 kB").split()[0])
    page = os.sysconf("SC_PAGE_SIZE")  # the kernel keeps a limit in whole pages
    return max(int(total_kib * 1024 * MEMORY_SHARE), 1 << 30) // page * page


def enter(user: str, root: SysRoot | None = None) -> None:
    """Put the calling process in the learner's group (its children follow): the spawner's and a re-grade's
    preexec_fn, so nothing of the learner's runs outside it for an instant. Nothing where there are no groups."""
    try:
        knob = LearnerCgroup(user, root)
    except PerflabError:  # not a learner's name (root's own helper, a test's `nobody`): no group to enter
        return
    if not knob.available() or knob.read() != "present":
        return
    for folder in knob.folders:
        if knob.root.exists(f"{folder}/{user}"):  # a group made before perflab used cpusets has none there
            knob.root.write(f"{folder}/{user}/cgroup.procs", str(os.getpid()))


def yield_to(holder: str | None, learners: list[str], root: SysRoot | None = None) -> None:
    """While `holder` measures, every other learner's CPU weight at the least; all normal again when holder is
    None. A weight counts against its siblings only: a learner's turn lowers the other learners' groups, a turn of
    someone outside the class (root's) lowers the workshop's group as a whole. Every learner back on all the CPUs:
    a turn begins before its measurement names its CPUs (hold_off). The queue calls it at each turn; a group that is
    gone (a learner being removed) is passed over."""
    root = root or default_root()
    found = layout(root)
    if found is None or not root.exists(found.folders[0]):
        return
    outside = holder is not None and holder not in learners
    settings = [(f"{found.folders[0]}/{found.cpu}", found.yielding if outside else found.normal)]
    settings += [(f"{found.folders[0]}/{user}/{found.cpu}",
                  found.yielding if holder not in (None, user) and not outside else found.normal) for user in learners]
    cpuset = cpuset_folder(root, found)
    if cpuset and root.exists(cpuset):  # v2's empty list (a bare newline) is the parent's CPUs; v1 takes no empty list
        everyone = _cpus_of(root, found, cpuset) if found.version == 1 else "\n"
        settings += [(f"{cpuset}/{user}/cpuset.cpus", everyone) for user in learners]
    _write_each(root, settings)


def hold_off(holder: str, learners: list[str], measured: list[int], root: SysRoot | None = None) -> str:
    """Every learner but `holder` onto the CPUs beyond those `measured`, until the turn ends (yield_to puts them
    back), where there are CPUs to spare and a cpuset controller; the line that tells the measurer what was done."""
    root = root or default_root()
    found = layout(root)
    cpuset = cpuset_folder(root, found) if found else None
    others = [user for user in learners if user != holder]
    if not others or found is None or not root.exists(found.folders[0]):
        return ""
    if cpuset is None or not root.exists(cpuset):
        return ("the class shares the measured CPUs at the least CPU weight: this machine has no cpuset controller "
                "to move it off them")
    spare = sorted(set(parse_cpulist(_cpus_of(root, found, cpuset))) - set(measured))
    if not spare:
        return (f"the class shares CPU {format_cpulist(measured)} at the least CPU weight: this machine has no CPU to "
                "spare beyond those measured")
    _write_each(root, [(f"{cpuset}/{user}/cpuset.cpus", format_cpulist(spare)) for user in others])
    return f"the class runs on CPU {format_cpulist(spare)} while this measures on CPU {format_cpulist(measured)}"


def _cpus_of(root: SysRoot, found: Layout, cpuset: str) -> str:
    """The CPUs the workshop's group may use: all the class may be given."""
    return (root.read(f"{cpuset}/cpuset.cpus{'.effective' if found.version == 2 else ''}") or "").strip()


def _write_each(root: SysRoot, settings: list[tuple[str, str]]) -> None:
    for path, value in settings:
        if root.exists(path):
            try:
                root.write(path, value)
            except PerflabError:
                continue


def main(argv: list[str]) -> None:
    """`python -m perflab.workshop.cgroups USER -- COMMAND...`: COMMAND in USER's group, for root's helpers that run
    a learner's code from a threaded process (a re-grade), where a preexec_fn could deadlock."""
    user, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: python -m perflab.workshop.cgroups USER -- COMMAND...")
    enter(user)
    os.execvp(command[0], command)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
