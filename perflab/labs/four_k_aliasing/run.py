"""Lab 8, the measurement: the store->load loop at every distance, then the stencil raced, page-aligned against
padded; the PMU's count where there is one; the expectation from the probe, said before anything is measured."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any

from tqdm.auto import tqdm

from ... import results, stats
from ...bounds import NO_LIMIT
from ...probe import Machine
from ...verdict import Verdict
from .. import Bound, Lab, one_cpu
from .hunt import hunt, hunt_note
from .stencil import ALIGNED, MIN_EFFECT, decide, kept, layout_note, padded, race_stencil
from .sweep import finding_note, findings, measure_sweep

# Bytes per allocation for the padded arm, as `-o padding=` gives them; the first is the source's fix.
PADDINGS = ("64", "32", "2048", "4096")
ZEN_4_GUEST = ("on a Zen 4 guest the course measured the scalar loop flat and the vectorised one 2-20% slower "
               "with dst 64 bytes ahead of src than 64 behind, differing from run to run")


@dataclass(frozen=True)
class Settings:
    """How much to measure: the loop's sweep, then the stencil's race."""

    sweep_rounds: int  # rounds of the sweep: each visits every distance of both loops once
    sweep_repeats: int  # loop passes per timed block, five blocks per visit (1024 elements each)
    stencil_sweeps: int  # Jacobi sweeps per timed repeat
    stencil_repeats: int  # timed repeats per run of an arm; the arm's value in a round is the fastest
    rounds_per_look: int  # race rounds between two looks at the verdict
    max_rounds: int  # the race stops here undecided...
    budget_s: float  # ...or after this long


# ANCHOR: expectation
def expectation(machine: Machine) -> str:
    """What this machine should show, from the probe's vendor and family alone (never a model name)."""
    vendor, family = machine.value("vendor"), machine.cpu_family()
    if vendor == "GenuineIntel":
        return (f"Intel, family {family}: Intel's optimisation guide describes the trap for its cores (3.6.8.2): "
                "a load is matched against the older stores by address bits 11:0 first. Expect the loop to be "
                "slow where dst runs a few stores ahead of src modulo 4 KiB and fast where it runs behind, and the "
                "page-aligned stencil slower than the padded one, up to x2 as in the source; how much depends on "
                "the core's generation")
    if vendor == "AuthenticAMD" and family == 25:
        return (f"AMD, family 25 (Zen 3 and Zen 4): {ZEN_4_GUEST}. Expect small effects at most: a few slow "
                "distances, and little or nothing in the stencil")
    if vendor == "AuthenticAMD":
        return (f"AMD, family {family}: the course has not measured this family; {ZEN_4_GUEST}: expect small "
                "effects at most")
    return f"{vendor or 'an unknown vendor'}, family {family}: the course has no expectation for these cores"
# ANCHOR_END: expectation


class FourKAliasing(Lab):
    """Page-aligned arrays run at half speed: 4 KiB aliasing between a loop's loads and older stores."""

    name = "4k-aliasing"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(sweep_rounds=15, sweep_repeats=100, stencil_sweeps=4, stencil_repeats=9, rounds_per_look=10,
                     max_rounds=120, budget_s=30)
    FULL = Settings(sweep_rounds=40, sweep_repeats=200, stencil_sweeps=4, stencil_repeats=15, rounds_per_look=10,
                    max_rounds=300, budget_s=180)
    RUNS = ("max_rounds",)
    OPTIONS = {"padding": PADDINGS}
    EMULATED = "an emulated CPU has no store buffer of its own whose address check could match falsely"
    BOUNDS = (
        Bound(
            "time per element of the copy-scale loop (ns)",
            0.01,
            NO_LIMIT,
            "no core loads, scales and stores 16 floats a cycle at 6 GHz",
            lambda result: [s["ns_per_element"] for s in result["sweep"]["samples"]],
        ),
        Bound(
            "stencil MFLOPS",
            0,
            400_000,
            "one core's peak is 64 single-precision flops a cycle at 6 GHz",
            lambda result: [
                v for arm in result.get("stencil", {"race": {"values": {}}})["race"]["values"].values() for v in arm
            ],
        ),
    )  # a sweep's result (its exercise's) has no stencil
    CANNOT_SHOW = ("An Intel core with a PMU counts it: `perf stat -e ld_blocks_partial.address_alias` "
                   "(ld_blocks.address_alias on newer cores); the source's own runs are drawn in the figures.")

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> int:
        """One CPU: the first one given, else the last online one."""
        return one_cpu(machine, cpus)

    def watched_cpus(self, placement: int, padding: str = PADDINGS[0]) -> list[int]:
        """The CPU every program runs on."""
        return [placement]

    def measure(self, machine: Machine, cpu: int, settings: Settings, progress: bool,
                padding: str = PADDINGS[0]) -> dict[str, Any]:
        """Say what to expect, sweep the loop, race the stencil, count the event where a PMU can."""
        prediction = expectation(machine)
        if progress:
            tqdm.write(f"expected here (from the probe): {prediction}", file=sys.stderr)
        result = results.new_result(self.name, "run", machine.summary(), {"cpu": cpu, "padding": int(padding),
                                                                         **asdict(settings)})
        result["prediction"] = prediction
        result["sweep"] = measure_sweep(cpu, settings.sweep_rounds, settings.sweep_repeats, progress)
        result["stencil"] = race_stencil(cpu, int(padding), settings, progress)
        result["hunt"] = hunt(machine, cpu, int(padding), settings)
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        padding = result["stencil"]["padding"]
        raced, values = kept(result)
        verdict, _, effect = decide(values, padding, raced.alpha_per_look)
        medians = {arm: stats.median(v) for arm, v in values.items()}
        notes = [f"expected from the probe, before measuring: {result['prediction']}",
                 f"stencil on CPU {result['params']['cpu']}: {medians[ALIGNED]:,.0f} MFLOPS page-aligned, "
                 f"{medians[padded(padding)]:,.0f} padded {padding} B per allocation (medians of {raced.rounds} "
                 f"rounds in {raced.looks} look{'s' if raced.looks != 1 else ''})",
                 layout_note(result["stencil"]["page_offsets"]),
                 *(finding_note(kernel, found) for kernel, found in findings(result["sweep"]["samples"]).items()),
                 *result["sweep"]["notes"], hunt_note(result["hunt"]), *raced.notes]
        if padding % 4096 == 0:
            notes.append(f"{padding} B is a whole number of pages: it changes no address bit below 12, so the "
                         "padded matrices meet each other's stores as the page-aligned ones do")
        for arm, arm_values in values.items():
            notes += [f"{arm}: {w}" for w in stats.instability_warnings(arm_values, "MFLOPS")]
        if verdict == "reproduced":
            reason = (f"{effect.text()}: the page-aligned matrices ran x{1 + effect.value:.2f} slower than padded "
                      "ones: the same work, only the matrices' offsets in their pages differ")
        elif verdict == "not-reproduced":
            reason = (f"{effect.text()}: a speed-up of {MIN_EFFECT:.0%} or more from padding is ruled out; this "
                      "core did not slow the page-aligned stencil (the loop's slow distances are in the notes)")
        else:
            reason = f"{effect.text()}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, effect, notes=notes)


LAB = FourKAliasing()
