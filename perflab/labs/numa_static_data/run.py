"""Lab 5, the measurement: threads that write one shared global, against the same threads checking before
they write; and, on a machine with two NUMA nodes (real, or the numa2 VM), where first touch puts .bss.

Three parts, by what the probe finds:
- coherence (every machine but an emulated one): the arms of shared_global.c race, round by round, until
  the unconditional write and check-before-write are told apart; the write is also measured at one touch
  every 8 operations, to fit the cost of one shared write. On one NUMA node this is cache-line coherence
  between cores, not NUMA: the verdict says so.
- placement (two or more nodes): four launches, each with the node the global's page must land on.
- remote (two or more nodes, not emulated): the write arm with the global's page on the threads' own node
  against the other node, in the same race.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ... import results, stats
from ...bounds import NO_LIMIT, Bound
from ...cpulist import check_cpus
from ...errors import PerflabError
from ...journal import SystemChanges
from ...knobs import NumaBalancing
from ...probe import Machine
from ...runner import run_records
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import Verdict, judge_change
from .. import CannotShow, Lab
from .model import MIN_EFFECT, cap_mops, decide, fit
from .program import ARMS, FIT_KS, Settings, binary, measure_placement, program_argv

REMOTE = "write, line on the other node"
REMOTE_MEANS = {
    "reproduced": "reproduced, the line's page on the other node costs the writers more: its every transfer "
                  "crosses the interconnect",
    "not-reproduced": f"not reproduced, a remote cost of {MIN_EFFECT:.0%} or more is ruled out here",
    "inconclusive": "inconclusive, too uncertain to say whether the other node costs more: rerun with more runs",
}
SPARSE = f"write, every {FIT_KS[1]}"


@dataclass(frozen=True)
class Placement:
    cpus: list[int]  # the threads' CPUs
    nodes: dict[int, list[int]]  # node -> its CPUs, when the machine has two or more; else empty
    emulated: bool


def node_cpus(machine: Machine) -> dict[int, list[int]]:
    return {n["node"]: n["cpus"] for n in machine.value("numa_nodes") or [] if n["cpus"]}


# ---------------------------------------------------------------- part 1 (and 3): the race

def race_arms(placement: Placement) -> list[str]:
    arms = [*ARMS, SPARSE]
    return arms + [REMOTE] if len(placement.nodes) >= 2 else arms


def arm_argv(program, placement: Placement, arm: str, settings: Settings) -> list[str]:
    """The program's command line for a race arm; with two nodes, the global's page is put on the threads'
    node (or, for REMOTE, the other node) first, so no arm depends on where perflab itself ran."""
    home = far = None
    if len(placement.nodes) >= 2:
        (home, _), (far, _) = sorted(placement.nodes.items())[:2]
    name, k = ("write", FIT_KS[1]) if arm == SPARSE else ("write", 1) if arm == REMOTE else (arm, 1)
    return program_argv(program, placement.cpus, name, k, settings, far if arm == REMOTE else home)


def mops_of(records: list[dict[str, Any]]) -> float:
    """Machine-wide million operations per second: the timed repeats' median (the first warms up)."""
    samples = [r for r in records if r.get("type") == "sample"]
    timed = samples[1:] or samples
    return samples[0]["threads"] * 1000 / stats.median([s["ns_per_op"] for s in timed])


def measure_race(placement: Placement, settings: Settings, progress: bool) -> dict[str, Any]:
    program = binary()
    samples: list[dict[str, Any]] = []

    def one_round(r: int, order: list[str]) -> dict[str, float]:
        measured = {}
        for arm in order:
            records = run_records(arm_argv(program, placement, arm, settings))
            samples.extend(dict(s, race_arm=arm, round=r) for s in records if s.get("type") == "sample")
            measured[arm] = mops_of(records)
        return measured

    def decided(values: dict[str, list[float]], alpha: float) -> bool:
        done = decide(values, alpha)[0] in DECIDED
        return done and (REMOTE not in values or remote_effect(values, alpha)[0] in DECIDED)

    plan = Plan(settings.rounds_per_look, settings.max_rounds, settings.budget_s)
    raced = race(race_arms(placement), one_round, decided, plan, control="none",
                 desc="rounds: every arm once, until decided", progress=progress)
    return {"race": raced.to_json(), "samples": [s for s in samples if s["round"] >= raced.first_kept]}


