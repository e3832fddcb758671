"""Calls of a shared library's functions by one program, counted per function with bpftrace's uprobes.

glibc picks one of several implementations of memcpy (its IFUNC variants) when a program loads; which one
ran is read here by putting a uprobe on every variant and counting the calls of the one program that bpftrace
starts (`-c`, filtered on `cpid`: the library is probed machine-wide, and bpftrace itself calls memcpy).
The variants are local symbols, in the library's debug file only (Debian's libc6-dbg): without it the
pattern matches nothing and `count_calls` says so. bpftrace detaches its uprobes through tracefs, which the
journal mounts when it is not, and unmounts when the run ends.
"""

from __future__ import annotations

import json
import shutil

from . import processes
from .errors import PerflabError
from .journal import SystemChanges
from .tracing import tracefs_folder

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def bpftrace_program(library: str, pattern: str) -> str:
    """Count each matching function's calls by bpftrace's child only."""
    return f"uprobe:{library}:{pattern} /pid == cpid/ {{ @[probe] = count(); }}"


def bpftrace_error(stderr: str) -> str:
    """Why bpftrace failed, from its stderr: its first line but the warning bpftrace 0.17 prints that it cannot
    raise RLIMIT_MEMLOCK, even when it then attaches (not the reason)."""
    return next((line for line in stderr.splitlines() if "RLIMIT_MEMLOCK" not in line), "no reason given")


def parse_counts(output: str, library: str) -> dict[str, int]:
    """function -> calls, from bpftrace's `-f json` lines (one map line at exit; none when nothing was called)."""
    prefix = f"uprobe:{library}:"
    counts: dict[str, int] = {}
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if record.get("type") == "map":
            counts.update({probe.removeprefix(prefix): int(n) for probe, n in record["data"]["@"].items()})
    return counts


def count_calls(argv: list[str], changes: SystemChanges, *, library: str = LIBC, pattern: str = "__memcpy_*",
                timeout: float = 60.0, env: dict[str, str] | None = None) -> dict[str, int]:
    """Run argv under bpftrace and return function -> calls for each function matching `pattern` it called.
    `env`: bpftrace's environment, and so the program's (default: this process's).

    Raises PerflabError with the reason when bpftrace is missing, cannot attach or finds no such function."""
    if shutil.which("bpftrace") is None:
        raise PerflabError("bpftrace is not installed (Debian: apt install bpftrace)")
    if any(" " in arg for arg in argv):
        raise PerflabError(f"bpftrace's -c splits its command on spaces, so no argument may hold one: {argv}")
    tracefs_folder(changes, changes.root)
    command = " ".join(argv)
    done = processes.run(["bpftrace", "-f", "json", "-e", bpftrace_program(library, pattern), "-c", command],
                         timeout=timeout, env=env)
    if "No probes to attach" in done.stdout + done.stderr:
        raise PerflabError(f"no function of {library} matches {pattern}: its debug symbols are missing "
                           "(Debian: apt install libc6-dbg)")
    if done.returncode != 0:
        raise PerflabError(f"bpftrace could not count {pattern} in {library}: {bpftrace_error(done.stderr)}")
    return parse_counts(done.stdout, library)
