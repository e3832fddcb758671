"""Lab 7, the measurement: perf's ranking, coz's profile, then a race that checks both against reality."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import results, stats
from ...bounds import Bound
from ...build import ensure_built
from ...cpulist import check_cpus
from ...paths import REPO_ROOT, scratch
from ...probe import Machine
from ...runner import run_once
from ...sequential import DECIDED, Plan, Race, race
from ...verdict import ALPHA, Verdict, judge_change
from .. import CannotShow, Lab
from . import coz
from .profilers import (
    FUNCTIONS,
    SOURCE_DIR,
    CozSession,
    function_at,
    hottest_function,
    perf_ranking,
    require_tools,
    work_lines,
)

SOURCE = REPO_ROOT / SOURCE_DIR / "commit.c"
POINT = "batch"  # the program's progress point
OPTIMISED = 0.5  # the real optimisation halves a function's work: coz's 50% virtual speedup
NEAR = 0.1  # coz's experiments within this of 50% make its prediction...
MIN_NEAR = 3  # ...when there are at least this many
MIN_EXPERIMENTS = 4  # a line with fewer experiments than this is too noisy to rank
MIN_EFFECT = 0.05  # a change of the batch rate smaller than 5% is not worth an optimisation
LARGE_SPEEDUP = 0.25  # coz's pick must help at virtual speedups of 25% and more
ROUNDS_PER_LOOK = 4  # rounds of the race between two looks at the verdict


@dataclass(frozen=True)
class Settings:
    """How long to profile and how much to race."""

    perf_seconds: float  # one perf record run
    survey_seconds: float  # one coz run over every line; coz runs about two experiments a second
    survey_runs: int  # at most this many survey runs, pooled: the survey stops when its top line is clear
    focus_seconds: float  # one coz run on each pick's line alone (--fixed-line), for the predictions
    race_seconds: float  # one timed run of each build in the race
    race_rounds: int  # at most this many interleaved rounds of the race...
    race_budget_s: float  # ...and at most this long: it stops as soon as it is decided


def coz_seconds(settings: Settings) -> float:
    return settings.survey_runs * settings.survey_seconds + 2 * settings.focus_seconds


def duration_text(settings: Settings) -> str:
    """The longest the lab can take: coz and the race stop earlier when they are decided."""
    seconds = settings.perf_seconds + coz_seconds(settings) + settings.race_budget_s
    return f"at most about {seconds / 60:.0f} min" if seconds >= 90 else f"at most about {seconds:.0f} s"


def program_argv(
    binary: Path, cpus: tuple[int, int], seconds: float, factors: dict[str, float] | None = None
) -> list[str]:
    argv = [str(binary), "-d", str(seconds), "-c", f"{cpus[0]},{cpus[1]}"]
    for function, factor in (factors or {}).items():
        argv += ["-x", f"{function}={factor}"]
    return argv


def race_picks(binary: Path, cpus: tuple[int, int], picks: dict[str, str], settings: Settings,
               progress: bool) -> Race:
    """Batches per second of the unchanged program and of each pick's function at half its work, round by round
    until the verdict is decided."""
    arms = ["unchanged", *dict.fromkeys(picks.values())]
    argv = {arm: program_argv(binary, cpus, settings.race_seconds, {} if arm == "unchanged" else {arm: OPTIMISED})
            for arm in arms}

    def one_round(_r: int, order: list[str]) -> dict[str, float]:
        return {arm: run_once(argv[arm])[1][0]["batches_per_s"] for arm in order}

    plan = Plan(ROUNDS_PER_LOOK, settings.race_rounds, settings.race_budget_s)
    return race(arms, one_round, lambda rates, alpha: race_decided(picks, rates, alpha), plan,
                control="unchanged", desc="racing the builds, until decided", progress=progress)


def batch_rates(result: dict[str, Any]) -> list[float]:
    """Batches per second of every timed run of the race in a result."""
    return [rate for rates in (result.get("rates") or {}).values() for rate in rates]


def survey(session: CozSession, settings: Settings) -> tuple[coz.Profile, list]:
    """coz over every line, run after run, until its top line clearly speeds the program up (or the runs run out).

    A line ranked first by a handful of noisy experiments is not a pick: it must have MIN_NEAR experiments at
    large virtual speedups whose predicted program speedup has its 95% interval above zero.
    """
    for _ in range(settings.survey_runs):
        profile = session.run(settings.survey_seconds)
        ranked = coz.rank_lines(profile, POINT, MIN_EXPERIMENTS)
        if ranked and clearly_faster(profile, ranked[0][0]):
            break
    return profile, ranked


def clearly_faster(profile: coz.Profile, line: str) -> bool:
    """Does speeding this line up by 25% or more speed the program up, with a 95% interval above zero?"""
    large = [e for e in profile.experiments if e.selected == line and e.speedup >= LARGE_SPEEDUP]
    estimate = coz.predicted_speedup(coz.baseline_experiments(profile), large, POINT)
    return estimate is not None and estimate.experiments >= MIN_NEAR and estimate.low > 0


# ANCHOR: compare
def compare(profile: coz.Profile, lines: dict[str, int], picks: dict[str, str],
            rates: dict[str, list[float]]) -> list[dict[str, Any]]:
    """For each pick: coz's predicted time saved at 50% against the measured, each with its 95% CI."""
    baseline = coz.baseline_experiments(profile)
    rows = []
    for who, function in picks.items():
        location = next((e.selected for e in profile.experiments
                         if coz.short_location(e.selected) == f"{SOURCE.name}:{lines[function]}"), None)
        estimate = coz.predicted_speedup(baseline, coz.near(profile, location, OPTIMISED, NEAR), POINT) \
            if location else None
        _, _, effect = judge_change(function, rates["unchanged"], rates[function], MIN_EFFECT, statistic=stats.median)
        actual = {"value": coz.time_saved(1 + effect.value), "low": coz.time_saved(1 + effect.ci_low),
                  "high": coz.time_saved(1 + effect.ci_high), "p_value": effect.p_value}
        predicted = asdict(estimate) if estimate and estimate.experiments >= MIN_NEAR else None
        rows.append({"pick": who, "function": function, "line": lines[function], "predicted": predicted,
                     "actual": actual, "held": predicted and held(predicted, actual)})
    return rows


