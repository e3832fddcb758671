"""Checks for the core-to-core exercises.

Every expected value is recomputed here: from the learner's raw result file
(when its provenance holds), from a recorded matrix, or from a fresh
measurement. Nothing the learner typed as a number is trusted, and their
functions are called on inputs drawn anew for each grading.
"""

from __future__ import annotations

import random
from dataclasses import replace

from ... import stats
from ...grading import FAILED, INCONCLUSIVE, PASSED, Answers, Check, calls, refuses
from ...grading.answers import close, function_check, saved_result
from ...grading.live import busy_check, watched
from ...grading.numbers import shown
from ...lock import measurement_lock
from ...paths import DATA_DIR
from ...probe import probe
from . import run as lab
from .advisor import analyze
from .matrix import load
from .placement import best_pipeline, pipeline_cost, shares_a_core

PIPELINE_MATRIX = DATA_DIR / "c2c" / "dual-intel-xeon-gold-6242-2-8ghz-by-concyclics.csv"
PIPELINE_STAGES = 4
PIPELINE_SLACK = 1.20  # within 20% of the best: the mesh makes some same-socket hops a little longer
NAIVE_PIPELINE = [14, 15, 16, 17]
MIN_SAMPLES = 20
HARMONIC_MEANS_ELSEWHERE = ("scipy.stats.hmean", "statistics.harmonic_mean")  # each the whole answer
# A fresh run of the same pair within this factor agrees; beyond it the pair's
# distance moved (a VM's vCPUs migrate), which a rerun settles: inconclusive.
FRESH_AGREEMENT = 1.5
# The lab's quick pair (3 rounds) takes 30-65 ms here: too short for the neighbour watch, which counts whole
# 10 ms ticks and names a program from 3 on, so a neighbour beside it could go unnamed (it did once in a full test run).
FRESH_ROUNDS = 30  # about 0.2 s quiet


def _raw_rates(saved: dict) -> list[float]:
    return [lab.sample_rate(s) for s in lab.raw_samples(saved)]


def fresh_rates() -> list[list]:
    """Rate lists drawn anew for every grading: a hard-coded answer cannot pass."""
    rng = random.Random()
    return [[[rng.lognormvariate(15, 0.3) for _ in range(rng.randint(8, 40))]] for _ in range(5)]


@calls(my_harmonic_mean=lambda: [[[1.0, 2.0, 4.0]], *fresh_rates()], my_harmonic_mean_ci=fresh_rates)
def harmonic_mean(ns: Answers) -> list[Check]:
    checks = [
        function_check(ns, "my_harmonic_mean", stats.harmonic_mean, 1e-9, also_refused=HARMONIC_MEANS_ELSEWHERE),
        function_check(ns, "my_harmonic_mean_ci", stats.harmonic_mean_ci, 1e-6),
    ]
    saved, found = saved_result(ns, "measure_pair(a, b)")
    checks.append(found)
    if saved is None:
        return checks
    expected = _raw_rates(saved)
    got = ns.get("rates")
    enough = len(expected) >= MIN_SAMPLES
    checks.append(Check("enough raw samples", PASSED if enough else FAILED, f">= {MIN_SAMPLES}", str(len(expected))))
    same = (
        isinstance(got, (list, tuple)) and len(got) == len(expected) and all(close(g, e) for g, e in zip(got, expected))
    )
    checks.append(
        Check(
            "rates computed from your raw samples",
            PASSED if same else FAILED,
            f"{len(expected)} rates, first {shown(expected[0])}/s" if expected else "rates",
            f"{len(got)} values, first {shown(got[0])}" if isinstance(got, (list, tuple)) and got else shown(got),
        )
    )
    return checks


