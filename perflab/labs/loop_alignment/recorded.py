"""The seed's talk, in numbers (perflab/data/loop-alignment/source.json): two times and three VTune shares.

The talk gives one time for each of two builds and one front-end-bound share (or a range) for each of three,
no repeated runs: no spread, so no interval and no test can be computed, and the lab's rule cannot be applied.
The replay computes what the numbers do allow (the times' ratio; the shares beside each build's layout) and says
what they do not establish. Nothing here is interpolated between them.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ...paths import DATA_DIR
from .run import MIN_EFFECT

SOURCE = DATA_DIR / "loop-alignment" / "source.json"
OLD_BUILD, SLOW_BUILD, ALIGNED_BUILD = "GCC 4.8.5", "GCC 8.5.0", "GCC 8.5.0, loop aligned"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


def builds(data: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The talk's builds by name."""
    return {build["name"]: build for build in (data or load())["builds"]}


def share_text(low: float, high: float) -> str:
    """A share as the talk gives it: '14.4%', or '45.2-50.3%' for a range."""
    return f"{low:g}%" if low == high else f"{low:g}-{high:g}%"


# ANCHOR: replay
def replay(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The talk's numbers as far as one run per build allows: the times' ratio, and each build's share."""
    found = builds(data)
    seconds = {name: build["seconds"] for name, build in found.items() if "seconds" in build}
    ratio = seconds[SLOW_BUILD] / seconds[OLD_BUILD]
    shares = {name: tuple(build["front_end_bound_percent"]) for name, build in found.items()}
    said = {name: share_text(*share) for name, share in shares.items()}
    judgement = (f"{SLOW_BUILD}'s loop took x{ratio:.2f} the time of {OLD_BUILD}'s ({seconds[SLOW_BUILD]} s against "
                 f"{seconds[OLD_BUILD]} s), past the lab's {MIN_EFFECT:.0%}; but one run per build has no spread, "
                 "so no interval and no test: the lab's race would time each build many times before it decided. "
                 f"VTune's front-end-bound share of slots: {said[OLD_BUILD]} for {OLD_BUILD}, {said[SLOW_BUILD]} for "
                 f"{SLOW_BUILD} with the loop across a 64-byte line, {said[ALIGNED_BUILD]} for the same compiler with "
                 "the loop aligned. The share moves with where the loop sits: that is the mechanism's evidence, not "
                 "a measure of how much slower the loop runs")
    return {"seconds": seconds, "ratio": ratio, "front_end_bound": shares,
            "layouts": {name: build["layout"] for name, build in found.items()}, "judgement": judgement}
# ANCHOR_END: replay
