"""Lab 8, part 2: the himeno-like stencil with its arrays page-aligned against padded, raced until decided.

stencil.c allocates himeno's seven matrices the way jemalloc does (each on a
page), plus PADDING bytes per allocation, compounding. Each round runs both
arms once, in rotated order; the race stops as soon as the verdict is decided.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...build import ensure_built
from ...runner import run_records
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import Effect, judge_change
from .sweep import SOURCE_DIR

ALIGNED = "page-aligned"
# The smallest speed-up from padding worth calling the effect (the source's was x1.95).
MIN_EFFECT = 0.10


def padded(padding: int) -> str:
    """The padded arm's name."""
    return f"padded {padding} B"


def stencil_argv(binary: Path, padding: int, sweeps: int, repeats: int, cpu: int) -> list[str]:
    return [str(binary), "-p", str(padding), "-n", str(sweeps), "-s", str(repeats), "-C", str(cpu)]


def mflops_of(records: list[dict[str, Any]]) -> float:
    """One arm's value in one round: its fastest repeat's MFLOPS (higher is better). An interruption only ever
    adds time, and on a shared machine one lands in most repeats of a few milliseconds."""
    return max(r["mflops"] for r in records if r.get("type") == "sample")


# ANCHOR: decide
def decide(values: dict[str, list[float]], padding: int, alpha: float) -> tuple[str, str, Effect]:
    """Does padding each allocation speed the stencil up by at least MIN_EFFECT, at this look's error rate?"""
    return judge_change(f"padding {padding} B per allocation, against page-aligned", values[ALIGNED],
                        values[padded(padding)], MIN_EFFECT, alpha=alpha)
# ANCHOR_END: decide


def race_stencil(cpu: int, padding: int, settings, progress: bool = True) -> dict[str, Any]:
    """Race the two arms until decided; keep each arm's page offsets (from the program's layout line)."""
    binary = ensure_built(SOURCE_DIR, "stencil")
    arms = {ALIGNED: 0, padded(padding): padding}
    layouts: dict[str, dict[str, int]] = {}

    def one_round(_r: int, order: list[str]) -> dict[str, float]:
        measured = {}
        for arm in order:
            records = run_records(
                stencil_argv(binary, arms[arm], settings.stencil_sweeps, settings.stencil_repeats, cpu)
            )
            layouts[arm] = next(r["page_offsets"] for r in records if r.get("type") == "layout")
            measured[arm] = mflops_of(records)
        return measured

    plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
    raced = race(list(arms), one_round, lambda values, alpha: decide(values, padding, alpha)[0] in DECIDED, plan,
                 control=padded(padding), desc="stencil: page-aligned vs padded, until decided", progress=progress)
    return {"padding": padding, "race": raced.to_json(), "page_offsets": layouts}


def layout_note(page_offsets: dict[str, dict[str, int]]) -> str:
    """Where each arm's matrices start in their pages: what the loads and stores compare."""
    shown = "; ".join(f"{arm}: " + ", ".join(f"{name} +{offset}" for name, offset in offsets.items())
                      for arm, offsets in page_offsets.items())
    return f"the matrices' offsets in their pages ({shown})"


def kept(result: dict[str, Any]) -> tuple[Race, dict[str, list[float]]]:
    raced = Race.from_json(result["stencil"]["race"])
    return raced, raced.kept_values()
