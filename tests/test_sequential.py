"""Races that measure until decided, on made-up measurements (seeded, so every run of the test is the same)."""

from __future__ import annotations

import random
import time

import pytest

from perflab.errors import PerflabError
from perflab.sequential import DECIDED, Plan, race
from perflab.verdict import judge_change

MIN_EFFECT = 0.05


def arms(speedup: float, seed: int, step_at: int | None = None, spread: float = 0.02):
    """Made-up rounds: arm B is `speedup` faster than A; from round `step_at` on, both run at half speed."""
    rng = random.Random(seed)

    def one_round(r: int, order: list[str]) -> dict[str, float]:
        level = 0.5 if step_at is not None and r >= step_at else 1.0
        return {"A": level * rng.gauss(100, 100 * spread), "B": level * rng.gauss(100 * (1 + speedup), 100 * spread)}
    return one_round


def verdict(values, alpha):
    return judge_change("B vs A", values["A"], values["B"], MIN_EFFECT, alpha=alpha)[0]


PLAN = Plan(5, 60, 60)


def run(one_round, plan=PLAN):
    return race(["A", "B"], one_round, lambda values, alpha: verdict(values, alpha) in DECIDED, plan, "A", "test",
                progress=False)


def test_a_clear_effect_is_decided_early():
    raced = run(arms(0.30, seed=1))
    assert raced.stopped == "decided" and raced.rounds == 10 and raced.looks == 2
    assert verdict(raced.kept_values(), raced.alpha_per_look) == "reproduced"


def test_no_effect_is_ruled_out_and_a_borderline_one_stays_open():
    raced = run(arms(0.0, seed=2))
    assert raced.stopped == "decided" and verdict(raced.kept_values(), raced.alpha_per_look) == "not-reproduced"
    borderline = run(arms(0.05, seed=3, spread=0.2), Plan(5, 20, 60))
    assert borderline.stopped == "rounds" and "all 20 rounds are measured" in borderline.undecided()
    assert "(--runs 40) or without --quick" in borderline.undecided()  # a lab's run: the options that decide it
    graded = borderline.undecided("grade again, on a quieter machine")  # a grade has no --runs: its own advice
    assert graded.endswith("kept; grade again, on a quieter machine") and "--runs" not in graded


def test_the_budget_stops_a_race_before_it_overruns():
    def slow(r, order):
        time.sleep(0.05)
        return arms(0.05, seed=4, spread=0.3)(r, order)
    raced = run(slow, Plan(2, 1000, budget_s=0.5))
    assert raced.stopped == "budget" and raced.seconds <= 0.5 + 0.15 and "time budget ran out" in raced.undecided()


def test_a_step_in_the_control_drops_the_rounds_before_it():
    raced = run(arms(MIN_EFFECT, seed=5, step_at=12, spread=0.1), Plan(4, 40, 60))
    assert raced.first_kept == 12 and "stepped from" in raced.notes[0] and "at round 13" in raced.notes[0]
    assert all(value < 75 for value in raced.kept("A")), "only rounds at the new level are kept"


def test_a_race_judged_by_its_rounds_ratio_keeps_rounds_across_a_step_of_the_whole_machine():
    """Both arms at half speed from round 12 on: their ratio stays, so a paired race keeps every round; a step in
    the ratio itself drops the rounds before it."""
    never = lambda values, alpha: False  # noqa: E731
    whole = race(["A", "B"], arms(MIN_EFFECT, seed=5, step_at=12, spread=0.01), never, Plan(4, 40, 60), ("B", "A"),
                 "test", progress=False)
    assert whole.first_kept == 0 and not whole.notes

    def b_doubles_from_round_12(r, order):
        measured = arms(MIN_EFFECT, seed=r, spread=0.01)(r, order)
        return {**measured, "B": measured["B"] * (2 if r >= 12 else 1)}
    ratio = race(["A", "B"], b_doubles_from_round_12, never, Plan(4, 40, 60), ("B", "A"), "test", progress=False)
    assert ratio.first_kept == 12 and ratio.notes[0].startswith("the rounds' ratio B / A stepped from")


def test_looking_often_keeps_the_error_rate_below_alpha():
    """60 races of an effect just below the edge: how often does one end in a wrong `reproduced`? Rarely."""
    wrong = 0
    for seed in range(60):
        raced = run(arms(0.03, seed=seed + 100, spread=0.05), Plan(5, 30, 60))
        wrong += verdict(raced.kept_values(), raced.alpha_per_look) == "reproduced" and raced.stopped == "decided"
    assert wrong <= 3, f"{wrong} of 60 races decided wrongly"


@pytest.mark.parametrize("rounds", [0, -1, 10**6])
def test_a_plan_refuses_impossible_rounds(rounds):
    with pytest.raises(PerflabError, match="--runs between 1 and"):
        Plan(5, rounds, 10)


def test_a_race_decided_early_leaves_its_bar_finished(monkeypatch):
    """tqdm's notebook bar closed short of its total turns red (its 'error' style) and keeps a stale ETA."""
    from tqdm.std import tqdm

    import perflab.sequential

    closed = []

    class Recorded(tqdm):
        def close(self):
            closed.append((self.n, self.total))
            super().close()

    monkeypatch.setattr(perflab.sequential, "tqdm", Recorded)
    raced = race(["A", "B"], arms(0.30, seed=1), lambda values, alpha: verdict(values, alpha) in DECIDED,
                 Plan(5, 60, 60), "A", "test", progress=True)
    assert raced.stopped == "decided" and raced.rounds < 60
    assert closed and set(closed) == {(raced.rounds, raced.rounds)}, "closed at its total, not short of it"
