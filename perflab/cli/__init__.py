"""The `perflab` command: a thin dispatcher over one module per verb group, and the labs' own tools.

labs.py (probe, run, list), grading.py (grade, hint, reset, progress), cases.py (case), vm.py, system.py,
workshop.py and authoring.py (exercises) each add their subcommands with `add_commands(commands)`; labtools.py
adds those a lab's package declares (perflab/labs/NAME/cli.py). Every verb with actions is a subcommand of its
own, with its own usage, description, options and `examples:`, so `perflab X --help` never does X and a word a
subcommand does not take is refused in one line. Imports of the heavy parts (numpy, matplotlib, the labs) wait
inside the handlers: `perflab --help` stays fast.

Options mean the same in every subcommand: -C is a CPU list, as in perf; --json prints JSON.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys

from ..errors import PerflabError
from . import authoring, cases, grading, labs, system, vm, workshop
from .labtools import add_lab_tools

VERB_GROUPS = (labs, grading, cases, vm, system, workshop, authoring)
INTERRUPTED = "perflab: interrupted; results already written are kept, the unfinished one was not saved"
INTERRUPTED_AFTER = "perflab: interrupted as it exited; the command had finished and what it printed is complete"


class _Formatter(argparse.HelpFormatter):
    """argparse's, but text written on several lines (the examples, the lab tools) is kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class Parser(argparse.ArgumentParser):
    """argparse, with `examples=` for the closing `examples:` block, its subcommands kept in `commands`,
    and a usage error on one line that starts `perflab: ` and says where the help is (exit code 2)."""

    def __init__(self, *args, examples: tuple[str, ...] | list[str] = (), **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        if examples:
            kwargs["epilog"] = "examples:\n" + "\n".join(f"  {line}" for line in examples)
        super().__init__(*args, **kwargs)
        self.commands: argparse._SubParsersAction | None = None

    def add_subparsers(self, **kwargs):
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def error(self, message: str):
        where = self.prog.removeprefix("perflab").strip()
        self.exit(2, f"perflab: {where + ': ' if where else ''}{message}; see `{self.prog} --help`\n")


def subcommands(parser: Parser) -> dict[str, Parser]:
    """The parser's subcommands by name (none for a leaf)."""
    return dict(parser.commands.choices) if parser.commands else {}


def build_parser() -> Parser:
    parser = Parser(
        prog="perflab",
        description="Make CPU and OS performance phenomena happen on this machine, measure them, and say whether "
                    "they showed. Each COMMAND has its own help: perflab COMMAND --help.",
        examples=("perflab probe", "perflab run core-to-core --quick", "perflab run all --quick",
                  "perflab grade c2c-harmonic-mean", "perflab c2c analyze perflab/data/c2c/"
                  "amd-ryzen-9-5950x-3-40ghz-by-nephyrin.csv --json"),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for group in VERB_GROUPS:
        group.add_commands(commands)
    parser.epilog = add_lab_tools(commands) + "\n\n" + parser.epilog
    return parser


def walk(parser: Parser):
    """The parser and every subcommand under it, at every depth."""
    yield parser
    for sub in subcommands(parser).values():
        yield from walk(sub)


def _unrecognized(parser: Parser, chosen: Parser, extra: list[str]) -> str:
    """argparse's words, and for an option that a sibling subcommand takes, which one takes it."""
    parent = next(p for p in walk(parser) if chosen in subcommands(p).values())
    hints = []
    for option in {word.split("=")[0] for word in extra if word.startswith("-")}:
        takers = [f"`{p.prog}`" for p in subcommands(parent).values() if option in p._option_string_actions]
        hints += [f"{option} is for {' and '.join(takers)}"] if takers else []
    return "; ".join([f"unrecognized arguments: {' '.join(extra)}", *sorted(hints)])


def _dispatch(argv: list[str]) -> int:
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            chosen = next(p for p in walk(parser) if p.get_default("func") is args.func)
            chosen.error(_unrecognized(parser, chosen, extra))
    except SystemExit as stop:  # --help, or argparse's one-line refusal: already printed
        return stop.code if isinstance(stop.code, int) else 2
    except PerflabError as err:  # the lab manifest that lists the labs' tools cannot be read
        print(f"perflab: {err}", file=sys.stderr)
        return err.exit_code
    args.argv = argv[1:]  # after the command's name: `run --vm` forwards it
    try:
        code = args.func(args)
        sys.stdout.flush()  # before an interruption could only end the process (below)
        return code
    except PerflabError as err:
        print(f"perflab: {err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # the reader (head, less) stopped reading: nothing to say, and no more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that Python's last flush cannot fail
        return 128 + signal.SIGPIPE  # as a shell reports a program that a closed pipe ended


def main(argv: list[str] | None = None) -> int:
    """Run `perflab ARGV`; with no argv, as this process's command (sys.argv), Ctrl-C handled to the end."""
    own_process, said = argv is None, False
    try:
        code = _dispatch(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr, flush=True)
        code, said = 130, True
    if own_process:
        _exit_cleanly_on_interrupt(already_said=said)
    return code


def _exit_cleanly_on_interrupt(already_said: bool) -> None:
    """From here a Ctrl-C can spoil nothing, but Python's default would end the process with a traceback or,
    once its teardown has begun, by the signal itself (exit -2, no word). So: the one line and 130 while
    Python still runs signal handlers, and the signal ignored from the first exit handler on."""
    def interrupted(signum, frame):
        if not already_said:
            os.write(2, (INTERRUPTED_AFTER + "\n").encode())
        os._exit(130)  # stdout was flushed; skipping Python's teardown loses nothing of ours

    signal.signal(signal.SIGINT, interrupted)
    atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
