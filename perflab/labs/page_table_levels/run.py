"""Lab 4, the measurement: the cost of one minor page fault with 5-level and with 4-level page tables.

Two ways, chosen with the `where` option:

- "vm" (the default): QEMU boots the same emulated la57 CPU and kernel twice
  per round, once with 5-level page tables (profile la57-icount) and once
  with `no5lvl` (no5lvl-icount), in rotated order. Their clocks count
  instructions (-icount shift=0), so a fault's cost is a count that does not
  depend on the host's speed, and the boots race until decided.
- "native": this boot's own kernel, timed in ns. One boot has one paging
  mode, so the comparison is with a saved native result of the other mode on
  this machine (reboot with or without `no5lvl` in between).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT, Bound
from ...cpulist import check_cpus
from ...errors import PerflabError
from ...probe import Machine
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import Verdict
from .. import Lab
from . import minimal
from .faults import (
    MIN_RELATIVE,
    Settings,
    boot_cost,
    decide,
    fault_around,
    fault_note,
    mode_bucket,
    per_fault,
    result_samples,
)
from .guests import PROFILES, TRACED, boot_both, check_vm_ready
from .native import judge_native, measure_here, other_boot

ARMS = ("5-level", "4-level")


# ---------------------------------------------------------------- measured in VMs

def measure_in_vms(settings: Settings, progress: bool) -> dict[str, Any]:
    """Boot both paging modes round by round, in rotated order, until decided: the race and every boot.

    The first round's boots also fault in a mapping hinted above 2^47 and draw the handle_mm_fault histogram,
    kept even if the race drops that round."""
    boots: list[dict[str, Any]] = []

    def one_round(r: int, order: list[str]) -> dict[str, float]:
        # Side by side, counting instructions: the order does not matter.
        if settings.minimal_guests:
            booted = minimal.boot_both(settings, high=r == 0)
        else:
            booted = boot_both(settings, histogram=r == 0, high=r == 0)
        boots.extend(dict(booted[int(arm[0])], round=r) for arm in order)
        return {arm: boot_cost(booted[int(arm[0])]) for arm in order}

    plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
    raced = race(list(ARMS), one_round, lambda values, alpha: decide(values, alpha)[0] in DECIDED, plan,
                 control="4-level", progress=progress,
                 desc=f"rounds: a boot of la57 and of no5lvl, ~{15 if settings.minimal_guests else 30} s")
    histograms = {str(b["paging_levels"]): b.pop(TRACED) for b in boots if TRACED in b}
    # Set beside the boot's last anonymous round below 2^47, not its cheapest: by the end of a boot the kernel
    # has usually moved to the state in which every fault costs about 8 instructions more (see boot_cost).
    hinted_high = {str(b["paging_levels"]): {"samples": b.pop("hinted_high"), "low_per_fault": last_anon_cost(b)}
                   for b in boots if "hinted_high" in b}
    return {"race": raced.to_json(), "boots": [b for b in boots if b["round"] >= raced.first_kept],
            "histograms": histograms, "hinted_high": hinted_high}


def last_anon_cost(boot: dict[str, Any]) -> float:
    return per_fault([sample for sample in boot["samples"] if sample["mode"] == "anon"][-1])


def hinted_high_note(hinted_high: dict[str, dict[str, Any]]) -> list[str]:
    """Where each kernel put a mapping asked for above 2^47, and what its faults cost there."""
    notes = []
    for levels in ("5", "4"):
        arm = hinted_high.get(levels)
        if not arm or not arm["samples"]:
            continue
        if all(sample["high"] for sample in arm["samples"]):
            cost = min(per_fault(sample) for sample in arm["samples"])  # the cheapest round, as for every boot
            notes.append(f"{levels}-level: a mapping asked for above 2^47 was put there, under the top table's second "
                         f"entry (a P4D table of its own): {cost:,.1f} instructions per fault, against "
                         f"{arm['low_per_fault']:,.1f} in the boot's last round below 2^47; every fault walks five "
                         "levels, wherever its page is")
        else:
            notes.append(f"{levels}-level: a mapping asked for above 2^47 was put below it: with 4 levels, user "
                         "space ends at 2^47 (128 TiB)")
    return notes


def histogram_note(histograms: dict[str, dict[str, Any]]) -> list[str]:
    """What funclatency saw in each kernel, or why it saw nothing."""
    notes = []
    for levels in ("5", "4"):
        traced = histograms.get(levels)
        if traced is None:
            continue
        if "error" in traced:
            notes.append(f"funclatency {TRACED}, {levels}-level: no histogram ({traced['error']})")
            continue
        low, high = mode_bucket(traced["buckets"])
        calls = sum(count for _, _, count in traced["buckets"])
        notes.append(f"funclatency {TRACED}, {levels}-level: {calls:,} calls, most in {low:,}-{high:,} "
                     "instructions (under the probe, which adds its own)")
    return notes


def guests_note(boots: list[dict[str, Any]]) -> str:
    """Which guests counted, and what the other kind would add."""
    if any(b.get("guest") == "minimal" for b in boots):
        return ("quick run: minimal guests (the image's kernel with an initramfs of init and a static faults, both "
                "modes booted at once) with nokaslr and norandmaps, so that every boot of a mode lays out the kernel "
                "and the program alike and counts alike; file faults read a file in the initramfs's memory, not a "
                "disk's page cache; the full run boots the Debian guest with both layouts random, as real machines "
                "boot, and adds funclatency's handle_mm_fault histogram")
    return ("full run: the Debian guest, with KASLR and random mappings, as real machines boot: each boot lays out "
            "the kernel and the program anew, which moves its count by up to 18 instructions a fault")


# ---------------------------------------------------------------- the lab

class PageTableLevels(Lab):
    """The fifth page-table level costs on every minor fault."""

    name = "page-table-levels"
    QUICK = Settings(rounds_per_look=2, max_rounds=2, budget_s=300, fault_rounds=9, pages=1024, minimal_guests=True)
    FULL = Settings(rounds_per_look=4, max_rounds=8, budget_s=2400, fault_rounds=9, pages=4096)
    RUNS = ("max_rounds",)
    OPTIONS = {"where": ("vm", "native")}
    IN_A_VM = ("this machine is itself a VM: natively, fault times are its guest kernel's and include the host's "
               "second-level page walks; the instruction counts of the la57/no5lvl guests are not affected")
    CANNOT_SHOW = ("Any machine with QEMU shows it in two emulated boots: `perflab run page-table-levels` "
                   "(where = \"vm\"); natively, a CPU with la57 (Intel Ice Lake or later, AMD Zen 4 or later).")
    # A fault enters the kernel, finds or allocates the page (zeroing 4 KiB for anonymous memory) and returns:
    # hundreds of instructions (about 6,900 in the guests), and over 100 ns natively at any clock. Fault-around
    # maps at most the 512 entries of one last-level page table per fault.
    BOUNDS = (Bound("cost per fault (ns natively, instructions under -icount)", 100, NO_LIMIT,
                    "entering the kernel and mapping a page takes more", lambda r: map(per_fault, result_samples(r))),
              Bound("pages mapped per fault", 0, 512, "one fault maps at most one page table's 512 entries",
                    lambda r: map(fault_around, result_samples(r))))

    def settings_for(self, quick: bool, runs: int | None = None) -> Settings:
        chosen = super().settings_for(quick, runs)
        if chosen.max_rounds < 2:
            raise PerflabError("--runs 1 gives one value per mode, and a confidence interval needs two: give --runs 2 "
                               "or more")
        return replace(chosen, rounds_per_look=min(chosen.rounds_per_look, chosen.max_rounds))

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> int:
        """Natively, the CPU to fault on: the last one given (-C 1), or the last online; the VMs have one vCPU."""
        if cpus:
            check_cpus(cpus, machine.online_cpus)
            return cpus[-1]
        return machine.online_cpus[-1]

    def watched_cpus(self, placement: int, where: str = "vm") -> list[int]:
        """Natively the faulting CPU. In the VMs none: under icount a busy host only adds instructions to some
        rounds (likely interrupts of events QEMU times by the host's clock: +235 a fault in one round of three,
        beside other tests), and each boot keeps its cheapest round (faults.boot_cost)."""
        return [placement] if where == "native" else []

    def measure(self, machine: Machine, placement: int, settings: Settings, progress: bool,
                where: str = "vm") -> dict[str, Any]:
        if where == "vm":
            check_vm_ready()
            result = results.new_result(self.name, "vm", machine.summary(), asdict(settings))
            result["vms"] = measure_in_vms(settings, progress)
            return result
        result = results.new_result(self.name, "native", machine.summary(), {"cpu": placement, **asdict(settings)})
        result["paging_levels"] = machine.value("paging_levels")
        result["runs"] = measure_here(placement, settings, progress)
        result["other_boot"] = other_boot(machine, result["paging_levels"])
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        if result["kind"] == "native":
            return judge_native(self.name, machine, result, self.CANNOT_SHOW)
        raced = Race.from_json(result["vms"]["race"])
        verdict, effect = decide(raced.kept_values(), raced.alpha_per_look)
        boots = result["vms"]["boots"]
        notes = [
            fault_note(
                [b for b in boots if b["paging_levels"] == levels],
                f"{levels}-level ({PROFILES[levels]}, {sum(b['paging_levels'] == levels for b in boots)} boots)",
                "instructions",
            )
            for levels in (5, 4)
        ]
        four, five = (stats.mean(raced.kept(arm)) for arm in ("4-level", "5-level"))
        notes.append(f"5-level minus 4-level: {five - four:+.1f} instructions per anonymous fault")
        notes += hinted_high_note(result["vms"].get("hinted_high", {}))
        notes += histogram_note(result["vms"].get("histograms", {}))
        notes.append(guests_note(boots))
        notes.append("what this counts: the guest kernel's instructions for the extra level (walking, allocating and "
                     "freeing the P4D), not the MMU's hardware walk, which TCG does not model (no TLB or "
                     "paging-structure caches); icount runs every vCPU on one host thread, so thread scaling "
                     "(ebizzy) cannot be shown this way")
        notes += raced.notes
        if verdict == "reproduced":
            reason = f"{effect.text()}: the fifth level costs on every fault, as on the source's Ice Lake (+0.23%)"
        elif verdict == "not-reproduced":
            reason = f"{effect.text()}; +{MIN_RELATIVE:.1%} or more per fault is ruled out"
        else:
            reason = f"{effect.text()}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, effect, notes=notes)


LAB = PageTableLevels()
