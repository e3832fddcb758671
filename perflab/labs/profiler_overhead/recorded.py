"""The source's numbers (perflab/data/profiler-overhead/source.json): NAS bt.B.x with no profiling and under
perf record -a at 25 kHz with each reader-thread affinity, one run each, as the patch series reports them.

One run per setting gives no interval; the ratios to the unprofiled run are what it does give.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ...paths import DATA_DIR

SOURCE = DATA_DIR / "profiler-overhead" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


# ANCHOR: replay
def replay(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each setting's time over the unprofiled run's, in both of the source's columns, as the source rounds them."""
    data = data or load()
    ratios = {run["setting"]: run["ratio"] for run in data["runs"][1:]}
    worst, best = max(ratios, key=lambda k: ratios[k][0]), min(ratios, key=lambda k: ratios[k][0])
    judgement = (f"on the source's large NUMA server, {worst} cost x{ratios[worst][0]:.2f} (x{ratios[worst][1]:.2f} "
                 f"by /usr/bin/time) and {best} x{ratios[best][0]:.2f}: where perf's reader thread runs decided "
                 "the overhead. One run per setting gives no interval; this machine's race gives one")
    return {"ratios": ratios, "judgement": judgement}
# ANCHOR_END: replay