@refuses(best_pipeline)
def pipeline_pinning(ns: dict) -> list[Check]:
    matrix = load(PIPELINE_MATRIX)
    analysis = analyze(matrix)
    smt = next(
        (lvl for lvl, info in zip(analysis["levels"], analysis["level_info"]) if info["name"] == "SMT siblings"), []
    )
    best, best_cost = best_pipeline(matrix, PIPELINE_STAGES, smt)
    placement = ns.get("placement")
    valid = (
        isinstance(placement, (list, tuple))
        and len(placement) == PIPELINE_STAGES
        and len(set(placement)) == PIPELINE_STAGES
        and all(c in matrix.cpus for c in placement)
    )
    checks = [
        Check(
            "placement is 4 distinct CPUs of the recorded machine",
            PASSED if valid else FAILED,
            f"4 distinct ids from 0-{max(matrix.cpus)}",
            shown(placement),
        )
    ]
    if valid:
        siblings = shares_a_core(placement, smt)
        checks.append(
            Check(
                "no two stages share a core",
                FAILED if siblings else PASSED,
                "no SMT siblings",
                f"siblings {siblings}" if siblings else "none",
            )
        )
        cost = pipeline_cost(matrix, placement)
        good = cost <= best_cost * PIPELINE_SLACK
        checks.append(
            Check(
                "pipeline latency close to the best",
                PASSED if good else FAILED,
                f"<= {shown(best_cost * PIPELINE_SLACK)} ns (best {shown(best_cost)} ns, e.g. {best})",
                f"{shown(cost)} ns",
            )
        )
    crossed = _crossed_level(analysis, NAIVE_PIPELINE)
    answer = ns.get("naive_crosses")
    checks.append(
        Check(
            f"which boundary the naive placement {NAIVE_PIPELINE} crosses",
            PASSED if answer == crossed else FAILED,
            shown(crossed),
            shown(answer),
        )
    )
    return checks


def _crossed_level(analysis: dict, placement: list[int]) -> str | None:
    """The coarsest level whose groups the chain of CPUs leaves."""
    crossed = None
    for groups, info in zip(analysis["levels"], analysis["level_info"]):
        group_of = {cpu: i for i, g in enumerate(groups) for cpu in g}
        if len({group_of[c] for c in placement}) > 1:
            crossed = info["name"]
    return crossed


@refuses(lab.relation)
def measure_pair(ns: dict) -> list[Check]:
    machine = probe()
    pair = ns.get("pair")
    valid = (
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and pair[0] != pair[1]
        and all(c in machine.online_cpus for c in pair)
    )
    checks = [
        Check("pair is two online CPUs", PASSED if valid else FAILED, f"two of {machine.online_cpus}", shown(pair))
    ]
    if not valid:
        return checks
    a, b = pair
    relation = lab.relation(machine, a, b)
    predicted = ns.get("predicted_relation")
    checks.append(
        Check(
            f"your prediction of how CPUs {a} and {b} are related",
            PASSED if predicted == relation else FAILED,
            shown(relation),
            shown(predicted),
        )
    )
    saved, found = saved_result(ns, "measure_pair(a, b)")
    checks.append(found)
    if saved is None:
        return checks
    mine = saved["matrix"]["cpus"] == sorted(pair) and saved["machine"].get("cpu_model") == machine.summary().get(
        "cpu_model"
    )
    checks.append(
        Check(
            "the result is this pair on this machine",
            PASSED if mine else FAILED,
            f"CPUs {sorted(pair)}",
            f"CPUs {saved['matrix']['cpus']}",
        )
    )
    samples = [s["one_way_ns"] for s in lab.raw_samples(saved)]
    enough = len(samples) >= MIN_SAMPLES
    checks.append(Check("enough raw samples", PASSED if enough else FAILED, f">= {MIN_SAMPLES}", str(len(samples))))
    if mine and enough:
        checks.append(_fresh_agreement(machine, a, b, samples))
    return checks


def _fresh_agreement(machine, a: int, b: int, samples: list[float]) -> Check:
    """Measure the pair again now, on CPUs watched for neighbours; the learner's median should agree within
    FRESH_AGREEMENT."""
    with measurement_lock(f"perflab grade: CPUs {a},{b}"), watched([a, b]) as seen:
        fresh = lab.measure_matrix(machine, sorted((a, b)), replace(lab.LAB.QUICK, rounds=FRESH_ROUNDS), progress=False)
    fresh_median = stats.median([s["one_way_ns"] for s in lab.raw_samples(fresh)])
    ratio = stats.median(samples) / fresh_median
    agree = 1 / FRESH_AGREEMENT <= ratio <= FRESH_AGREEMENT
    name, yours = "your median agrees with a fresh measurement", f"{shown(stats.median(samples))} ns"
    expected = f"within x{FRESH_AGREEMENT} of {shown(fresh_median)} ns (measured just now)"
    if seen.busy:
        return busy_check(name, expected, seen, yours)
    return Check(
        name,
        PASSED if agree else INCONCLUSIVE,
        expected,
        yours + ("" if agree else ": the pair's latency moved; rerun your notebook"),
    )
