"""Choosing KVM or TCG for a boot: what the profile needs, what this host offers, and how KVM did here before."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from ..errors import PerflabError
from ..probe import cpuinfo
from ..sysfs import SysRoot, default_root
from . import image as guest_image
from .profiles import Profile
from .qemu import qemu_version


def trial_key(image_id: str) -> str:
    """KVM's verdict holds for this host kernel, CPU, QEMU and guest image; any change tests again."""
    model = (cpuinfo(default_root()) or {}).get("model name", "unknown CPU")
    return f"{platform.release()} | {model} | {qemu_version()} | image {image_id}"


# ANCHOR: choose_accel
def choose_accel(profile: Profile, kvm_problem: str | None, host_la57: bool, trial: dict | None,
                 forced: str | None = None) -> tuple[str, str, bool]:
    """(accel, why, trial_needed). Pure: the facts are passed in, so every branch is testable."""
    if profile.icount:
        if forced == "kvm":
            raise PerflabError(f"{profile.name} counts instructions (icount = {profile.icount!r}), which only TCG can; "
                               "unset PERFLAB_VM_ACCEL or set it to tcg")
        return "tcg", "the profile counts instructions (icount), which only TCG's emulation can", False
    if forced:
        return forced, f"PERFLAB_VM_ACCEL={forced}", False
    if kvm_problem:
        return "tcg", kvm_problem, False
    if profile.la57 and not host_la57:
        return (
            "tcg",
            "the profile needs la57 and this host CPU has none; KVM can only pass through the host's paging modes",
            False,
        )
    if trial is None:
        return "kvm", "KVM is present; trying it first, with TCG as the fallback", True
    if trial["ok"]:
        return "kvm", f"KVM booted this guest before ({trial['when']})", False
    return (
        "tcg",
        f"KVM could not boot this guest on {trial['when']} ({trial['reason']}); delete {_trials_path()} to try again",
        False,
    )
# ANCHOR_END: choose_accel


def kvm_problem(root: SysRoot | None = None) -> str | None:
    """Why KVM cannot boot the guest image here, where that is known without trying; None if it may."""
    modules = set((root or default_root()).listdir("/sys/module"))
    # PVM runs guests without hardware virtualisation (in a cloud VM without nested virtualisation), but only
    # kernels built as PVM guests: the image's Debian kernels print nothing, and a trial would wait 20 s to see it.
    if "kvm_pvm" in modules and not modules & {"kvm_intel", "kvm_amd"}:
        return ("this host's KVM is PVM (the kvm_pvm module), which boots only kernels built to be PVM guests, and "
                "the guest image's Debian kernels are not")
    if not Path("/dev/kvm").exists():
        return "/dev/kvm does not exist (no hardware virtualisation, or the kvm module is not loaded)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm is not accessible to this user: add yourself to the kvm group"
    return None


def host_has_la57() -> bool:
    return "la57" in (cpuinfo(default_root()) or {}).get("flags", "").split()


def _trials_path() -> Path:
    return guest_image.cache_dir() / "kvm-trials.json"


def trials() -> dict:
    try:
        return json.loads(_trials_path().read_text())
    except (OSError, ValueError):
        return {}


def record_trial(key: str, ok: bool, reason: str) -> None:
    known = trials()
    known[key] = {"ok": ok, "reason": reason, "when": time.strftime("%Y-%m-%d %H:%M")}
    _trials_path().parent.mkdir(parents=True, exist_ok=True)
    _trials_path().write_text(json.dumps(known, indent=1) + "\n")

