"""Boot, use and stop a VM for a profile: QEMU driven directly, one folder of state per running VM.

A VM's folder (<cache>/vms/<profile>/) holds QEMU's pid and start time, the agent's socket, the serial
console log and the exchange folder shared into the guest as /exchange. Nothing listens on a network:
the guest has no network card and the host side is Unix sockets only. Every transition holds a
flock(2) on <cache>/vms/<profile>.lock, which the kernel drops when its holder dies, so no lock
outlives a crash; a folder whose QEMU has died is cleared by the next command that looks at it.

QEMU is started through perflab.processes. A VM that `perflab vm up` boots outlives that command
once booted; one booted for a single command (`vm run`, `vm shell`, `run --vm`, lab 4's boots) is
one of that command's programs and stops with it, even on kill -9. Killed while booting, either stops.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import termios
import time
import tty
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import processes
from ..errors import PerflabError
from ..journal import signals_end_the_process
from ..lock import exclusive
from ..paths import REPO_ROOT
from . import image as guest_image
from .image import say
from .profiles import TCG_SINGLE_THREAD, Profile, check_name, load, machine_args, scratch_disk_args, single_thread
from .protocol import PORT_NAME, LineReader, encode, pack, unpack

QEMU = "qemu-system-x86_64"
KVM_TRIAL_TIMEOUT_S = 60  # a working KVM reaches the agent in seconds; a broken one crawls or dies
KVM_FIRST_OUTPUT_S = 20  # a working KVM prints the initramfs's first line within a second or two
STOP_GRACE_S = 5
GUEST_ENV = {"PYTHONPATH": "/perflab", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/root",
             "MPLCONFIGDIR": "/tmp/matplotlib", "LANG": "C.UTF-8"}


class BootFailed(PerflabError):
    pass


class QemuCrashed(BootFailed):
    """QEMU itself died of a signal while booting (not a guest that failed to come up)."""


@dataclass(frozen=True)
class VM:
    profile: Profile

    @property
    def folder(self) -> Path:
        # check again here: this folder is deleted, so a Profile built by hand must not name a path either
        return guest_image.cache_dir() / "vms" / check_name(self.profile.name)

    @property
    def agent_socket(self) -> Path:
        return self.folder / "agent.sock"

    @property
    def console_log(self) -> Path:
        return self.folder / "console.log"

    @property
    def exchange(self) -> Path:
        return self.folder / "exchange"

    @property
    def info_path(self) -> Path:
        return self.folder / "vm.json"

    def info(self) -> dict:
        try:
            return json.loads(self.info_path.read_text())
        except (OSError, ValueError):
            return {}

    def qemu(self) -> tuple[int, int] | None:
        """QEMU's pid and start time if this VM is running; a dead or reused pid counts as not running."""
        info = self.info()
        pid, started = info.get("pid"), info.get("started")
        return (pid, started) if pid and started is not None and processes.alive(pid, started) else None

    def running(self) -> bool:
        return self.qemu() is not None


def vm(name: str) -> VM:
    return VM(load(name))


# --- choosing KVM or TCG ---------------------------------------------------------------------

def trial_key(image_id: str) -> str:
    """KVM's verdict holds for this host kernel, CPU, QEMU and guest image; any change tests again."""
    model = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), "unknown CPU")
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
        return "tcg", "the profile needs la57 and this host CPU has none; KVM can only pass through the host's paging modes", False
    if trial is None:
        return "kvm", "KVM is present; trying it first, with TCG as the fallback", True
    if trial["ok"]:
        return "kvm", f"KVM booted this guest before ({trial['when']})", False
    return "tcg", f"KVM could not boot this guest on {trial['when']} ({trial['reason']}); delete {_trials_path()} to try again", False
# ANCHOR_END: choose_accel


def kvm_problem() -> str | None:
    if not Path("/dev/kvm").exists():
        return "/dev/kvm does not exist (no hardware virtualisation, or the kvm module is not loaded)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm is not accessible to this user: add yourself to the kvm group"
    return None


