"""VM profiles: one small TOML file per machine shape in vm/, and the QEMU arguments for it."""

from __future__ import annotations

import re
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from ..errors import PerflabError
from ..paths import REPO_ROOT

PROFILES_DIR = REPO_ROOT / "vm"
KERNELS = ("standard", "rt")
# A name becomes vm/<name>.toml and <cache>/vms/<name>/, which perflab deletes: no path may hide in it.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_CPUS = 256  # QEMU's q35 machine takes up to 288 vCPUs; more than this is a typo, not a lab
ICOUNT = re.compile(r"shift=(\d|10|auto)(,sleep=(on|off))?(,align=(on|off))?")  # the -icount forms a lab needs
MEMORY_MIB = (256, 65536)  # the guest boots in 256 MiB; 64 GiB is more than any lab needs or a laptop has
SCRATCH_SERIAL = "perflab-scratch"  # the guest finds its scratch disk by this serial (/sys/block/*/serial)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    sockets: int
    cores: int
    threads: int
    memory_mib: int
    numa_nodes: int = 1
    numa_distance: int = 20
    la57: bool = False
    kernel: str = "standard"
    kernel_args: list[str] = field(default_factory=list)
    icount: str = ""  # QEMU's -icount: the guest clock counts instructions (TCG only), e.g. "shift=0,sleep=off"
    scratch_disk_mib: int = 0  # a one-queue virtio disk that reads zeroes and costs the host no I/O (0: none)
    tcg_single_thread: bool = False  # under TCG, one host thread runs every vCPU (see TCG_SINGLE_THREAD)
    boot_timeout_s: int = 240  # TCG on two host cores; KVM boots in a few seconds

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    def topology(self) -> str:
        text = f"{self.cpus} vCPUs ({self.sockets}s x {self.cores}c x {self.threads}t)"
        if self.numa_nodes > 1:
            text += f", {self.numa_nodes} NUMA nodes"
        return (text + f", {self.memory_mib // 1024} GiB" + (", la57" if self.la57 else "")
                + (f", icount {self.icount}" if self.icount else "")
                + (f", a {self.scratch_disk_mib} MiB scratch disk" if self.scratch_disk_mib else ""))


def _whole(low: int, high: int):
    """A check for a whole number in low..high (a TOML bool is not one, although Python's bool is an int)."""
    return (lambda v: type(v) is int and low <= v <= high), f"a whole number from {low} to {high}"


def _kernel_args(value) -> bool:
    # Each item is one word of the kernel command line: a string here would be split into characters.
    return isinstance(value, list) and all(isinstance(a, str) and a and not re.search(r"\s", a) for a in value)


# key -> (check, what is allowed): each file's values are checked here, before they are merged.
KEYS = {
    "extends": (lambda v: isinstance(v, str) and NAME.fullmatch(v) is not None, "the name of another profile in vm/"),
    "description": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "sockets": _whole(1, MAX_CPUS),
    "cores": _whole(1, MAX_CPUS),
    "threads": _whole(1, MAX_CPUS),
    "memory_mib": _whole(*MEMORY_MIB),
    "numa_nodes": _whole(1, MAX_CPUS),
    "numa_distance": _whole(11, 254),  # ACPI's SLIT: 10 is local, 255 unreachable
    "la57": (lambda v: isinstance(v, bool), "true or false"),
    "kernel": (lambda v: v in KERNELS, " or ".join(f'"{k}"' for k in KERNELS)),
    "kernel_args": (_kernel_args, 'a list of words, e.g. ["quiet", "no5lvl"]'),
    "icount": (lambda v: isinstance(v, str) and ICOUNT.fullmatch(v) is not None,
               'QEMU\'s -icount value, e.g. "shift=0,sleep=off" (shift 0 to 10 or auto)'),
    "scratch_disk_mib": _whole(0, 1 << 20),
    "tcg_single_thread": (lambda v: isinstance(v, bool), "true or false"),
    "boot_timeout_s": _whole(10, 3600),
}
REQUIRED = [f.name for f in fields(Profile)
            if f.name != "name" and f.default is MISSING and f.default_factory is MISSING]


