"""An interrupted guest-image build leaves no mount and no process: kill -9 of `perflab vm build` at several
points of the build, in a cache folder of its own (PERFLAB_VM_CACHE), then the next build removes the partial
folder and says so. As root only, like the build itself.

The quick test runs the build with stand-ins for mmdebstrap, chroot and mke2fs that mount /proc in the target
as mmdebstrap does and leave a detached process writing into the partial folder; the slow one kills the
real mmdebstrap and apt."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from perflab.vm import image

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="building the guest image needs root"),
              pytest.mark.skipif(shutil.which("unshare") is None, reason="the build needs unshare (util-linux)")]

HANG = """
hang() {  # what a step does when it is killed: /proc mounted in the target, a detached writer in the folder
    mount -t proc proc "$1/proc"
    setsid sh -c 'while :; do date >> "$1/../writer.log"; sleep 0.05; done' writer "$1" &
    touch "$PERFLAB_TEST_READY"
    exec sh -c 'while :; do sleep 0.05; done' hanging "$1"
}
"""
STAND_INS = {
    "mmdebstrap": """target=$4  # mmdebstrap --variant=minbase --mode=root SUITE TARGET MIRROR
mkdir -p "$target/tmp" "$target/etc" "$target/boot" "$target/proc" "$target/sys"
for version in 6.1.0-1-amd64 6.1.0-1-rt-amd64; do
    echo kernel > "$target/boot/vmlinuz-$version"; echo initrd > "$target/boot/initrd.img-$version"
