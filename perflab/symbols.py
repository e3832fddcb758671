"""The names of a shared library's function at an offset, from the library's debug symbols.

glibc's memcpy variants are local symbols: the library itself carries only the
exported `memcpy`, whose IFUNC resolver picks a variant when a program loads.
Their names are in the debug file (Debian's libc6-dbg), which sits under
/usr/lib/debug/.build-id/ named by the library's build ID; `nm` reads it. A
program can report where its memcpy resolved to (dladdr), and this names it
where bpftrace's uprobes cannot count calls.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from . import processes
from .errors import PerflabError

DEBUG_ROOT = Path("/usr/lib/debug/.build-id")


def build_id(library: str) -> str:
    """The library's GNU build ID, from its notes."""
    done = processes.run(["readelf", "-n", library], timeout=30)
    found = re.search(r"Build ID: ([0-9a-f]+)", done.stdout)
    if done.returncode != 0 or not found:
        raise PerflabError(f"cannot read {library}'s build ID: {done.stderr.strip() or 'readelf found none'}")
    return found.group(1)


def debug_file(library: str, root: Path = DEBUG_ROOT) -> Path:
    """Where the library's debug symbols are, or PerflabError saying what installs them."""
    identity = build_id(library)
    path = root / identity[:2] / f"{identity[2:]}.debug"
    if not path.is_file():
        raise PerflabError(f"{library} has no debug symbols at {path} (Debian: apt install libc6-dbg for glibc)")
    return path


def parse_nm(text: str) -> dict[int, list[str]]:
    """offset -> the names of the functions (text symbols, local or global) that start there, sorted."""
    names: dict[int, list[str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            names.setdefault(int(parts[0], 16), []).append(parts[2])
    return {offset: sorted(found) for offset, found in names.items()}


@cache
def functions(library: str) -> dict[int, list[str]]:
    """The library's functions by offset, from its debug file."""
    path = debug_file(library)
    done = processes.run(["nm", str(path)], timeout=60)
    if done.returncode != 0:
        raise PerflabError(f"nm cannot read {path}: {done.stderr.strip()}")
    return parse_nm(done.stdout)


def name_at(library: str, offset: int, prefix: str = "") -> str:
    """The name, starting with `prefix`, of the library's function at `offset` (glibc gives one variant two
    names, __memcpy_x and __memmove_x); PerflabError when none is there."""
    names = [name for name in functions(library).get(offset, []) if name.startswith(prefix)]
    if not names:
        raise PerflabError(f"no function{' ' + prefix + '*' if prefix else ''} starts at {library}+{offset:#x}")
    return names[0]
