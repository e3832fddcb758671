"""perflab vm without booting anything: profiles, the choice of KVM or TCG, QEMU's arguments,
the agent's protocol served over a socket pair, results coming back, and bad input."""

from __future__ import annotations

import importlib.util
import json
import lzma
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from perflab import processes
from perflab.errors import PerflabError
from perflab.labs import labs
from perflab.sysfs import SysRoot
from perflab.vm import accelerator, agent, boot, image, labrun, machine, profiles, protocol, pvh, qemu


def test_every_profile_loads_and_the_labs_name_real_profiles():
    names = profiles.names()
    assert {"default", "numa2", "la57", "no5lvl", "wide"} <= set(names)
    for name in names:
        profile = profiles.load(name)
        assert profile.description
    for lab in labs():
        assert set(lab.vm) <= set(names), f"labs/manifest.toml: {lab.name} names a VM profile that does not exist"


def test_the_icount_pair_boots_the_la57_machines_paging_modes():
    """Only lab 4's icount pair is booted in the slow tests; they cover la57 and no5lvl because they differ
    from them only in the clock and the number of vCPUs."""
    for name in ("la57", "no5lvl"):
        wall_clock, counted = profiles.load(name), profiles.load(f"{name}-icount")
        assert counted.icount and not wall_clock.icount
        assert (counted.la57, counted.kernel, counted.kernel_args) == (wall_clock.la57, wall_clock.kernel,
                                                                       wall_clock.kernel_args)


def test_profile_shapes_match_the_issue():
    numa2, wide = profiles.load("numa2"), profiles.load("wide")
    assert (numa2.sockets, numa2.cores, numa2.numa_nodes, numa2.numa_distance) == (2, 2, 2, 20)
    assert (wide.cpus, wide.sockets, wide.threads) == (8, 2, 2)
    la57, no5lvl = profiles.load("la57"), profiles.load("no5lvl")
    assert la57.la57 and no5lvl.la57, "no5lvl is the la57 machine"
    assert "no5lvl" in no5lvl.kernel_args and "no5lvl" not in la57.kernel_args
    assert (la57.cpus, la57.memory_mib) == (no5lvl.cpus, no5lvl.memory_mib)


def test_numa_arguments_put_each_socket_in_its_own_node():
    args = " ".join(profiles.machine_args(profiles.load("numa2"), "tcg"))
    assert "-smp 4,sockets=2,cores=2,threads=1" in args
    assert "cpu,node-id=0,socket-id=0" in args and "cpu,node-id=1,socket-id=1" in args
    assert "dist,src=0,dst=1,val=20" in args
    assert "size=1024M" in args


def test_only_a_profile_that_asks_gets_a_scratch_disk_of_one_queue_on_null_co():
    numa2 = " ".join(profiles.scratch_disk_args(profiles.load("numa2")))
    assert f"driver=null-co,node-name=scratch,size={64 << 20},read-zeroes=on" in numa2
    assert "num-queues=1" in numa2 and f"serial={profiles.SCRATCH_SERIAL}" in numa2
    assert profiles.scratch_disk_args(profiles.load("default")) == []


def test_single_threaded_tcg_is_for_the_profile_that_asks_and_the_guest_is_told(tmp_path):
    def argv(name: str, accel: str) -> list[str]:
        return qemu.qemu_argv(machine.vm(name), tmp_path / "d", tmp_path / "k", tmp_path / "i", accel)

    wide_tcg, wide_kvm, numa2_tcg = argv("wide", "tcg"), argv("wide", "kvm"), argv("numa2", "tcg")
    assert wide_tcg[wide_tcg.index("-accel") + 1] == "tcg,thread=single"
    assert profiles.TCG_SINGLE_THREAD in wide_tcg[wide_tcg.index("-append") + 1].split()
    assert wide_kvm[wide_kvm.index("-accel") + 1] == "kvm" and profiles.TCG_SINGLE_THREAD not in " ".join(wide_kvm)
    assert numa2_tcg[numa2_tcg.index("-accel") + 1] == "tcg" and profiles.TCG_SINGLE_THREAD not in " ".join(numa2_tcg)


