"""Lab 9, the measurement: lookups swept over n, then a race of the small-n lookups and the expiry passes, profiled."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT
from ...errors import PerflabError
from ...probe import Machine
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import ALPHA, Effect, Verdict, judge_paired_change
from .. import Bound, Lab, one_cpu
from . import profile
from .programs import (
    ARMS,
    FLOW_SIZES,
    LOOKUP_SIZES,
    SMALL_N,
    arm,
    crossover,
    flows_profile_argv,
    lookup_medians,
    round_runner,
    sweep_lookups,
)

MIN_SCAN_EFFECT = 0.10  # the O(n) scan must be at least 10% faster per lookup than the O(log n) search
QUADRATIC_FROM = 1.5  # an exponent above this is closer to n^2 than to n
MIN_FIX_EFFECT = 1.0  # the fix must make the largest table's expiry pass at least twice as fast
ROUNDS_PER_LOOK = 5


@dataclass(frozen=True)
class Settings:
    """How much to measure: the lookup sweep, the race, the profiles."""

    sweep_rounds: int  # rounds of the sweep: every structure at every n once per round
    visit_ms: float  # each (structure, n) and (version, n) is timed for at least this long per visit
    race_rounds: int  # at most this many rounds of the race...
    race_budget_s: float  # ...and at most this long: it stops as soon as it is decided
    profile_s: float  # perf record on each version of the expiry pass


def exponent(values: dict[str, list[float]], version: str, confidence: float) -> stats.PowerLaw:
    """The scaling exponent of one version's expiry pass, fitted over every round at every size."""
    sizes = [n for n in FLOW_SIZES for _ in values[arm(version, n)]]
    return stats.power_law_fit(sizes, [t for n in FLOW_SIZES for t in values[arm(version, n)]], confidence)


# ANCHOR: judge
def judge_race(values: dict[str, list[float]], alpha: float = ALPHA) -> tuple[str, str, Effect]:
    """Reproduced when all three hold: at n=16 the O(n) scan beats the O(log n) search; the expiry pass's exponent
    is above 1.5; the fix makes the largest table's pass at least twice as fast. Each is judged at a third of
    the error rate, since three comparisons make the verdict."""
    scan, scan_text, _ = judge_paired_change(f"linear scan vs binary search at n={SMALL_N}",
                                             values[arm("binary", SMALL_N)], values[arm("linear", SMALL_N)],
                                             MIN_SCAN_EFFECT, alpha=alpha / 3)
    fit = exponent(values, "quadratic", 1 - alpha / 3)
    p = fit.p_above(QUADRATIC_FROM)
    effect = Effect("scaling exponent of the expiry pass", fit.exponent, "exponent", fit.low, fit.high, p,
                    1 - alpha / 3, relative=False)
    grows = "reproduced" if fit.low > QUADRATIC_FROM and p < alpha / 3 else \
        "not-reproduced" if fit.high < QUADRATIC_FROM else "inconclusive"
    largest = FLOW_SIZES[-1]
    fix, fix_text, _ = judge_paired_change(f"the fix at n={largest}", values[arm("quadratic", largest)],
                                           values[arm("fixed", largest)], MIN_FIX_EFFECT, alpha=alpha / 3)
    shown = f"{scan_text}; the expiry pass grows as n^{fit.exponent:.2f} ({effect.text()}); {fix_text}"
    parts = {"scan": scan, "exponent": grows, "fix": fix}
    if all(v == "reproduced" for v in parts.values()):
        return "reproduced", shown, effect
    if "not-reproduced" in parts.values():
        failed = ", ".join(name for name, v in parts.items() if v == "not-reproduced")
        return "not-reproduced", f"not shown here ({failed}): {shown}", effect
    return "inconclusive", shown, effect
# ANCHOR_END: judge


def prediction(machine: Machine) -> str:
    """What this machine should show, from the probe alone, said before measuring."""
    caches = {c["level"]: c for c in machine.caches_of(machine.online_cpus[-1]) if c["type"] != "Instruction"} \
        if machine.online_cpus else {}
    line = caches.get(1, {}).get("line_size") or 64
    l2 = caches.get(2, {}).get("size_kib")
    pmu = ("its PMU can count branch-misses and cache-misses for each structure (`perf stat`)"
           if machine.value("hw_pmu") else "no hardware PMU here: timing only, and perf samples on the software clock")
    core = ("an emulated CPU (QEMU's TCG) has no branch predictor or cache of its own: part 1 cannot show here"
            if machine.emulated() else
            f"a {machine.value('vendor') or 'CPU'} core that predicts branches and fetches {line}-byte lines: expect "
            f"the linear scan to beat binary search at n={SMALL_N} (a few compares in one line, one mispredicted exit, "
            "against log2(n) branches guessed half wrong) and to lose at large n")
    nodes = (f"; its {l2} KiB L2 holds the tree's and the list's largest node pools (about 400 KiB), so they "
             "chase pointers within L2" if l2 and l2 >= 512 else "")
    return (f"{core}{nodes}. The expiry pass: exponent near 2 at any CPU (the algorithm, not the hardware), "
            f"hidden at small n where the per-flow work dominates; the fix near 1. {pmu}")


def profile_both(cpu: int, seconds: float) -> tuple[dict[str, dict[str, int]] | None, str | None]:
    """perf record -g on each version of the expiry pass at the largest table: folded stacks, or why none."""
    try:
        return {
            v: profile.record(flows_profile_argv(v, FLOW_SIZES[-1], seconds, cpu)) for v in ("quadratic", "fixed")
        }, None
    except PerflabError as err:
        return None, str(err)


