"""Lab 9's programs, driven: the lookup sweep (part 1) and the rounds that time lookups and expiry passes (part 2).

Both programs visit their configurations in an order rotated by the round
number, and print one JSON line per visit (labs/09-hidden-quadratic/*.c).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import stats
from ...build import ensure_built
from ...runner import run_once

SOURCE_DIR = "labs/09-hidden-quadratic"
STRUCTURES = ("linear", "binary", "tree", "list")
LOOKUP_SIZES = tuple(2 ** k for k in range(2, 15))  # 4 to 16,384 keys
SMALL_N = 16  # where the race asks whether the O(n) scan beats the O(log n) search: fixed before measuring
FLOW_SIZES = (1024, 4096, 16384, 65536)  # the expiry pass's table sizes, four steps of x4
VERSIONS = ("quadratic", "fixed")


def lookup_argv(binary: Path, sizes: tuple[int, ...], structures: tuple[str, ...], visit_ms: float, rotation: int,
                cpu: int) -> list[str]:
    return [str(binary), "-s", ",".join(map(str, sizes)), "-k", ",".join(structures),
            "-t", str(int(visit_ms * 1e6)), "-r", str(rotation), "-C", str(cpu)]


def flows_argv(binary: Path, sizes: tuple[int, ...], versions: tuple[str, ...], visit_ms: float, rotation: int,
               cpu: int) -> list[str]:
    return [str(binary), "-n", ",".join(map(str, sizes)), "-v", ",".join(versions),
            "-t", str(int(visit_ms * 1e6)), "-r", str(rotation), "-C", str(cpu)]


def sweep_lookups(cpu: int, rounds: int, visit_ms: float, progress: bool = True) -> list[dict[str, Any]]:
    """Every structure at every size, one process per round, each visiting them in a rotated order."""
    binary = ensure_built(SOURCE_DIR, "lookup")
    samples: list[dict[str, Any]] = []
    for r in tqdm(range(rounds), desc="lookups: 4 ways, 13 sizes", disable=not progress, file=sys.stderr, leave=False):
        _, found = run_once(lookup_argv(binary, LOOKUP_SIZES, STRUCTURES, visit_ms, r, cpu))
        samples += [{"structure": s["structure"], "n": s["n"], "ns_per_lookup": s["ns_per_lookup"], "round": r}
                    for s in found]
    return samples


def lookup_medians(samples: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """{structure: {n: median ns per lookup over the rounds}}."""
    by: dict[str, dict[int, list[float]]] = {}
    for s in samples:
        by.setdefault(s["structure"], {}).setdefault(s["n"], []).append(s["ns_per_lookup"])
    return {k: {n: stats.median(v) for n, v in sorted(sizes.items())} for k, sizes in by.items()}


def crossover(sizes: list[int], linear: list[float], binary: list[float]) -> int | None:
    """The smallest size from which binary search is faster than the linear scan, at it and at every larger size;
    None if the scan is still faster at the largest size."""
    found = None
    for n, scan, search in sorted(zip(sizes, linear, binary), reverse=True):
        if search >= scan:
            break
        found = n
    return found


def arm(kind: str, n: int) -> str:
    """A race arm's name: 'linear n=16', 'quadratic n=65536'."""
    return f"{kind} n={n}"


ARMS = (arm("linear", SMALL_N), arm("binary", SMALL_N), *(arm(v, n) for v in VERSIONS for n in FLOW_SIZES))


def round_runner(cpu: int, visit_ms: float):
    """measure_round(r, order) for perflab.sequential.race: both programs once, in an order that alternates by
    round, each rotating its own visits; returns the time of every arm (ns per lookup, ns per expiry pass)."""
    lookup, flows = ensure_built(SOURCE_DIR, "lookup"), ensure_built(SOURCE_DIR, "flows")

    def lookups(r: int) -> dict[str, float]:
        found = run_once(lookup_argv(lookup, (SMALL_N,), ("linear", "binary"), visit_ms, r, cpu))[1]
        return {arm(s["structure"], s["n"]): s["ns_per_lookup"] for s in found}

    def passes(r: int) -> dict[str, float]:
        found = run_once(flows_argv(flows, FLOW_SIZES, VERSIONS, visit_ms, r, cpu))[1]
        return {arm(s["version"], s["n"]): s["ns_per_pass"] for s in found}

    def measure_round(r: int, _order: list[str]) -> dict[str, float]:  # the programs rotate their own visits
        first, second = (lookups, passes) if r % 2 == 0 else (passes, lookups)
        return {**first(r), **second(r)}

    return measure_round


def flows_profile_argv(version: str, n: int, seconds: float, cpu: int) -> list[str]:
    """One version's expiry pass, repeated for `seconds`, for perf to sample."""
    return flows_argv(ensure_built(SOURCE_DIR, "flows"), (n,), (version,), seconds * 1e3, 0, cpu)
