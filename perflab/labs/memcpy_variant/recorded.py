"""The source's numbers (perflab/data/memcpy-variant/source.json): funccount's memcpy calls per variant, one
5-second count on each system, before and after its upgrade.

One count per system gives no interval and no timing: it says which variants ran and how often, which is
what the source needed to see that the upgrade had swapped its memcpy, not how much slower each one was.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ...paths import DATA_DIR

SOURCE = DATA_DIR / "memcpy-variant" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


# ANCHOR: replay
def replay(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each system's calls per variant as shares of its total, and what one count can and cannot tell."""
    data = data or load()
    shares = {}
    for system in data["systems"]:
        total = sum(system["calls"].values())
        shares[system["name"]] = {name: calls / total for name, calls in system["calls"].items()}
    old, new = (data["systems"][i] for i in (0, 1))
    top = max(new["calls"], key=new["calls"].get)
    judgement = (f"after the upgrade (kernel {new['kernel']}, glibc {new['glibc']}) {shares['new'][top]:.0%} of the "
                 f"counted calls went to {top}, a variant the old system (glibc {old['glibc']}) never called; "
                 f"{data['slowdown_percent_about']}% slower overall, and the source found "
                 f"{data['findings'][1]}. One count per system shows which code ran, not how fast: "
                 "the lab times every variant at every size to find where the default loses")
    return {"shares": shares, "judgement": judgement}
# ANCHOR_END: replay
