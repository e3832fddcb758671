"""Lab 1, the measurement: every pair's latency, the structure it reveals, sequential against best pair."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT, Bound
from ...build import ensure_built
from ...cpulist import check_cpus, format_cpulist
from ...formatting import median_with_spread
from ...lock import measurement_lock
from ...paths import DATA_DIR, REPO_ROOT
from ...probe import Machine
from ...runner import Config, Run, interleave, run_once
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import Verdict, judge_change
from .. import CannotShow, Lab
from .advisor import analyze
from .matrix import from_result, load

SOURCE_DIR = "labs/01-core-to-core"
# The smallest throughput gain from better pinning worth calling an effect
# (the seed measured +7% on a Sapphire Rapids Xeon).
MIN_EFFECT = 0.03
# Round medians of one pair that differ by more than this mean the pair's
# distance changed during the run: on a VM the host moved the vCPUs.
UNSTABLE_RATIO = 1.25
ROUNDS_PER_LOOK = 5  # rounds of the sequential and the best pair between two looks at the verdict
RECORDED_EXAMPLE = DATA_DIR / "c2c" / "amd-ryzen-9-5950x-3-40ghz-by-nephyrin.csv"


@dataclass(frozen=True)
class Settings:
    """How much to measure: round trips per sample, samples per run, interleaved rounds."""

    round_trips: int
    samples: int
    rounds: int
    compare_round_trips: int
    compare_runs: int  # at most this many rounds of the race of the two pairs...
    compare_budget_s: float  # ...and at most this long: it stops as soon as it is decided


def pingpong_argv(
    binary: Path, a: int, b: int, mode: str, round_trips: int, samples: int, warmup: int = 3
) -> list[str]:
    return [str(binary), "-C", f"{a},{b}", "-m", mode, "-r", str(round_trips), "-s", str(samples), "-w", str(warmup)]


# ANCHOR: stability
def round_medians(run: Run, key: str = "one_way_ns") -> list[float]:
    """Median of each interleaved round: one number per visit to the pair."""
    by_round: dict[int, list[float]] = {}
    for s in run.samples:
        if not s.get("warmup"):
            by_round.setdefault(s["round"], []).append(s[key])
    return [stats.median(v) for _, v in sorted(by_round.items())]


def stability_note(label: str, medians: list[float]) -> str | None:
    """Say so when one pair's latency moved between rounds: its distance is not stable."""
    if len(medians) < 2 or max(medians) / min(medians) <= UNSTABLE_RATIO:
        return None
    return (
        f"CPUs {label}: the latency moved between rounds from {min(medians):.0f} to {max(medians):.0f} ns. "
        "A virtual machine's vCPUs are moved between physical cores by the host, so its core distances are not "
        "stable; on bare metal this points to frequency changes or another load."
    )
# ANCHOR_END: stability


def measure_matrix(machine: Machine, cpus: list[int], settings: Settings, mode: str = "cas",
                   progress: bool = True) -> dict[str, Any]:
    """Measure every pair of `cpus`, interleaved; return a result with the matrix and raw samples."""
    pairs = list(itertools.combinations(cpus, 2))
    binary = ensure_built(SOURCE_DIR, "pingpong")
    configs = [Config(f"{a},{b}", pingpong_argv(binary, a, b, mode, settings.round_trips, settings.samples))
               for a, b in pairs]
    runs = interleave(configs, settings.rounds, desc=f"{len(pairs)} CPU pairs", progress=progress)
    index = {cpu: i for i, cpu in enumerate(cpus)}
    grid: list[list[float | None]] = [[None] * len(cpus) for _ in cpus]
    notes = []
    for (a, b), run in zip(pairs, runs.values()):
        grid[index[a]][index[b]] = grid[index[b]][index[a]] = stats.median(run.values("one_way_ns"))
        note = stability_note(run.label, round_medians(run))
        if note:
            notes.append(note)
    result = results.new_result(
        CoreToCore.name, "matrix", machine.summary(), {"mode": mode, "cpus": cpus, **asdict(settings)}
    )
    result.update(matrix={"cpus": cpus, "one_way_ns": grid}, runs=[r.to_json() for r in runs.values()], notes=notes)
    return result


def measure_pair(a: int, b: int, settings: Settings | None = None, mode: str = "cas", progress: bool = True,
                 machine: Machine | None = None) -> dict[str, Any]:
    """Measure one pair (for exercises and quick looks); the result is saved and returned."""
    machine = machine or LAB.probe()
    check_cpus([a, b], machine.online_cpus)
    with measurement_lock(f"perflab {CoreToCore.name}: pair {a},{b}"):
        result = measure_matrix(machine, sorted({a, b}), settings or CoreToCore.QUICK, mode, progress)
    result["kind"] = "pair"
    result["path"] = str(results.save(result))
    return result