def host_has_la57() -> bool:
    return any(line.startswith("flags") and " la57" in line for line in _read("/proc/cpuinfo").splitlines())


def _trials_path() -> Path:
    return guest_image.cache_dir() / "kvm-trials.json"


def _trials() -> dict:
    try:
        return json.loads(_trials_path().read_text())
    except (OSError, ValueError):
        return {}


def _record_trial(key: str, ok: bool, reason: str) -> None:
    trials = _trials()
    trials[key] = {"ok": ok, "reason": reason, "when": time.strftime("%Y-%m-%d %H:%M")}
    _trials_path().parent.mkdir(parents=True, exist_ok=True)
    _trials_path().write_text(json.dumps(trials, indent=1) + "\n")


# --- QEMU ------------------------------------------------------------------------------------

def qemu_missing() -> str | None:
    """Why QEMU cannot be started here, with how to install it; None when it is on PATH."""
    if shutil.which(QEMU) is None:
        return f"QEMU is missing ({QEMU} not on PATH): run `make lab`, which installs qemu-system-x86"
    return None


def cannot_run_vms() -> str | None:
    """Why this user can boot no guest here (no QEMU, no folder of VMs they may write), with how to fix it."""
    missing = qemu_missing()
    if missing:
        return missing
    runs = guest_image.cache_dir() / "vms"
    nearest = next(folder for folder in (runs, *runs.parents) if folder.exists())
    if not os.access(nearest, os.W_OK):  # e.g. a workshop's learner: the checkout and its VM cache are root's
        return (f"this user cannot write {runs}, where the course's VMs run: the checkout's owner runs the VM "
                "parts (in a workshop, the instructor, as root)")
    return None


def cannot_boot() -> str | None:
    """Why no guest can boot here without building the image first, with how to fix it; None when one can."""
    problem = cannot_run_vms()
    if problem is None and not guest_image.current().exists():
        problem = "the guest image is not built: run `.venv/bin/perflab vm build` (about 4 minutes, once, as root)"
    return problem


@functools.cache
def qemu_version() -> str:
    """One `qemu --version` per process: the trial key and vm.json both need it."""
    done = processes.run([QEMU, "--version"])
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def qemu_argv(machine: VM, disk: Path, kernel: Path, initrd: Path, accel: str) -> list[str]:
    profile = machine.profile
    append = ["root=/dev/vda", "ro", "console=ttyS0", "init=/usr/local/sbin/perflab-init", "panic=-1", "loglevel=4",
              f"perflab.profile={profile.name}", *([TCG_SINGLE_THREAD] if single_thread(profile, accel) else []),
              *profile.kernel_args]
    return [
        QEMU, "-name", f"perflab-{profile.name}", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        *machine_args(profile, accel),
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", " ".join(append),
        # snapshot=on: the guest's writes go to a temporary overlay, so the cached image never changes
        "-drive", f"file={disk},if=virtio,format=raw,snapshot=on",
        *scratch_disk_args(profile),
        "-fsdev", f"local,id=project,path={REPO_ROOT},security_model=none,readonly=on",
        "-device", "virtio-9p-pci,fsdev=project,mount_tag=perflab",
        "-fsdev", f"local,id=exchange,path={machine.exchange},security_model=none",
        "-device", "virtio-9p-pci,fsdev=exchange,mount_tag=exchange",
        "-device", "virtio-serial-pci",
        "-chardev", f"socket,id=agent,path={machine.agent_socket},server=on,wait=off",
        "-device", f"virtserialport,chardev=agent,name={PORT_NAME}",
        "-chardev", f"file,id=console,path={machine.console_log}", "-serial", "chardev:console",
    ]


# --- the agent -------------------------------------------------------------------------------

GONE = "the guest went away (QEMU stopped, or the guest crashed)"


