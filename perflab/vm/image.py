"""The guest image: Debian 12 from mmdebstrap, provisioned by vm/provision.sh, cached by recipe.

The recipe is the suite, the mirror, the bootstrap command and the provisioning script; its hash names the cached
image, so editing vm/provision.sh builds a new image on the next boot and nothing else does.
Each command of the build runs in a mount and PID namespace of its own (unshare) that dies
with perflab: the /proc and /sys that mmdebstrap and the provisioning mount never reach the
host's mount table, and kill -9 of perflab ends every process of the build (mmdebstrap, apt,
dpkg, mke2fs) at once. What such a build leaves is its partial folder, which the next build
removes and names.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..errors import PerflabError
from ..lock import exclusive
from ..paths import REPO_ROOT
from . import pvh
from .profiles import KERNELS

SUITE = "bookworm"
PROVISION_SCRIPT = REPO_ROOT / "vm" / "provision.sh"
# Essential packages and apt, as debootstrap's minbase, in one apt run: 22 to 23 s here where debootstrap took 36 s
# (20 CPU-s against 36), and without its download cache in the image.
BOOTSTRAP = ["mmdebstrap", "--variant=minbase", "--mode=root"]
BUILD_SPACE_GIB = 7  # rootfs and ext4 image side by side at the peak; the image alone is smaller
TOOLS = {"mmdebstrap": "mmdebstrap", "mke2fs": "e2fsprogs", "unshare": "util-linux", "chroot": "coreutils"}
KERNEL_SUFFIX = {"standard": "-amd64", "rt": "-rt-amd64"}
# ANCHOR: namespace
# The step is the first process of a new PID namespace, so the kernel kills all it started when it dies,
# daemons included; unshare kills it when unshare dies, and unshare dies with perflab (_dies_with).
NAMESPACE = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc"]
# ANCHOR_END: namespace
PR_SET_PDEATHSIG = 1


def cache_dir() -> Path:
    """Images and running VMs live here; PERFLAB_VM_CACHE moves them (say, to a roomier disk)."""
    return Path(os.environ.get("PERFLAB_VM_CACHE", REPO_ROOT / ".cache" / "vm"))


def mirror() -> str:
    return os.environ.get("PERFLAB_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def recipe() -> dict:
    return {"suite": SUITE, "mirror": mirror(), "bootstrap": " ".join(BOOTSTRAP),
            "provision_sha256": hashlib.sha256(PROVISION_SCRIPT.read_bytes()).hexdigest()}


def recipe_id(of: dict) -> str:
    return hashlib.sha256(json.dumps(of, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Image:
    folder: Path

    @property
    def disk(self) -> Path:
        return self.folder / "rootfs.ext4"

    def kernel(self, flavour: str) -> Path:
        return self.folder / f"vmlinuz-{flavour}"

    def initrd(self, flavour: str) -> Path:
        return self.folder / f"initrd-{flavour}"

    @property
    def info_path(self) -> Path:
        return self.folder / "image.json"

    def exists(self) -> bool:
        return self.info_path.is_file()

    def info(self) -> dict:
        return json.loads(self.info_path.read_text())


def current() -> Image:
    return Image(cache_dir() / "images" / recipe_id(recipe()))


def ensure(progress: bool = True) -> Image:
    """The image for the current recipe, built first if it is not cached."""
    image = current()
    if image.exists():
        return image
    return build(progress=progress)


def build(progress: bool = True, force: bool = False) -> Image:
    """Build the image for the current recipe; a cached one is kept unless `force`, then replaced once the new one
    is built (a failed rebuild leaves the old image as it was)."""
    _check_can_build()
    images = cache_dir() / "images"
    images.mkdir(parents=True, exist_ok=True)
    with exclusive(images / ".build.lock", "another process is building the guest image"):
        image = current()
        if image.exists() and not force:  # already built, perhaps by another process while this one waited
            return image
        free_gib = shutil.disk_usage(images).free / 2**30
        if free_gib < BUILD_SPACE_GIB:
            raise PerflabError(_no_space(images, free_gib))
        for partial in images.glob(".partial-*"):  # no build is writing it: this one holds the lock
            _remove_partial(partial)
        work = images / f".partial-{image.folder.name}"
        work.mkdir()
        log = work / "build.log"
        started = time.monotonic()
        try:
            _build_into(work, log, progress)
        except BaseException as err:
            kept = images / "last-failed-build.log"
            if log.exists():
                shutil.copyfile(log, kept)
            shutil.rmtree(work, ignore_errors=True)
            if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                raise PerflabError(_no_space(images, shutil.disk_usage(images).free / 2**30)) from None
            raise
        seconds = time.monotonic() - started
        info = {"recipe": recipe(), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(seconds, 1), "disk_bytes": _tree_bytes(work, allocated=True),
                "kernels": json.loads((work / "kernels.json").read_text())}
        (work / "image.json").write_text(json.dumps(info, indent=2) + "\n")
        if image.exists():  # --force: the old image goes only now that its replacement is whole
            replaced = images / f".partial-replaced-{image.folder.name}"
            image.folder.rename(replaced)
            shutil.rmtree(replaced, ignore_errors=True)
        work.rename(image.folder)
        for stale in images.iterdir():  # images of older recipes: nothing boots them any more
            if stale.is_dir() and stale != image.folder and not stale.name.startswith("."):
                shutil.rmtree(stale, ignore_errors=True)
        say(progress, f"guest image ready in {seconds:.0f} s: {image.folder} ({info['disk_bytes'] / 2**30:.2f} GiB on "
                      "disk)")
        return image


def _build_into(work: Path, log: Path, progress: bool) -> None:
    rootfs = work / "rootfs"
    _run_step(progress, log, "1/4 mmdebstrap", [*BOOTSTRAP, SUITE, str(rootfs), mirror()])
    shutil.copyfile(PROVISION_SCRIPT, rootfs / "tmp" / "provision.sh")
    shutil.copyfile("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")
    # Not `exec chroot`: the namespace's first process stays outside the chroot, so that ischroot and
    # systemd's checks inside still see a chroot, as they do on the host.
    _run_step(
        progress,
        log,
        "2/4 provisioning",
        [
            "sh",
            "-ec",
            'mount -t proc proc "$1/proc"; mount -t sysfs sysfs "$1/sys"; chroot "$1" /bin/sh /tmp/provision.sh',
            "provision",
            str(rootfs),
        ],
    )
    (rootfs / "tmp" / "provision.sh").unlink()
    (rootfs / "etc" / "resolv.conf").unlink()  # the guest has no network to resolve names on
    say(progress, "[3/4 kernels] copying the kernels out of the image, and uncompressed for PVH boots")
    kernels = {}
    for flavour in KERNELS:
        version = _kernel_version(rootfs / "boot", KERNEL_SUFFIX[flavour])
        shutil.copyfile(rootfs / "boot" / f"vmlinuz-{version}", work / f"vmlinuz-{flavour}")
        shutil.copyfile(rootfs / "boot" / f"initrd.img-{version}", work / f"initrd-{flavour}")
        pvh.write_uncompressed(work / f"vmlinuz-{flavour}")
        kernels[flavour] = version
    (work / "kernels.json").write_text(json.dumps(kernels))
    size_mib = _tree_bytes(rootfs) * 5 // 4 // 2**20 + 512  # room for what the labs build and write in the guest
    _run_step(progress, log, "4/4 ext4 image", ["mke2fs", "-q", "-t", "ext4", "-L", "perflab", "-d", str(rootfs),
                                                str(work / "rootfs.ext4"), f"{size_mib}M"])
    shutil.rmtree(rootfs)


def _kernel_version(boot: Path, suffix: str) -> str:
    rt = suffix == KERNEL_SUFFIX["rt"]
    versions = sorted(p.name.removeprefix("vmlinuz-") for p in boot.glob(f"vmlinuz-*{suffix}")
                      if p.name.endswith(KERNEL_SUFFIX["rt"]) == rt)
    if not versions:
        raise PerflabError(f"the provisioned image has no kernel ending in {suffix}: check vm/provision.sh's PACKAGES")
    return versions[-1]


def _run_step(progress: bool, log: Path, label: str, argv: list[str]) -> None:
    """Run one build step in its own namespaces (NAMESPACE), logging everything and showing its latest line
    on one status line."""
    tail: deque[str] = deque(maxlen=15)
    live = progress and sys.stderr.isatty()
    say(progress and not live, f"[{label}] {argv[0]} ...")
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        process = subprocess.Popen([*NAMESPACE, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", preexec_fn=_dies_with(os.getpid()))
        try:
            for line in process.stdout:
                out.write(line)
                tail.append(line.rstrip())
                if live:
                    width = shutil.get_terminal_size().columns - 1
                    print(f"\r\033[K[{label}] {line.strip()}"[:width], end="", file=sys.stderr, flush=True)
            code = process.wait()
        finally:
            if process.poll() is None:
                _stop(process)
        ended = f"{'done' if code == 0 else f'failed (exit {code})'} in {time.monotonic() - started:.0f} s"
        out.write(f"# {label}: {ended}\n")
        if live:
            print(f"\r\033[K[{label}] {ended}", file=sys.stderr, flush=True)
        say(progress and not live, f"[{label}] {ended}")
    if code != 0:
        if any("No space left on device" in line for line in tail):
            raise OSError(errno.ENOSPC, "no space left on device")
        last = "; ".join(line for line in tail if line)[-600:]
        raise PerflabError(f"building the guest image failed in step {label} ({argv[0]} exited with {code}): {last}; "
                           f"the full log is kept in {cache_dir() / 'images' / 'last-failed-build.log'}")


def _dies_with(parent: int):
    """A preexec_fn: the child gets SIGKILL when `parent` dies, even by kill -9 (PR_SET_PDEATHSIG).

    Strictly, when the thread that started it ends: the build runs on perflab's main thread."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork, not in the child

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl: no signal will come
            os._exit(1)
    return arm


