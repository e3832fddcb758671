"""Lab 8, part 1: one store->load loop, timed at many distances between its two arrays modulo 4 KiB.

alias_sweep.c runs copy-scale (dst[i] = k * src[i]) with dst a chosen number of
bytes ahead of src modulo 4096 (behind, when negative), scalar and vectorised.
This module runs it in rounds, every distance once per round in an order the
round rotates, and says which distances are slow against the control: dst
half a page from src, as far from every store in flight as 4 KiB allows.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import stats
from ...build import ensure_built
from ...errors import PerflabError
from ...runner import run_once
from ...verdict import ALPHA

SOURCE_DIR = "labs/08-4k-aliasing"
KERNELS = {"scalar": 8, "vector": 32}  # bytes per load and per store
CONTROL = -2048  # half a page: the same as +2048 modulo 4096
NEAR = 256  # every access width from -NEAR to +NEAR bytes, where a store still in flight can be
# A distance is slow when its median is this much above the control's, significantly.
SWEEP_MIN_EFFECT = 0.05


def distances(width: int) -> list[int]:
    """Every `width` bytes from -NEAR to +NEAR, then every NEAR bytes around the rest of the page."""
    return sorted(set(range(-NEAR, NEAR + 1, width)) | set(range(CONTROL, -CONTROL, NEAR)))


def sweep_argv(binary: Path, kernel: str, repeats: int, rotation: int, cpu: int) -> list[str]:
    """One round per process: every distance of the kernel once, in an order rotated by `rotation`."""
    return [str(binary), "-k", kernel, "-d", ",".join(map(str, distances(KERNELS[kernel]))), "-n", str(repeats),
            "-r", str(rotation), "-C", str(cpu)]


def measure_sweep(cpu: int, rounds: int, repeats: int, progress: bool = True) -> dict[str, Any]:
    """Both kernels, round by round (their order alternating), every visit's sample kept; a kernel this CPU
    cannot run (no AVX) is left out with a note."""
    binary = ensure_built(SOURCE_DIR, "alias_sweep")
    kernels, samples, notes, meta = list(KERNELS), [], [], {}
    for r in tqdm(range(rounds), desc="store->load loop, every distance", disable=not progress, file=sys.stderr,
                  leave=False):
        for kernel in kernels[r % 2:] + kernels[:r % 2]:
            try:
                meta, found = run_once(sweep_argv(binary, kernel, repeats, r, cpu))
            except PerflabError as err:  # the program says why in one line, e.g. no AVX for the vector loop
                kernels.remove(kernel)
                notes.append(f"the {kernel} loop was left out: {err}")
                continue
            samples += [dict(s, round=r) for s in found]
    return {"meta": meta, "samples": samples, "notes": notes}


def by_distance(samples: list[dict[str, Any]], kernel: str) -> dict[int, list[float]]:
    """ns per element at each distance, for one kernel, in distance order."""
    found: dict[int, list[float]] = {}
    for s in samples:
        if s["kernel"] == kernel:
            found.setdefault(s["distance"], []).append(s["ns_per_element"])
    return dict(sorted(found.items()))


# ANCHOR: classify
def classify(timings: dict[int, list[float]], min_effect: float = SWEEP_MIN_EFFECT) -> dict[str, Any]:
    """Which distances are slow: each against the control, half a page away.

    A distance is slow when its median is at least `min_effect` above the
    control's and Mann-Whitney U says so at ALPHA divided by the number of
    distances compared (Bonferroni: eighty tests must not find a slow
    distance by chance).
    """
    control = timings[CONTROL]
    base = stats.median(control)
    ratios = {d: stats.median(values) / base for d, values in timings.items()}
    threshold = ALPHA / (len(timings) - 1)
    slow = [d for d, values in timings.items() if d != CONTROL and ratios[d] >= 1 + min_effect
            and stats.mann_whitney_u(control, values)[1] < threshold]
    return {"control_ns": base, "ratios": {str(d): r for d, r in ratios.items()}, "slow": slow,
            "slowest": max(ratios, key=ratios.get)}
# ANCHOR_END: classify


def ranges(values: list[int], step: int) -> str:
    """[8, 16, 24, 64] with step 8 -> '+8..+24, +64'."""
    spans: list[list[int]] = []
    for v in sorted(values):
        if spans and v == spans[-1][1] + step:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(f"{a:+d}" if a == b else f"{a:+d}..{b:+d}" for a, b in spans) or "none"


def findings(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The classification of every kernel that was measured."""
    kernels = [k for k in KERNELS if any(s["kernel"] == k for s in samples)]
    return {kernel: classify(by_distance(samples, kernel)) for kernel in kernels}


def finding_note(kernel: str, found: dict[str, Any]) -> str:
    """One line per kernel for the verdict's notes."""
    slowest = found["slowest"]
    return (f"{kernel} loop ({KERNELS[kernel]}-byte accesses): slow distances (dst ahead of src, bytes mod 4096; "
            f">= {SWEEP_MIN_EFFECT:.0%} above the control at {CONTROL:+d}, significant): "
            f"{ranges(found['slow'], KERNELS[kernel])}; slowest {slowest:+d} at x{found['ratios'][str(slowest)]:.2f} "
            f"the control's {found['control_ns']:.3f} ns per element")
