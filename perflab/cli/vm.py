"""`perflab vm list|build|up|run|shell|down|box`: QEMU VMs with the topology a lab needs."""

from __future__ import annotations

import argparse

from ..errors import PerflabError


def add_commands(commands) -> None:
    vm = commands.add_parser(
        "vm", help="VMs with the topology a lab needs (two NUMA nodes, la57, many vCPUs)",
        description="Boot, use and stop QEMU VMs described by the profiles in vm/ (one TOML file each). The guest "
                    "image is built from Debian packages on first use (root needed once) and cached in .cache/vm/.",
        examples=("perflab vm list", "perflab vm up numa2", "perflab vm run numa2 -- numactl --hardware",
                  "perflab vm shell wide", "perflab vm down numa2", "perflab run core-to-core --quick --vm default",
                  "PERFLAB_VM_ACCEL=tcg perflab vm up default   # skip the KVM trial"))
    verbs = vm.add_subparsers(dest="vm_command", required=True, metavar="VERB", title="verbs")

    p = verbs.add_parser(
        "list", help="the profiles, which VMs run, and whether the guest image is built",
        description="Every profile in vm/: its machine (sockets, cores, NUMA nodes), kernel, whether its VM is "
                    "running, the labs that use it; then the guest image's folder and whether it is built.",
        examples=("perflab vm list",))
    p.set_defaults(func=cmd_list)

    p = verbs.add_parser(
        "build", help="build the guest image (root, about two minutes)",
        description="Build the guest image from Debian packages (about two minutes and 2.4 GiB in .cache/vm/; "
                    "needs root). An image already built from the same recipe is kept unless --force. The "
                    "first `perflab vm up` builds it too.",
        examples=("sudo .venv/bin/perflab vm build", "sudo .venv/bin/perflab vm build --force"))
    p.add_argument("--force", action="store_true", help="rebuild even if the image for this recipe is cached")
    p.set_defaults(func=cmd_build)

    _add_verbs_on_one_vm(verbs)

    p = verbs.add_parser(
        "box", help="make a Vagrant box of the guest image",
        description="Write a Vagrant box of the guest image (building the image first if needed) to "
                    ".cache/vm/vagrant/, for vm/Vagrantfile, and say how to add it.",
        examples=("perflab vm box   # then see vm/Vagrantfile",))
    p.set_defaults(func=cmd_box)


def _add_verbs_on_one_vm(verbs) -> None:
    """up, run, shell, down: each names a profile's VM."""
    p = verbs.add_parser(
        "up", help="boot a profile's VM and leave it running",
        description="Boot the profile's VM in the background (KVM where this machine allows it, else QEMU's TCG, "
                    "and say which and why) and leave it running until `perflab vm down PROFILE`.",
        examples=("perflab vm up numa2", "PERFLAB_VM_ACCEL=tcg perflab vm up default   # skip the KVM trial"))
    _profile(p)
    p.set_defaults(func=cmd_up)

    p = verbs.add_parser(
        "run", help="run one command in a profile's VM",
        description="Run one command in the profile's VM, its output streamed here, and exit with its exit code. "
                    "A VM that is not up is booted for the command and stopped after it. Put -- before the "
                    "command when it has options of its own.",
        examples=("perflab vm run numa2 -- numactl --hardware",
                  "perflab vm run la57 -- grep VmallocTotal /proc/meminfo"))
    _profile(p)
    p.add_argument("guest_command", nargs="*", metavar="COMMAND", help="the command and its arguments, after --")
    p.set_defaults(func=cmd_run)

    p = verbs.add_parser(
        "shell", help="a login shell in a profile's VM",
        description="A login shell in the profile's VM on this terminal. A VM that is not up is booted for the "
                    "shell and stopped when it ends.",
        examples=("perflab vm shell wide",))
    _profile(p)
    p.set_defaults(func=cmd_shell)

    p = verbs.add_parser(
        "down", help="stop a profile's VM",
        description="Stop the profile's VM. The guest's disk writes are discarded; results a lab run brought "
                    "back stay in results/.",
        examples=("perflab vm down numa2",))
    _profile(p)
    p.set_defaults(func=cmd_down)


def _profile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE", help="a profile: the name of a file vm/PROFILE.toml")


def _named(args: argparse.Namespace) -> str:
    """The profile given; an empty name is refused here, a path or an unknown name by perflab.vm.profiles."""
    if not args.profile:
        from ..vm.profiles import names

        raise PerflabError(f"`perflab vm {args.vm_command}` needs a profile: one of {', '.join(names())}")
    return args.profile


def cmd_list(args: argparse.Namespace) -> int:
    from ..formatting import table
    from ..vm import image, machine

    rows = machine.status()
    print(table([["profile", "machine", "kernel", "state", "labs", "for"],
                 *[[r["profile"], r["topology"], " ".join(filter(None, [r["kernel"], r["kernel_args"]])), r["state"],
                    ",".join(r["labs"]) or "-", r["description"]] for r in rows]]))
    built = image.current()
    state = "built" if built.exists() else "not built yet: the first `perflab vm up` builds it"
    print(f"guest image: {built.folder} ({state})")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from ..vm import image

    built = image.build(force=args.force)
    info = built.info()
    print(f"{built.folder}: built {info['built']} in {info['build_seconds']} s, "
          f"{info['disk_bytes'] / 2**30:.2f} GiB on disk")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from ..vm import boot

    profile = _named(args)
    info = boot.up(profile)
    print(f"{profile}: running ({info['accel'].upper()}: {info['accel_reason']}); "
          f"`perflab vm shell {profile}` opens a shell, `perflab vm down {profile}` stops it")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ..vm import boot, commands

    profile = _named(args)
    if not args.guest_command:
        raise PerflabError(f"nothing to run: `perflab vm run {profile} -- COMMAND...`")
    with boot.session(profile) as vm:
        return commands.execute(vm, args.guest_command)


def cmd_shell(args: argparse.Namespace) -> int:
    from ..vm import boot, commands

    with boot.session(_named(args)) as vm:
        return commands.interactive_shell(vm)


def cmd_down(args: argparse.Namespace) -> int:
    from ..vm import boot

    profile = _named(args)
    was_running = boot.down(profile)
    print(f"{profile}: {'stopped' if was_running else 'was not running'}")
    return 0


def cmd_box(args: argparse.Namespace) -> int:
    from ..vm.vagrant import BOX_NAME, build_box

    box = build_box()
    print(f"{box}: add it with `vagrant box add --name {BOX_NAME} {box}`, then `cd vm && vagrant up` "
          "(see vm/Vagrantfile)")
    return 0