class Agent:
    """One connection to a running guest's agent."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except OSError as err:
            self.sock.close()
            raise PerflabError(f"cannot reach the guest agent at {path}: {err}") from None
        self.reader = LineReader()
        self.pending: deque[dict] = deque()

    def close(self) -> None:
        self.sock.close()

    def send(self, message: dict) -> None:
        self.sock.settimeout(5.0)  # receive() leaves its own timeout behind
        try:
            self.sock.sendall(encode(message))
        except TimeoutError:
            raise PerflabError("the guest stopped taking input (QEMU hangs, or the guest is frozen)") from None
        except (ConnectionResetError, BrokenPipeError):
            raise PerflabError(GONE) from None

    def receive(self, timeout: float | None) -> dict | None:
        """The next message, or None when `timeout` passes first. Raises PerflabError if the guest hangs up."""
        if self.pending:
            return self.pending.popleft()
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:  # QEMU dropped the connection with our ping unread, as it can while booting
            raise PerflabError(GONE) from None
        if not chunk:
            raise PerflabError(GONE)
        self.pending.extend(self.reader.feed(chunk))
        return self.pending.popleft() if self.pending else None


def _ping(agent: Agent, within: float) -> dict | None:
    """Send a ping and wait up to `within` seconds for its pong (older pongs are skipped)."""
    rid = uuid.uuid4().hex
    agent.send({"id": rid, "op": "ping"})
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        message = agent.receive(left)
        if message and message.get("id") == rid and message.get("op") == "pong":
            return message
    return None


# --- up and down -----------------------------------------------------------------------------

def _profile_lock(machine: VM):
    name = machine.profile.name
    return exclusive(machine.folder.parent / f"{name}.lock", f"another perflab is starting or stopping {name}")


def up(name: str, progress: bool = True, keep: bool = True) -> dict:
    """Boot the profile's VM unless it is running; return its vm.json (accel, why, boot time...).

    keep: once booted, the VM outlives this process (`perflab vm up`); otherwise its QEMU stays one of this
    process's programs, which ends with it (a VM booted for one command)."""
    machine = vm(name)
    problem = cannot_run_vms()
    if problem:
        raise PerflabError(problem)
    with _profile_lock(machine):
        if machine.running():
            return machine.info()
        info = _boot_as_chosen(machine, progress)
        if keep:
            processes.release(info["pid"])
        return info


def _boot_as_chosen(machine: VM, progress: bool) -> dict:
    """Boot with KVM or TCG as choose_accel says: a KVM trial falls back to TCG, a TCG crash boots once more."""
    name = machine.profile.name
    _clear(machine)
    built = guest_image.ensure(progress=progress)
    forced = os.environ.get("PERFLAB_VM_ACCEL")
    if forced not in (None, "", "kvm", "tcg"):
        raise PerflabError(f"PERFLAB_VM_ACCEL={forced} is not kvm or tcg; unset it to let perflab choose")
    key = trial_key(built.folder.name)
    accel, why, trial = choose_accel(machine.profile, kvm_problem(), host_has_la57(), _trials().get(key), forced or None)
    say(progress, f"{name}: {accel.upper()}, because {why}")
    timeout = float(os.environ.get("PERFLAB_VM_BOOT_TIMEOUT", machine.profile.boot_timeout_s))
    if trial:
        try:
            info = _boot(machine, built, "kvm", why, min(timeout, KVM_TRIAL_TIMEOUT_S), progress,
                         silent_limit=KVM_FIRST_OUTPUT_S)
            _record_trial(key, True, "booted")
            return info
        except BootFailed as err:
            _record_trial(key, False, str(err.args[0]).split(";")[0])
            accel, why = "tcg", f"KVM could not boot this guest ({str(err.args[0]).split(';')[0]})"
            say(progress, f"{name}: falling back to TCG, because {why}")
    try:
        return _boot(machine, built, accel, why, timeout, progress)
    except QemuCrashed as crash:
        if accel != "tcg":
            raise
        # QEMU 7.2's TCG segfaulted once in about a day of boots here (8 vCPUs, wide), at random: a
        # second boot is the remedy, and the message says it happened.
        say(True, f"{name}: {str(crash.args[0]).split(';')[0]} (a crash in QEMU's TCG); booting once more")
        return _boot(machine, built, accel, why, timeout, progress)


