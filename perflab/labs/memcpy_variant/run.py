"""Lab 11, the measurement: name each variant the masks reach, then race them at every size until decided."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import results
from ...bounds import NO_LIMIT
from ...build import ensure_built
from ...errors import PerflabError
from ...probe import Machine
from ...runner import run_once
from ...sequential import Plan, Race, race
from ...verdict import Verdict
from .. import Bound, CannotShow, Lab, one_cpu
from .speedups import MIN_EFFECT, SMALL, arm_key, band, compare, decide, size_text, winners_by_size
from .variants import (
    CONTROL,
    DEFAULT,
    SOURCE_DIR,
    Variant,
    argv_under,
    count_default,
    find_variants,
    from_json,
    to_json,
)

SIZES = tuple(1 << k for k in range(21))  # 1 B to 1 MiB, every power of two
QUICK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20)


@dataclass(frozen=True)
class Settings:
    """How much to measure."""

    sizes: tuple[int, ...]  # bytes per copy, each a power of two from 1 B to 1 MiB
    blocks: int  # timed blocks per size in one process; the fastest is its sample
    rounds_per_look: int  # rounds between two looks at the verdict (each: every variant once, every size)
    max_rounds: int  # the race stops here undecided...
    budget_s: float  # ...or after this long


def sweep_argv(binary: Path, variant: Variant, sizes: tuple[int, ...], blocks: int, cpu: int) -> list[str]:
    return argv_under(variant.tunables, [str(binary), "-s", ",".join(map(str, sizes)), "-b", str(blocks),
                                         "-C", str(cpu)])


def race_variants(binary: Path, variants: list[Variant], cpu: int, settings: Settings, progress: bool) -> Race:
    """Rounds of one copy_sweep process per variant (their order rotated each round), every size in each."""
    arms = [v.arm for v in variants]
    plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)

    def measure_round(r: int, _order: list[str]) -> dict[str, float]:
        measured = {}
        shift = r % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            _, samples = run_once(sweep_argv(binary, variant, settings.sizes, settings.blocks, cpu))
            measured |= {arm_key(variant.arm, s["size"]): s["ns_per_copy"] for s in samples}
        return measured

    def decided(values: dict[str, list[float]], alpha: float) -> bool:
        return decide(compare(values, arms, list(settings.sizes), alpha))[0] != "inconclusive"

    # A step in the ratio of the default's two measurements (its own arm and the control) means the arms stopped
    # being comparable; without a control, a step in the default's own level at 8 B drops rounds.
    control = (arm_key(CONTROL, 8), arm_key(DEFAULT, 8)) if CONTROL in arms else arm_key(DEFAULT, 8)
    keys = [arm_key(a, s) for a in arms for s in settings.sizes]
    return race(keys, measure_round, decided, plan, control, "memcpy variants, every size", progress)


class MemcpyVariant(Lab):
    """The memcpy glibc picks for this CPU can be the slower one, for small copies."""

    name = "memcpy-variant"
    QUICK = Settings(sizes=QUICK_SIZES, blocks=5, rounds_per_look=8, max_rounds=160, budget_s=45)
    FULL = Settings(sizes=SIZES, blocks=9, rounds_per_look=10, max_rounds=400, budget_s=180)
    RUNS = ("max_rounds",)
    EMULATED = ("QEMU's TCG turns every variant's vector moves into its own host code, so their speeds are "
                "QEMU's, not the CPU's")
    IN_A_VM = ("in a VM the guest sees the CPU features the hypervisor passes through: glibc picks from those, and "
               "a host that hides AVX-512 from its guests gives them another default")
    BOUNDS = (
        Bound("ns per memcpy call", 0.1, NO_LIMIT, "a call and its return take at least a cycle, 0.17 ns at 6 GHz",
              lambda result: [v for values in result["race"]["values"].values() for v in values]),
    )
    CANNOT_SHOW = ("A machine with glibc on x86-64 shows it; the source's call counts before and after its upgrade "
                   "are in the lab's figures (perflab/data/memcpy-variant).")

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> int:
        """One CPU: the first one given, else the last online one."""
        return one_cpu(machine, cpus)

    def watched_cpus(self, placement: int, **options) -> list[int]:
        return [placement]

    def measure(self, machine: Machine, cpu: int, settings: Settings, progress: bool) -> dict[str, Any]:
        """Name the variants, count the default's calls with uprobes where they work, then race."""
        try:
            binary = ensure_built(SOURCE_DIR, "copy_sweep")
            variants, notes = find_variants(binary)
        except PerflabError as why:
            raise CannotShow(f"cannot find this glibc's memcpy variants: {why}") from None
        if all(v.arm in (DEFAULT, CONTROL) for v in variants):
            raise CannotShow(f"every mask gave this glibc's default, {variants[0].function}: there is no other "
                             "variant to race")
        if progress:
            tqdm.write("variants here: " + ", ".join(f"{v.arm} ({v.function})" for v in variants), file=sys.stderr)
        result = results.new_result(self.name, "run", machine.summary(), {"cpu": cpu, **asdict(settings)})
        result["variants"], result["variant_notes"] = to_json(variants), notes
        result["uprobes"] = count_default(binary)
        result["race"] = race_variants(binary, variants, cpu, settings, progress).to_json()
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        variants = from_json(result["variants"])
        raced = Race.from_json(result["race"])
        sizes = list(result["params"]["sizes"])
        comparisons = compare(raced.kept_values(), [v.arm for v in variants], sizes, raced.alpha_per_look)
        verdict, shown = decide(comparisons)
        won = winners_by_size(comparisons)
        default = variants[0].function
        notes = [f"the default here: {default}{uprobe_note(result['uprobes'])}",
                 *(f"{v.arm}: {v.function} under GLIBC_TUNABLES={v.tunables}" for v in variants[1:]),
                 *result["variant_notes"],
                 *(f"at {size_text(size)}: faster than the default: {', '.join(arms)}" for size, arms in won.items()),
                 f"{raced.rounds} rounds in {raced.looks} look{'s' if raced.looks != 1 else ''} "
                 f"({raced.seconds:.0f} s), each: every variant in its own process on CPU {result['params']['cpu']}",
                 *raced.notes]
        if verdict == "reproduced":
            reason = (f"{shown.effect.text()}: the default, {default}, is not the fastest memcpy here at "
                      f"{band(list(won))} (a variant at least {MIN_EFFECT:.0%} faster, against the control too)")
        elif verdict == "not-reproduced":
            reason = (f"no variant copies {MIN_EFFECT:.0%} faster than the default ({default}) at any size up to "
                      f"{size_text(SMALL)}: the closest, {shown.effect.text()}")
        else:
            reason = f"closest to deciding, {shown.effect.text()}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, shown.effect, notes=notes)


def uprobe_note(uprobes: dict[str, Any]) -> str:
    """How the default was named: by the uprobes' counts, or why they could not count."""
    if "skipped" in uprobes:
        return f" (named from glibc's debug symbols; uprobes did not count: {uprobes['skipped']})"
    counts = sorted(uprobes["counts"].items(), key=lambda item: -item[1])
    return " (uprobes counted " + ", ".join(f"{calls:,} calls of {name}" for name, calls in counts) + ")"


LAB = MemcpyVariant()
