"""Checks a learner can pass on a noisy machine: the grader's own measurements are watched for neighbours and say
so when the machine was busy, each live check tests what holds on this machine, and every number a check prints
is written one way."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from test_interference import start_neighbour

from perflab.grading import FAILED, INCONCLUSIVE, PASSED, Answers
from perflab.grading.answers import function_check
from perflab.grading.kernel import FunctionAnswer
from perflab.grading.live import Watched, watched
from perflab.grading.numbers import digits_for, shown
from perflab.labs.first_core_ipi import exercises as ipi
from perflab.labs.first_core_ipi.run import OPERATIONS, PROCESSES, ROWS, arm
from perflab.labs.numa_static_data import exercises as nsd
from perflab.labs.numa_static_data.model import fit, predict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side


@pytest.mark.parametrize("value, text", [
    (499999.99999999994, "500,000"), (0.0023, "0.0023"), (71.4321, "71.43"), (12345678, "12,345,678"),
    (-0.0, "0"), (2.0, "2"), ([1.0000000001, "socket"], "[1, 'socket']"), ((3.0,), "(3,)"),
    ({"CAL", "TLB"}, "{'CAL', 'TLB'}"), ({1: 2.5}, "{1: 2.5}"), (True, "True"), (None, "None"), ("5", "'5'"),
])
def test_every_number_a_check_prints_is_written_one_way(value, text):
    assert shown(value) == text


def test_a_tolerance_asks_for_the_digits_that_tell_apart_and_an_exact_check_for_all():
    assert digits_for(0.05) == 4 and digits_for(1e-6) == 7
    assert digits_for(0) == 17  # a yes-or-no or exact check: raised "math domain error" before


def test_the_source_cap_is_shown_as_the_expected_value_is():
    """`got: 499999.99999999994` stood against `expected: 500,000 queries per second`."""
    check = nsd.source_cap_check(499999.99999999994)
    assert check.status == PASSED
    assert (check.expected, check.got) == ("500,000 queries per second", "500,000 queries per second")
    assert nsd.source_cap_check("500k").got == "'500k'" and nsd.source_cap_check(True).status == FAILED


def test_a_function_that_misses_the_reference_shows_the_digits_that_differ():
    learner = FunctionAnswer("__main__", "my_fit", [(1.0, 2.00001)])
    answers = Answers({"my_fit": learner}, {"my_fit": [[1, 3.0, 8, 1.25]]}, ["def my_fit(k1, ns1, k2, ns2):\n    pass"])
    check = function_check(answers, "my_fit", fit, 1e-6)
    assert check.status == FAILED and check.expected == "(1, 2)" and check.got == "(1, 2.00001)"


def cap_model_answers() -> Answers:
    inputs = {"my_fit": nsd.fit_inputs(), "my_predict": nsd.predict_inputs()}
    code = ["def my_fit(k1, ns1, k2, ns2):\n    pass", "def my_predict(base, per_write, k):\n    pass"]
    return Answers({"my_fit": FunctionAnswer("__main__", "my_fit", [fit(*a) for a in inputs["my_fit"]]),
                    "my_predict": FunctionAnswer("__main__", "my_predict", [predict(*a) for a in inputs["my_predict"]]),
                    "SOURCE_CAP": 5e5}, inputs, code)


@pytest.mark.parametrize("at_four, busy, status", [
    (40.0, [], PASSED),  # 40% above the 28.57 the model predicts from every 1 and every 8: nobody did anything wrong
    (101.0, [], INCONCLUSIVE),
    (15.0, [], INCONCLUSIVE),
    (40.0, ["other programs ran on CPU 1 for 30% of it (stress-ng (pid 7))"], INCONCLUSIVE),
])
def test_the_cap_model_checks_what_holds_measured_by_the_grader(monkeypatch, at_four, busy, status):
    monkeypatch.setattr(nsd, "fresh_write_rates", lambda: ({1: 80.0, 8: 20.0, 4: at_four}, Watched(busy)))
    between = nsd.cap_model(cap_model_answers())[2]
    assert between.status == status, between
    assert between.name.startswith("one write every 4 operations costs between one every 8 and one every 1 "
                                   "(the grader's runs")
    assert between.expected == "between 20 and 80 ns per operation"
    assert "the model, fitted to the grader's runs at every 1 and every 8, predicts 28.57" in between.got
    assert ("the machine was busy (other programs ran on CPU 1" in between.got) == bool(busy)


class Raced:
    """A finished race of lab 3's bystander: per-operation counts by arm, as Race.kept_values() gives them."""

    alpha_per_look = 0.01

    def __init__(self, membarrier_cal: list[float]):
        rounds = len(membarrier_cal)
        self.values = {arm(op, process, row): [0.0] * rounds for op in OPERATIONS for process in PROCESSES
                       for row in ROWS}
        for op in ("munmap", "mprotect"):
            for row in ROWS:
                self.values[arm(op, "shared", row)] = [1.0] * rounds
        self.values[arm("membarrier", "shared", "CAL")] = membarrier_cal

    def kept_values(self) -> dict[str, list[float]]:
        return self.values


