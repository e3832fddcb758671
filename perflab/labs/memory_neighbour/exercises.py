"""Checks for the memory-neighbour exercises.

- mn-flood-suspect: the learner's bandwidth from a cumulative byte counter and their suspect among processes,
  on made-up processes (whose largest RSS is never the flood) and on three processes measured for this grading.
- mn-predict-slowdown: the learner's prediction of the far victim's slowdown beside plain stores from its
  slowdown beside non-temporal ones and both neighbours' bandwidth, on made-up numbers; then against a fresh
  race here, where a prediction that misses is inconclusive (the model is first-order), never failed.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import cache
from typing import Any

from ... import stats
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, calls
from ...grading.answers import function_check
from ...grading.kernel import FunctionAnswer
from ...grading.live import Watched, busy_check, watched
from ...grading.own_code import refused_call
from ...lock import measurement_lock
from ...sequential import DECIDED, Race
from .measure import arm, measure_race
from .run import LAB, judge_stream
from .suspects import three_processes

GB = 1e9
# A first-order model is a good one within half the measured slowdown, or within 3 points of it: a victim's
# median moves by about that much between races on a shared machine.
PREDICTION_TOLERANCE, PREDICTION_SLACK = 0.5, 0.03


# ---------------------------------------------------------------- mn-flood-suspect

def bandwidth_gbps(readings: list[list[float]]) -> float:
    """GB/s from a cumulative byte counter read at [seconds, bytes] points: its rise over the time it took."""
    (t0, b0), (t1, b1) = readings[0], readings[-1]
    return (b1 - b0) / (t1 - t0) / GB


def flood_suspect(processes: list[dict[str, Any]]) -> str:
    """The process that moves the most bytes per second, whatever its RSS."""
    return max(processes, key=lambda p: bandwidth_gbps(p["readings"]))["name"]


def made_up_processes(rng: random.Random) -> list[dict[str, Any]]:
    """Three to six processes; the largest RSS moves the least, the flood has a modest RSS."""
    count = rng.randint(3, 6)
    rates = sorted(rng.uniform(0.01, 20) for _ in range(count))
    rss = sorted((rng.randint(64, 32768) << 20 for _ in range(count)), reverse=True)
    rss[-1], rss[-2] = rss[-2], rss[-1]  # the flood is not the smallest either
    rows = []
    for name, rate, resident in zip(rng.sample("PQRSTUVW", count), rates, rss):
        start, t = rng.randrange(1 << 44), 0.0
        readings = []
        for _ in range(rng.randint(2, 6)):
            t += rng.uniform(0.1, 2)
            readings.append([round(t, 3), start + int(rate * GB * t)])
        rows.append({"name": name, "rss_bytes": resident, "readings": readings})
    return rows


@cache
def measured_here() -> tuple[dict, ...]:
    """Three processes measured once per grading: both functions are called on the same."""
    placement = LAB.placement_here()
    return tuple(three_processes(placement.victim_cpu, placement.neighbour_cpus[0])[0])


def suspect_inputs() -> list[list]:
    rng = random.Random()
    return [[made_up_processes(rng)] for _ in range(3)] + [[list(measured_here())]]


def bandwidth_inputs() -> list[list]:
    return [[p["readings"]] for rows in suspect_inputs() for p in rows[0]]


@calls(bandwidth_gbps=bandwidth_inputs, flood_suspect=suspect_inputs)
def flood_suspect_check(ns: Answers) -> list[Check]:
    return [function_check(ns, "bandwidth_gbps", bandwidth_gbps, 1e-6), names_check(ns, "flood_suspect")]


def names_check(ns: Answers, name: str) -> Check:
    """The learner's suspect on every input, against the reference's: names, which function_check (numbers)
    does not compare. The last input is the three processes measured here."""
    learner = ns.get(name)
    if not isinstance(learner, FunctionAnswer):
        return Check(f"{name} is defined", FAILED, "a function defined in your notebook", "not defined")
    if learner.module != "__main__":
        return Check(f"{name} is your own", FAILED, "a function written in your notebook", "a function from "
                                                                                           f"{learner.module}")
    if refused := refused_call(ns.code, name, flood_suspect):
        return Check(f"{name} is your own", FAILED, "a function written in your notebook, not a call of the answer",
                     refused)
    for arguments, got in zip(ns.inputs[name], learner.results):
        expected = flood_suspect(*arguments)
        if got != expected:
            largest = max(arguments[0], key=lambda p: p["rss_bytes"])["name"]
            return Check(f"{name} on {len(arguments[0])} processes", FAILED,
                         f"{expected!r}" + (f" (the largest RSS is {largest!r})" if got == largest else ""), repr(got))
    return Check(f"{name} on {len(ns.inputs[name])} sets of processes, the last measured here", PASSED,
                 "matches the reference", "matches")


# ---------------------------------------------------------------- mn-predict-slowdown

def predicted_write_slowdown(nt_slowdown: float, nt_gbps: float, write_gbps: float) -> float:
    """Slowdown proportional to the memory traffic: a plain store moves its line twice (read for ownership, then
    written back), a non-temporal one once."""
    return nt_slowdown * 2 * write_gbps / nt_gbps


def model_inputs() -> list[list]:
    rng = random.Random()
    return [[rng.uniform(0.0, 0.5), rng.uniform(1, 30), rng.uniform(1, 30)] for _ in range(5)]


@cache
def fresh_race() -> tuple[dict[str, Any], Watched]:
    """The lab's quick race, run once for this grading, on CPUs watched for neighbours: another program on the
    victim's CPU or the neighbours' moves the slowdowns the model is checked against."""
    settings, placement = replace(LAB.QUICK, budget_s=45), LAB.placement_here()
    with measurement_lock("perflab grade mn-predict-slowdown"), watched(LAB.watched_cpus(placement)) as seen:
        measured = measure_race(placement, settings, lambda ns, a: judge_stream(ns, a)[0] in DECIDED, progress=False)
    return measured, seen


@calls(predict_write_slowdown=model_inputs)
def predict_slowdown(ns: Answers) -> list[Check]:
    checks = [function_check(ns, "predict_write_slowdown", predicted_write_slowdown, 1e-6)]
    if checks[0].status == FAILED:
        return checks
    measured, seen = fresh_race()
    ns_kept = Race.from_json(measured["race"]).kept_values()
    busy = stats.median(ns_kept[arm("far", "compute")])
    slowdown = {m: stats.median(ns_kept[arm("far", m)]) / busy - 1 for m in ("write", "nt-write")}
    gbps = {m: stats.median([p["gb_per_s"] for p in measured["neighbour_periods"][m]]) for m in ("write", "nt-write")}
    predicted = predicted_write_slowdown(slowdown["nt-write"], gbps["nt-write"], gbps["write"])
    close = abs(predicted - slowdown["write"]) <= max(PREDICTION_TOLERANCE * abs(slowdown["write"]), PREDICTION_SLACK)
    name = "the model on a fresh race here"
    expected = (f"{slowdown['write']:+.1%} beside plain stores ({gbps['write']:.1f} GB/s), within "
                f"{PREDICTION_TOLERANCE:.0%} of it or {PREDICTION_SLACK * 100:.0f} points")
    got = f"{predicted:+.1%} predicted from {slowdown['nt-write']:+.1%} beside non-temporal stores " \
          f"({gbps['nt-write']:.1f} GB/s)"
    if seen.busy:
        return [*checks, busy_check(name, expected, seen, got)]
    missed = "" if close else ": the model missed on this run; what else do plain stores do?"
    return [*checks, Check(name, PASSED if close else INCONCLUSIVE, expected, got + missed)]
