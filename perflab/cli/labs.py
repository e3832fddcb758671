"""`perflab probe`, `run` and `list`: what this machine can show, a lab run to its verdict, the last verdicts."""

from __future__ import annotations

import argparse
import sys

from ..errors import PerflabError
from .common import print_json


def add_commands(commands) -> None:
    p = commands.add_parser(
        "probe", help="what this machine can show, and where each fact came from",
        description="Every fact the labs rely on (CPUs and their topology, caches, NUMA nodes, paging levels, "
                    "performance counters, tracing, virtualization, governor and turbo), each with the file or "
                    "instruction it came from and a note where it is unknown. Reads only; changes nothing.",
        examples=("perflab probe", "perflab probe --json | jq .facts.llc_inclusive",
                  "PERFLAB_SYSROOT=tests/fixtures/machines/intel-2s-smt perflab probe"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_probe)

    p = commands.add_parser(
        "run", help="run a lab (or all) and print its verdict",
        allow_abbrev=False,  # --vm forwards the other flags to the guest exactly as given
        description="Run one lab, or every lab with `all`, and print its verdict (reproduced, not-reproduced, "
                    "inconclusive or cannot-show) with the reason and the result file it saved in results/. "
                    "Measurements take turns on one machine-wide lock; a run waits for its turn and says so.",
        examples=("perflab run core-to-core", "perflab run core-to-core --quick -C 0-3",
                  "perflab run loop-alignment --quick --vm default", "perflab run core-to-core --runs 60 --json",
                  "perflab run all --quick", "perflab run page-table-levels -o where=native"))
    p.add_argument("lab", help="lab name (core-to-core, ...; `perflab list` shows them) or `all`")
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions: a first look in seconds, not a final answer")
    p.add_argument("--json", action="store_true",
                   help="print the verdict as JSON (lab, verdict, reason, effect, results)")
    p.add_argument("-C", "--cpus", metavar="LIST", help="CPUs to use, like 0-3,8 (default: all online)")
    p.add_argument("--runs", type=_runs, metavar="N",
                   help="interleaved rounds (more runs: narrower confidence intervals)")
    p.add_argument("--no-wait", action="store_true", help="fail at once if another measurement is running")
    p.add_argument("--vm", metavar="PROFILE", help="run the lab inside a VM of this profile (see `perflab vm list`)")
    p.add_argument("--progress", action="store_true", help="progress bars on stderr even with --json")
    p.add_argument("-o", "--option", action="append", metavar="NAME=VALUE",
                   help="a lab's own option, e.g. -o where=native for page-table-levels (repeatable)")
    p.set_defaults(func=cmd_run)

    p = commands.add_parser(
        "list", help="every lab with its last verdict here, every exercise with its status",
        description="Every lab of labs/manifest.toml with its last verdict on this machine (from results/), and "
                    "every exercise with its status in your progress file. Reads only.",
        examples=("perflab list", "perflab list --json"))
    p.add_argument("--json", action="store_true", help="labs and exercises as JSON")
    p.set_defaults(func=cmd_list)


def _runs(text: str) -> int:
    from ..sequential import MAX_RUNS

    try:
        runs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--runs takes a whole number of rounds, not {text!r}") from None
    if not 1 <= runs <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"--runs {runs} is out of range: give 1 to {MAX_RUNS}")
    return runs


def cmd_probe(args: argparse.Namespace) -> int:
    from ..probe import probe

    machine = probe()
    if args.json:
        print_json(machine.to_json())
    else:
        print(machine.render())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ..cpulist import parse_cpulist

    if args.cpus is not None:
        args.cpus = parse_cpulist(args.cpus)
    if args.vm:
        return _run_lab_in_vm(args)
    if args.lab == "all":
        return _run_all(args)
    from ..manifest.labs import find

    verdict = find(args.lab).load().run(cpus=args.cpus, quick=args.quick, runs=args.runs,
                                        progress=args.progress or not args.json, wait=not args.no_wait,
                                        **_options(args.option or []))
    _clear_progress_line()
    if args.json:
        print_json(verdict.to_json())
    else:
        print(verdict.headline())
        for note in verdict.notes:
            print(f"  - {note}")
        print(f"results: {verdict.results}")
    return 0


def _run_all(args: argparse.Namespace) -> int:
    from ..report import run_all

    if args.option:
        raise PerflabError("-o sets one lab's option: name the lab, "
                           "e.g. `perflab run page-table-levels -o where=native`")
    verdicts, report_path = run_all(cpus=args.cpus, quick=args.quick, runs=args.runs, wait=not args.no_wait,
                                    progress=not args.json)
    _clear_progress_line()
    if args.json:
        print_json({"labs": [v.to_json() for v in verdicts], "report": str(report_path)})
    else:
        for verdict in verdicts:
            print(verdict.headline())
        print(f"report: {report_path}")
    return 0


def _options(given: list[str]) -> dict[str, str]:
    """`-o where=native` as {"where": "native"}; the lab checks the names and values."""
    options = {}
    for item in given:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise PerflabError(f"-o {item!r}: give NAME=VALUE, e.g. -o where=native "
                               "(the lab's README lists its options)")
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
    from ..manifest.labs import find
    from ..vm.labrun import run_lab

    if args.lab == "all":
        raise PerflabError("--vm runs one lab at a time: name the lab, e.g. `perflab run core-to-core --vm default`")
    find(args.lab).load()  # an unknown or planned lab fails here, before a VM boots
    verdict = run_lab(args.lab, args.vm, without_vm(args.argv), progress=not args.json)
    if args.json:
        print_json(verdict)
    else:
        vm = verdict["vm"]
        print(f"{verdict['lab']}: {verdict['verdict'].upper()} in VM {vm['profile']} "
              f"({vm['accel'].upper()}, {vm['topology']})")
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


def cmd_list(args: argparse.Namespace) -> int:
    from .. import overview

    if args.json:
        print_json({"labs": [vars(r) for r in overview.lab_rows()],
                    "exercises": [vars(r) for r in overview.exercise_rows()]})
    else:
        print(overview.render())
    return 0
