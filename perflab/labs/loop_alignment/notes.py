"""The words of lab 6's notes: offsets as ranges, what a PMU would add to the timing, where the seed's numbers are."""

from __future__ import annotations

from ...probe import Machine

# Where a run that did not show the effect points: the seed's talk, replayed (recorded.py).
REPLAYED = ("what a front end that does not hide the boundary did to the seed's loop: the notebook's section 6, the "
            "chapter's 'The seed's numbers, replayed'")


def offset_ranges(offsets: list[int]) -> str:
    """[46, 47, 48, 110] -> '46-48, 110'."""
    spans: list[list[int]] = []
    for o in sorted(offsets):
        if spans and o == spans[-1][1] + 1:
            spans[-1][1] = o
        else:
            spans.append([o, o])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


def pmu_note(machine: Machine) -> str:
    """How to see the front end's uop sources: with this machine's PMU, or on bare metal."""
    if machine.value("hw_pmu"):
        return (
            "this machine has a hardware PMU: count the front end's uop sources for a slow and a fast offset with "
            "`perf stat -e idq.dsb_uops,idq.mite_uops,idq.lsd_uops -- "
            "build/06-loop-alignment/offset_sweep -o 46 -s 20` "
            "(event names differ between generations: see `perf list frontend`)"
        )
    return ("no hardware PMU here (a VM without a virtual PMU): timing only. On bare metal, `perf stat -e "
            "idq.dsb_uops,idq.mite_uops` on a slow and a fast offset shows where the uops came from")
