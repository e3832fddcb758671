"""The source's numbers (perflab/data/4k-aliasing/source.json), as its blog post reports them.

The post gives one run per padding (and a range over 96 to 512 bytes), not
repeated runs, so the lab's race cannot be replayed on them: this module
computes what one run per arm does allow (the speed-up, the padded runs'
spread among themselves, the alias events' ratio) and says what it does not.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ...paths import DATA_DIR
from .stencil import MIN_EFFECT

SOURCE = DATA_DIR / "4k-aliasing" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


def padded_mflops(data: dict[str, Any] | None = None) -> list[float]:
    """Every padded number the post gives: the 64-byte run and the two ends of the 96-512 range."""
    data = data or load()
    return [run["mflops"] for run in data["runs"] if run["padding_bytes"]] + list(data["range"]["mflops"])


# ANCHOR: replay
def replay(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The source's table under the lab's rule, as far as one run per padding allows."""
    data = data or load()
    aligned = next(run["mflops"] for run in data["runs"] if run["padding_bytes"] == 0)
    padded = padded_mflops(data)
    low, high = min(padded) / aligned - 1, max(padded) / aligned - 1
    spread = max(padded) / min(padded) - 1
    events = data["alias_events"]
    fewer = (events["no_padding"] / events["padded_about"][1], events["no_padding"] / events["padded_about"][0])
    judgement = (f"padding sped himeno up by {low:+.0%} to {high:+.0%}, {low / MIN_EFFECT:.0f} times the "
                 f"lab's {MIN_EFFECT:.0%}, while the padded runs differ by {spread:.1%} among themselves; but one "
                 "run of the page-aligned arm gives no interval and no test, so the lab's race would measure "
                 f"more before it decided. Without padding the PMU counted x{fewer[0]:.1f} to x{fewer[1]:.1f} "
                 f"the {events['event']} events: the same mechanism the lab times")
    return {"aligned": aligned, "padded": padded, "speedup": (low, high), "padded_spread": spread,
            "events_ratio": fewer, "judgement": judgement}
# ANCHOR_END: replay
