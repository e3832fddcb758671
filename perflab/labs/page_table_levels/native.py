"""Lab 4 measured natively: this boot's kernel in ns, compared with a saved run of the other paging mode."""

from __future__ import annotations

import os
from typing import Any

from ... import results, stats
from ...build import ensure_built
from ...errors import PerflabError
from ...paths import results_dir, scratch
from ...probe import Machine
from ...runner import run_once
from ...verdict import Verdict
from .faults import MODES, SOURCE_DIR, Settings, boot_cost, decide, fault_note, faults_argv

# Across reboots a native result also carries the boot's luck (frequency, memory placement): below this,
# a difference between two boots is not believable without repeating boots, as the source did 30 times.
NATIVE_BELIEVABLE = 0.05


def measure_here(cpu: int, settings: Settings, progress: bool) -> list[dict[str, Any]]:
    """This boot's faults: both modes, interleaved over max_rounds runs."""
    binary = str(ensure_built(SOURCE_DIR, "faults"))
    runs = []
    with scratch("faults") as folder:
        for r in range(settings.max_rounds):
            samples = []
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                argv = faults_argv(binary, mode, settings, cpu) + ["-f", os.path.join(folder, "file.dat")]
                samples += run_once(argv)[1]
            runs.append({"round": r, "samples": samples})
    return runs


def other_boot(machine: Machine, levels: int | None) -> dict[str, Any] | None:
    """The newest saved native result of this lab, on this machine, with the other paging mode."""
    for path in sorted((results_dir() / "page-table-levels").glob("*-native*.json"), reverse=True):
        try:
            saved = results.load(path)
        except PerflabError:
            continue
        if results.provenance_problems(saved):
            continue  # edited since perflab wrote it, or from another machine: nothing to compare with
        if saved.get("paging_levels") not in (None, levels):
            return {"path": str(path), "paging_levels": saved["paging_levels"], "runs": saved["runs"],
                    "kernel": saved["machine"].get("kernel")}
    return None


def judge_native(name: str, machine: Machine, result: dict[str, Any], cannot_show: str) -> Verdict:
    levels = result["paging_levels"]
    here = [boot_cost(run) for run in result["runs"]]
    notes = [fault_note(result["runs"], f"this boot ({levels}-level)", "ns")]
    other = result.get("other_boot")
    if not other:
        la57 = (machine.value("la57_cpu") or {}).get("cpuid") or (machine.value("la57_cpu") or {}).get("cpuinfo")
        how = "reboot with `no5lvl` on the kernel command line" if levels == 5 else "reboot without `no5lvl`"
        if levels != 5 and not la57:
            return Verdict(
                name,
                "cannot-show",
                f"this boot runs {levels}-level page tables and the CPU has no la57, so "
                "no boot of this machine can run 5 levels. " + cannot_show,
                notes=notes,
            )
        return Verdict(name, "inconclusive", f"one boot measured ({levels}-level, {stats.median(here):.0f} ns per "
                       f"fault); {how}, run the lab again, and it compares the two boots", notes=notes)
    there = [boot_cost(run) for run in other["runs"]]
    values = {f"{levels}-level": here, f"{other['paging_levels']}-level": there}
    verdict, effect = decide(values)
    notes.append(fault_note(other["runs"], f"the other boot ({other['paging_levels']}-level, {other['path']})", "ns"))
    notes.append(f"two boots compared: the runs of one boot are not independent of that boot's luck (frequency, "
                 f"where memory landed); believe a difference under {NATIVE_BELIEVABLE:.0%} only after repeating "
                 "boots (the source rebooted 30 times per mode)")
    if verdict == "reproduced" and effect.value < NATIVE_BELIEVABLE:
        return Verdict(name, "inconclusive", f"{effect.text()}: significant within these two boots, but too small to "
                       "believe across one reboot; repeat both boots a few times", effect, notes=notes)
    return Verdict(name, verdict, effect.text(), effect, notes=notes)