def raw_samples(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every measured sample of a saved result, warm-up samples left out."""
    return [s for run in result["runs"] for s in run["samples"] if not s.get("warmup")]


def relation(machine: Machine, a: int, b: int) -> str:
    """How two CPUs are related in the probe's topology, from closest to farthest."""
    if b in machine.cpu(a)["smt_siblings"]:
        return "smt-siblings"
    if machine.cpu(a)["package"] != machine.cpu(b)["package"]:
        return "different-socket"
    if any(a in group and b in group for group in machine.llc_groups()):
        return "same-llc"
    return "different-llc"


def topology_agreement(analysis: dict[str, Any], machine: Machine, cpus: list[int]) -> list[str]:
    """Check each level recovered from latencies against the probe's groupings of the same CPUs."""
    def restricted(groups: list[list[int]]) -> list[list[int]]:
        return sorted(g for g in ([c for c in group if c in cpus] for group in groups) if g)

    probe_levels = {"SMT siblings (probe)": restricted(machine.smt_sibling_groups()),
                    "shared LLC (probe)": restricted(machine.llc_groups()),
                    "package (probe)": restricted(machine.package_groups())}
    notes = []
    for groups, info in zip(analysis["levels"], analysis["level_info"]):
        match = [name for name, expected in probe_levels.items() if sorted(groups) == expected]
        notes.append(f"recovered level '{info['name']}' ({len(groups)} groups) "
                     + (f"matches the {match[0]}" if match else "matches no grouping the probe reports"))
    if not analysis["levels"]:
        notes.append(
            "no structure recovered from these latencies; the probe says: "
            + "; ".join(
                f"{name}: {' | '.join(format_cpulist(g) for g in groups)}" for name, groups in probe_levels.items()
            )
        )
    return notes


def sample_rate(sample: dict[str, Any]) -> float:
    """Round trips per second of one sample: the throughput two communicating threads reach."""
    return sample["round_trips"] * 1e9 / sample["elapsed_ns"]


def round_trip_times(result: dict[str, Any]) -> list[float]:
    """ns per round trip of every sample in a result, the matrix's and the race's (saved as rates)."""
    return ([s["elapsed_ns"] / s["round_trips"] for run in result["runs"] for s in run["samples"]]
            + [1e9 / rate for rates in result.get("rates", {}).values() for rate in rates])


# ANCHOR: compare
def compare_pairs(machine: Machine, sequential: tuple[int, int], best: tuple[int, int], settings: Settings,
                  progress: bool = True) -> dict[str, Any]:
    """Message-passing throughput on the sequential pair and on the best pair, round by round until decided."""
    binary = ensure_built(SOURCE_DIR, "pingpong")
    argv = {label: pingpong_argv(binary, *pair, "two-lines", settings.compare_round_trips, 1, warmup=1)
            for label, pair in (("sequential", sequential), ("best", best))}

    def one_round(_r: int, order: list[str]) -> dict[str, float]:
        return {label: sample_rate(next(s for s in run_once(argv[label])[1] if not s.get("warmup")))
                for label in order}

    plan = Plan(ROUNDS_PER_LOOK, settings.compare_runs, settings.compare_budget_s)
    raced = race(
        ["sequential", "best"],
        one_round,
        lambda rates, alpha: decide(rates, sequential, best, alpha)[0] in DECIDED,
        plan,
        control="sequential",
        desc="sequential vs best pair, until decided",
        progress=progress,
    )
    return {"rates": raced.kept_values(), "race": raced.to_json()}


def decide(rates: dict[str, list[float]], sequential, best, alpha: float):
    """Does the best pair pass messages at least MIN_EFFECT faster than the sequential one?"""
    return judge_change(f"throughput on {best[0]},{best[1]} vs {sequential[0]},{sequential[1]}",
                        rates["sequential"], rates["best"], MIN_EFFECT, alpha=alpha)
# ANCHOR_END: compare


def rate_summary(rates: list[float]) -> dict[str, float]:
    """Harmonic mean of round trips per second with its 95% CI, as the seed reports it."""
    low, high = stats.harmonic_mean_ci(rates)
    return {"harmonic_mean": stats.harmonic_mean(rates), "ci_low": low, "ci_high": high, "n": len(rates)}


def pick_pairs(analysis: dict[str, Any]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The naive pair (neighbours in numbering, the one crossing the coarsest boundary) and the best pair."""
    sequential = analysis["sequential_pairs"]
    crossing = [p for p in sequential if p["crosses"]]
    naive = max(crossing, key=lambda p: p["one_way_ns"]) if crossing else sequential[0]
    best = analysis["recommended_pairs"][0]
    return tuple(naive["cpus"]), tuple(best["cpus"])


def recorded_example() -> str:
    """What a recorded many-core machine shows, computed from its data, for machines too small to show it."""
    found = analyze(load(RECORDED_EXAMPLE))
    crossing = [p for p in found["sequential_pairs"] if p["crosses"]]
    if not crossing:
        return f"Recorded {RECORDED_EXAMPLE.name}: no sequential pair crosses a boundary."
    worst = max(crossing, key=lambda p: p["one_way_ns"])
    a, b = worst["cpus"]
    return (
        f"Recorded data (AMD Ryzen 9 5950X): CPUs {a} and {b} are neighbours in numbering but cross a "
        f"{worst['crosses']} boundary: {worst['one_way_ns']:.0f} ns one way, while CPU {a}'s nearest other core is "
        f"{worst['vs_best_ns']:.0f} ns away. See it with `perflab c2c analyze "
        f"{RECORDED_EXAMPLE.relative_to(REPO_ROOT)}`."
    )


class CoreToCore(Lab):
    """Core numbers lie about distance: the latency matrix, the structure in it, and what pinning by it gains."""

    name = "core-to-core"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(round_trips=1000, samples=20, rounds=3, compare_round_trips=20_000, compare_runs=30,
                     compare_budget_s=20)
    FULL = Settings(round_trips=2000, samples=100, rounds=10, compare_round_trips=200_000, compare_runs=80,
                    compare_budget_s=120)
    RUNS = ("rounds", "compare_runs")
    EMULATED = "its vCPUs are host threads with no cache hierarchy between them, so no distance is real"
    CANNOT_SHOW = ("Showing that numbering misleads needs 3+ CPUs with different distances: a machine with two L3 "
                   "clusters or sockets, or the recorded matrices (`perflab c2c analyze`)")
    # Each way, one core's store must reach a load on the other: even SMT siblings sharing an L1 wait its
    # latency (4+ cycles) each way, and no core clocks above ~6 GHz, so 1.3 ns there and back at the very least.
    # The fastest pair in the course's recorded matrices (an i9-12900K's SMT siblings) takes 8.7 ns.
    BOUNDS = (Bound("time per round trip (ns)", 2, NO_LIMIT, "two cores cannot hand a cache line there and back "
                    "in under 2 ns", round_trip_times),)

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> list[int]:
        """The CPUs to measure: the given ones if they are online, else all online CPUs."""
        online = machine.online_cpus
        chosen = sorted(cpus) if cpus else online
        check_cpus(chosen, online)
        if len(chosen) < 2:
            raise CannotShow(f"core-to-core needs at least two CPUs, got {format_cpulist(chosen) or 'none'} "
                             f"(online: {format_cpulist(online)}); pass two or more with -C, or use a machine or VM "
                             "with more CPUs")
        return chosen

    def watched_cpus(self, placement: list[int]) -> list[int]:
        """Every CPU of the matrix: a neighbour on one delays every round trip through it."""
        return placement

    def measure(self, machine: Machine, cpus: list[int], settings: Settings, progress: bool) -> dict[str, Any]:
        """The matrix and its analysis; with 3+ CPUs, the race of the naive pair against the best one."""
        result = measure_matrix(machine, cpus, settings, progress=progress)
        result["analysis"] = analysis = analyze(from_result(result))
        if len(cpus) > 2:
            sequential, best = pick_pairs(analysis)
            result["pairs"] = {"sequential": list(sequential), "best": list(best)}
            if set(sequential) != set(best):
                compared = compare_pairs(machine, sequential, best, settings, progress=progress)
                result.update(rates=compared["rates"], race=compared["race"],
                              summary={label: rate_summary(r) for label, r in compared["rates"].items()})
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        cpus, analysis = result["matrix"]["cpus"], result["analysis"]
        notes = list(result["notes"]) + analysis["notes"] + topology_agreement(analysis, machine, cpus)
        if len(cpus) == 2:
            one_way = median_with_spread([s["one_way_ns"] for s in raw_samples(result)], "ns", 0)
            return Verdict(self.name, "cannot-show",
                           f"only two CPUs ({cpus[0]},{cpus[1]}) to measure: one pair, one way {one_way}, and "
                           f"nothing to compare it with. {self.CANNOT_SHOW}.", notes=notes + [recorded_example()])
        sequential, best = result["pairs"]["sequential"], result["pairs"]["best"]
        if "rates" not in result:
            return Verdict(self.name, "not-reproduced", f"here the neighbours {sequential[0]},{sequential[1]} are "
                           "also the best pair: numbering matches distance", notes=notes)
        raced = Race.from_json(result["race"])
        verdict, reason, effect = decide(result["rates"], sequential, best, raced.alpha_per_look)
        if verdict == "inconclusive":
            reason = f"{effect.text()}; {raced.undecided()}"
        for label in ("sequential", "best"):
            notes += [f"{label}: {w}" for w in stats.instability_warnings(result["rates"][label], "round trips/s")]
        return Verdict(self.name, verdict, reason, effect, notes=notes + raced.notes)


LAB = CoreToCore()
