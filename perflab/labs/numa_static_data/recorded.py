"""The source's numbers (perflab/data/numa-static-data/source.json), as its article reports them.

The article gives a few numbers, not runs: the two modes' rates and IPC, the
core count where slow runs stop scaling, and the model that explains the cap.
Nothing here is interpolated between them.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ...paths import DATA_DIR

SOURCE = DATA_DIR / "numa-static-data" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


def source_cap(data: dict[str, Any] | None = None) -> float:
    """Queries per second one remotely homed line allows: the article's model, recomputed."""
    model = (data or load())["model"]
    seconds_per_write = model["cycles_per_remote_write"] / (model["ghz"] * 1e9)
    return 1 / (seconds_per_write * model["writes_per_query"])


def slow_fraction(data: dict[str, Any] | None = None) -> tuple[float, float]:
    """A slow run's rate per shard as a fraction of a fast run's, over the fast runs' reported range."""
    runs = (data or load())["runs"]
    low, high = runs["fast"]["writes_per_s_per_shard"]
    slow = runs["slow"]["writes_per_s_per_shard"]
    return slow / high, slow / low
