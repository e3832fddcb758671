"""Boot and stop a profile's VM: QEMU driven directly, KVM tried first where it may work, TCG as the fallback.

QEMU is started through perflab.processes. A VM that `perflab vm up` boots outlives that command
once booted; one booted for a single command (`vm run`, `vm shell`, `run --vm`, lab 4's boots) is
one of that command's programs and stops with it, even on kill -9. Killed while booting, either stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .. import processes
from ..errors import PerflabError
from ..journal import signals_end_the_process
from . import accelerator, pvh, qemu
from . import image as guest_image
from .connection import AgentConnection, ping
from .image import say
from .machine import VM, vm
from .profiles import pvh_boot

KVM_TRIAL_TIMEOUT_S = 60  # a working KVM reaches the agent in seconds; a broken one crawls or dies
KVM_FIRST_OUTPUT_S = 20  # a working KVM prints the initramfs's first line within a second or two
STOP_GRACE_S = 5


class BootFailed(PerflabError):
    pass


class QemuCrashed(BootFailed):
    """QEMU itself died of a signal while booting (not a guest that failed to come up)."""


def up(name: str, progress: bool = True, keep: bool = True, stop: threading.Event | None = None) -> dict:
    """Boot the profile's VM unless it is running; return its vm.json (accel, why, boot time...).

    keep: once booted, the VM outlives this process (`perflab vm up`); otherwise its QEMU stays one of this
    process's programs, which ends with it (a VM booted for one command).
    stop: set by another thread, it ends the boot at once (BootFailed), as an interrupt would."""
    machine = vm(name)
    problem = qemu.cannot_run_vms()
    if problem:
        raise PerflabError(problem)
    with machine.lock():
        if machine.running():
            return machine.info()
        info = _boot_as_chosen(machine, progress, stop)
        if keep:
            processes.release(info["pid"])
        return info


def _boot_as_chosen(machine: VM, progress: bool, stop: threading.Event | None) -> dict:
    """Boot with KVM or TCG as choose_accel says: a KVM trial falls back to TCG, a TCG crash boots once more."""
    name = machine.profile.name
    machine.clear()
    built = guest_image.ensure(progress=progress)
    qemu.compile_the_share()
    forced = os.environ.get("PERFLAB_VM_ACCEL")
    if forced not in (None, "", "kvm", "tcg"):
        raise PerflabError(f"PERFLAB_VM_ACCEL={forced} is not kvm or tcg; unset it to let perflab choose")
    key = accelerator.trial_key(built.folder.name)
    accel, why, trial = accelerator.choose_accel(
        machine.profile,
        accelerator.kvm_problem(),
        accelerator.host_has_la57(),
        accelerator.trials().get(key),
        forced or None,
    )
    say(progress, f"{name}: {accel.upper()}, because {why}")
    timeout = float(os.environ.get("PERFLAB_VM_BOOT_TIMEOUT", machine.profile.boot_timeout_s))
    if trial:
        try:
            info = _boot(machine, built, "kvm", why, min(timeout, KVM_TRIAL_TIMEOUT_S), progress, stop,
                         silent_limit=KVM_FIRST_OUTPUT_S)
            accelerator.record_trial(key, True, "booted")
            return info
        except BootFailed as err:
            if stopped(stop):
                raise
            accelerator.record_trial(key, False, str(err.args[0]).split(";")[0])
            accel, why = "tcg", f"KVM could not boot this guest ({str(err.args[0]).split(';')[0]})"
            say(progress, f"{name}: falling back to TCG, because {why}")
    try:
        return _boot(machine, built, accel, why, timeout, progress, stop)
    except QemuCrashed as crash:
        if accel != "tcg" or stopped(stop):
            raise
        # QEMU 7.2's TCG segfaulted once in about a day of boots here (8 vCPUs, wide), at random: a
        # second boot is the remedy, and the message says it happened.
        say(True, f"{name}: {str(crash.args[0]).split(';')[0]} (a crash in QEMU's TCG); booting once more")
        return _boot(machine, built, accel, why, timeout, progress, stop)


def stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def _boot(machine: VM, built: guest_image.Image, accel: str, why: str, timeout: float, progress: bool,
          stop: threading.Event | None, silent_limit: float | None = None) -> dict:
    """Start QEMU and wait for the agent; BootFailed (QEMU stopped, state cleared) if it does not answer.

    silent_limit: give up early when the console stays empty this long (the KVM trial).
    """
    profile = machine.profile
    machine.clear()
    machine.exchange.mkdir(parents=True)
    kernel = pvh.kernel_for(built.kernel(profile.kernel), pvh_boot(profile, accel))
    argv = qemu.qemu_argv(machine, built.disk, kernel, built.initrd(profile.kernel), accel)
    started = time.monotonic()
    with (machine.folder / "qemu.err").open("w") as err:  # no death signal: `perflab vm up` lets it live on
        process = processes.start(argv, stdout=err, stderr=err, own_session=True, death_signal=False)
    info = {
        "profile": profile.name,
        "pid": process.pid,
        "started": processes.start_time(process.pid),
        "accel": accel,
        "accel_reason": why,
        "topology": profile.topology(),
        "kernel": built.info()["kernels"][profile.kernel],
        "kernel_args": profile.kernel_args,
        "kernel_entry": "bzImage" if kernel == built.kernel(profile.kernel) else "PVH, uncompressed (no KASLR)",
        "image": built.folder.name,
        "qemu": qemu.qemu_version(),
        "qemu_argv": argv,
    }
    machine.info_path.write_text(json.dumps(info, indent=1) + "\n")
    try:
        pong = _wait_for_agent(machine, process, accel, started, timeout, progress, stop, silent_limit)
    except BaseException:
        _stop(machine, (process.pid, info["started"]))
        raise
    info["boot_seconds"] = round(time.monotonic() - started, 1)
    info["guest_kernel"] = pong.get("kernel")
    machine.info_path.write_text(json.dumps(info, indent=1) + "\n")
    say(progress, f"{profile.name}: up in {info['boot_seconds']} s ({accel.upper()}, {profile.topology()})")
    return info


def _wait_for_agent(machine: VM, process: subprocess.Popen, accel: str, started: float, timeout: float,
                    progress: bool, stop: threading.Event | None, silent_limit: float | None) -> dict:
    live = progress and sys.stderr.isatty()
    agent = None
    try:
        while (elapsed := time.monotonic() - started) < timeout:
            if stopped(stop):
                raise BootFailed(f"{machine.profile.name}: booting stopped, as asked")
            if process.poll() is not None:
                failed = QemuCrashed if process.returncode < 0 else BootFailed
                raise failed(f"QEMU exited with {process.returncode} while booting {machine.profile.name}; "
                             f"{_last_words(machine)}")
            if silent_limit and elapsed > silent_limit and not _read(machine.console_log).strip():
                raise BootFailed(f"the guest printed nothing in {silent_limit} s under {accel.upper()}; "
                                 f"{_last_words(machine)}")
            if agent is None and machine.agent_socket.exists():
                agent = AgentConnection(machine.agent_socket)
            try:
                if agent is not None and (pong := ping(agent, 1.0)):
                    return pong
            except PerflabError:  # QEMU not serving the port yet: connect again on the next round
                agent.close()
                agent = None
            time.sleep(0.2 if agent is None else 0)
            if live:
                line = _tail(machine.console_log, 1)
                print(f"\r\033[K{machine.profile.name}: booting ({accel.upper()}) {elapsed:4.0f} s  {line[-60:]}",
                      end="", file=sys.stderr, flush=True)
        raise BootFailed(f"{machine.profile.name} did not boot within {timeout:.0f} s ({accel.upper()}); "
                         f"{_last_words(machine)}")
    finally:
        if live:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        if agent is not None:
            agent.close()


def _last_words(machine: VM) -> str:
    """The end of the console log, kept beside the cache, for the error message."""
    kept = machine.folder.parent / f"{machine.profile.name}-last-failed-console.log"
    text = _read(machine.console_log) + _read(machine.folder / "qemu.err")
    kept.write_text(text)
    last = [line.strip() for line in text.splitlines() if line.strip()][-3:]
    return f"the console ended with: {' | '.join(last) or '(nothing)'}; full log kept in {kept}"


def down(name: str) -> bool:
    """Stop the profile's VM; False when it was not running. The guest's disk writes are discarded."""
    machine = vm(name)
    with machine.lock():
        running = machine.qemu()
        _stop(machine, running)
        return running is not None


def _stop(machine: VM, running: tuple[int, int] | None) -> None:
    """Stop QEMU (pid, start time), SIGTERM then SIGKILL, and clear the VM's folder."""
    if running is not None:
        processes.end(*running, signal.SIGTERM, STOP_GRACE_S)
    machine.clear()


@contextmanager
def session(name: str, progress: bool = True, stop: threading.Event | None = None):
    """The running VM for `name`; if it was not running, boot it now and stop it afterwards. stop: as up()'s."""
    machine = vm(name)
    booted_here = not machine.running()
    with signals_end_the_process():  # a VM booted for this command stops with it, also on kill
        if booted_here:
            say(progress, f"{name} is not running: booting it for this command (`perflab vm up {name}` keeps it up)")
            up(name, progress=progress, keep=False, stop=stop)
        try:
            yield machine
        finally:
            if booted_here:
                down(name)


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int) -> str:
    text = [line for line in _read(path).splitlines() if line.strip()]
    return " | ".join(text[-lines:])
