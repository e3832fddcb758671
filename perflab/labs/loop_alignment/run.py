"""Lab 6, the measurement: sweep the loop's start offset, confirm the extremes in a fresh run, explain."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import results, stats
from ...bounds import NO_LIMIT, Bound
from ...build import ensure_built
from ...probe import Machine
from ...runner import run_once
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import ALPHA, Verdict, judge_change
from .. import Lab, one_cpu
from . import layout
from .notes import REPLAYED, offset_ranges, pmu_note

SOURCE_DIR = "labs/06-loop-alignment"
LOOPS = ("alu", "call")
OFFSETS = range(128)  # two 64-byte lines: the pattern should repeat
# The smallest slowdown of the slowest offset worth calling an effect
# (the seed measured +30%, the issue +42% on a Cascade Lake guest).
MIN_EFFECT = 0.10
# A layout fact "explains" the slow offsets when it agrees with them on this share of offsets.
EXPLAINS = 0.9
ROUNDS_PER_LOOK = 5  # fresh rounds of the slowest against the fastest offset between two looks at the verdict


@dataclass(frozen=True)
class Settings:
    """How much to measure: loop iterations per sample, sweep rounds, confirmation rounds, seed runs."""

    iterations: int  # loop iterations per timed visit
    rounds: int  # sweep rounds: each visits every offset once
    confirm_rounds: int  # at most this many visits of the slowest and the fastest offset in the fresh race...
    confirm_budget_s: float  # ...and at most this long: the race stops as soon as it is decided
    seed_iterations: int  # iterations per run of each seed.c build
    seed_runs: int  # interleaved runs of the seed.c builds


def sweep_argv(binary: Path, loop: str, offsets: str, iterations: int, rotation: int, cpu: int) -> list[str]:
    """One round per process: the lab starts a process per round, so the progress bar moves."""
    return [str(binary), "-l", loop, "-o", offsets, "-n", str(iterations), "-s", "1",
            "-r", str(rotation), "-C", str(cpu)]


def loop_layouts(binary: Path, loop: str) -> dict[int, layout.Loop]:
    """Each copy's loop, from objdump: copy N is the function `<loop>_loop_N`."""
    functions = layout.disassemble(binary)
    return {offset: layout.find_loop(functions[f"{loop}_loop_{offset}"]) for offset in OFFSETS}


def samples_by_offset(samples: list[dict[str, Any]]) -> dict[int, list[float]]:
    by_offset: dict[int, list[float]] = {}
    for s in samples:
        by_offset.setdefault(s["offset"], []).append(s["ns_per_iter"])
    return dict(sorted(by_offset.items()))


# ANCHOR: classify
def classify(by_offset: dict[int, list[float]], min_effect: float = MIN_EFFECT) -> dict[str, Any]:
    """Which offsets are slow, and which only sometimes.

    The reference is the most consistently fast offset (lowest 90th
    percentile: fast on 9 visits of 10, not just usually). An offset differs from it when Mann-Whitney U says so at
    ALPHA divided by the number of offsets (Bonferroni: 128 tests must not
    find slow offsets by chance). It is *slow* when even its 25th percentile
    is `min_effect` above the reference's median (slow on 3 visits of 4), and
    *sometimes slow* when only its 75th percentile is.
    """
    medians = {o: stats.median(v) for o, v in by_offset.items()}
    fastest = min(by_offset, key=lambda o: stats.percentile(by_offset[o], 90))
    slowest = max(by_offset, key=lambda o: stats.percentile(by_offset[o], 25))
    limit = medians[fastest] * (1 + min_effect)
    threshold = ALPHA / len(by_offset)
    slow, sometimes = [], []
    for offset, values in by_offset.items():
        if stats.percentile(values, 75) < limit or stats.mann_whitney_u(by_offset[fastest], values)[1] >= threshold:
            continue
        (slow if stats.percentile(values, 25) >= limit else sometimes).append(offset)
    return {"medians": medians, "fastest": fastest, "slowest": slowest, "slow": slow, "sometimes_slow": sometimes}
# ANCHOR_END: classify


# ANCHOR: explain
def explain(slow: list[int], facts: dict[int, dict[str, bool]]) -> list[dict[str, Any]]:
    """For each layout fact, on how many offsets "slow" and "fact is true" agree; best first."""
    slow_set = set(slow)
    names = next(iter(facts.values())).keys()
    ranked = []
    for name in names:
        agree = sum((offset in slow_set) == f[name] for offset, f in facts.items())
        ranked.append({"fact": name, "agree": agree, "of": len(facts), "share": agree / len(facts)})
    return sorted(ranked, key=lambda r: -r["agree"])
# ANCHOR_END: explain


