"""Lab 6's tool: `perflab layout`, where a function's innermost loop sits on 64-byte lines (from objdump).

Loaded by path for every `perflab` command (perflab/cli/labtools.py), so only the standard library at the
top; the lab's modules are imported inside the handler, absolutely.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(commands) -> None:
    p = commands.add_parser(
        "layout",
        help="where a function's innermost loop sits on 64-byte lines (from objdump)",
        description="Disassemble one function of an x86-64 binary with objdump, find its innermost loop, and lay "
        "its instructions out on 64-byte lines and 32-byte windows, marking each boundary the loop "
        "or its closing jump crosses.",
        examples=(
            "perflab layout build/06-loop-alignment/offset_sweep alu_loop_46",
            "perflab layout ./a.out main --json",
        ),
    )
    p.add_argument("binary", help="an x86-64 ELF binary")
    p.add_argument("function", help="the function whose innermost loop to show (a symbol objdump knows)")
    p.add_argument("--json", action="store_true", help="the loop's bytes and boundary facts as JSON")
    p.set_defaults(func=cmd_layout)


def cmd_layout(args: argparse.Namespace) -> int:
    from perflab.cli.common import print_json
    from perflab.errors import PerflabError
    from perflab.labs.loop_alignment import layout

    binary = Path(args.binary)
    if not binary.is_file():
        raise PerflabError(f"no such binary {binary}: build it first (for the lab: make -C labs/06-loop-alignment)")
    loop = layout.find_loop(layout.disassemble(binary, [args.function])[args.function])
    if args.json:
        print_json(layout.describe(loop))
    else:
        print(layout.render_lines(loop))
    return 0