def test_a_row_that_rose_on_too_few_operations_is_undecided_not_flat():
    """The author check failed on a busy day with membarrier's CAL at +0.02 per operation, read as "does not rise":
    membarrier interrupts only the CPUs running a thread of the process, and the bystander was mostly off its CPU."""
    trickle = [0.0, 0.03, 0.02, 0.01, 0.04, 0.02, 0.0, 0.03, 0.02, 0.03] * 2
    rising, said = ipi.rows_that_rise(Raced(trickle), "membarrier", 1)
    assert rising is None and "CAL rose, but on fewer than one membarrier in 20" in said
    assert "off its CPU" in said
    assert ipi.rows_that_rise(Raced([1.0, 0.98] * 10), "membarrier", 1)[0] == {"CAL"}
    assert ipi.rows_that_rise(Raced([0.0] * 20), "membarrier", 1)[0] == set()
    assert ipi.rows_that_rise(Raced(trickle), "mprotect", 1)[0] == {"CAL", "TLB"}


@pytest.fixture
def neighbour() -> tuple[int, int]:
    """(its CPU, its pid): another program spinning on this machine's last CPU, not a descendant of this one (a
    grader's own children are not neighbours), for up to a minute."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    pid = start_neighbour(cpu, 60)
    yield cpu, pid
    subprocess.run(["kill", str(pid)], capture_output=True)


def test_a_measurement_beside_a_neighbour_names_it(neighbour):
    cpu, pid = neighbour
    with watched([cpu]) as seen:
        time.sleep(2)
    assert any(f"CPU {cpu}" in phrase and f"pid {pid}" in phrase for phrase in seen.busy), seen.busy
    assert seen.why().startswith("the machine was busy (") and seen.why().endswith("grade again when it is quiet")


def test_the_fresh_pair_measurement_beside_a_neighbour_says_the_machine_was_busy(neighbour):
    """c2c-measure-pair's fresh run passed or failed on whatever it measured; beside a neighbour it now names it."""
    from perflab.labs.core_to_core import exercises as c2c
    from perflab.probe import probe

    cpu, pid = neighbour
    other = next(c for c in sorted(os.sched_getaffinity(0)) if c != cpu)
    check = c2c._fresh_agreement(probe(), other, cpu, [50.0] * 20)
    assert check.status == INCONCLUSIVE and f"pid {pid}" in check.got, check
    assert "the machine was busy" in check.got and check.got.startswith("50 ns, but ")


def test_a_learners_run_that_could_not_decide_is_quoted():
    """llc-predict's own run, beside a neighbour, says the machine was busy: the grade said only "could not decide"."""
    from perflab.labs.inclusive_llc import exercises as llc

    busy = "the machine was busy while the lab measured (other programs ran on CPU 1 for 30% of it (stress-ng-cpu))"
    check = llc._fresh_measurement(None, None, busy)
    assert check.status == INCONCLUSIVE and check.got == f"None: your own run could not decide ({busy}); rerun it"
