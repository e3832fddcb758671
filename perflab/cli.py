"""The `perflab` command. Options mean the same in every subcommand: -C is a CPU list, as in perf."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from .cpulist import parse_cpulist
from .errors import PerflabError


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def cmd_probe(args: argparse.Namespace) -> int:
    from .probe import probe

    machine = probe()
    if args.json:
        _print_json(machine.to_json())
    else:
        print(machine.render())
    return 0


def _run_lab(name: str, args: argparse.Namespace):
    from .labs import find

    return find(name).load().run(cpus=args.cpus, quick=args.quick, runs=args.runs,
                                 progress=args.progress or not args.json, wait=not args.no_wait,
                                 **_options(args.option or []))


def _options(given: list[str]) -> dict[str, str]:
    """`-o where=native` as {"where": "native"}; the lab checks the names and values."""
    options = {}
    for item in given:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise PerflabError(f"-o {item!r}: give NAME=VALUE, e.g. -o where=native (the lab's README lists its options)")
        options[name] = value
    return options


def without_vm(argv: list[str]) -> list[str]:
    """The `run` command line as given, minus `--vm PROFILE`: every other flag goes on to the guest."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg == "--vm" or arg.startswith("--vm="):
            skip = arg == "--vm"
            continue
        kept.append(arg)
    return kept


def _run_lab_in_vm(args: argparse.Namespace) -> int:
    from .labs import find
    from .vm.labrun import run_lab

    if args.lab == "all":
        raise PerflabError("--vm runs one lab at a time: name the lab, e.g. `perflab run core-to-core --vm default`")
    find(args.lab).load()  # an unknown or planned lab fails here, before a VM boots
    verdict = run_lab(args.lab, args.vm, without_vm(args.argv), progress=not args.json)
    if args.json:
        _print_json(verdict)
    else:
        vm = verdict["vm"]
        print(f"{verdict['lab']}: {verdict['verdict'].upper()} in VM {vm['profile']} ({vm['accel'].upper()}, {vm['topology']})")
        print(f"  {verdict['reason']}")
        for note in verdict.get("notes", []):
            print(f"  - {note}")
        print(f"results: {verdict['results']} (with the guest's probe and the VM's settings)")
    return 0