def test_tcg_guests_boot_without_the_mitigations_but_kvm_and_instruction_counting_ones_keep_them(tmp_path):
    def appended(name: str, accel: str) -> list[str]:
        argv = qemu.qemu_argv(machine.vm(name), tmp_path / "d", tmp_path / "k", tmp_path / "i", accel)
        return argv[argv.index("-append") + 1].split()

    assert profiles.TCG_NO_MITIGATIONS in appended("default", "tcg") and profiles.TCG_NO_MITIGATIONS in appended(
        "wide", "tcg")
    assert profiles.TCG_NO_MITIGATIONS not in appended("default", "kvm") + appended("numa2", "kvm")
    assert profiles.TCG_NO_MITIGATIONS not in appended("la57-icount", "tcg") + appended("no5lvl-icount", "tcg")
    assert appended("no5lvl", "tcg")[-1] == "no5lvl", "the profile's own words come last, so that they decide"
    assert profiles.TCG_NO_CRYPTO_TESTS in appended("numa2", "tcg")
    assert profiles.TCG_NO_CRYPTO_TESTS not in appended("numa2", "kvm") + appended("la57-icount", "tcg")


def test_tcg_boots_the_uncompressed_kernel_but_la57_and_kvm_keep_the_bzimage():
    def pvh(name: str, accel: str) -> bool:
        return profiles.pvh_boot(profiles.load(name), accel)

    assert pvh("default", "tcg") and pvh("wide", "tcg") and pvh("numa2", "tcg")
    assert not any(pvh(name, "tcg") for name in ("la57", "no5lvl", "la57-icount", "no5lvl-icount"))
    assert not pvh("default", "kvm")


def _elf_with_notes(notes: bytes) -> bytes:
    """A 64-bit ELF header, one PT_NOTE program header, and the notes."""
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 1, 0,
                                                                 0, 0)
    program = struct.pack("<IIQQQQQQ", pvh.PT_NOTE, 4, 120, 0, 0, len(notes), len(notes), 4)
    return header + program + notes


def _note(name: bytes, kind: int, description: bytes) -> bytes:
    def padded(blob: bytes) -> bytes:
        return blob + bytes(-len(blob) % 4)

    return struct.pack("<III", len(name), len(description), kind) + padded(name) + padded(description)


def test_the_kernel_comes_out_of_its_bzimage_only_if_qemu_can_enter_it(tmp_path):
    entry = _note(b"Xen\0", 6, b"linux\0") + _note(b"Xen\0", pvh.XEN_ELFNOTE_PHYS32_ENTRY, bytes(8))
    kernel = _elf_with_notes(entry)
    assert pvh.has_pvh_entry(kernel) and not pvh.has_pvh_entry(_elf_with_notes(_note(b"Xen\0", 6, b"linux\0")))
    assert not pvh.has_pvh_entry(_elf_with_notes(_note(b"GNU\0", pvh.XEN_ELFNOTE_PHYS32_ENTRY, bytes(8))))
    bzimage = tmp_path / "vmlinuz-standard"
    bzimage.write_bytes(b"setup and decompressor" + lzma.compress(kernel, format=lzma.FORMAT_XZ))
    assert pvh.write_uncompressed(bzimage) and pvh.uncompressed(bzimage) == tmp_path / "vmlinux-standard"
    assert (tmp_path / "vmlinux-standard").read_bytes() == kernel
    for name, payload in (("no-entry", lzma.compress(_elf_with_notes(b""), format=lzma.FORMAT_XZ)),
                          ("not-xz", b"\x1f\x8b\x08\x00gzip"), ("cut-short", pvh.XZ_MAGIC + b"\0\0"),
                          ("elf-cut-short", lzma.compress(kernel[:80], format=lzma.FORMAT_XZ))):
        other = tmp_path / name / "vmlinuz-rt"
        other.parent.mkdir()
        other.write_bytes(b"setup" + payload)
        assert not pvh.write_uncompressed(other) and os.listdir(other.parent) == ["vmlinuz-rt"], name


