"""Lab 1's tools: `perflab c2c analyze` (the pinning advisor) and `perflab c2c heatmap`, on any latency matrix.

Loaded by path for every `perflab` command (perflab/cli/labtools.py), so only the standard library at the
top; the lab's modules are imported inside the handlers, absolutely.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

FILE_HELP = ("a core-to-core-latency CSV or a perflab matrix result (.json); empty cells, nan and null mean "
             "'not measured', and a matrix with fewer than half of its pairs measured is refused")
RECORDED = "perflab/data/c2c/amd-ryzen-9-5950x-3-40ghz-by-nephyrin.csv"


# ANCHOR: tools
def add_commands(commands) -> None:
    c2c = commands.add_parser(
        "c2c", help="core-to-core latency matrices: the pinning advisor and the heatmap",
        description="Read a core-to-core latency matrix (one you measured with `perflab run core-to-core`, or "
                    "any CSV of the core-to-core-latency tool), recover the machine's structure from it, and "
                    "draw it.",
        examples=(f"perflab c2c analyze {RECORDED}", f"perflab c2c heatmap {RECORDED} -o 5950x.png"))
    tools = c2c.add_subparsers(dest="c2c_command", required=True, metavar="TOOL", title="tools")

    p = tools.add_parser(
        "analyze", help="recover SMT siblings, clusters and sockets; recommend pinning",
        description="The pinning advisor: SMT siblings, shared-cache clusters and sockets recovered from the "
                    "latencies alone, the pairs to pin two communicating threads to, and the neighbours in CPU "
                    "numbering that are far apart.",
        examples=("perflab c2c analyze results/core-to-core/20261121T101500Z-matrix.json",
                  f"perflab c2c analyze {RECORDED} --json"))
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("--json", action="store_true", help="levels, recommended pairs and notes as JSON")
    p.set_defaults(func=cmd_analyze)

    p = tools.add_parser(
        "heatmap", help="draw a latency matrix as a heatmap PNG",
        description="Draw the matrix as a heatmap, CPUs ordered by the structure the advisor finds, each level's "
                    "groups outlined; pairs not measured are left blank.",
        examples=(f"perflab c2c heatmap {RECORDED} -o 5950x.png",))
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("-o", "--output", default="heatmap.png", help="the PNG to write (default: heatmap.png)")
    p.set_defaults(func=cmd_heatmap)
# ANCHOR_END: tools


def cmd_analyze(args: argparse.Namespace) -> int:
    from perflab.cli.common import print_json
    from perflab.labs.core_to_core.advisor import analyze, render_analysis
    from perflab.labs.core_to_core.matrix import load

    analysis = analyze(load(args.file))
    if args.json:
        print_json(analysis)
    else:
        print(render_analysis(analysis))
    return 0


def cmd_heatmap(args: argparse.Namespace) -> int:
    from perflab.labs.core_to_core.advisor import analyze
    from perflab.labs.core_to_core.figures import heatmap
    from perflab.labs.core_to_core.matrix import load

    output = writable_png(args.output)
    matrix = load(args.file)
    heatmap(matrix, analyze(matrix)).savefig(output, dpi=120, bbox_inches="tight")
    print(output)
    return 0


def writable_png(given: str) -> Path:
    """The PNG that -o names, refused before any work if it cannot be written there (a file is tried)."""
    from perflab.errors import PerflabError

    output = Path(given)
    if given.endswith("/") or output.is_dir():
        raise PerflabError(f"-o {given} is a folder; give the PNG's file name, ending in .png")
    if output.suffix.lower() != ".png":
        raise PerflabError(f"{output}: the heatmap is a PNG; give -o a name ending in .png")
    folder = output.parent.resolve()
    if not folder.is_dir():
        raise PerflabError(f"cannot write {output}: its folder {output.parent} does not exist or is not writable; "
                           "create it or choose another -o")
    try:  # access() says yes to root even in /proc and /sys: only a real file says whether one can be made
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise PerflabError(f"cannot write {output}: the folder {folder} takes no new file ({err.strerror}); "
                           "choose another -o") from None
    return output