def check_name(name: object, folder: Path | None = None) -> str:
    """The name if it can only mean a file in vm/; a path, or anything else, is refused."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PerflabError(f"{str(name)[:80]!r} is not a VM profile name: use a plain name of letters, digits, - and _ "
                           f"(the file vm/NAME.toml), one of: {', '.join(names(folder))}")
    return name


def names(folder: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (folder or PROFILES_DIR).glob("*.toml") if NAME.fullmatch(p.stem))


def load(name: str, folder: Path | None = None) -> Profile:
    """Read vm/<name>.toml; `extends = "other"` starts from another profile's settings."""
    folder = folder or PROFILES_DIR  # read at call time, so tests can point it elsewhere
    check_name(name, folder)  # before the name touches the file system
    settings = _settings(name, folder, seen=())
    settings.pop("extends", None)
    where = _shown(folder / f"{name}.toml")
    missing = [key for key in REQUIRED if key not in settings]
    if missing:
        raise PerflabError(f"{where}: {', '.join(missing)} missing; a profile sets {', '.join(REQUIRED)}, "
                           "or extends another profile that does (see vm/README.md)")
    profile = Profile(name=name, **settings)
    _check(profile, where)
    return profile


def _shown(path: Path) -> str:
    """vm/x.toml for the course's own profiles, the full path for any other."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _settings(name: str, folder: Path, seen: tuple[str, ...]) -> dict:
    path = folder / f"{name}.toml"
    if not path.is_file():
        raise PerflabError(f"unknown VM profile {name!r}; choose one of: {', '.join(names(folder))} (files in "
                           f"{_shown(folder)}/)")
    if name in seen:
        raise PerflabError(f"{_shown(path)}: `extends` loops back to {name}")
    try:
        own = tomllib.loads(path.read_text())
    except OSError as err:
        raise PerflabError(f"cannot read {_shown(path)}: {err.strerror}; make it readable") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise PerflabError(f"{_shown(path)} is not valid TOML: {err}") from None
    for key, value in own.items():
        if key not in KEYS:
            raise PerflabError(f"{_shown(path)}: unknown key {key!r}; a profile may set {', '.join(KEYS)}")
        allowed, what = KEYS[key]
        if not allowed(value):
            raise PerflabError(f"{_shown(path)}: {key} = {_short(value)} is not allowed; {key} must be {what}")
    if "extends" not in own:
        return own
    return {**_settings(own["extends"], folder, (*seen, name)), **own}


def _check(profile: Profile, where: str) -> None:
    """What no single key shows: the shape as a whole (the keys may come from the profile it extends)."""
    if profile.cpus > MAX_CPUS:
        raise PerflabError(f"{where}: sockets x cores x threads = {profile.cpus} vCPUs; at most {MAX_CPUS}")
    if profile.sockets % profile.numa_nodes:
        raise PerflabError(
            f"{where}: {profile.sockets} sockets do not split evenly into {profile.numa_nodes} NUMA nodes; "
            f"numa_nodes must divide sockets (each node holds whole sockets)"
        )
    if profile.memory_mib % profile.numa_nodes:
        raise PerflabError(f"{where}: memory_mib = {profile.memory_mib} must split evenly into {profile.numa_nodes} "
                           "NUMA nodes")


# The kernel argument that tells the guest one host thread runs all its vCPUs. Multi-threaded TCG hung the RT
# guest while the kernel patched its own hot code (every vCPU looping on the int3 that text_poke_bp plants, seen
# with gdb when osnoise switched its tracepoints); one thread runs every vCPU in turn, so none sees a half-patched
# instruction (40 of 40 osnoise starts and stops, 2026-11-24).
TCG_SINGLE_THREAD = "perflab.tcg=single"


def single_thread(profile: Profile, accel: str) -> bool:
    return accel == "tcg" and profile.tcg_single_thread


# Under TCG the guest's CPU is emulated and does not speculate, so the kernel's mitigations guard nothing there,
# and page-table isolation costs most: each switch of page tables (two a system call) empties QEMU's software TLB.
# In the default guest here, 400,000 one-byte reads took 13.5 s with them and 0.8 s without, and a boot 24 s
# against 19 s. Under KVM the host's CPU runs the guest, flaws and all: the kernel decides. The profiles that count
# instructions keep them too: lab 4 counts the fault path as its recorded boots did, with the mitigations' entry
# and exit code in it.
TCG_NO_MITIGATIONS = "mitigations=off"
# The kernel tests each crypto algorithm it registers, at boot and as the initramfs loads modules: 2.5 s of an
# emulated boot here, for algorithms no lab uses.
TCG_NO_CRYPTO_TESTS = "cryptomgr.notests"


def kernel_args(profile: Profile, accel: str) -> list[str]:
    """The words perflab adds to the guest kernel's command line under `accel`, then the profile's own."""
    added = [TCG_SINGLE_THREAD] if single_thread(profile, accel) else []
    return added + (tcg_boot_args(profile) if accel == "tcg" else []) + profile.kernel_args


def tcg_boot_args(profile: Profile) -> list[str]:
    """What an emulated boot of the profile drops: all but the icount profiles'. Lab 4 counts a fault's
    instructions as its recorded boots did, and a boot's settings move the count: with cryptomgr.notests alone,
    lab 4's quick guests counted 6,824.9 instructions a 5-level fault instead of 6,818.2 (4-level: 6,809.9 and
    6,811.4)."""
    return [] if profile.icount else [TCG_NO_MITIGATIONS, TCG_NO_CRYPTO_TESTS]


def pvh_boot(profile: Profile, accel: str) -> bool:
    """Whether QEMU starts the uncompressed kernel at its PVH entry (perflab.vm.pvh) rather than the bzImage.

    Under TCG, yes, as that saves seconds. Skipping the decompressor skips what it does besides: it picks
    KASLR's random offset, which no lab in these guests depends on, and it switches 5-level paging on, so la57
    profiles keep the bzImage (the icount ones among them: lab 4 counts its faults as its recorded boots did)."""
    return accel == "tcg" and not profile.icount and not profile.la57


def machine_args(profile: Profile, accel: str) -> list[str]:
    """QEMU's CPU, topology and memory arguments for the profile under `accel` (kvm or tcg)."""
    la57 = "on" if profile.la57 else "off"
    # -cpu max gives TCG every feature it emulates, la57 included, so it is switched off unless wanted.
    # Its default vendor is AMD, whose SMT topology Linux reads from a leaf TCG lacks: Intel's it has.
    cpu = f"host,la57={la57}" if accel == "kvm" else f"max,la57={la57},vendor=GenuineIntel"
    args = ["-machine", "q35", "-accel", "tcg,thread=single" if single_thread(profile, accel) else accel, "-cpu", cpu,
            "-smp", f"{profile.cpus},sockets={profile.sockets},cores={profile.cores},threads={profile.threads}",
            "-m", f"{profile.memory_mib}M"]
    if profile.icount and accel == "tcg":
        args += ["-icount", profile.icount]
    if profile.numa_nodes > 1:
        per_node = profile.memory_mib // profile.numa_nodes
        sockets_per_node = profile.sockets // profile.numa_nodes
        for node in range(profile.numa_nodes):
            args += ["-object", f"memory-backend-ram,id=mem{node},size={per_node}M",
                     "-numa", f"node,nodeid={node},memdev=mem{node}"]
            for socket in range(node * sockets_per_node, (node + 1) * sockets_per_node):
                args += ["-numa", f"cpu,node-id={node},socket-id={socket}"]
        for src in range(profile.numa_nodes):
            for dst in range(src + 1, profile.numa_nodes):
                args += ["-numa", f"dist,src={src},dst={dst},val={profile.numa_distance}"]
    return args


def scratch_disk_args(profile: Profile) -> list[str]:
    """The profile's scratch disk: QEMU's null-co driver answers every read with zeroes and touches no file, so
    a lab can read it as fast as it likes; one queue, so the guest's rq_affinity decides where reads complete."""
    if not profile.scratch_disk_mib:
        return []
    return ["-blockdev", f"driver=null-co,node-name=scratch,size={profile.scratch_disk_mib << 20},read-zeroes=on",
            # A PCI slot after the automatic ones: the guest names virtio disks in slot order, and root is vda.
            "-device", f"virtio-blk-pci,drive=scratch,num-queues=1,serial={SCRATCH_SERIAL},addr=0x10"]
