"""The source's stress-ng runs (perflab/data/inclusive-llc/source.json), judged as the lab judges its own.

The post gives five runs of the stress-ng victim per setup on two machines: alone, and beside an aggressor
streaming a little more than the LLC on another core. They are judged here by the rule the lab judges its own
stress-ng runs with (stress_ng.judge_rates), in one look, as those are. Five runs per arm put a floor under
Mann-Whitney's p: no five runs can be more separated than every run of one arm beyond every run of the other,
and the replay says so.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ... import stats
from ...paths import DATA_DIR
from ...sequential import MIN_KEPT, Plan
from ...verdict import ALPHA
from .run import ALONE, LAB, ROUNDS_PER_LOOK
from .stress_ng import WITH_AGGRESSOR, judge_rates

SOURCE = DATA_DIR / "inclusive-llc" / "source.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(SOURCE.read_text())


def p_floor(n_a: int, n_b: int) -> float:
    """The smallest p the lab's Mann-Whitney test can give n_a runs against n_b, whatever they measured."""
    ranks = [float(i) for i in range(n_a + n_b)]
    return stats.mann_whitney_u(ranks[:n_a], ranks[n_a:])[1]  # every run of one arm below every run of the other


def race_alpha() -> float:
    """The level each look of the lab's quick race judges at: the lab's alpha shared among its looks."""
    return Plan(ROUNDS_PER_LOOK, LAB.QUICK.rounds, LAB.QUICK.budget_s).alpha_per_look


# ANCHOR: replay
def replay(data: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Each machine's runs under the lab's rule: the victim's time per bogo op beside the aggressor against alone."""
    judged = {}
    for machine in (data or load())["machines"]:
        rates = {ALONE: machine["alone"], WITH_AGGRESSOR: machine["beside_aggressor"]}
        verdict, reason, effect = judge_rates(rates, "victim's time per bogo op, beside the aggressor vs alone")
        judged[machine["name"]] = {"machine": machine, "verdict": verdict, "reason": reason, "effect": effect,
                                   "p_floor": p_floor(len(rates[ALONE]), len(rates[WITH_AGGRESSOR]))}
    return judged
# ANCHOR_END: replay


def replay_text(data: dict[str, Any] | None = None) -> str:
    """The replay in words: each machine's verdict, then what so few runs can and cannot decide."""
    judged = replay(data)
    lines = [f"{name} ({j['machine']['cpu']}, {j['machine']['llc']} LLC): {j['verdict'].upper()} - {j['reason']}"
             for name, j in judged.items()]
    first = next(iter(judged.values()))
    runs = f"{len(first['machine']['alone'])} runs against {len(first['machine']['beside_aggressor'])}"
    lines.append(
        f"With {runs}, Mann-Whitney's p cannot go below {first['p_floor']:.2g}, however the runs fall (every run of "
        f"one setup beyond every run of the other). Judged once at {ALPHA:g}, as the lab judges its stress-ng runs, "
        f"that can decide; the lab's own race judges only from {MIN_KEPT} rounds on, and each of its looks at "
        f"{race_alpha():.2g}, which {runs} could never reach, however large the slowdown.")
    return "\n".join(lines)