def profile_note(profiles: dict[str, dict[str, int]] | None, why: str | None) -> str:
    if not profiles:
        return f"no profile: {why}"
    before, after = profiles["quadratic"], profiles["fixed"]
    top_before, top_after = profile.hottest(before), profile.hottest(after)
    return (
        f"perf record -g (cpu-clock) at n={FLOW_SIZES[-1]}: bit_ffs_at in {profile.share(before, 'bit_ffs_at'):.0%} "
        f"of the O(n^2) pass's samples ({sum(before.values())}), hottest {top_before[0]} ({top_before[1]:.0%}); "
        f"after the fix in {profile.share(after, 'bit_ffs_at'):.0%} of {sum(after.values())}, hottest "
        f"{top_after[0]} ({top_after[1]:.0%})"
    )


def per_flow(result: dict[str, Any]) -> list[float]:
    """Each raced expiry pass's time over its flows ("fixed n=4096": its n); a sweep's result has no race."""
    return [value / int(name.split("n=")[1]) for name, values in result.get("race", {"values": {}})["values"].items()
            if name.startswith(("quadratic", "fixed")) for value in values]


class HiddenQuadratic(Lab):
    """Big O is not performance, and a quadratic hides until scale: a lookup sweep, an expiry pass raced and
    profiled."""

    name = "hidden-quadratic"
    QUICK = Settings(sweep_rounds=10, visit_ms=1, race_rounds=40, race_budget_s=25, profile_s=1)
    FULL = Settings(sweep_rounds=30, visit_ms=2, race_rounds=100, race_budget_s=120, profile_s=3)
    RUNS = ("sweep_rounds", "race_rounds")
    EMULATED = "an emulated CPU has no branch predictor or caches whose costs could let the O(n) scan win"
    BOUNDS = (Bound("time per lookup (ns)", 0.2, NO_LIMIT, "a lookup is a load and a compare at least: a cycle of a "
                    "5 GHz clock", lambda result: [s["ns_per_lookup"] for s in result["sweep"]]),
              Bound("time per flow of an expiry pass (ns)", 0.002, NO_LIMIT, "a pass reads each flow's bit at least: "
                    "64 flows a word, a word a cycle at 6 GHz", per_flow))
    IN_A_VM = ("in a VM, the host's other guests share the caches and take the vCPU away: a round the host "
               "interrupted is an outlier, which the medians and the race absorb, but the crossover can move by a size")
    CANNOT_SHOW = "Any machine with one CPU can show it"

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> int:
        """One CPU: the first one given, else the last online one."""
        return one_cpu(machine, cpus)

    def watched_cpus(self, placement: int, **options) -> list[int]:
        return [placement]

    def measure(self, machine: Machine, cpu: int, settings: Settings, progress: bool) -> dict[str, Any]:
        """The sweep, the race until decided, then a profile of each version of the expiry pass."""
        sweep = sweep_lookups(cpu, settings.sweep_rounds, settings.visit_ms, progress)
        plan = Plan(ROUNDS_PER_LOOK, settings.race_rounds, settings.race_budget_s)
        raced = race(list(ARMS), round_runner(cpu, settings.visit_ms),
                     lambda values, alpha: judge_race(values, alpha)[0] in DECIDED, plan,
                     control=arm("fixed", FLOW_SIZES[-1]), desc="lookups at n=16 and expiry passes, until decided",
                     progress=progress)
        profiles, why = profile_both(cpu, settings.profile_s)
        result = results.new_result(self.name, "race", machine.summary(), {"cpu": cpu, **asdict(settings)})
        result.update(sweep=sweep, race=raced.to_json(), profiles=profiles, profile_error=why,
                      prediction=prediction(machine))
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        raced = Race.from_json(result["race"])
        kept = raced.kept_values()
        verdict, reason, effect = judge_race(kept, raced.alpha_per_look)
        if verdict == "inconclusive":
            reason = f"{reason}; {raced.undecided()}"
        return Verdict(self.name, verdict, reason, effect, notes=measured_notes(result, raced))


def measured_notes(result: dict[str, Any], raced: Race) -> list[str]:
    """The prediction, the crossover, each version's exponent, the profile, and what to distrust."""
    kept, medians = raced.kept_values(), lookup_medians(result["sweep"])
    sizes = [n for n in LOOKUP_SIZES if n in medians["linear"]]
    at = crossover(sizes, [medians["linear"][n] for n in sizes], [medians["binary"][n] for n in sizes])
    scan, search = (stats.median(kept[arm(k, SMALL_N)]) for k in ("linear", "binary"))
    notes = [f"predicted from the probe: {result['prediction']}",
             f"CPU {result['params']['cpu']}; at n={SMALL_N}: linear scan {scan:.1f} ns, binary search {search:.1f} ns "
             f"per lookup (medians of {raced.rounds - raced.first_kept} rounds)",
             f"crossover (the sweep's medians): binary search is faster from n={at} on" if at else
             f"crossover: the linear scan was still faster at n={sizes[-1]}, the sweep's largest"]
    for version in ("quadratic", "fixed"):
        fit = exponent(kept, version, 0.95)
        times = ", ".join(f"{stats.median(kept[arm(version, n)]) / n:.1f}" for n in FLOW_SIZES)
        notes.append(f"{version} expiry pass: time grows as n^{fit.exponent:.2f} (95% CI {fit.low:.2f} to "
                     f"{fit.high:.2f}); ns per flow at n={', '.join(map(str, FLOW_SIZES))}: {times}")
    notes.append(profile_note(result["profiles"], result["profile_error"]))
    notes += raced.notes
    for name in (arm("linear", SMALL_N), arm("quadratic", FLOW_SIZES[-1])):
        notes += [f"{name}: {w}" for w in stats.instability_warnings(kept[name], "rounds")]
    return notes


LAB = HiddenQuadratic()