def _boot(machine: VM, built: guest_image.Image, accel: str, why: str, timeout: float, progress: bool,
          silent_limit: float | None = None) -> dict:
    """Start QEMU and wait for the agent; BootFailed (QEMU stopped, state cleared) if it does not answer.

    silent_limit: give up early when the console stays empty this long (the KVM trial).
    """
    profile = machine.profile
    _clear(machine)
    machine.exchange.mkdir(parents=True)
    argv = qemu_argv(machine, built.disk, built.kernel(profile.kernel), built.initrd(profile.kernel), accel)
    started = time.monotonic()
    with (machine.folder / "qemu.err").open("w") as err:  # no death signal: `perflab vm up` lets it live on
        process = processes.start(argv, stdout=err, stderr=err, own_session=True, death_signal=False)
    info = {"profile": profile.name, "pid": process.pid, "started": processes.start_time(process.pid), "accel": accel,
            "accel_reason": why,
            "topology": profile.topology(), "kernel": built.info()["kernels"][profile.kernel],
            "kernel_args": profile.kernel_args, "image": built.folder.name, "qemu": qemu_version(), "qemu_argv": argv}
    machine.info_path.write_text(json.dumps(info, indent=1) + "\n")
    try:
        pong = _wait_for_agent(machine, process, accel, started, timeout, progress, silent_limit)
    except BaseException:
        _stop(machine, (process.pid, info["started"]))
        raise
    info["boot_seconds"] = round(time.monotonic() - started, 1)
    info["guest_kernel"] = pong.get("kernel")
    machine.info_path.write_text(json.dumps(info, indent=1) + "\n")
    say(progress, f"{profile.name}: up in {info['boot_seconds']} s ({accel.upper()}, {profile.topology()})")
    return info


def _wait_for_agent(machine: VM, process: subprocess.Popen, accel: str, started: float, timeout: float,
                    progress: bool, silent_limit: float | None) -> dict:
    live = progress and sys.stderr.isatty()
    agent = None
    try:
        while (elapsed := time.monotonic() - started) < timeout:
            if process.poll() is not None:
                failed = QemuCrashed if process.returncode < 0 else BootFailed
                raise failed(f"QEMU exited with {process.returncode} while booting {machine.profile.name}; "
                             f"{_last_words(machine)}")
            if silent_limit and elapsed > silent_limit and not _read(machine.console_log).strip():
                raise BootFailed(f"the guest printed nothing in {silent_limit} s under {accel.upper()}; "
                                 f"{_last_words(machine)}")
            if agent is None and machine.agent_socket.exists():
                agent = Agent(machine.agent_socket)
            try:
                if agent is not None and (pong := _ping(agent, 1.0)):
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
    with _profile_lock(machine):
        qemu = machine.qemu()
        _stop(machine, qemu)
        return qemu is not None


def _stop(machine: VM, qemu: tuple[int, int] | None) -> None:
    """Stop QEMU (pid, start time), SIGTERM then SIGKILL, and clear the VM's folder."""
    if qemu is not None:
        processes.end(*qemu, signal.SIGTERM, STOP_GRACE_S)
    _clear(machine)


def _clear(machine: VM) -> None:
    shutil.rmtree(machine.folder, ignore_errors=True)


@contextmanager
def session(name: str, progress: bool = True):
    """The running VM for `name`; if it was not running, boot it now and stop it afterwards."""
    machine = vm(name)
    booted_here = not machine.running()
    with signals_end_the_process():  # a VM booted for this command stops with it, also on kill
        if booted_here:
            say(progress, f"{name} is not running: booting it for this command (`perflab vm up {name}` keeps it up)")
            up(name, progress=progress, keep=False)
        try:
            yield machine
        finally:
            if booted_here:
                down(name)


# --- commands in the guest -------------------------------------------------------------------