def test_a_boot_under_tcg_uses_the_uncompressed_kernel_only_where_the_image_has_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path / "cache"))
    built = image.Image(tmp_path / "image")
    built.folder.mkdir()
    started = []

    def start(argv, **_):
        started.append(argv)
        raise boot.BootFailed("not started: the command line is what this test reads")

    monkeypatch.setattr(boot.processes, "start", start)
    for present in (False, True):
        if present:
            boot.pvh.uncompressed(built.kernel("standard")).write_bytes(b"an ELF kernel")
        for name, accel in (("default", "tcg"), ("la57", "tcg"), ("default", "kvm")):
            with pytest.raises(boot.BootFailed):
                boot._boot(machine.vm(name), built, accel, "a test", 1, False, None)
    kernels = [argv[argv.index("-kernel") + 1] for argv in started]
    bz, elf = str(built.kernel("standard")), str(built.folder / "vmlinux-standard")
    assert kernels == [bz, bz, bz, elf, bz, bz], kernels


def test_la57_is_on_only_where_the_profile_asks():
    assert "max,la57=on,vendor=GenuineIntel" in profiles.machine_args(profiles.load("la57"), "tcg")
    assert "max,la57=off,vendor=GenuineIntel" in profiles.machine_args(profiles.load("default"), "tcg")
    assert "host,la57=off" in profiles.machine_args(profiles.load("default"), "kvm")


@pytest.mark.parametrize("text, message", [
    ("sockets = 0\ncores = 1\nthreads = 1\nmemory_mib = 512\ndescription = 'x'", "sockets = 0 is not allowed.*from 1 to "
                                                                                 "256"),
    ("sockets = 1\ncores = 1\nthreads = 1\nmemory_mib = 512\ndescription = 'x'\nkernel = 'lts'", "kernel must be"),
    ("sockets = 3\ncores = 1\nthreads = 1\nmemory_mib = 512\ndescription = 'x'\nnuma_nodes = 2", "split evenly"),
    ("sockets = 1\ncores = 1\nthreads = 1\nmemory_mib = 512\ndescription = 'x'\ncolour = 'red'", "unknown key .colour."),
    ("sockets = [", "not valid TOML"),
    ("extends = 'bad'", "loops back"),
])
def test_bad_profiles_are_refused_with_the_file_named(tmp_path, text, message):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(PerflabError, match=message) as err:
        profiles.load("bad", folder=tmp_path)
    assert "bad.toml" in str(err.value)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(PerflabError, match="unknown VM profile 'numa3'.*numa2"):
        profiles.load("numa3")


def test_choose_accel_covers_every_reason():
    default, la57 = profiles.load("default"), profiles.load("la57")
    assert accelerator.choose_accel(default, None, False, None) [::2] == ("kvm", True)
    assert accelerator.choose_accel(default, "/dev/kvm does not exist", False, None) == ("tcg", "/dev/kvm does not "
                                                                                                "exist", False)
    accel, why, trial = accelerator.choose_accel(la57, None, False, None)
    assert (accel, trial) == ("tcg", False) and "la57" in why
    assert accelerator.choose_accel(la57, None, True, None)[0] == "kvm"
    failed = {"ok": False, "when": "2026-11-21 10:00", "reason": "the guest printed nothing"}
    accel, why, trial = accelerator.choose_accel(default, None, False, failed)
    assert (accel, trial) == ("tcg", False) and "printed nothing" in why and "kvm-trials.json" in why
    assert accelerator.choose_accel(default, None, False, {"ok": True, "when": "x", "reason": ""})[::2] == (
        "kvm",
        False,
    )
    assert accelerator.choose_accel(la57, None, True, None, forced="tcg") == ("tcg", "PERFLAB_VM_ACCEL=tcg", False)