def measure_offsets(binary: Path, loop: str, offsets: str, cpu: int, iterations: int, rounds: range, desc: str,
                    progress: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One process per round, each visiting every offset in an order rotated by the round number."""
    samples: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for r in tqdm(rounds, desc=desc, disable=not progress, file=sys.stderr, leave=False):
        meta, found = run_once(sweep_argv(binary, loop, offsets, iterations, r, cpu))
        samples += [dict(s, round=r) for s in found]
    return meta, samples


def restart_after_a_step(samples: list[dict[str, Any]]) -> tuple[int, str] | None:
    """If the machine stepped to another speed during the sweep (each round's mean over all offsets moved and
    stayed), the first round after the step and a note saying so; None for a steady sweep."""
    by_round: dict[int, list[float]] = {}
    for s in samples:
        by_round.setdefault(s["round"], []).append(s["ns_per_iter"])
    means = [stats.mean(v) for _, v in sorted(by_round.items())]
    step = stats.step_change(means)
    if step is None:
        return None
    return step, (f"the sweep's mean time per iteration stepped from {stats.median(means[:step]):.3f} to "
                  f"{stats.median(means[step:]):.3f} ns at round {step + 1}: the machine changed mid-sweep (on a "
                  f"VM, the host may have moved the vCPU), so rounds 1-{step} were dropped and as many measured anew")


def sweep(loop: str, cpu: int, settings: Settings, progress: bool = True,
          machine: Machine | None = None) -> dict[str, Any]:
    """Time the loop at every offset, round by round in rotated order; classify and explain."""
    machine = machine or LAB.probe()
    binary = ensure_built(SOURCE_DIR, "offset_sweep")
    every = f"{OFFSETS[0]}-{OFFSETS[-1]}"
    meta, samples = measure_offsets(binary, loop, every, cpu, settings.iterations, range(settings.rounds),
                                    f"{loop} loop, {len(OFFSETS)} offsets", progress)
    notes = []
    restart = restart_after_a_step(samples)
    if restart:
        step, note = restart
        notes.append(note)
        samples = [s for s in samples if s["round"] >= step]
        samples += measure_offsets(binary, loop, every, cpu, settings.iterations,
                                   range(settings.rounds, settings.rounds + step), "sweeping again", progress)[1]
    by_offset = samples_by_offset(samples)
    layouts = loop_layouts(binary, loop)
    facts = {o: layout.boundary_facts(layouts[o]) for o in by_offset}
    found = classify(by_offset)
    found["medians"] = {str(o): m for o, m in found["medians"].items()}  # JSON keys are strings
    result = results.new_result(
        LoopAlignment.name, "sweep", machine.summary(), {"loop": loop, "cpu": cpu, **asdict(settings)}
    )
    result.update(meta=meta, samples=samples, layouts={str(o): layout.describe(layouts[o]) for o in by_offset},
                  classification=found, explanation=explain(found["slow"], facts), notes=notes)
    return result


# ANCHOR: confirm
def confirm(sweep_result: dict[str, Any], settings: Settings, progress: bool = True) -> dict[str, Any]:
    """Race the sweep's slowest offset against its fastest in fresh rounds until decided: no winner's curse."""
    params = sweep_result["params"]
    fast, slow = sweep_result["classification"]["fastest"], sweep_result["classification"]["slowest"]
    binary = ensure_built(SOURCE_DIR, "offset_sweep")

    def one_round(r: int, _order: list[str]) -> dict[str, float]:  # the program rotates the order itself
        _, found = run_once(sweep_argv(binary, params["loop"], f"{fast},{slow}", settings.iterations, r, params["cpu"]))
        return {str(s["offset"]): s["ns_per_iter"] for s in found}

    plan = Plan(ROUNDS_PER_LOOK, settings.confirm_rounds, settings.confirm_budget_s)
    raced = race(
        [str(fast), str(slow)],
        one_round,
        lambda values, alpha: decide(values, fast, slow, alpha)[0] in DECIDED,
        plan,
        control=str(fast),
        desc=f"offset {slow} vs {fast}, until decided",
        progress=progress,
    )
    return {"fastest": fast, "slowest": slow, "race": raced.to_json()}


def decide(ns_per_iter: dict[str, list[float]], fast: int, slow: int, alpha: float):
    """Is the slowest offset at least MIN_EFFECT slower than the fastest, at this look's error rate?"""
    return judge_change(f"offset {fast} vs offset {slow}", rates(ns_per_iter[str(slow)]), rates(ns_per_iter[str(fast)]),
                        MIN_EFFECT, alpha=alpha)
# ANCHOR_END: confirm


def iteration_times(result: dict[str, Any]) -> list[float]:
    """ns per iteration of every timed run in a result: a sweep's and its confirmation's, or the seed's builds'."""
    if result["kind"] == "seed":
        return [t for times in result["ns_per_iter"].values() for t in times]
    confirmed = (result.get("confirmation") or {}).get("race", {}).get("values", {})
    return [s["ns_per_iter"] for s in result["samples"]] + [t for times in confirmed.values() for t in times]


def rates(ns_per_iter: list[float]) -> list[float]:
    """Iterations per nanosecond: higher is better, as judge_change expects."""
    return [1 / t for t in ns_per_iter]


# ANCHOR: lab
class LoopAlignment(Lab):
    """The same loop, shifted a few bytes, runs much slower: an offset sweep explained by objdump."""

    name = "loop-alignment"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(iterations=300_000, rounds=15, confirm_rounds=40, confirm_budget_s=20,
                     seed_iterations=10_000_000, seed_runs=5)
    FULL = Settings(iterations=1_000_000, rounds=30, confirm_rounds=80, confirm_budget_s=120,
                    seed_iterations=100_000_000, seed_runs=15)
    OPTIONS = {"loop": LOOPS}
    EMULATED = "an emulated CPU has no front end whose fetch lines or uop cache the offsets could cross"
    # An iteration takes a cycle at least: each adds 1 to the counter the last one wrote (the alu loop is six
    # instructions; the call loop has a call and a return besides), and no core clocks above ~6 GHz: 0.16 ns.
    BOUNDS = (Bound("time per iteration (ns)", 0.1, NO_LIMIT, "no loop iteration takes under a cycle of the "
                    "fastest clock", iteration_times),)

    def settings_for(self, quick: bool, runs: int | None = None) -> Settings:
        """`runs` sets the sweep's rounds and the seed's runs, and at most twice as many confirmation rounds."""
        chosen = self.QUICK if quick else self.FULL
        return replace(chosen, rounds=runs, confirm_rounds=2 * runs, seed_runs=runs) if runs else chosen

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> int:
        """One CPU: the first one given, else the last online one."""
        return one_cpu(machine, cpus)

    def watched_cpus(self, placement: int, **options) -> list[int]:
        """The CPU the loops run on, whichever loop."""
        return [placement]

    def measure(
        self, machine: Machine, cpu: int, settings: Settings, progress: bool, loop: str = "alu"
    ) -> dict[str, Any]:
        """The sweep, then a fresh race of its slowest offset against its fastest."""
        result = sweep(loop, cpu, settings, progress, machine)
        result["confirmation"] = confirm(result, settings, progress)
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        check, classification, best = result["confirmation"], result["classification"], result["explanation"][0]
        slow, fast = check["slowest"], check["fastest"]
        raced = Race.from_json(check["race"])
        kept = raced.kept_values()
        verdict, reason, effect = decide(kept, fast, slow, raced.alpha_per_look)
        times = {o: stats.median(v) for o, v in kept.items()}
        notes = [
            f"{result['params']['loop']} loop on CPU {result['params']['cpu']}: "
            f"{times[str(fast)]:.3f} ns per iteration "
            f"at offset {fast}, {times[str(slow)]:.3f} ns at offset {slow}: x{times[str(slow)] / times[str(fast)]:.2f} "
            f"(fresh race of {raced.rounds} rounds in {raced.looks} looks, medians)",
            f"slow offsets (>= {MIN_EFFECT:.0%} slower than offset {fast} on 3 visits of 4, significant): "
            f"{offset_ranges(classification['slow'])}",
            *result["notes"],
            *raced.notes,
        ]
        if classification["sometimes_slow"]:
            notes.append(f"slow on some visits only: {offset_ranges(classification['sometimes_slow'])}. The front end "
                         "switched between a fast and a slow way of running the same bytes; on a VM, the host running "
                         "something on this core's other hyperthread is one possible cause (a PMU would tell)")
        if classification["slow"] and best["share"] >= EXPLAINS:
            notes.append(f"they line up with '{best['fact']}': slow where it is true, fast where it is false, on "
                         f"{best['agree']} of {best['of']} offsets (objdump's layout of each copy)")
        elif classification["slow"]:
            notes.append(f"no single boundary explains them; closest: '{best['fact']}' agrees on {best['agree']} of "
                         f"{best['of']} offsets")
        for name, offset in (("slowest", slow), ("fastest", fast)):
            notes += [f"{name} offset: {w}" for w in stats.instability_warnings(kept[str(offset)], "ns per iteration")]
        notes.append(pmu_note(machine))
        confidence = f"{100 * (1 - raced.alpha_per_look):.4g}% CI"
        ratio = (f"the slowest offset takes x{1 + effect.value:.2f} the time of the fastest "
                 f"({confidence} x{1 + effect.ci_low:.2f} to x{1 + effect.ci_high:.2f})")
        if verdict == "reproduced":
            reason = f"{ratio}, p = {effect.p_value:.2g}; same bytes, different address"
        elif verdict == "not-reproduced":
            reason = (f"{ratio}: no offset is {MIN_EFFECT:.0%} slower in this run; this core's front end hid the "
                      "boundaries" + (" (on a VM that can change with the host's load: run it again later)"
                                      if machine.value("virtualization") else ""))
        else:
            reason = f"{ratio}; {raced.undecided()}"
        notes += [] if verdict == "reproduced" else [REPLAYED]
        return Verdict(self.name, verdict, reason, effect, notes=notes)


LAB = LoopAlignment()
# ANCHOR_END: lab