def held(predicted: dict[str, float], actual: dict[str, float]) -> bool:
    """Within 5 points of the measurement, or the two 95% intervals overlap."""
    return abs(predicted["value"] - actual["value"]) <= MIN_EFFECT or \
        (predicted["low"] <= actual["high"] and actual["low"] <= predicted["high"])
# ANCHOR_END: compare


# ANCHOR: judge
def judge_race(picks: dict[str, str], rates: dict[str, list[float]], alpha: float = ALPHA) -> tuple[str, str, Any]:
    """Reproduced when coz's pick really speeds the program up and perf's pick really does not.

    Two comparisons make the verdict, so each is judged at half the error rate.
    """
    if picks["perf"] == picks["coz"]:
        helps, shown, effect = judge_change(picks["coz"], rates["unchanged"], rates[picks["coz"]], MIN_EFFECT,
                                            stats.median, alpha=alpha)
        if helps == "reproduced":
            return "not-reproduced", f"perf and coz both point to {picks['coz']}: here the hottest function is the " \
                f"one to fix ({shown})", effect
        if helps == "not-reproduced":  # coz pointed where halving does not help: its profile, not the program, missed
            return "inconclusive", f"perf and coz both point to {picks['coz']}, but halving it does not speed the " \
                f"program up ({shown}): coz's profile missed what limits it in this run; rerun without --quick, " \
                "where coz profiles each line longer", effect
        return "inconclusive", f"perf and coz both point to {picks['coz']} ({shown})", effect
    coz_verdict, coz_shown, effect = judge_change(f"halving {picks['coz']} (coz's pick)", rates["unchanged"],
                                                  rates[picks["coz"]], MIN_EFFECT, stats.median, alpha=alpha / 2)
    perf_verdict, perf_shown, _ = judge_change(f"halving {picks['perf']} (perf's pick)", rates["unchanged"],
                                               rates[picks["perf"]], MIN_EFFECT, stats.median, alpha=alpha / 2)
    shown = f"batch rate: {coz_shown}; {perf_shown}"
    if coz_verdict == "reproduced" and perf_verdict == "not-reproduced":
        return "reproduced", f"the hottest function was not the one to fix; {shown}", effect
    if coz_verdict == "not-reproduced" or perf_verdict == "reproduced":
        return "not-reproduced", f"coz's pick did not beat perf's here; {shown}", effect
    return "inconclusive", shown, effect
