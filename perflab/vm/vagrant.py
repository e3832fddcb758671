"""A Vagrant box (libvirt provider) made from the cached guest image, for learners who use Vagrant.

The box holds the image's disk as qcow2; vm/Vagrantfile boots it with the image's own kernel
(libvirt's direct kernel boot, as `perflab vm` does) and provisions it with the same
vm/provision.sh. box.json beside the box gives the Vagrantfile the kernels and every profile's shape.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from dataclasses import asdict
from pathlib import Path

from ..errors import PerflabError
from . import image as guest_image
from . import pvh
from .profiles import Profile, load, names, pvh_boot, tcg_boot_args

BOX_NAME = "perflab"


def box_dir() -> Path:
    return guest_image.cache_dir() / "vagrant"


def build_box(progress: bool = True) -> Path:
    """Write <cache>/vagrant/perflab.box and box.json; return the box's path."""
    if shutil.which("qemu-img") is None:
        raise PerflabError("qemu-img is missing: run `make lab` (it installs qemu-utils)")
    built = guest_image.ensure(progress=progress)
    folder = box_dir()
    folder.mkdir(parents=True, exist_ok=True)
    box = folder / f"{BOX_NAME}.box"
    disk = folder / "box.img"
    try:
        subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(built.disk), str(disk)], check=True,
                       capture_output=True, text=True)
        size_gib = -(-built.disk.stat().st_size // 2**30)
        metadata = folder / "metadata.json"  # the tar holds it; the folder keeps only the box
        metadata.write_text(json.dumps({"provider": "libvirt", "format": "qcow2", "virtual_size": size_gib}))
        with tarfile.open(box.with_suffix(".partial"), "w") as tar:
            tar.add(metadata, "metadata.json")
            tar.add(disk, "box.img")
        box.with_suffix(".partial").rename(box)
    except subprocess.CalledProcessError as err:
        raise PerflabError(f"qemu-img could not convert the image: {err.stderr.strip()}") from None
    finally:
        for leftover in (disk, folder / "metadata.json", box.with_suffix(".partial")):
            leftover.unlink(missing_ok=True)
    description = {
        "image": built.folder.name,
        "kernels": {flavour: str(built.kernel(flavour)) for flavour in built.info()["kernels"]},
        "initrds": {flavour: str(built.initrd(flavour)) for flavour in built.info()["kernels"]},
        "profiles": {name: _shape(load(name), built) for name in names()},
    }
    (folder / "box.json").write_text(json.dumps(description, indent=1) + "\n")
    return box


def _shape(profile: Profile, built: guest_image.Image) -> dict:
    """The profile as the Vagrantfile reads it, with the kernel and the words an emulated boot uses (as
    `perflab vm` boots it under TCG: perflab.vm.profiles.pvh_boot and tcg_boot_args)."""
    kernel = pvh.kernel_for(built.kernel(profile.kernel), pvh_boot(profile, "tcg"))
    return asdict(profile) | {"cpus": profile.cpus, "tcg_kernel": str(kernel),
                              "tcg_kernel_args": tcg_boot_args(profile)}