def execute(machine: VM, argv: list[str], stdout=None, stderr=None, env: dict | None = None,
            cwd: str = "/perflab") -> int:
    """Run argv in the guest, streaming its output to the given binary files; return its exit code.

    Ctrl-C is passed on to the guest command as SIGINT; a second Ctrl-C kills it.
    """
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    request = {"op": "exec", "argv": argv, "cwd": cwd, "env": {**GUEST_ENV, **(env or {})}}
    with _command_slot(machine), _connected(machine) as agent:
        rid = request["id"] = uuid.uuid4().hex
        agent.send(request)
        interrupts = 0
        while True:
            try:
                message = agent.receive(None)
            except KeyboardInterrupt:
                interrupts += 1
                agent.send({"id": rid, "op": "signal", "signum": signal.SIGINT if interrupts == 1 else signal.SIGKILL})
                continue
            if message is None or message.get("id") != rid:
                continue
            op = message.get("op")
            if op in ("out", "err"):
                target = stdout if op == "out" else stderr
                target.write(unpack(message["data"]))
                target.flush()
            elif op == "exit":
                if interrupts:
                    raise KeyboardInterrupt
                return int(message["code"])
            elif op == "error":
                raise PerflabError(f"the guest could not run the command: {message.get('message')}")


def interactive_shell(machine: VM) -> int:
    """A login shell in the guest on this terminal (raw mode), over the agent's pty support."""
    if not sys.stdin.isatty():
        raise PerflabError("`perflab vm shell` needs a terminal; in scripts use `perflab vm run PROFILE -- COMMAND`")
    size = shutil.get_terminal_size()
    request = {"op": "exec", "argv": ["/bin/bash", "-l"], "cwd": "/perflab", "pty": True,
               "rows": size.lines, "cols": size.columns,
               "env": {**GUEST_ENV, "TERM": os.environ.get("TERM", "xterm")}}
    saved = termios.tcgetattr(sys.stdin)
    with _command_slot(machine), _connected(machine) as agent:
        rid = request["id"] = uuid.uuid4().hex
        agent.send(request)
        tty.setraw(sys.stdin, termios.TCSANOW)  # not TCSAFLUSH: keep what was typed ahead
        try:
            while True:
                readable, _, _ = select.select([sys.stdin, agent.sock], [], [])
                if sys.stdin in readable:
                    agent.send({"id": rid, "op": "in", "data": pack(os.read(sys.stdin.fileno(), 4096))})
                if agent.sock in readable or agent.pending:
                    message = agent.receive(0.1)
                    if message is None or message.get("id") != rid:
                        continue
                    if message.get("op") in ("out", "err"):
                        sys.stdout.buffer.write(unpack(message["data"]))
                        sys.stdout.buffer.flush()
                    elif message.get("op") == "exit":
                        return int(message["code"])
        finally:
            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


@contextmanager
def _connected(machine: VM):
    if not machine.running():
        raise PerflabError(f"{machine.profile.name} is not running: start it with `perflab vm up {machine.profile.name}`")
    agent = Agent(machine.agent_socket)
    try:
        yield agent
    finally:
        agent.close()


def _command_slot(machine: VM):
    """The agent serves one command at a time; a second caller waits for the first."""
    return exclusive(machine.folder / "command.lock", f"another command is running in {machine.profile.name}")


def status() -> list[dict]:
    """Every profile with its shape and whether its VM runs; clears the folders of VMs that died."""
    from ..manifest.labs import labs
    from .profiles import names

    shown_by = {name: [lab.name for lab in labs() if name in lab.vm] for name in names()}
    rows = []
    for name in names():
        machine = vm(name)
        info = machine.info() if machine.running() else None
        if info is None and machine.folder.exists():
            with _profile_lock(machine):
                if not machine.running():
                    _clear(machine)
        rows.append({"profile": name, "topology": machine.profile.topology(), "kernel": machine.profile.kernel,
                     "kernel_args": " ".join(machine.profile.kernel_args), "description": machine.profile.description,
                     "labs": shown_by[name], "state": f"running ({info['accel'].upper()}, pid {info['pid']})" if info else "stopped"})
    return rows


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int) -> str:
    text = [line for line in _read(path).splitlines() if line.strip()]
    return " | ".join(text[-lines:])