@pytest.mark.parametrize("loaded, pvm", [({"kvm", "kvm_pvm"}, True), ({"kvm", "kvm_intel"}, False),
                                         ({"kvm", "kvm_amd", "kvm_pvm"}, False)])
def test_a_pvm_only_kvm_is_known_without_a_trial(tmp_path, loaded, pvm):
    for module in loaded:
        (tmp_path / "sys" / "module" / module).mkdir(parents=True)
    problem = accelerator.kvm_problem(SysRoot(tmp_path))
    assert (problem is not None and "PVM" in problem) == pvm, problem
    if pvm:
        accel, why, trial = accelerator.choose_accel(profiles.load("default"), problem, False, None)
        assert (accel, trial) == ("tcg", False) and "kvm_pvm" in why


def test_qemu_gets_no_network_and_a_read_only_project_tree(tmp_path):
    argv = qemu.qemu_argv(machine.vm("default"), tmp_path / "d", tmp_path / "k", tmp_path / "i", "tcg")
    text = " ".join(argv)
    assert "-nodefaults" in argv  # no default network card
    assert not any(flag in argv for flag in ("-nic", "-netdev", "-net"))
    assert "tcp:" not in text and "telnet" not in text  # the host side is Unix sockets only
    assert "security_model=none,readonly=on" in text and "snapshot=on" in text
    assert "null-co" not in text and "null-co" in " ".join(
        qemu.qemu_argv(machine.vm("numa2"), tmp_path / "d", tmp_path / "k", tmp_path / "i", "tcg"))


def test_the_shared_tree_is_compiled_so_no_guest_compiles_it_under_emulation(tmp_path, monkeypatch):
    module = tmp_path / "perflab" / "labs" / "lab.py"
    module.parent.mkdir(parents=True)
    module.write_text("ANSWER = 42\n")
    monkeypatch.setattr(qemu, "REPO_ROOT", tmp_path)
    qemu.compile_the_share()
    compiled = Path(importlib.util.cache_from_source(str(module)))
    assert compiled.exists()  # beside its source, where a guest's python3 (PYTHONDONTWRITEBYTECODE) looks
    before = compiled.stat().st_mtime_ns
    qemu.compile_the_share()
    assert compiled.stat().st_mtime_ns == before, "a current file is not compiled again"


def test_line_reader_reassembles_split_messages_and_skips_noise():
    reader = protocol.LineReader()
    assert reader.feed(b'{"op": "po') == []
    assert reader.feed(b'ng"}\nnot json\n[1]\n{"op": "x"}\n') == [{"op": "pong"}, {"op": "x"}]


class AgentOverSocket:
    """The guest agent serving one request on one end of a socket pair, the test on the other."""

    def __init__(self) -> None:
        self.host, guest = socket.socketpair()
        self.thread = threading.Thread(target=agent.serve, args=(agent.Port(guest.fileno()),), kwargs={"once": True})
        self.guest = guest
        self.thread.start()
        self.reader = protocol.LineReader()

    def ask(self, request: dict) -> list[dict]:
        self.host.sendall(protocol.encode(request))
        replies: list[dict] = []
        while not replies or replies[-1]["op"] not in ("exit", "pong", "error"):
            replies += self.reader.feed(self.host.recv(65536))
        self.thread.join(10)
        self.host.close()
        self.guest.close()
        return replies