def operation_times(result: dict[str, Any]) -> list[float]:
    """ns per operation of every timed repeat in a result's race (none in a placement-only result)."""
    return [s["ns_per_op"] for s in result.get("coherence", {}).get("samples", [])]


def remote_effect(values: dict[str, list[float]], alpha: float):
    """Is the write arm faster with the line homed on the threads' node than on the other?"""
    verdict, _, effect = judge_change("write arm, line on the threads' node vs the other node", values[REMOTE],
                                      values["write"], MIN_EFFECT, stats.median, alpha=alpha)
    return verdict, effect


def fitted(values: dict[str, list[float]], threads: int) -> tuple[float, float]:
    """(base, per_write) in ns per operation per thread, from the write arm at FIT_KS."""
    ns = [threads * 1000 / stats.median(values[arm]) for arm in ("write", SPARSE)]
    return fit(FIT_KS[0], ns[0], FIT_KS[1], ns[1])


# ---------------------------------------------------------------- the lab

class NumaStaticData(Lab):
    """One written global in .data/.bss caps a whole machine's throughput."""

    name = "numa-static-data"
    TIME_RATIO = True  # its effect is a ratio of its arms' times or rates
    QUICK = Settings(rounds_per_look=5, max_rounds=60, budget_s=30, ops=200_000, repeats=3)
    FULL = Settings(rounds_per_look=10, max_rounds=200, budget_s=180, ops=500_000, repeats=5)
    RUNS = ("max_rounds",)
    OPTIONS = {"part": ("auto", "placement")}
    IN_A_VM = ("in a VM the threads' vCPUs may share a physical core or move between host cores, which changes "
               "what a line transfer costs; the effect is a ratio measured inside one run")
    CANNOT_SHOW = ("Two CPUs show the shared line's cost; placement needs two NUMA nodes: "
                   "`perflab run numa-static-data --vm numa2`; remote against local throughput needs a real "
                   "two-socket machine.")
    # Every operation's private work is 8 dependent multiply-xorshift steps (shift, xor, multiply: 5+ cycles
    # each), 40 cycles before any touch of the global, and no core clocks above ~6 GHz.
    BOUNDS = (Bound("time per operation (ns)", 5, NO_LIMIT, "each operation's private work is a chain of 40 "
                    "cycles", operation_times),)

    def choose_cpus(self, machine: Machine, cpus: list[int] | None) -> Placement:
        """-C gives the threads' CPUs (two or more); by default two CPUs of the first node, the last online."""
        nodes = node_cpus(machine)
        nodes = nodes if len(nodes) >= 2 else {}
        if cpus:
            check_cpus(cpus, machine.online_cpus)
            if len(set(cpus)) < 2:
                raise CannotShow(f"give two or more different CPUs for the threads (-C 0,1), not {cpus}: one "
                                 "thread shares its line with no one")
            return Placement(sorted(set(cpus)), nodes, machine.emulated())
        home = sorted(nodes.items())[0][1] if nodes else machine.online_cpus
        if len(home) < 2:
            raise CannotShow("one CPU: no other thread to share the line with")
        return Placement(home[-2:], nodes, machine.emulated())

    def watched_cpus(self, placement: Placement, part: str = "auto") -> list[int]:
        """The threads' CPUs, where they race: a neighbour there takes turns with a writer of the line. Where
        first touch puts a page, no neighbour changes."""
        return placement.cpus if part == "auto" and not placement.emulated else []

    def measure(self, machine: Machine, placement: Placement, settings: Settings, progress: bool,
                part: str = "auto") -> dict[str, Any]:
        if part == "placement" and not placement.nodes:
            raise PerflabError("the placement part needs two NUMA nodes and this machine has one: run it in the "
                               "numa2 VM, `perflab run numa-static-data -o part=placement --vm numa2`")
        result = results.new_result(self.name, "run", machine.summary(),
                                    {**asdict(placement), "part": part, **asdict(settings)})
        balancing = NumaBalancing()
        result["numa_balancing"] = balancing.read()
        with SystemChanges() as changes:
            if placement.nodes and balancing.available() and result["numa_balancing"] not in (None, "0"):
                changes.set(balancing, "0")  # it would migrate the page toward its users and blur placement
            if placement.nodes:
                result["placement"] = measure_placement(binary(), placement.nodes)
            if part == "auto" and not placement.emulated:
                result["coherence"] = measure_race(placement, settings, progress)
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        notes = [f"kernel.numa_balancing was {result['numa_balancing']!r}"
                 + (" (set to 0 while measuring placement, then restored)" if result.get("placement")
                    and result["numa_balancing"] not in (None, "0") else "")]
        placed_ok = None
        if "placement" in result:
            placed_ok = all(p["node"] == p["expected"] for p in result["placement"])
            notes += [placement_note(p) for p in result["placement"]]
        if "coherence" not in result:
            return self.judge_placement(placed_ok, notes, result["params"]["emulated"])
        raced = Race.from_json(result["coherence"]["race"])
        kept = raced.kept_values()
        verdict, effect = decide(kept, raced.alpha_per_look)
        notes += coherence_notes(kept, result["params"]["cpus"], bool(result["params"]["nodes"]))
        if REMOTE in kept:
            remote, remote_effect_found = remote_effect(kept, raced.alpha_per_look)
            notes.append(f"{remote_effect_found.text()}: {REMOTE_MEANS[remote]}")
        notes += raced.notes
        if verdict == "reproduced" and placed_ok is False:
            return Verdict(self.name, "not-reproduced", f"{effect.text()}; but a page did not land where first "
                           "touch predicts (see the notes)", effect, notes=notes)
        if verdict == "reproduced":
            return Verdict(self.name, verdict, f"{effect.text()}: writing a value that never changes costs every "
                           "thread the line", effect, notes=notes)
        if verdict == "not-reproduced":
            return Verdict(self.name, verdict, f"{effect.text()}; {MIN_EFFECT:.0%} or more is ruled out", effect,
                           notes=notes)
        return Verdict(self.name, verdict, f"{effect.text()}; {raced.undecided()}", effect, notes=notes)

    def judge_placement(self, placed_ok: bool | None, notes: list[str], is_emulated: bool) -> Verdict:
        if is_emulated:
            notes.append("throughput is not measured: QEMU's TCG emulates no caches and no NUMA latency, so a "
                         "remote line costs what a local one does; a two-socket machine shows it, or the recorded "
                         "data (the figures)")
        if placed_ok:
            return Verdict(self.name, "reproduced", "every launch put the global's page on the node first touch "
                           "and memory policy predict", notes=notes)
        return Verdict(self.name, "not-reproduced", "a launch put the global's page on another node than first "
                       "touch and memory policy predict (see the notes)", notes=notes)


