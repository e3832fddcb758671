"""shared_global.c, run from Python: its arms, one run's value, and where first touch put its page."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ... import stats
from ...build import ensure_built
from ...errors import PerflabError
from ...lock import measurement_lock
from ...runner import run_records

SOURCE_DIR = "labs/05-numa-static-data"
ARMS = ("none", "read", "write", "check", "padded")  # what each thread does with the global, see the C file
FIT_KS = (1, 8)  # the two write rates (one touch every K operations) the cost per shared write is fitted from


@dataclass(frozen=True)
class Settings:
    """How much to measure: rounds of every arm in rotated order, racing until decided."""

    rounds_per_look: int
    max_rounds: int
    budget_s: float
    ops: int  # operations per thread per repeat
    repeats: int  # repeats per run; the first is a warm-up


def binary() -> Path:
    return ensure_built(SOURCE_DIR, "shared_global")


def program_argv(program: Path, cpus: list[int], arm: str, k: int, settings: Settings, move_to: int | None = None,
                 launcher: tuple[str, ...] = ()) -> list[str]:
    argv = [*launcher, str(program), "-c", ",".join(map(str, cpus)), "-a", arm, "-k", str(k),
            "-n", str(settings.ops), "-r", str(settings.repeats)]
    return argv + (["-m", str(move_to)] if move_to is not None else [])


def run_arm(program: Path, cpus: list[int], arm: str, k: int, settings: Settings) -> dict[str, Any]:
    """One run: its samples, and its value, machine-wide million operations per second over the timed repeats."""
    records = run_records(program_argv(program, cpus, arm, k, settings))
    samples = [r for r in records if r.get("type") == "sample"]
    timed = samples[1:] or samples  # the first repeat warms caches and wakes the CPUs
    ns_per_op = stats.median([s["ns_per_op"] for s in timed])
    return {"arm": arm, "k": k, "ns_per_op": ns_per_op, "mops": len(cpus) * 1000 / ns_per_op,
            "samples": samples}


def write_costs(cpus: list[int], ks: Sequence[int], rounds: int, ops: int, repeats: int) -> dict[int, list[float]]:
    """ns per operation per thread of the write arm at one write every K operations, for each K: one value per
    run (see run_arm), `rounds` runs of each K in rotated order, so that a drift of the machine hits every K."""
    one_run = Settings(rounds_per_look=1, max_rounds=1, budget_s=0, ops=ops, repeats=repeats)  # no race: one run
    program = binary()
    costs: dict[int, list[float]] = {k: [] for k in ks}
    with measurement_lock("perflab numa-static-data: write costs"):
        for r in range(rounds):
            for k in [*ks[r % len(ks):], *ks[:r % len(ks)]]:
                costs[k].append(run_arm(program, cpus, "write", k, one_run)["ns_per_op"])
    return costs


# ---------------------------------------------------------------- placement: where first touch puts .bss

def launches(node_cpus: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Four launches of the program, each with the node its global's page should end on, and why."""
    (home, home_cpus), (far, far_cpus) = sorted(node_cpus.items())[:2]
    on_far = ("taskset", "-c", str(far_cpus[0]))
    return [
        {"name": f"pinned to node {home}", "launcher": ("taskset", "-c", str(home_cpus[0])), "move_to": None,
         "expected": home, "why": "first touch: the page comes from the node of the CPU that touched it first"},
        {"name": f"pinned to node {far}", "launcher": on_far, "move_to": None, "expected": far,
         "why": "first touch, from the other node's CPU"},
        {"name": f"pinned to node {far}, numactl --membind {home}", "move_to": None, "expected": home,
         "launcher": ("numactl", f"--membind={home}", *on_far),
         "why": "a memory policy overrides first touch"},
        {"name": f"pinned to node {far}, then mbind to node {home}", "launcher": on_far, "move_to": home,
         "expected": home, "why": "mbind(MPOL_MF_MOVE) migrates a page that is already there"},
    ]


def measure_placement(program: Path, node_cpus: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Run every launch (a short run, two threads on the launch's CPU) and read back the page's node."""
    for tool in ("taskset", "numactl"):
        if not shutil.which(tool):
            raise PerflabError(f"{tool} is missing: run `make lab` (it installs util-linux and numactl)")
    tiny = Settings(1, 1, 1, ops=1000, repeats=1)
    placed = []
    for launch in launches(node_cpus):
        cpu = int(launch["launcher"][-1])
        records = run_records(program_argv(program, [cpu, cpu], "none", 1, tiny, launch["move_to"],
                                           launch["launcher"]))
        placement = next(r for r in records if r.get("type") == "placement")
        placed.append({**launch, "launcher": list(launch["launcher"]), **placement})
    return placed