# ANCHOR_END: judge


def race_decided(picks: dict[str, str], rates: dict[str, list[float]], alpha: float) -> bool:
    """The race can stop: its verdict is decided, or, where both profilers picked one function, whether halving
    that function helps is (either way, more rounds cannot change the verdict)."""
    if picks["perf"] == picks["coz"]:
        return judge_change(picks["coz"], rates["unchanged"], rates[picks["coz"]], MIN_EFFECT, stats.median,
                            alpha=alpha)[0] in DECIDED
    return judge_race(picks, rates, alpha)[0] in DECIDED


def measured_notes(result: dict[str, Any], profile: coz.Profile) -> list[str]:
    """Where the threads ran, both rankings, whether coz's predictions held, and what to distrust."""
    settings, source = result["params"], SOURCE.read_text()
    notes = [f"commit thread on CPU {settings['cpus'][0]}, log thread on CPU {settings['cpus'][1]}; "
             f"coz ran {settings['survey_runs']} x {settings['survey_seconds']:.0f} s over every line, then "
             f"{settings['focus_seconds']:.0f} s on each pick's line: {len(profile.experiments)} experiments",
             "perf's ranking: " + ", ".join(f"{r['symbol']} {r['share']:.0%}" for r in result["perf"][:4]),
             "coz's ranking (mean predicted speedup over the tried speedups): " + ", ".join(
                 f"{function_at(source, line) or coz.short_location(line)} {value:+.1%}"
                 for line, value in result["coz_ranking"][:4])]
    for row in result["comparison"]:
        if row["held"] is not None:
            notes.append(f"coz's prediction for halving {row['function']}: {row['predicted']['value']:+.1%} of each "
                         f"batch's time saved; measured {row['actual']['value']:+.1%}: "
                         f"{'held' if row['held'] else 'did not hold'} (held: within {MIN_EFFECT:.0%} points, or "
                         "the 95% intervals overlap)")
    if result["rates"]:
        notes += [f"unchanged: {w}" for w in stats.instability_warnings(result["rates"]["unchanged"], "timed runs")]
    return notes + profile.warnings


