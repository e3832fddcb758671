"""perf record -g on the software clock, and its stacks folded: what a flame graph draws.

`perf record -e cpu-clock --call-graph dwarf` needs no hardware PMU (it works
in a VM without one) and walks the stack from DWARF's unwind tables, so a
function that keeps no frame pointer (GCC 12 at -O2 drops it even in leaf
functions built with -mno-omit-leaf-frame-pointer) still shows its caller.
As root perf sees the kernel too; an unprivileged user at
perf_event_paranoid 2 may profile their own programs, in user space only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ... import processes
from ...errors import PerflabError
from ...paths import scratch

FREQUENCY = 999  # samples per second: prime-ish, so it does not beat with periodic work
STACK_BYTES = 4096  # of stack copied per sample for DWARF unwinding: the lab's stacks are shallow


# ANCHOR: fold
def fold(script: str) -> dict[str, int]:
    """`perf script -F comm,ip,sym` output -> {"main;expire_quadratic;bit_ffs_at": samples}, root first.

    perf prints one block per sample, a header line then one frame per line, the leaf first. Frames perf
    cannot name are "[unknown]"; " (inlined)" marks a function inlined into its caller, which keeps its name.
    """
    folded: dict[str, int] = {}
    for block in script.strip().split("\n\n"):
        frames = [line.split(None, 1) for line in block.splitlines()[1:] if line.strip()]
        names = [f[1].removesuffix(" (inlined)") if len(f) > 1 else "[unknown]" for f in frames]
        if names:
            stack = ";".join(reversed(names))
            folded[stack] = folded.get(stack, 0) + 1
    return folded
# ANCHOR_END: fold


def share(folded: dict[str, int], function: str) -> float:
    """The share of samples with `function` anywhere on the stack (itself or what it called)."""
    total = sum(folded.values())
    return sum(c for stack, c in folded.items() if function in stack.split(";")) / total if total else 0.0


def self_share(folded: dict[str, int], function: str) -> float:
    """The share of samples taken in `function` itself: the top of the stack."""
    total = sum(folded.values())
    return sum(c for stack, c in folded.items() if stack.split(";")[-1] == function) / total if total else 0.0


def hottest(folded: dict[str, int]) -> tuple[str, float]:
    """The function on top of the most samples, and its share."""
    tops: dict[str, int] = {}
    for stack, count in folded.items():
        tops[stack.split(";")[-1]] = tops.get(stack.split(";")[-1], 0) + count
    top = max(tops, key=tops.get)
    return top, tops[top] / sum(tops.values())


def require_perf() -> None:
    if shutil.which("perf") is None:
        raise PerflabError("perf is missing: run `make lab` (it installs Debian's linux-perf)")


def record(argv: list[str]) -> dict[str, int]:
    """Run argv under `perf record -g` on the software clock; its folded stacks."""
    require_perf()
    with scratch("perf") as folder:
        data = Path(folder) / "perf.data"
        recorded = processes.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQUENCY),
                                  "--call-graph", f"dwarf,{STACK_BYTES}", "-o", str(data), "--", *argv])
        if recorded.returncode != 0:
            last = (recorded.stderr.strip().splitlines() or ["no message"])[-1]
            raise PerflabError(f"perf record failed: {last}; a user may profile their own programs at "
                               "perf_event_paranoid 2 or lower (`sysctl kernel.perf_event_paranoid`)")
        script = processes.run(["perf", "script", "-i", str(data), "-F", "comm,ip,sym"])
    if script.returncode != 0:
        raise PerflabError(f"perf script failed: {(script.stderr.strip().splitlines() or ['no message'])[-1]}")
    return fold(script.stdout)