def test_agent_streams_output_and_returns_the_exit_code():
    replies = AgentOverSocket().ask({"id": "r1", "op": "exec", "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
    assert all(r["id"] == "r1" for r in replies)
    assert b"".join(protocol.unpack(r["data"]) for r in replies if r["op"] == "out") == b"out\n"
    assert b"".join(protocol.unpack(r["data"]) for r in replies if r["op"] == "err") == b"err\n"
    assert replies[-1] == {"id": "r1", "op": "exit", "code": 3}


def test_agent_passes_a_signal_to_the_command():
    session = AgentOverSocket()
    session.host.sendall(protocol.encode({"id": "r2", "op": "exec", "argv": ["sleep", "30"]}))
    session.host.sendall(protocol.encode({"id": "r2", "op": "signal", "signum": int(signal.SIGTERM)}))
    replies: list[dict] = []
    while not replies or replies[-1]["op"] != "exit":
        replies += session.reader.feed(session.host.recv(65536))
    assert replies[-1]["code"] == 128 + signal.SIGTERM
    session.thread.join(10)


def test_agent_reports_a_command_it_cannot_start_and_unknown_requests():
    replies = AgentOverSocket().ask({"id": "r3", "op": "exec", "argv": ["/no/such/program"]})
    assert replies[-1]["op"] == "error" and "/no/such/program" in replies[-1]["message"]
    assert AgentOverSocket().ask({"id": "r4", "op": "dance"})[-1]["op"] == "error"
    pong = AgentOverSocket().ask({"id": "r5", "op": "ping"})[-1]
    assert pong["op"] == "pong" and pong["kernel"] == os.uname().release


def test_lab_argv_asks_for_json_with_progress():
    assert labrun.lab_argv(["loop-alignment", "--quick", "--runs", "3", "-C", "0,1"]) == [
        "python3",
        "-m",
        "perflab",
        "run",
        "loop-alignment",
        "--quick",
        "--runs",
        "3",
        "-C",
        "0,1",
        "--json",
        "--progress",
    ]


def test_run_in_a_vm_forwards_every_flag_but_vm():
    """The guest gets the host's command line as typed, so a flag added to `run` later is forwarded too."""
    from perflab.cli import build_parser
    from perflab.cli.labs import without_vm

    given = ["loop-alignment", "--quick", "--runs", "3", "-C", "0,1", "--no-wait", "--progress", "--json",
             "-o", "loop=x", "--vm", "default"]
    forwarded = without_vm(given)
    assert forwarded == given[:-2]
    assert without_vm(["loop-alignment", "--vm=numa2", "--quick"]) == ["loop-alignment", "--quick"]
    help_text = build_parser().parse_known_args(["run", "x"])[0]
    assert {name for name in vars(help_text) if name not in ("lab", "vm", "func", "command")} == {
        "quick",
        "json",
        "cpus",
        "runs",
        "no_wait",
        "progress",
        "option",
    }, "a new `run` option: add it to `given` above"


def test_results_come_back_with_the_vm_and_the_guest_probe(tmp_path):
    guest = tmp_path / "guest" / "loop-alignment"
    guest.mkdir(parents=True)
    (guest / "20261121T100000Z-sweep.json").write_text(json.dumps(
        {"perflab_result_version": 1, "lab": "loop-alignment", "path": "/exchange/results/loop-alignment/x.json"}))
    (guest / "notes.txt").write_text("plain file")
    host = tmp_path / "host"
    copied = labrun.bring_back(tmp_path / "guest", host, {"profile": "default", "accel": "tcg"}, {"facts": {}})
    assert sorted(p.name for p in copied) == ["20261121T100000Z-sweep.json", "notes.txt"]
    data = json.loads((host / "loop-alignment" / "20261121T100000Z-sweep.json").read_text())
    assert data["vm"]["accel"] == "tcg" and data["guest_probe"] == {"facts": {}}
    assert data["path"] == str(host / "loop-alignment" / "20261121T100000Z-sweep.json")


def test_cli_unknown_profile_is_one_clear_line():
    done = run_cli("vm", "up", "numa3")
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "unknown VM profile 'numa3'" in done.stderr


def test_cli_without_qemu_says_how_to_install_it_and_leaves_nothing(tmp_path):
    done = run_cli("vm", "run", "default", "--", "true",
                   env={"PATH": "/nonexistent", "PERFLAB_VM_CACHE": str(tmp_path / "cache")})
    assert done.returncode != 0
    assert "QEMU is missing" in done.stderr and "make lab" in done.stderr
    assert not (tmp_path / "cache" / "vms" / "default").exists()


def test_cli_refuses_vm_with_all_and_a_run_without_command():
    assert "one lab at a time" in run_cli("run", "all", "--vm", "default").stderr
    assert "nothing to run" in run_cli("vm", "run", "default").stderr


def test_cli_list_shows_every_profile(tmp_path):
    done = run_cli("vm", "list", env={"PERFLAB_VM_CACHE": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    for name in profiles.names():
        assert name in done.stdout
    assert "stopped" in done.stdout


def test_stale_state_of_a_dead_vm_is_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    dead = machine.vm("default")
    dead.folder.mkdir(parents=True)
    dead.info_path.write_text(json.dumps({"pid": 2**22 + 1}))  # above pid_max's default: never a live process
    assert not dead.running()
    assert next(r for r in machine.status() if r["profile"] == "default")["state"] == "stopped"
    assert not dead.folder.exists()


def test_building_without_root_says_to_use_sudo(monkeypatch, tmp_path):
    from perflab.vm import image

    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PerflabError, match="needs root.*sudo perflab vm build"):
        image.build(progress=False)


def test_image_recipe_changes_with_the_provisioning_script(monkeypatch, tmp_path):
    from perflab.vm import image

    before = image.recipe_id(image.recipe())
    edited = tmp_path / "provision.sh"
    edited.write_text(image.PROVISION_SCRIPT.read_text() + "\n# one more line\n")
    monkeypatch.setattr(image, "PROVISION_SCRIPT", edited)
    assert image.recipe_id(image.recipe()) != before
    monkeypatch.setenv("PERFLAB_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert image.current().folder.name != before


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_no_space_for_the_image_is_a_clear_error_and_leaves_nothing(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    os.system(f"mount -t tmpfs -o size=64m tmpfs {small}")
    try:
        done = run_cli("vm", "build", env={"PERFLAB_VM_CACHE": str(small)})
        assert done.returncode != 0
        assert "not enough disk space" in done.stderr and "PERFLAB_VM_CACHE" in done.stderr
        assert not list((small / "images").glob(".partial-*"))
    finally:
        os.system(f"umount {small}")


def test_hardware_verdicts_become_cannot_show_under_tcg():
    from perflab.probe import Fact, Machine
    from perflab.verdict import Verdict, unless_emulated

    measured = Verdict("loop-alignment", "reproduced", "x1.4 slower", results="r.json", notes=["n"])
    tcg = Machine({"virtualization": Fact({"vendor": "TCG (QEMU emulation)"}, "t")})
    kvm = Machine({"virtualization": Fact({"vendor": "KVM"}, "t")})
    assert unless_emulated(measured, kvm, "no front end") is measured
    shown = unless_emulated(measured, tcg, "no front end")
    assert shown.verdict == "cannot-show" and "TCG" in shown.reason and "no front end" in shown.reason
    assert shown.results == "r.json" and "x1.4 slower" in shown.notes[0]


def test_exclusive_lock_is_held_inside_the_block_only(tmp_path):
    import fcntl

    from perflab.lock import exclusive

    path = tmp_path / "vms" / "default.lock"
    with exclusive(path, "busy"):
        other = os.open(path, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(other)
    other = os.open(path, os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(other)


def shell_against(replies: list[dict], tmp_path, monkeypatch) -> tuple[int | str, bytes]:
    """`perflab vm shell` on a terminal, against a guest agent that answers its request with `replies` in one write
    and then keeps the connection open, as the agent does: (the shell's exit code or the error, what it printed)."""
    import io
    import pty
    import types

    from perflab.vm import commands

    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    done = threading.Event()

    def guest() -> None:
        accepted, _ = server.accept()
        request = protocol.LineReader().feed(accepted.recv(65536))[0]
        accepted.sendall(b"".join(protocol.encode({"id": request["id"], **reply}) for reply in replies))
        done.wait(30)
        accepted.close()

    serving = threading.Thread(target=guest)
    serving.start()
    terminal, learner_side = pty.openpty()
    monkeypatch.setattr(sys, "stdin", os.fdopen(learner_side, "r"))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
    vm = types.SimpleNamespace(running=lambda: True, agent_socket=path, folder=tmp_path,
                               profile=types.SimpleNamespace(name="numa2"))
    try:
        return commands.interactive_shell(vm), sys.stdout.buffer.getvalue()
    except PerflabError as err:
        return str(err), sys.stdout.buffer.getvalue()
    finally:
        done.set()
        serving.join()
        server.close()
        os.close(terminal)


@pytest.mark.timeout(30)
def test_a_shell_whose_last_output_and_exit_arrive_together_ends(tmp_path, monkeypatch):
    """The guest's last output and its exit can come in one read of the socket (under TCG on a busy host they
    often did): `perflab vm shell` must end with the guest shell's code, not wait for more from the socket."""
    replies = [{"op": "out", "data": protocol.pack(b"42\r\n")}, {"op": "exit", "code": 3}]
    assert shell_against(replies, tmp_path, monkeypatch) == (3, b"42\r\n")


@pytest.mark.timeout(30)
def test_a_shell_the_guest_cannot_start_is_one_error(tmp_path, monkeypatch):
    replies = [{"op": "error", "message": "cannot start ['/bin/bash', '-l']: no such file"}]
    said, printed = shell_against(replies, tmp_path, monkeypatch)
    assert said == "the guest could not start a shell: cannot start ['/bin/bash', '-l']: no such file"
    assert printed == b""


def test_a_connection_qemu_resets_is_a_guest_gone_error_not_a_traceback(tmp_path):
    """QEMU can drop the agent socket with a ping unread while the guest boots: the boot loop must see a
    PerflabError (and connect again), never a ConnectionResetError."""
    from perflab.vm.connection import AgentConnection

    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    connection = AgentConnection(path)
    accepted, _ = server.accept()
    connection.send({"id": "1", "op": "ping"})
    accepted.close()  # closed with the ping unread: the kernel resets the connection
    server.close()
    with pytest.raises(PerflabError, match="the guest went away"):
        connection.receive(1.0)
    with pytest.raises(PerflabError, match="the guest went away"):
        connection.send({"id": "2", "op": "ping"})
    connection.close()


def test_a_qemu_crash_under_tcg_boots_once_more_and_says_so(monkeypatch, tmp_path, capsys):
    """QEMU 7.2's TCG segfaulted once while booting `wide` in about a day of boots: one retry, said aloud;
    a second crash is the learner's error to see."""
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    built = image.Image(tmp_path / "images" / "abc")
    monkeypatch.setattr(qemu, "cannot_run_vms", lambda: None)
    monkeypatch.setattr(boot.guest_image, "ensure", lambda progress: built)
    monkeypatch.setattr(accelerator, "choose_accel", lambda *facts: ("tcg", "no KVM here", False))
    crashes_left, crashed = [1], []

    def fake_boot(vm, image_, accel, why, timeout, progress, stop, silent_limit=None):
        if crashes_left[0]:
            crashes_left[0] -= 1
            crashed.append(accel)
            raise boot.QemuCrashed("QEMU exited with -11 while booting wide; the console ended with: (nothing)")
        return {"accel": accel, "pid": 0}

    monkeypatch.setattr(boot, "_boot", fake_boot)
    assert boot.up("wide", progress=False)["accel"] == "tcg" and crashed == ["tcg"]
    assert (
        "QEMU exited with -11 while booting wide (a crash in QEMU's TCG); booting once more" in capsys.readouterr().err
    )
    crashes_left[0] = 2
    with pytest.raises(boot.QemuCrashed, match="-11"):
        boot.up("wide", progress=False)


def test_a_boot_another_thread_stops_ends_at_once_and_is_not_booted_again(monkeypatch, tmp_path):
    """Lab 4's full run boots its two guests side by side: when one fails, the other's boot must end now, not at
    its timeout, and a QEMU that stopping ended is no crash to boot again."""
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    stop = threading.Event()
    stop.set()
    qemu_process = processes.start(["sleep", "300"])
    try:
        started = time.monotonic()
        with pytest.raises(boot.BootFailed, match="booting stopped, as asked"):
            boot._wait_for_agent(machine.vm("default"), qemu_process, "tcg", started, 600, False, stop, None)
        assert time.monotonic() - started < 1
    finally:
        processes.stop(qemu_process, signal.SIGKILL)

    monkeypatch.setattr(qemu, "cannot_run_vms", lambda: None)
    monkeypatch.setattr(boot.guest_image, "ensure", lambda progress: image.Image(tmp_path / "images" / "abc"))
    monkeypatch.setattr(accelerator, "choose_accel", lambda *facts: ("tcg", "no KVM here", False))
    boots = []

    def killed_by_the_stop(*args, **kwargs):
        boots.append(args)
        raise boot.QemuCrashed("QEMU exited with -15 while booting wide; the console ended with: (nothing)")

    monkeypatch.setattr(boot, "_boot", killed_by_the_stop)
    with pytest.raises(boot.QemuCrashed):
        boot.up("wide", progress=False, stop=stop)
    assert len(boots) == 1


@pytest.mark.timeout(30)
def test_a_command_another_thread_stops_is_killed_in_the_guest_and_raises(tmp_path):
    from types import SimpleNamespace

    from perflab.vm import commands

    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def guest() -> None:
        accepted, _ = server.accept()
        agent.serve(agent.Port(accepted.fileno()), once=True)
        accepted.close()

    serving = threading.Thread(target=guest)
    serving.start()
    vm = SimpleNamespace(running=lambda: True, agent_socket=path, folder=tmp_path, profile=SimpleNamespace(name="la57"))
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    with pytest.raises(PerflabError, match="the command in la57 was stopped, as asked"):
        commands.execute(vm, ["sleep", "30"], stop=stop, cwd=str(tmp_path))
    assert time.monotonic() - started < 0.5 + 2 * commands.STOP_LOOK_S
    serving.join(10)  # the agent serves until its command ends: sleep 30 was killed
    server.close()
    assert not serving.is_alive(), "the command in the guest lives on"


# `perflab vm up` (keep) or one command's boot, of a VM whose QEMU is `sleep 300`: booted, or still booting.
FAKE_QEMU = textwrap.dedent("""
    import sys, time
    from collections import defaultdict
    from types import SimpleNamespace
    from perflab.vm import accelerator, boot, qemu
    qemu.cannot_run_vms = lambda: None
    boot.guest_image.ensure = lambda progress: SimpleNamespace(
        disk="disk", folder=SimpleNamespace(name="image"), kernel=lambda name: "vmlinuz", initrd=lambda name: "initrd",
        info=lambda: {"kernels": defaultdict(str)})
    accelerator.choose_accel = lambda *facts: ("tcg", "a test", False)
    boot.pvh_boot = lambda *args: False
    qemu.qemu_version = lambda: "QEMU (a test)"
    qemu.qemu_argv = lambda *args: ["sleep", "300"]
    booted = sys.argv[2] == "booted"
    boot._wait_for_agent = lambda *args: {"kernel": "test"} if booted else time.sleep(300)
    boot.up("default", progress=False, keep=sys.argv[1] == "keep")
    print("up", flush=True)
    time.sleep(300)
""")


@pytest.mark.parametrize("keep, when, outlives", [("keep", "booted", True), ("for-one-command", "booted", False),
                                                  ("keep", "booting", False)])
def test_only_a_vm_that_vm_up_booted_outlives_a_kill_9_of_its_command(keep, when, outlives, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    command = subprocess.Popen([sys.executable, "-c", FAKE_QEMU, keep, when], cwd=REPO, stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    vm = machine.vm("default")
    if when == "booted":
        assert command.stdout.readline() == "up\n"
    while not vm.info().get("started"):
        time.sleep(0.01)
    qemu = vm.info()["pid"], vm.info()["started"]
    command.kill()
    command.wait()
    deadline = time.monotonic() + 2
    while processes.alive(*qemu) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes.alive(*qemu) == outlives
    if outlives:
        assert vm.running() and boot.down("default") and not processes.alive(*qemu)
