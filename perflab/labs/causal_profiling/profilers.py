"""Lab 7's two profilers, run for real: perf ranks functions by samples, coz measures causal impact.

Both point into commit.c, so this module also reads the source: which
function a line belongs to, and each function's one line of work.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from ... import processes
from ...errors import PerflabError
from . import coz

SOURCE_DIR = "labs/07-causal-profiling"
SOURCE_NAME = "commit.c"
FUNCTIONS = ("parse_records", "build_index", "checksum_batch", "compress_log")  # commit.c's, one line of work each
PERF_FREQUENCY = 997  # samples per second; prime, so it does not beat with periodic work


def require_tools() -> None:
    for tool, package in (("coz", "coz-profiler"), ("perf", "linux-perf")):
        if shutil.which(tool) is None:
            raise PerflabError(f"{tool} is missing: run `make lab` (it installs Debian's {package})")


# ANCHOR: lines
DEFINITION = re.compile(r"^(?!#)\S.*?\b(\w+)\([^;]*\)\s*$")  # a function definition's first line (not a macro)


def function_of_line(source: str, line: int) -> str | None:
    """The function whose body holds `line` (1-based), from the definitions above it."""
    for code in reversed(source.splitlines()[:line]):
        found = DEFINITION.match(code)
        if found:
            return found.group(1)
    return None


def function_at(source: str, location: str) -> str | None:
    """The commit.c function a coz location (FILE:LINE) falls in; None for other files."""
    file, _, line = coz.short_location(location).rpartition(":")
    return function_of_line(source, int(line)) if file == SOURCE_NAME else None


def work_lines(source: str) -> dict[str, int]:
    """Each function's WORK(...) line: the one line coz can point to."""
    lines: dict[str, int] = {}
    for number, code in enumerate(source.splitlines(), 1):
        if code.lstrip().startswith("WORK("):
            lines[function_of_line(source, number)] = number
    return lines
# ANCHOR_END: lines


def parse_perf_report(text: str) -> list[dict[str, Any]]:
    """`perf report -F overhead,sym --field-separator=,` lines -> [{symbol, share, kernel}], largest first."""
    ranking = []
    for line in text.splitlines():
        share, sep, symbol = line.partition(",")
        if not sep or not share.strip().endswith("%"):
            continue
        kind, _, name = symbol.strip().partition(" ")
        ranking.append({"symbol": name.strip(), "share": float(share.strip().rstrip("%")) / 100,
                        "kernel": kind == "[k]"})
    return sorted(ranking, key=lambda r: -r["share"])


def perf_ranking(argv: list[str], folder: Path) -> list[dict[str, Any]]:
    """Sample on the software task-clock (no hardware PMU needed) and rank symbols by samples."""
    data = folder / "perf.data"
    recorded = processes.run(["perf", "record", "-q", "-e", "task-clock", "-F", str(PERF_FREQUENCY),
                              "-o", str(data), "--", *argv])
    if recorded.returncode != 0:
        last = (recorded.stderr.strip().splitlines() or ["no message"])[-1]
        raise PerflabError(f"perf record failed: {last}; as root, or after `sysctl kernel.perf_event_paranoid=1`, it "
                           "can sample")
    report = processes.run(["perf", "report", "-i", str(data), "--stdio", "-q", "--no-children",
                            "-F", "overhead,sym", "--field-separator=,"])
    return parse_perf_report(report.stdout)


def hottest_function(ranking: list[dict[str, Any]]) -> str | None:
    """perf's first choice among the functions the lab can optimise (None: perf saw none of them)."""
    return next((r["symbol"] for r in ranking if r["symbol"] in FUNCTIONS), None)


# ANCHOR: coz_run
def coz_run(argv: list[str], output: Path, seconds: float, bar: tqdm, fixed_line: str | None = None) -> str:
    """One `coz run` of the program, over every line or one; returns the profile's text.

    The bar moves with the clock: coz says nothing until the end.
    """
    output.unlink(missing_ok=True)
    focus = ["--fixed-line", fixed_line] if fixed_line else []
    process = processes.start(["coz", "run", *focus, "-o", str(output), "---", *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        start = time.monotonic()
        while process.poll() is None:
            time.sleep(0.25)
            if time.monotonic() - start > 3 * seconds + 30:
                raise PerflabError(f"coz ran for over {3 * seconds + 30:.0f} s on a {seconds:.0f} s program and was "
                                   "stopped: is a CPU overloaded?")
            bar.n = min(bar.total, bar.n + 0.25)
            bar.refresh()
        if process.returncode != 0:
            last = (process.stderr.read().strip().splitlines() or [f"exit code {process.returncode}"])[-1]
            raise PerflabError(f"coz run failed: {last}; check that the program was built with -gdwarf-3 "
                               f"(`make -C {SOURCE_DIR}`)")
    finally:
        processes.stop(process, signal.SIGINT)
    return output.read_text()
# ANCHOR_END: coz_run


class CozSession:
    """Every coz run of one lab run, under one progress bar; the profiles' texts, one after another."""

    def __init__(self, argv_for: Callable[[float], list[str]], folder: Path, total_seconds: float, progress: bool):
        self.argv_for, self.folder, self.text = argv_for, folder, ""
        self.bar = tqdm(total=total_seconds, desc="coz", disable=not progress, file=sys.stderr, leave=False,
                        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s of coz")

    def run(self, seconds: float, fixed_line: str | None = None) -> coz.Profile:
        """One more run; returns the pooled profile of all runs so far."""
        start = self.bar.n
        output = self.folder / f"coz-{self.text.count('startup')}.coz"
        self.text += coz_run(self.argv_for(seconds), output, seconds, self.bar, fixed_line)
        self.bar.n = start + seconds
        self.bar.refresh()
        return coz.parse(self.text)

    def close(self) -> None:
        self.bar.close()