class CausalProfiling(Lab):
    """The hottest function is not the one to fix: perf's pick and coz's pick, each really optimised and raced."""

    name = "causal-profiling"
    QUICK = Settings(perf_seconds=1, survey_seconds=8, survey_runs=3, focus_seconds=6, race_seconds=0.3,
                     race_rounds=40, race_budget_s=15)
    FULL = Settings(perf_seconds=3, survey_seconds=30, survey_runs=3, focus_seconds=25, race_seconds=0.5,
                    race_rounds=60, race_budget_s=90)
    RUNS = ("race_rounds",)
    IN_A_VM = ("in a VM, coz's pauses and perf's samples run on the software clock, and a neighbour on the host "
               "can stretch any experiment: repeat the lab before trusting one curve")
    CANNOT_SHOW = ("The book's chapter and the sample profiles in the notebook show the idea; any machine with two "
                   "cores (or `perflab vm`) can measure it")
    # A batch waits for its slower thread: at least 80 units of work in every arm (50 here, to spare), a unit
    # being 150,000 dependent multiply-adds at 3+ cycles each (a 64-bit multiply's latency on any core), and no
    # core clocks above ~6 GHz: 3.75 ms or more per batch.
    BOUNDS = (Bound("batches per second", 0, 300, "a batch is a chain of at least 22 million cycles",
                    batch_rates),)

    def choose_cpus(self, machine: Machine, cpus: list[int] | None = None) -> tuple[int, int]:
        """(commit thread's CPU, log thread's CPU): two CPUs that are not SMT siblings, CPU 0 last."""
        chosen = cpus or machine.online_cpus
        check_cpus(chosen, machine.online_cpus)
        order = sorted(chosen, key=lambda c: (c == 0, -c))  # CPU 0 takes the most interrupts
        for commit_cpu in order:
            siblings = set(machine.cpu(commit_cpu)["smt_siblings"]) | {commit_cpu}
            for log_cpu in order:
                if log_cpu not in siblings:
                    return commit_cpu, log_cpu
        raise CannotShow(
            f"the lab needs two CPUs on different cores, and {'the CPUs given are' if cpus else 'this machine has'} "
            f"only {len(chosen)} CPU(s) on one core: both threads would take turns, so the slower thread "
            "would no longer set the pace"
        )

    def watched_cpus(self, placement: tuple[int, int]) -> list[int]:
        """The commit and log threads' CPUs: a neighbour on one of them moves the bottleneck."""
        return list(placement)

    def measure(self, machine: Machine, cpus: tuple[int, int], settings: Settings, progress: bool) -> dict[str, Any]:
        """perf's ranking, coz's survey and focused runs, and the race of both picks against the unchanged program."""
        require_tools()
        binary = ensure_built(SOURCE_DIR, "commit")
        source = SOURCE.read_text()
        lines = work_lines(source)
        with scratch("coz") as folder:
            ranking = perf_ranking(program_argv(binary, cpus, settings.perf_seconds), Path(folder))
            session = CozSession(lambda seconds: program_argv(binary, cpus, seconds), Path(folder),
                                 coz_seconds(settings), progress)
            try:
                profile, ranked = survey(session, settings)
                picks = {"coz": function_at(source, ranked[0][0]) if ranked else None,
                         "perf": hottest_function(ranking)}
                ready = picks["coz"] in FUNCTIONS and picks["perf"] in FUNCTIONS
                if ready:
                    for function in dict.fromkeys(picks.values()):
                        profile = session.run(settings.focus_seconds, f"{SOURCE}:{lines[function]}")
            finally:
                session.close()
        raced = race_picks(binary, cpus, picks, settings, progress) if ready else None
        rates = raced.kept_values() if raced else {}
        result = results.new_result(self.name, "profile", machine.summary(), {
            "cpus": list(cpus), "point": POINT, "optimised": OPTIMISED, **asdict(settings)})
        result.update(perf=ranking, coz_profile=session.text, coz_ranking=ranked, picks=picks, rates=rates,
                      race=raced and raced.to_json(), comparison=compare(profile, lines, picks, rates) if rates else [])
        return result

    def judge(self, machine: Machine, result: dict[str, Any]) -> Verdict:
        picks, rates, ranked = result["picks"], result["rates"], result["coz_ranking"]
        profile = coz.parse(result["coz_profile"])
        effect = None
        if rates:
            raced = Race.from_json(result["race"])
            verdict, reason, effect = judge_race(picks, rates, raced.alpha_per_look)
            if verdict == "inconclusive" and raced.stopped != "decided":  # a decided race has no rounds to add
                reason = f"{reason}; {raced.undecided()}"
        elif picks["perf"] is None:
            verdict, reason = "inconclusive", ("perf's samples name none of the program's functions: is "
                                               "build/07-causal-profiling/commit stripped? Rebuild with "
                                               f"`make -C {SOURCE_DIR}`")
        elif not ranked:
            verdict, reason = "inconclusive", (f"coz ran {len(profile.experiments)} experiment(s), too few to rank any "
                                               f"line ({MIN_EXPERIMENTS} per line needed): rerun without --quick, "
                                               "whose coz runs last longer")
        else:
            verdict, reason = "inconclusive", (f"coz ranked {coz.short_location(ranked[0][0])} first, which is not "
                                               "a line the lab can optimise: the profile is too noisy; rerun "
                                               "without --quick")
        return Verdict(self.name, verdict, reason, effect, notes=measured_notes(result, profile))


LAB = CausalProfiling()