def _clear_progress_line() -> None:
    """Progress bars draw on stderr with carriage returns; wipe their line so the verdict starts clean."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def cmd_run(args: argparse.Namespace) -> int:
    from .report import run_all

    if args.vm:
        return _run_lab_in_vm(args)
    if args.lab == "all":
        if args.option:
            raise PerflabError("-o sets one lab's option: name the lab, e.g. `perflab run page-table-levels -o where=native`")
        verdicts, report_path = run_all(cpus=args.cpus, quick=args.quick, runs=args.runs, wait=not args.no_wait,
                                        progress=not args.json)
        _clear_progress_line()
        if args.json:
            _print_json({"labs": [v.to_json() for v in verdicts], "report": str(report_path)})
        else:
            for verdict in verdicts:
                print(verdict.headline())
            print(f"report: {report_path}")
        return 0
    verdict = _run_lab(args.lab, args)
    _clear_progress_line()
    if args.json:
        _print_json(verdict.to_json())
    else:
        print(verdict.headline())
        for note in verdict.notes:
            print(f"  - {note}")
        print(f"results: {verdict.results}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from .grading import grade

    report = grade(args.exercise, notebook=args.notebook, record=not args.no_record, timeout=args.timeout)
    if args.json:
        _print_json(report.to_json())
    else:
        print(report.render())
    return 0 if report.status == "passed" else 1


def cmd_progress(args: argparse.Namespace) -> int:
    from .grading import progress
    from .overview import exercise_rows, render_exercises

    if args.reset:
        progress.reset()
        print(f"progress reset ({progress.progress_path()})")
    else:
        print(render_exercises(exercise_rows()))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from . import overview

    if args.json:
        _print_json({"labs": [vars(r) for r in overview.lab_rows()],
                     "exercises": [vars(r) for r in overview.exercise_rows()]})
    else:
        print(overview.render())
    return 0


def cmd_hint(args: argparse.Namespace) -> int:
    from .grading import next_hint
    from .grading.manifest import load_manifest

    exercise = load_manifest().find(args.exercise)
    shown = next_hint(exercise)
    if shown is None:
        print(f"{exercise.name} has no hints; its notebook says what to do")
        return 0
    opened = shown[0]
    first = 1 if args.all else opened
    for number in range(first, opened + 1):
        print(f"hint {number} of {len(exercise.hints)}: {exercise.hints[number - 1]}")
    if opened < len(exercise.hints) and not args.all:
        print("(each failed grade opens one more hint; --all shows them all)")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from .grading.manifest import load_manifest
    from .workspace import reset

    exercise = load_manifest().find(args.exercise)
    backup = reset(exercise.exercise_path, exercise.learner_path)
    print(f"{exercise.learner_path}: a fresh copy" + (f"; yours is kept in {backup}" if backup else ""))
    print("reload it in JupyterLab (File > Reload Notebook from Disk) before you go on")
    return 0


def cmd_c2c_analyze(args: argparse.Namespace) -> int:
    from .labs.core_to_core.advisor import analyze, render_analysis
    from .labs.core_to_core.matrix import load

    analysis = analyze(load(args.file))
    if args.json:
        _print_json(analysis)
    else:
        print(render_analysis(analysis))
    return 0


def cmd_c2c_heatmap(args: argparse.Namespace) -> int:
    from .labs.core_to_core.advisor import analyze
    from .labs.core_to_core.figures import heatmap
    from .labs.core_to_core.matrix import load

    output = Path(args.output)
    if output.suffix.lower() != ".png":
        raise PerflabError(f"{output}: the heatmap is a PNG; give -o a name ending in .png")
    if not output.parent.resolve().is_dir() or not os.access(output.parent.resolve(), os.W_OK):
        raise PerflabError(f"cannot write {output}: its folder {output.parent} does not exist or is not writable; "
                           "create it or choose another -o")
    matrix = load(args.file)
    heatmap(matrix, analyze(matrix)).savefig(output, dpi=120, bbox_inches="tight")
    print(output)
    return 0


def cmd_exercises(args: argparse.Namespace) -> int:
    from .grading import authoring

    if args.action == "generate":
        for path in authoring.generate_all():
            print(path)
        return 0
    problems = authoring.author_check()
    for problem in problems:
        print(problem)
    print("author check: " + ("FAILED" if problems else "every solution passes, every untouched exercise fails"))
    return 1 if problems else 0


def cmd_layout(args: argparse.Namespace) -> int:
    from .labs.loop_alignment import layout

    binary = Path(args.binary)
    if not binary.is_file():
        raise PerflabError(f"no such binary {binary}: build it first (for the lab: make -C labs/06-loop-alignment)")
    loop = layout.find_loop(layout.disassemble(binary, [args.function])[args.function])
    if args.json:
        _print_json(layout.describe(loop))
    else:
        print(layout.render_lines(loop))
    return 0


def cmd_vm(args: argparse.Namespace) -> int:
    from .vm import image, machine

    if args.action == "list":
        from .text import table

        rows = machine.status()
        print(table([["profile", "machine", "kernel", "state", "labs", "for"],
                     *[[r["profile"], r["topology"], " ".join(filter(None, [r["kernel"], r["kernel_args"]])), r["state"],
                        ",".join(r["labs"]) or "-", r["description"]] for r in rows]]))
        built = image.current()
        print(f"guest image: {built.folder} ({'built' if built.exists() else 'not built yet: the first `perflab vm up` builds it'})")
        return 0
    if args.action == "build":
        built = image.build() if args.force or not image.current().exists() else image.current()
        info = built.info()
        print(f"{built.folder}: built {info['built']} in {info['build_seconds']} s, {info['disk_bytes'] / 2**30:.2f} GiB on disk")
        return 0
    if args.action == "box":
        from .vm.vagrant import BOX_NAME, build_box

        box = build_box()
        print(f"{box}: add it with `vagrant box add --name {BOX_NAME} {box}`, then `cd vm && vagrant up` "
              "(see vm/Vagrantfile)")
        return 0
    if not args.profile:
        raise PerflabError(f"`perflab vm {args.action}` needs a profile: one of {', '.join(machine_names())}")
    if args.action == "up":
        info = machine.up(args.profile)
        print(f"{args.profile}: running ({info['accel'].upper()}: {info['accel_reason']}); "
              f"`perflab vm shell {args.profile}` opens a shell, `perflab vm down {args.profile}` stops it")
        return 0
    if args.action == "down":
        was_running = machine.down(args.profile)
        print(f"{args.profile}: {'stopped' if was_running else 'was not running'}")
        return 0
    if args.action == "shell":
        with machine.session(args.profile) as vm:
            return machine.interactive_shell(vm)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise PerflabError(f"nothing to run: `perflab vm run {args.profile} -- COMMAND...`")
    with machine.session(args.profile) as vm:
        return machine.execute(vm, command)


def cmd_system(args: argparse.Namespace) -> int:
    from . import system

    if args.action == "show":
        print(system.show())
        return 0
    done = system.tune() if args.action == "tune" else system.reset_all()
    for line in done:
        print(line)
    if not done:
        print("nothing to tune here: no cpufreq governor and no turbo switch (in a VM the host decides both)"
              if args.action == "tune" else "nothing to restore: perflab has changed nothing on this machine")
    return 0


def cmd_workshop(args: argparse.Namespace) -> int:
    from .workshop import hub

    if args.action in ("up", "add-learners") and not args.learners:
        raise PerflabError(f"name the learners: `perflab workshop {args.action} alice bob carol`")
    if args.learners and args.action in ("status", "down"):
        raise PerflabError(f"`perflab workshop {args.action}` takes no learner names")
    if args.all and args.action != "regrade":
        raise PerflabError("--all is for `perflab workshop regrade`: every exercise, not only those marked passed")
    if args.action == "regrade":
        from .workshop.regrade import regrade

        lines = regrade(args.learners, args.all, say=lambda line: print(line, file=sys.stderr, flush=True))
        print("\n".join(lines) if lines else "nothing to re-grade: no learner's progress file calls an exercise passed")
        return 0
    if args.action == "status":
        found = hub.status()
        _print_json(found) if args.json else print(hub.render_status(found))
        return 0
    lines = {"up": lambda: hub.up(args.learners, args.ip, args.port, args.ssl_cert, args.ssl_key, args.reserve_cpus),
             "add-learners": lambda: hub.add_learners(args.learners), "down": hub.down}[args.action]()
    print("\n".join(lines) if lines else "perflab workshop: nothing was left to remove")
    return 0


def machine_names() -> list[str]:
    from .vm.profiles import names

    return names()


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line that says where the help is (exit code 2, as argparse's)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`\n")


def _runs(text: str) -> int:
    from .sequential import MAX_RUNS

    try:
        runs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--runs takes a whole number of rounds, not {text!r}") from None
    if not 1 <= runs <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"--runs {runs} is out of range: give 1 to {MAX_RUNS}")
    return runs


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout takes seconds, not {text!r}") from None
    if not 1 <= seconds <= 86400:
        raise argparse.ArgumentTypeError(f"--timeout {text} is out of range: give 1 to 86400 seconds")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = Parser(
        prog="perflab", formatter_class=formatter,
        description="Make CPU and OS performance phenomena happen on this machine, measure them, and say whether they showed.",
        epilog=_examples("perflab probe", "perflab run core-to-core --quick", "perflab run all --quick",
                         "perflab grade c2c-harmonic-mean", "perflab c2c analyze results.csv --json"),
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("probe", help="what this machine can show, and where each fact came from", formatter_class=formatter,
                       epilog=_examples("perflab probe", "perflab probe --json | jq .facts.llc_inclusive",
                                        "PERFLAB_SYSROOT=tests/fixtures/machines/intel-2s-smt perflab probe"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("run", help="run a lab (or all) and print its verdict", formatter_class=formatter,
                       allow_abbrev=False,  # --vm forwards the other flags to the guest exactly as given
                       epilog=_examples("perflab run core-to-core", "perflab run core-to-core --quick -C 0-3",
                                        "perflab run loop-alignment --quick --vm default",
                                        "perflab run core-to-core --runs 60 --json", "perflab run all --quick",
                                        "perflab run page-table-levels -o where=native"))
    p.add_argument("lab", help="lab name (core-to-core, ...) or `all`")
    p.add_argument("--quick", action="store_true", help="fewer repetitions: a first look in seconds, not a final answer")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (lab, verdict, reason, effect, results)")
    p.add_argument("-C", "--cpus", metavar="LIST", help="CPUs to use, like 0-3,8 (default: all online)")
    p.add_argument("--runs", type=_runs, metavar="N", help="interleaved rounds (more runs: narrower confidence intervals)")
    p.add_argument("--no-wait", action="store_true", help="fail at once if another measurement is running")
    p.add_argument("--vm", metavar="PROFILE", help="run the lab inside a VM of this profile (see `perflab vm list`)")
    p.add_argument("--progress", action="store_true", help="progress bars on stderr even with --json")
    p.add_argument("-o", "--option", action="append", metavar="NAME=VALUE",
                   help="a lab's own option, e.g. -o where=native for page-table-levels (repeatable)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("grade", help="grade an exercise notebook", formatter_class=formatter,
                       epilog=_examples("perflab grade c2c-harmonic-mean", "perflab grade c2c-pipeline-pinning --json",
                                        "perflab grade c2c-measure-pair --notebook my-copy.ipynb"))
    p.add_argument("exercise", help="exercise name, as in exercises/manifest.toml")
    p.add_argument("--notebook", help="grade this notebook instead of your copy in work/exercises/ "
                                      "(recorded as progress only if it is that copy)")
    p.add_argument("--timeout", type=_seconds, default=600, metavar="SECONDS",
                   help="stop a cell that runs longer than this (default 600): graded as failed")
    p.add_argument("--no-record", action="store_true",
                   help="leave progress as it is (an instructor's re-grade, an author's check)")
    p.add_argument("--json", action="store_true", help="print each check as JSON")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("progress", help="which exercises you have passed", formatter_class=formatter,
                       epilog=_examples("perflab progress", "perflab progress --reset"))
    p.add_argument("--reset", action="store_true", help="forget all progress")
    p.set_defaults(func=cmd_progress)

    p = sub.add_parser("list", help="every lab with its last verdict here, every exercise with its status",
                       formatter_class=formatter, epilog=_examples("perflab list", "perflab list --json"))
    p.add_argument("--json", action="store_true", help="labs and exercises as JSON")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("hint", help="the next hint for an exercise (one more after each failed grade)",
                       formatter_class=formatter, epilog=_examples("perflab hint c2c-harmonic-mean",
                                                                   "perflab hint slow-build --all"))
    p.add_argument("exercise", help="exercise name, as `perflab list` shows it")
    p.add_argument("--all", action="store_true", help="every hint opened so far, not only the latest")
    p.set_defaults(func=cmd_hint)

    p = sub.add_parser("reset", help="a fresh copy of an exercise notebook; yours is kept in work/.backup/",
                       formatter_class=formatter, epilog=_examples("perflab reset c2c-harmonic-mean"))
    p.add_argument("exercise", help="exercise name, as `perflab list` shows it")
    p.set_defaults(func=cmd_reset)

    c2c = sub.add_parser("c2c", help="core-to-core latency matrices: the pinning advisor")
    c2c_sub = c2c.add_subparsers(dest="c2c_command", required=True, metavar="ACTION")
    p = c2c_sub.add_parser("analyze", help="recover SMT siblings, clusters and sockets; recommend pinning",
                           formatter_class=formatter,
                           epilog=_examples("perflab c2c analyze results/core-to-core/20261121T101500Z-matrix.json",
                                            "perflab c2c analyze perflab/data/c2c/amd-ryzen-9-5950x-3-40ghz-by-nephyrin.csv --json"))
    p.add_argument("file", help="a core-to-core-latency CSV or a perflab matrix result (.json)")
    p.add_argument("--json", action="store_true", help="levels, recommended pairs and notes as JSON")
    p.set_defaults(func=cmd_c2c_analyze)
    p = c2c_sub.add_parser("heatmap", help="draw a latency matrix as a heatmap PNG", formatter_class=formatter,
                           epilog=_examples("perflab c2c heatmap perflab/data/c2c/amd-ryzen-9-5950x-3-40ghz-by-nephyrin.csv -o 5950x.png"))
    p.add_argument("file", help="a core-to-core-latency CSV or a perflab matrix result (.json)")
    p.add_argument("-o", "--output", default="heatmap.png", help="PNG to write (default: heatmap.png)")
    p.set_defaults(func=cmd_c2c_heatmap)

    p = sub.add_parser("layout", help="where a function's innermost loop sits on 64-byte lines (from objdump)",
                       formatter_class=formatter,
                       epilog=_examples("perflab layout build/06-loop-alignment/offset_sweep alu_loop_46",
                                        "perflab layout ./a.out main --json"))
    p.add_argument("binary", help="an x86-64 ELF binary")
    p.add_argument("function", help="the function whose innermost loop to show (a symbol objdump knows)")
    p.add_argument("--json", action="store_true", help="the loop's bytes and boundary facts as JSON")
    p.set_defaults(func=cmd_layout)

    p = sub.add_parser("vm", help="VMs with the topology a lab needs (two NUMA nodes, la57, many vCPUs)",
                       formatter_class=formatter,
                       description="Boot, use and stop QEMU VMs described by the profiles in vm/. The guest image is "
                                   "built from Debian packages on first use (root needed once) and cached.",
                       epilog=_examples("perflab vm list", "perflab vm up numa2",
                                        "perflab vm run numa2 -- numactl --hardware",
                                        "perflab vm run la57 -- grep VmallocTotal /proc/meminfo",
                                        "perflab vm shell wide", "perflab vm down numa2",
                                        "perflab run core-to-core --quick --vm default",
                                        "perflab vm box   # then see vm/Vagrantfile",
                                        "PERFLAB_VM_ACCEL=tcg perflab vm up default   # skip the KVM trial"))
    p.add_argument("action", choices=["list", "build", "up", "run", "shell", "down", "box"],
                   help="list profiles | build the image | boot | run a command | open a shell | stop | "
                        "make a Vagrant box")
    p.add_argument("profile", nargs="?", help="a profile: a file vm/PROFILE.toml")
    p.add_argument("command", nargs=argparse.REMAINDER, help="for run: -- COMMAND [ARGS...]")
    p.add_argument("--force", action="store_true", help="for build: rebuild even if the image for this recipe is cached")
    p.set_defaults(func=cmd_vm)

    p = sub.add_parser("system", help="the system settings the labs use; tune the machine, and put everything back",
                       formatter_class=formatter,
                       description="show: every knob the labs use (governor, turbo, NUMA balancing, each disk's "
                                   "rq_affinity and IRQ affinities), its value, and whether perflab changed it. "
                                   "tune: performance governor and turbo off, kept until reset. reset: restore "
                                   "what tune set and what a killed run left changed, and end the programs it "
                                   "left running; it never waits for a measurement.",
                       epilog=_examples("perflab system show", "sudo perflab system tune", "sudo perflab system reset",
                                        "PERFLAB_SYSROOT=tests/fixtures/machines/intel-2s-smt perflab system show"))
    p.add_argument("action", choices=["show", "tune", "reset"])
    p.set_defaults(func=cmd_system)

    p = sub.add_parser("workshop", help="for instructors: JupyterHub for a class on this machine (root)",
                       formatter_class=formatter,
                       description="up: one system user per learner, JupyterHub with each learner's own JupyterLab "
                                   "and workspace, and the class dashboard; prints every login's password once. "
                                   "add-learners: more learners while it runs. status: the hub and each learner's "
                                   "server. regrade: grade again, as each learner, what their progress file calls passed; "
                                   "the dashboard shows the outcome. down: stop it all, remove the users, restore the machine. It listens on "
                                   "127.0.0.1 unless --ip says otherwise; serve beyond this machine only with TLS.",
                       epilog=_examples("sudo .venv/bin/perflab workshop up alice bob carol",
                                        "sudo .venv/bin/perflab workshop add-learners dave",
                                        "sudo .venv/bin/perflab workshop status",
                                        "sudo .venv/bin/perflab workshop regrade alice",
                                        "sudo .venv/bin/perflab workshop up alice bob carol --reserve-cpus 4",
                                        "sudo .venv/bin/perflab workshop up alice bob --ip 0.0.0.0 --port 443 "
                                        "--ssl-cert cert.pem --ssl-key key.pem",
                                        "sudo .venv/bin/perflab workshop down"))
    p.add_argument("action", choices=["up", "add-learners", "status", "regrade", "down"])
    p.add_argument("learners", nargs="*", metavar="LEARNER",
                   help="for up and add-learners: learner names; for regrade: whose (default: everyone's)")
    p.add_argument("--ip", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="the port learners open (default 8000)")
    p.add_argument("--ssl-cert", help="a PEM certificate: serve HTTPS (with --ssl-key)")
    p.add_argument("--ssl-key", help="the certificate's PEM key")
    p.add_argument("--reserve-cpus", type=int, default=0, metavar="N",
                   help="for up: N CPUs of their own for each learner (not the first CPU), where the machine has "
                        "enough; each then measures without queueing behind the others")
    p.add_argument("--all", action="store_true", help="for regrade: every exercise, not only those marked passed")
    p.add_argument("--json", action="store_true", help="for status: JSON")
    p.set_defaults(func=cmd_workshop)

    p = sub.add_parser("exercises", help="for authors: generate learner notebooks, run the author check",
                       formatter_class=formatter,
                       epilog=_examples("perflab exercises generate", "perflab exercises check"))
    p.add_argument("action", choices=["generate", "check"])
    p.set_defaults(func=cmd_exercises)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv[1:]  # after the command's name: `run --vm` forwards it
    handler: Callable[[argparse.Namespace], int] = args.func
    try:
        if getattr(args, "cpus", None) is not None:
            args.cpus = parse_cpulist(args.cpus)
        return handler(args)
    except PerflabError as err:
        print(f"perflab: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("perflab: interrupted; results already written are kept, the unfinished one was not saved", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
