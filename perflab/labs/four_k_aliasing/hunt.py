"""Lab 8's hunt: the PMU event that counts 4 KiB aliasing, where this machine has one, on both stencil arms.

Intel's cores count the loads a false match on address bits 11:0 blocked:
LD_BLOCKS_PARTIAL.ADDRESS_ALIAS (the source's event) in older cores' event
lists, LD_BLOCKS.ADDRESS_ALIAS in newer ones. The probe says whether a
hardware PMU is here at all and whose cores these are; perf says which of the
names it knows. Without one, the lab times only, and says so.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

from ... import processes
from ...build import ensure_built
from ...probe import Machine
from ...runner import BENCH_TIMEOUT_S
from .stencil import ALIGNED, padded, stencil_argv
from .sweep import SOURCE_DIR

EVENTS = ("ld_blocks_partial.address_alias", "ld_blocks.address_alias")
NO_PMU = ("no hardware PMU here (a VM without a virtual PMU): timing only. Where there is one, on an Intel core, "
          "`perf stat -e ld_blocks_partial.address_alias` (ld_blocks.address_alias on newer cores) counts the "
          "loads that a false match held back")


def listed_events() -> str:
    """Every event name perf knows here, space-separated ('' without perf)."""
    if shutil.which("perf") is None:
        return ""
    return processes.run(["perf", "list", "--raw-dump"], timeout=60).stdout


# ANCHOR: event
def alias_event(machine: Machine, listed: str | None = None) -> tuple[str | None, str]:
    """The event that counts 4 KiB aliasing here, or None; and a sentence saying which and why."""
    if not machine.value("hw_pmu"):
        return None, NO_PMU
    vendor = machine.value("vendor")
    if vendor != "GenuineIntel":
        return None, (f"a hardware PMU, but {vendor or 'an unknown vendor'}'s cores have no event for 4 KiB aliasing "
                      "that this lab knows: timing only")
    names = (listed_events() if listed is None else listed).split()
    for event in EVENTS:
        if event in names:
            return event, f"perf counts {event} here: the loads a false match on address bits 11:0 held back"
    return None, f"perf knows neither {' nor '.join(EVENTS)} on this Intel core (`perf list`): timing only"
# ANCHOR_END: event


def parse_perf_stat(text: str, event: str) -> int | None:
    """The count of `event` from `perf stat -x,` output (value,unit,event,...); None if not counted."""
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].split(":")[0] == event and fields[0].strip().isdigit():
            return int(fields[0])
    return None


def count(event: str, argv: list[str]) -> tuple[int | None, list[dict[str, Any]]]:
    """Run argv under `perf stat -e event`: the count, and the program's own JSON records."""
    done = processes.run(["perf", "stat", "-x", ",", "-e", event, "--", *argv], timeout=BENCH_TIMEOUT_S)
    return parse_perf_stat(done.stderr, event), [json.loads(line) for line in done.stdout.splitlines()]


def hunt(machine: Machine, cpu: int, padding: int, settings) -> dict[str, Any]:
    """Each stencil arm once under perf: the event's count per stencil point; {"event": None, ...} without one."""
    event, why = alias_event(machine)
    found: dict[str, Any] = {"event": event, "why": why, "per_point": {}}
    if event is None:
        return found
    binary = ensure_built(SOURCE_DIR, "stencil")
    for arm, arm_padding in ((ALIGNED, 0), (padded(padding), padding)):
        events, records = count(event, stencil_argv(binary, arm_padding, settings.stencil_sweeps,
                                                    settings.stencil_repeats, cpu))
        layout = next(r for r in records if r.get("type") == "layout")
        sweeps = 1 + settings.stencil_sweeps * settings.stencil_repeats  # the untimed sweep counts too
        found["per_point"][arm] = None if events is None else events / (layout["points_per_sweep"] * sweeps)
    return found


def hunt_note(found: dict[str, Any]) -> str:
    counted = found["per_point"]
    if not counted:
        return found["why"]
    shown = ", ".join(f"{arm} {'not counted' if n is None else f'{n:.3f}'}" for arm, n in counted.items())
    return f"{found['why']}: per stencil point, {shown}"
