"""VM profiles: one small TOML file per machine shape in vm/, and the QEMU arguments for it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PerflabError
from ..paths import REPO_ROOT

PROFILES_DIR = REPO_ROOT / "vm"
KERNELS = ("standard", "rt")


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
    boot_timeout_s: int = 240  # TCG on two host cores; KVM boots in a few seconds

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    def topology(self) -> str:
        text = f"{self.cpus} vCPUs ({self.sockets}s x {self.cores}c x {self.threads}t)"
        if self.numa_nodes > 1:
            text += f", {self.numa_nodes} NUMA nodes"
        return text + f", {self.memory_mib // 1024} GiB" + (", la57" if self.la57 else "")


def names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def load(name: str, folder: Path = PROFILES_DIR) -> Profile:
    """Read vm/<name>.toml; `extends = "other"` starts from another profile's settings."""
    settings = _settings(name, folder, seen=())
    settings.pop("extends", None)
    try:
        profile = Profile(name=name, **settings)
    except TypeError as err:
        raise PerflabError(f"vm/{name}.toml: {err}; see vm/README.md for the keys a profile may set") from None
    _check(profile)
    return profile


def _settings(name: str, folder: Path, seen: tuple[str, ...]) -> dict:
    path = folder / f"{name}.toml"
    if not path.is_file():
        raise PerflabError(f"unknown VM profile {name!r}; choose one of: {', '.join(names())} (files in vm/)")
    if name in seen:
        raise PerflabError(f"vm/{name}.toml: `extends` loops back to {name}")
    try:
        own = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise PerflabError(f"vm/{name}.toml is not valid TOML: {err}") from None
    if "extends" not in own:
        return own
    return {**_settings(own["extends"], folder, (*seen, name)), **own}


def _check(profile: Profile) -> None:
    where = f"vm/{profile.name}.toml"
    if min(profile.sockets, profile.cores, profile.threads) < 1:
        raise PerflabError(f"{where}: sockets, cores and threads must be at least 1")
    if profile.kernel not in KERNELS:
        raise PerflabError(f"{where}: kernel must be one of {', '.join(KERNELS)}, not {profile.kernel!r}")
    if profile.numa_nodes > 1 and profile.sockets % profile.numa_nodes:
        raise PerflabError(f"{where}: {profile.sockets} sockets do not split evenly into {profile.numa_nodes} NUMA nodes")
    if profile.memory_mib % profile.numa_nodes:
        raise PerflabError(f"{where}: memory_mib must split evenly into {profile.numa_nodes} NUMA nodes")


def machine_args(profile: Profile, accel: str) -> list[str]:
    """QEMU's CPU, topology and memory arguments for the profile under `accel` (kvm or tcg)."""
    la57 = "on" if profile.la57 else "off"
    # -cpu max gives TCG every feature it emulates, la57 included, so it is switched off unless wanted.
    # Its default vendor is AMD, whose SMT topology Linux reads from a leaf TCG lacks: Intel's it has.
    cpu = f"host,la57={la57}" if accel == "kvm" else f"max,la57={la57},vendor=GenuineIntel"
    args = ["-machine", "q35", "-accel", accel, "-cpu", cpu,
            "-smp", f"{profile.cpus},sockets={profile.sockets},cores={profile.cores},threads={profile.threads}",
            "-m", f"{profile.memory_mib}M"]
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