done
[ "$PERFLAB_TEST_HANG" != mmdebstrap ] || hang "$target"
""",
    "chroot": '[ "$PERFLAB_TEST_HANG" != chroot ] || hang "$1"\n',
    "mke2fs": 'echo ext4 > "$8"  # mke2fs -q -t ext4 -L perflab -d ROOTFS IMAGE SIZE\n'
              '[ "$PERFLAB_TEST_HANG" != mke2fs ] || hang "$7"\n',
}


@pytest.fixture
def cache(tmp_path):
    """A cache folder of its own; whatever a failed test left in it is ended, unmounted and removed."""
    folder = tmp_path / "cache"
    folder.mkdir()
    if shutil.disk_usage(folder).free < image.BUILD_SPACE_GIB * 2**30:
        pytest.skip(f"the build refuses to start with less than {image.BUILD_SPACE_GIB} GiB free in {folder}")
    yield folder
    for _ in range(3):  # a writer killed mid-loop may have started one more process
        for pid in users_of(folder):
            os.kill(pid, signal.SIGKILL)
        if not users_of(folder):
            break
        time.sleep(0.2)
    for mount in reversed(mounts_under(folder)):
        subprocess.run(["umount", "--lazy", mount], check=False)
    shutil.rmtree(folder, ignore_errors=True)


def start_build(cache: Path, output: Path, env: dict | None = None, *flags: str) -> subprocess.Popen:
    with output.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "perflab", "vm", "build", *flags],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PERFLAB_VM_CACHE": str(cache), **(env or {})},
        )


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from the state on (field 3), so that a name with spaces does not shift the fields."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def processes() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid -> (parent pid, start time, name); zombies are dead."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = stat_fields(int(entry.name))
            if fields[0] != "Z":
                found[int(entry.name)] = (int(fields[1]), int(fields[19]), (entry / "comm").read_text().strip())
        except (OSError, ValueError):
            continue
    return found


def descendants(root: int) -> dict[int, tuple[int, int, str]]:
    everyone = processes()
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _, _) in everyone.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return {pid: everyone[pid] for pid in tree - {root} if pid in everyone}


def users_of(folder: Path) -> list[int]:
    """Processes whose root, working folder or command line is in `folder`."""
    found = []
    for pid in processes():
        try:
            links = [os.readlink(f"/proc/{pid}/root"), os.readlink(f"/proc/{pid}/cwd")]
            words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if pid != os.getpid() and any(str(folder) in word for word in links + words):
            found.append(pid)
    return found


def mounts_under(folder: Path, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    points = [line.split()[4].replace("\\040", " ") for line in Path(mountinfo).read_text().splitlines()]
    return [point for point in points if point.startswith(str(folder) + "/")]


def wait_for(what: str, condition, build: subprocess.Popen, output: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert build.poll() is None, f"the build ended (exit {build.returncode}) before {what}: {output.read_text()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: {output.read_text()}"
        time.sleep(0.1)


def kill_and_find_nothing_left(build: subprocess.Popen, cache: Path, when: str) -> None:
    """kill -9 the build; within 2 s, no mount under the cache in this (the host's) namespace, and none of
    the build's processes alive, nor any other process in the cache folder."""
    tree = descendants(build.pid)
    assert tree, f"the build {when} has no child process to kill"
    os.kill(build.pid, signal.SIGKILL)
    build.wait()
    deadline = time.monotonic() + 2
    while True:
        now = processes()
        left = sorted({f"{pid} {name}" for pid, (_, started, name) in tree.items()
                       if now.get(pid, (0, None))[1] == started} | {f"{pid} {now[pid][2]}" for pid in users_of(cache)})
        mounts = mounts_under(cache)
        if not (left or mounts) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not mounts, f"killed {when}, the build left mounts in the host's namespace: {mounts}"
    assert not left, f"killed {when}, the build left processes running: {left}"


def removed_the_partial(output: Path, cache: Path) -> bool:
    return f"perflab: removed {cache / 'images'}/.partial-" in output.read_text()


def test_a_killed_build_leaves_no_mount_and_no_process_and_the_next_build_removes_its_partial(tmp_path, cache):
    """Killed in step 1 (mmdebstrap's /proc in the target), step 2 (the chroot) and step 4 (mke2fs), each
    time with a detached process writing into the partial folder; each next build removes the partial and
    says so, and the last one, not killed, builds the image."""
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for tool, body in STAND_INS.items():
        (stand_ins / tool).write_text(f"#!/bin/sh\nset -e\n{HANG}\n{body}")
        (stand_ins / tool).chmod(0o755)
    ready = tmp_path / "ready"
    for number, step in enumerate(["mmdebstrap", "chroot", "mke2fs", None]):
        output = tmp_path / f"build-{number}.txt"
        env = {"PATH": f"{stand_ins}:{os.environ['PATH']}", "PERFLAB_TEST_READY": str(ready),
               "PERFLAB_TEST_HANG": step or ""}
        build = start_build(cache, output, env)
        if step is None:
            assert build.wait(timeout=120) == 0, output.read_text()
        else:
            wait_for(f"{step} hanging", ready.exists, build, output, timeout=60)
            kill_and_find_nothing_left(build, cache, f"in {step}")
            ready.unlink()
        assert removed_the_partial(output, cache) == (number > 0), output.read_text()
    built = image.Image(next((cache / "images").glob("[!.]*")))
    assert built.exists() and not list((cache / "images").glob(".partial-*"))
    (built.folder / "old").touch()
    forced = start_build(cache, tmp_path / "forced.txt", env, "--force")
    assert forced.wait(timeout=120) == 0, (tmp_path / "forced.txt").read_text()
    assert built.exists() and not (built.folder / "old").exists(), "--force kept the cached image"
    assert not list((cache / "images").glob(".partial-*"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="the build needs mmdebstrap")
def test_a_real_build_killed_at_four_points_leaves_no_mount_and_no_process(tmp_path, cache):
    """Killed while mmdebstrap downloads, while it installs the essential packages with /proc mounted in the
    target, while apt runs in the provisioning chroot, and downloading again; each next build removes the partial
    and says so, and the second and third get further than the one before was killed at. A whole real build
    succeeding is the suite's background build (tests/conftest.py); the quick test above builds to the end after
    its kills."""

    def rootfs_proc_mounted() -> bool:
        targets = [str(path / "rootfs" / "proc") for path in (cache / "images").glob(".partial-*")]
        for pid in descendants(build.pid):
            try:
                if any(point in targets for point in mounts_under(cache, f"/proc/{pid}/mountinfo")):
                    return True
            except OSError:
                continue
        return False

    def running(name: str, chrooted: bool = False):
        """A process of the build by this name; chrooted: one whose root is the rootfs (mmdebstrap runs apt-get
        outside it, the provisioning inside)."""
        def found() -> bool:
            for pid, (_, _, comm) in descendants(build.pid).items():
                try:
                    if comm == name and (not chrooted or os.readlink(f"/proc/{pid}/root").endswith("/rootfs")):
                        return True
                except OSError:
                    continue
            return False
        return found

    points = [("mmdebstrap downloading (apt's http method)", running("http"), 120),
              ("mmdebstrap installing the essential packages (/proc mounted in the target)", rootfs_proc_mounted, 300),
              ("provisioning (apt-get in the chroot)", running("apt-get", chrooted=True), 600),
              ("mmdebstrap downloading again", running("http"), 120)]
    for number, (when, reached, timeout) in enumerate(points):
        output = tmp_path / f"build-{number}.txt"
        build = start_build(cache, output)
        wait_for(when, reached, build, output, timeout)
        kill_and_find_nothing_left(build, cache, f"during {when}")
        assert removed_the_partial(output, cache) == (number > 0), output.read_text()
