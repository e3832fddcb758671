"""The Vagrant path for real: a box made from the cached image, `vagrant up` with the libvirt
provider, provisioned by vm/provision.sh, the profile's topology inside. Slow (a few minutes).

libvirt's daemons are started here if they are not running (no systemd in CI) and stopped
again afterwards; the box, its libvirt volume and the domain are removed, pass or fail."""

from __future__ import annotations

import grp
import os
import shutil
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from perflab.vm import accelerator, image

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
BOX = "perflab-test"


@pytest.fixture(scope="module")
def libvirt():
    if os.geteuid() != 0:
        pytest.skip("libvirt's system daemons need root")
    if shutil.which("vagrant") is None or shutil.which("libvirtd") is None:
        pytest.fail("vagrant or libvirt is missing: `make test` installs deps/debian-test.txt")
    started = []
    for daemon in ("virtlogd", "libvirtd"):
        if subprocess.run(["pgrep", "-x", daemon], capture_output=True).returncode != 0:
            subprocess.run([daemon, "-d"], check=True)
            started.append(daemon)
    socket = Path("/run/libvirt/libvirt-sock")
    deadline = time.monotonic() + 60  # generous: on a loaded machine the daemon starts slowly
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert socket.exists(), "libvirtd started but did not open its socket within 60 s"
    with kvm_device_as_udev_leaves_it():
        yield
    for daemon in reversed(started):
        subprocess.run(["pkill", "-x", daemon])


@contextmanager
def kvm_device_as_udev_leaves_it():
    """/dev/kvm as Debian's udev rule leaves it (root:kvm 0660) while the test runs, put back after.

    Without udev (a container) it stays root-only. libvirt's cached QEMU capabilities then say "KVM" while its
    qemu user cannot open the device, so it probes QEMU again (about 13 s) on every call: a minute or more of
    `vagrant up`, whose driver here is TCG anyway."""
    kvm = Path("/dev/kvm")
    if not kvm.exists():
        yield
        return
    before = kvm.stat()
    try:
        os.chown(kvm, 0, grp.getgrnam("kvm").gr_gid)
        kvm.chmod(0o660)
        yield
    finally:
        os.chown(kvm, before.st_uid, before.st_gid)
        kvm.chmod(stat.S_IMODE(before.st_mode))


def vagrant(*args: str, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["vagrant", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, cwd=REPO / "vm")


def driver() -> str:
    """kvm where a KVM trial of this image succeeded here, qemu (TCG) otherwise."""
    key = accelerator.trial_key(image.current().folder.name)
    trial = accelerator.trials().get(key)
    return "kvm" if trial and trial["ok"] and not accelerator.kvm_problem() else "qemu"


def test_vagrant_up_provisions_the_numa2_guest(libvirt, guest_image, tmp_path):
    done = run_cli("vm", "box", timeout=1500)
    assert done.returncode == 0, done.stderr
    env = {"VAGRANT_HOME": str(tmp_path / "vagrant.d"), "VAGRANT_DOTFILE_PATH": str(tmp_path / "dot"),
           "PERFLAB_BOX": BOX, "PERFLAB_PROFILE": "numa2", "PERFLAB_VAGRANT_DRIVER": driver()}
    box = image.cache_dir() / "vagrant" / "perflab.box"
    try:
        added = vagrant("box", "add", "--name", BOX, str(box), env=env)
        assert added.returncode == 0, added.stderr
        started = time.monotonic()
        up = vagrant("up", "--provider", "libvirt", env=env)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        print(f"vagrant up took {time.monotonic() - started:.0f} s with driver {env['PERFLAB_VAGRANT_DRIVER']}")
        assert "Running provisioner: shell" in up.stdout
        inside = vagrant("ssh", "-c", "numactl --hardware; nproc; hostname; ls /perflab/vm/provision.sh; "
                                      "test -x /usr/local/sbin/perflab-init && echo provisioned; "
                                      "cat /etc/hostname /proc/cmdline; sudo grep ' _text$' /proc/kallsyms", env=env)
        assert inside.returncode == 0, inside.stderr
        assert "available: 2 nodes (0-1)" in inside.stdout and "\n4\nperflab-numa2\n" in inside.stdout
        assert "/perflab/vm/provision.sh" in inside.stdout, "the project tree is shared over 9p"
        assert "provisioned\nperflab-numa2\n" in inside.stdout, "the name a reboot keeps is the profile's"
        tcg = env["PERFLAB_VAGRANT_DRIVER"] == "qemu"
        assert ("mitigations=off cryptomgr.notests" in inside.stdout) == tcg, inside.stdout
        # Under TCG, the uncompressed kernel entered at its PVH entry: no decompressor moved it (KASLR).
        assert ("ffffffff81000000 T _text" in inside.stdout) == tcg, inside.stdout
    finally:
        vagrant("destroy", "-f", env=env)
        vagrant("box", "remove", "--force", BOX, env=env)
        volumes = subprocess.run(
            ["virsh", "-c", "qemu:///system", "vol-list", "default"], capture_output=True, text=True
        )
        for line in volumes.stdout.splitlines():
            if line.split() and line.split()[0].startswith(BOX):
                subprocess.run(["virsh", "-c", "qemu:///system", "vol-delete", "--pool", "default", line.split()[0]])