def placement_note(placed: dict[str, Any]) -> str:
    mark = "as predicted" if placed["node"] == placed["expected"] else f"predicted node {placed['expected']}"
    return (f"placement, {placed['name']}: shared_sentinel ({placed['address']}) on node {placed['node']}, "
            f"{mark} ({placed['why']})")


def coherence_notes(kept: dict[str, list[float]], cpus: list[int], numa: bool) -> list[str]:
    medians = {arm: stats.median(values) for arm, values in kept.items()}
    shown = ", ".join(f"{arm} {medians[arm]:.0f}" for arm in kept)
    base, per_write = fitted(kept, len(cpus))
    where = ("the threads share one NUMA node here, so this is the cost of moving a cache line between cores, "
             "not NUMA; across sockets each transfer costs several times more" if not numa else
             "the threads share the first NUMA node; the global's page is put there first")
    return [f"machine-wide million operations per second on CPUs {','.join(map(str, cpus))}: {shown}", where,
            f"model: {base:.1f} ns of private work per operation, {per_write:.1f} ns per shared write (fitted at "
            f"one write every {FIT_KS[0]} and every {FIT_KS[1]} operations): one line caps the whole machine at "
            f"{cap_mops(per_write, 1):.0f} M operations/s at one write per operation, however many cores; "
            f"{len(cpus)} threads already ran the write arm at {medians['write']:.0f} M/s "
            f"({medians['write'] / cap_mops(per_write, 1):.2f} x the cap: the model is an estimate, "
            "since a thread that holds the line may write it more than once before it moves)"]


LAB = NumaStaticData()