def _stop(step: subprocess.Popen) -> None:
    """Kill a step's namespace and return once none of its processes is left (before its folder is removed).

    SIGKILL to the namespace's first process kills every process in it, and unshare reaps that one only after
    all are gone, so unshare's exit is the sign; unshare is killed itself only if it has not forked yet."""
    try:
        first = Path(f"/proc/{step.pid}/task/{step.pid}/children").read_text().split()
    except OSError:
        first = []
    if first:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(first[0]), signal.SIGKILL)
    else:
        step.kill()
    step.wait()


def _remove_partial(partial: Path) -> None:
    """Remove the folder an interrupted build left (killed outright: Ctrl-C removes its own) and say so."""
    size = _tree_bytes(partial, allocated=True)
    shutil.rmtree(partial, ignore_errors=True)
    if partial.exists():
        raise PerflabError(f"cannot remove {partial}, which an interrupted build of the guest image left: "
                           f"remove it by hand (`sudo rm -rf {partial}`)")
    say(True, f"removed {partial} ({size / 2**20:.1f} MiB), left by an interrupted build of the guest image")


def _check_can_build() -> None:
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise PerflabError(f"building the guest image needs {', '.join(missing)}: run `make lab` (it installs "
                           "deps/debian.txt)")
    if os.geteuid() != 0:
        raise PerflabError("building the guest image needs root (mmdebstrap and chroot): run `sudo perflab vm build` "
                           "once; booting it afterwards needs no root")


def _no_space(folder: Path, free_gib: float) -> str:
    return (f"not enough disk space for the guest image in {folder}: {free_gib:.1f} GiB free, the build needs about "
            f"{BUILD_SPACE_GIB} GiB; free some space or point PERFLAB_VM_CACHE at a roomier disk")


def _tree_bytes(folder: Path, allocated: bool = False) -> int:
    """What `du -sb` says of `folder`, or with allocated `du -sB1`: every inode once, no symbolic link followed
    (a rootfs's absolute links point into the host)."""
    seen, total = set(), 0
    for top, folders, files in os.walk(folder):
        for path in [top, *(os.path.join(top, name) for name in folders + files)]:
            try:
                info = os.lstat(path)
            except OSError:  # gone meanwhile
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512 if allocated else info.st_size
    return total


def say(enabled: bool, text: str) -> None:
    """A progress line on stderr, for the VM commands."""
    if enabled:
        print(f"perflab: {text}", file=sys.stderr, flush=True)
