"""Grading runs the learner's notebook in a fresh kernel and checks what came back in the grader's own process:
every way around it that was found by hand now fails, and cells are named as the learner sees them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import run_cli
from perflab.grading import FAILED, PASSED, grade, progress
from perflab.grading.kernel import cell_names, read_notebook, run_notebook
from perflab.manifest.exercises import load_manifest

PINNING = load_manifest().find("c2c-pipeline-pinning")


def notebook_with(tmp_path, *sources: str, solution=PINNING):
    """The exercise's reference solution with code cells appended (or, as `replace:N:text`, cell N replaced)."""
    notebook = nbformat.read(solution.solution_path, as_version=4)
    for source in sources:
        if source.startswith("replace:"):
            _, index, text = source.split(":", 2)
            notebook.cells[int(index)].source = text
        else:
            notebook.cells.append(nbformat.v4.new_code_cell(source))
    path = tmp_path / "attempt.ipynb"
    nbformat.write(notebook, path)
    return path


def test_the_reference_solution_passes_in_a_fresh_kernel_and_magics_work(tmp_path):
    path = notebook_with(tmp_path, "%time twice = 2 * 2", "%%capture\nprint('hidden')")
    assert grade(PINNING.name, path).status == PASSED


def test_a_cell_replacing_a_check_function_changes_nothing(tmp_path):
    path = notebook_with(
        tmp_path, "replace:3:placement = [0, 32, 1, 2]",
        "import perflab.labs.core_to_core.exercises as e\nfrom perflab.grading import Check, PASSED\n"
        "e.pipeline_pinning = lambda ns: [Check('anything', PASSED, '', '')]")
    report = grade(PINNING.name, path)
    assert report.status == FAILED and any(c.name == "no two stages share a core" and c.status == FAILED
                                           for c in report.checks)


def test_sys_exit_in_a_cell_is_a_failed_cell_not_a_silent_pass(tmp_path):
    path = notebook_with(tmp_path, "replace:3:import sys\nsys.exit(0)\nplacement = [5, 6, 7, 8]")
    done = run_cli("grade", PINNING.name, "--notebook", str(path))
    assert done.returncode == 1 and "FAILED" in done.stdout and "SystemExit" in done.stdout
    assert "TCP without encryption" not in done.stderr, "the grading kernel talks over Unix sockets"


def test_a_killed_kernel_fails_with_a_message(tmp_path):
    report = grade(PINNING.name, notebook_with(tmp_path, "replace:3:import os\nos._exit(0)"))
    assert report.status == FAILED and "the kernel died while running code cell 2" in report.cell_errors[0]


def test_an_endless_loop_is_stopped_and_named(tmp_path):
    path = tmp_path / "loop.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Mine"),
        nbformat.v4.new_code_cell("placement = [5, 6, 7, 8]"),
        nbformat.v4.new_markdown_cell("## 2. Forever"),
        nbformat.v4.new_code_cell("while True:\n    pass"),
    ]
    nbformat.write(notebook, path)
    report = grade(PINNING.name, path, timeout=8)
    assert report.status == FAILED
    assert report.cell_errors[0].startswith("code cell 2 (under '## 2. Forever') was still running when the "
                                            "grade's budget of 8 s ran out")


def test_cells_are_named_by_position_and_heading_not_by_markdown_count():
    names = cell_names(nbformat.read(PINNING.solution_path, as_version=4))
    assert list(names.values())[:2] == [
        "code cell 1 (under '# Exercise: pin a 4-stage pipeline on a two-socket server')",
        "code cell 2 (under '## 1. Your placement')",
    ]


def test_grading_a_solution_is_not_the_learners_progress():
    assert grade(PINNING.name, PINNING.solution_path).status == PASSED
    assert PINNING.name not in progress.current()
    assert grade(PINNING.name).status == FAILED, "the learner's own, untouched copy"
    assert progress.current()[PINNING.name] == FAILED


HARMONIC = load_manifest().find("c2c-harmonic-mean")
MADE_UP = """
import json, pathlib
path = pathlib.Path("made-up.json").resolve()
samples = [{"round": 0, "round_trips": 1000, "elapsed_ns": 200000 + i, "one_way_ns": 100.0} for i in range(30)]
path.write_text(json.dumps({"perflab_result_version": 1, "lab": "core-to-core", "kind": "pair", "machine": {},
                            "runs": [{"label": "0,1", "samples": samples}], "matrix": {"cpus": [0, 1]}}))
result = {"path": str(path)}
rates = [s["round_trips"] * 1e9 / s["elapsed_ns"] for s in samples]
"""


def test_a_made_up_result_fails_however_right_the_arithmetic(tmp_path):
    report = grade(HARMONIC.name, notebook_with(tmp_path, MADE_UP, solution=HARMONIC))
    by_name = {c.name: c for c in report.checks}
    saved = by_name["your measurement, saved by perflab on this machine"]
    assert report.status == FAILED and saved.status == FAILED and "no provenance" in saved.got


def test_an_edited_result_fails(tmp_path):
    edit = ("import json, pathlib\npath = pathlib.Path(result['path'])\ndata = json.loads(path.read_text())\n"
            "data['runs'][0]['samples'][-1]['elapsed_ns'] //= 2\npath.write_text(json.dumps(data))")
    report = grade(HARMONIC.name, notebook_with(tmp_path, edit, solution=HARMONIC))
    saved = next(c for c in report.checks if c.name.startswith("your measurement"))
    assert saved.status == FAILED and "changed after perflab wrote it" in saved.got


def test_a_function_from_the_package_is_not_your_own(tmp_path):
    path = notebook_with(tmp_path, "from perflab.stats import harmonic_mean as my_harmonic_mean", solution=HARMONIC)
    check = next(c for c in grade(HARMONIC.name, path).checks if "my_harmonic_mean" in c.name)
    assert check.status == FAILED and "perflab.stats" in check.got


@pytest.mark.parametrize("content", ["a,b\n1,2\n", "{not json", "\x00\x01binary", None, "dir"])
def test_a_bad_notebook_is_one_line(tmp_path, content):
    path = tmp_path / "bad.ipynb"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content.encode())
    done = run_cli("grade", PINNING.name, "--notebook", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_answers_come_back_as_plain_data_only(tmp_path):
    path = notebook_with(tmp_path, "import numpy as np\nfrom pathlib import Path\nARRAY = np.arange(3)\n"
                                   "WHERE = Path('/x')\nKEYS = {0.5: True}\nclass Thing: pass\nTHING = Thing()\n"
                                   "SCALAR = np.float64(0.25) + np.float64(0.5)")
    answers, errors = run_notebook(read_notebook(path), tmp_path, {}, 60)
    assert (
        errors == [] and answers["ARRAY"] == [0, 1, 2] and answers["WHERE"] == "/x" and answers["KEYS"] == {0.5: True}
    )
    assert answers["SCALAR"] == 0.75, "numpy's float64 is a float subclass whose repr is a call: sent as a float"
    assert "not plain data" in repr(answers["THING"])


def test_the_environment_a_grading_adds_reaches_the_kernel_and_only_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_RUNS", "10")
    path = notebook_with(tmp_path, "import os\nRUNS = os.environ['PERFLAB_RUNS']")
    answers, errors = run_notebook(read_notebook(path), tmp_path, {}, 60, env={"PERFLAB_RUNS": "2"})
    assert errors == [] and answers["RUNS"] == "2" and os.environ["PERFLAB_RUNS"] == "10"


def test_a_function_answering_yes_or_no_is_checked_against_the_same_bool():
    from perflab.grading import Answers
    from perflab.grading.answers import function_check
    from perflab.grading.kernel import FunctionAnswer

    inputs, code = {"my_f": [[1], [2]]}, ["def my_f(x):\n    return x == 2"]
    right = Answers({"my_f": FunctionAnswer("__main__", "my_f", [False, True])}, inputs, code)
    assert function_check(right, "my_f", lambda x: x == 2, 0).status == "passed"
    for wrong in ([0, 1], [True, True]):  # numbers are not answers to a yes-or-no question
        answers = Answers({"my_f": FunctionAnswer("__main__", "my_f", wrong)}, inputs, code)
        assert function_check(answers, "my_f", lambda x: x == 2, 0).status == "failed"


def test_a_function_failing_on_inputs_that_are_not_numbers_is_reported():
    """A failing call on a list of records (lab 4's boots) is a FAILED check that shows the input, not a crash."""
    from perflab.grading import Answers
    from perflab.grading.answers import function_check
    from perflab.grading.kernel import CallError, FunctionAnswer

    boots = [[{"paging_levels": 5, "samples": []}]]
    answers = Answers({"my_f": FunctionAnswer("__main__", "my_f", [CallError("NotImplementedError: ")])},
                      {"my_f": boots}, ["def my_f(records):\n    raise NotImplementedError()"])
    check = function_check(answers, "my_f", lambda records: 1.0, 1e-9)
    assert check.status == "failed" and "paging_levels" in check.name and check.got == "NotImplementedError: "


# --- cheats that passed before: each is refused now ---------------------------------------------------------

FAKE = '{"values": {"placement": {"literal": "[5, 6, 7, 8]"}, "naive_crosses": {"literal": "\'socket\'"}}, "functions": {}}'
FAKE_EXPORT = f"def _fake_export(*arguments):\n    open(arguments[-1], 'w').write({FAKE!r})\n"
FAKE_RUNPY = FAKE_EXPORT + (
    "import sys, types\nfake = types.ModuleType('runpy')\n"
    "fake.run_path = lambda path: {'export': _fake_export, 'sealed_export': lambda *a: _fake_export}\n"
    "sys.modules['runpy'] = fake"
)
FAKE_OPEN = ("import builtins\n_open = builtins.open\n"
             "def _fake_open(file, mode='r', *arguments, **options):\n"
             "    if str(file).endswith('answers.json') and 'w' in mode:\n"
             f"        _open(file, mode).write({FAKE!r})\n"
             "        return _open('/dev/null', mode)\n"
             "    return _open(file, mode, *arguments, **options)\n"
             "builtins.open = _fake_open")


@pytest.mark.parametrize("cheat, said", [
    (FAKE_RUNPY, "the notebook changed the grader's modules (runpy)"),  # issue 32's: the export ran the fake
    (FAKE_RUNPY + "\n_perflab_export = _fake_export", "the notebook replaced the grader's export"),
    (FAKE_OPEN, "the notebook changed the grader's modules (builtins.open)"),
    (f"import json\njson.dump = lambda answers, out, **options: out.write({FAKE!r})", None),  # the export has its own
], ids=["runpy", "the export itself", "builtins.open", "json.dump"])
def test_a_fake_export_is_refused(tmp_path, cheat, said):
    report = grade(PINNING.name, notebook_with(tmp_path, "replace:3:placement = [0, 32, 1, 2]", cheat))
    assert report.status == FAILED
    if said:
        assert any(error.startswith(said) for error in report.cell_errors), report.cell_errors
    else:
        assert report.cell_errors == [] and any(c.name == "no two stages share a core" and c.status == FAILED
                                                for c in report.checks), "the real answers were read"


def test_a_grade_with_a_cell_error_does_not_pass(tmp_path):
    report = grade(PINNING.name, notebook_with(tmp_path, "raise ValueError('not finished')"))
    assert all(c.status == PASSED for c in report.checks) and report.status == FAILED
    assert report.cell_errors == ["code cell 5 (under '## 2. The naive placement'): ValueError: not finished"]


def invented(elapsed_ns: int) -> str:
    """A first cell that saves 30 made-up samples of 1,000 round trips with perflab.results.save, as the issue did."""
    return (
        "replace:1:from perflab import results\nfrom perflab.probe import probe\n"
        "made = results.new_result('core-to-core', 'pair', probe().summary(), {})\n"
        f"samples = [{{'round_trips': 1000, 'elapsed_ns': {elapsed_ns} + i, 'one_way_ns': 1.0}} for i in range(30)]\n"
        "made.update(runs=[{'label': '0,1', 'samples': samples}], matrix={'cpus': [0, 1]})\n"
        "result = {**made, 'path': str(results.save(made))}"
    )


def test_invented_samples_saved_by_perflab_are_refused_with_the_bound_named(tmp_path):
    report = grade(HARMONIC.name, notebook_with(tmp_path, invented(1), solution=HARMONIC))  # 10^12 round trips/s
    saved = next(c for c in report.checks if c.name.startswith("your measurement"))
    assert report.status == FAILED and saved.status == FAILED
    assert "time per round trip (ns) is 0.001, below 2" in saved.got


def test_a_function_wrapping_the_reference_is_not_your_own(tmp_path):
    wrapper = "replace:5:import perflab.stats\n\ndef my_harmonic_mean(r):\n    return perflab.stats.harmonic_mean(r)"
    report = grade(HARMONIC.name, notebook_with(tmp_path, invented(200_000), wrapper, solution=HARMONIC))
    check = next(c for c in report.checks if c.name.startswith("my_harmonic_mean"))
    assert check.name == "my_harmonic_mean is your own" and check.status == FAILED
    assert check.got == "my_harmonic_mean calls perflab.stats.harmonic_mean: write it yourself"


OWN = "def my_harmonic_mean(r):\n    return len(r) / sum(1 / x for x in r)"


@pytest.mark.parametrize("code, calls", [
    ("from perflab.stats import harmonic_mean as h\ndef my_harmonic_mean(r):\n    return h(r)", "perflab.stats.harmonic_mean"),
    ("import perflab.stats as s\ndef my_harmonic_mean(r):\n    return s.harmonic_mean(r)", "perflab.stats.harmonic_mean"),
    ("g = h\nfrom perflab import stats\nh = stats.harmonic_mean\ndef my_harmonic_mean(r):\n    return g(r)",
     "perflab.stats.harmonic_mean"),
    ("import perflab.stats as s\ndef my_harmonic_mean(r):\n    return getattr(s, 'harmonic_mean')(r)",
     "perflab.stats.harmonic_mean"),
    ("import importlib\ndef my_harmonic_mean(r):\n    return importlib.import_module('perflab.stats').harmonic_mean(r)",
     "perflab.stats.harmonic_mean"),
    ("import sys\ndef my_harmonic_mean(r):\n    return sys.modules['perflab.stats'].harmonic_mean(r)",
     "perflab.stats.harmonic_mean"),
    ("from perflab.stats import *\ndef my_harmonic_mean(r):\n    return harmonic_mean(r)", "perflab.stats.harmonic_mean"),
    ("%time x = 1\ndef helper(r):\n    import perflab.stats as s\n    return s.harmonic_mean(r)\n"
     "def my_harmonic_mean(r):\n    return helper(r)", "perflab.stats.harmonic_mean"),
    ("from scipy import stats\ndef my_harmonic_mean(r):\n    return stats.hmean(r)", "scipy.stats.hmean"),
    ("import statistics\ndef my_harmonic_mean(r):\n    return statistics.harmonic_mean(r)", "statistics.harmonic_mean"),
])
def test_every_name_for_the_reference_is_refused(code, calls):
    from perflab import stats
    from perflab.grading.own_code import refused_call
    from perflab.labs.core_to_core.exercises import HARMONIC_MEANS_ELSEWHERE

    assert refused_call([code], "my_harmonic_mean", stats.harmonic_mean, HARMONIC_MEANS_ELSEWHERE).endswith(
        f"calls {calls}: write it yourself")


@pytest.mark.parametrize("cells", [
    [OWN],
    ["import perflab.stats\nh = perflab.stats.harmonic_mean  # to compare with", OWN.replace("(r)", "(h)").replace(" r)", " h)")],
    ["from perflab.stats import t_quantile", OWN + " if t_quantile(0.9, 3) else 0"],
    ["def (", OWN],  # a cell that does not parse raised when it ran; the others are read
])
def test_your_own_function_is_yours(cells):
    from perflab import stats
    from perflab.grading.own_code import refused_call

    assert refused_call(cells, "my_harmonic_mean", stats.harmonic_mean) is None


def test_a_reexported_reference_is_the_reference_and_a_lambda_is_no_def():
    from perflab.grading.own_code import refused_call
    from perflab.labs.numa_static_data import exercises, model

    fit = "from perflab.labs.numa_static_data.exercises import fit as f\ndef my_fit(*a):\n    return f(*a)"
    assert exercises.fit is model.fit and "calls perflab.labs.numa_static_data.exercises.fit" in refused_call(
        [fit], "my_fit", model.fit)
    assert refused_call(["my_fit = lambda *a: 1"], "my_fit", model.fit) == "no `def my_fit(...)` in your notebook"


# --- budgets, hints, and who runs the learner's code ---------------------------------------------------------

def test_the_manifests_budget_covers_the_whole_notebook(tmp_path, monkeypatch):
    import dataclasses

    import perflab.grading as grading

    manifest = load_manifest()
    short = dataclasses.replace(
        manifest, exercises=tuple(dataclasses.replace(e, budget_s=6) for e in manifest.exercises)
    )
    monkeypatch.setattr(grading, "load_manifest", lambda: short)
    path = tmp_path / "slow.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(f"import time\ntime.sleep(4)  # {n}") for n in range(2)]
    nbformat.write(notebook, path)
    report = grade(PINNING.name, path)
    assert re.match(
        r"code cell [12] was still running when the grade's budget of 6 s ran out", report.cell_errors[0]
    ), "each cell alone fits in the budget, both do not"


@pytest.mark.live  # a 5 s budget against a kernel's start: alone
def test_waiting_for_the_measurement_queue_does_not_spend_the_budget(tmp_path):
    """A notebook that waits 6 s for another process's measurement (longer than its whole budget), then runs 1 s,
    fits a budget of 5 s (in a busy class a learner's grade waited minutes in line); one that runs 8 s does not,
    and is told."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fcntl.flock(os.open(os.environ['PERFLAB_LOCK'], os.O_RDWR | os.O_CREAT), fcntl.LOCK_EX)\n"
            "print('held', flush=True)\ntime.sleep(6)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    path = tmp_path / "queued.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("from perflab.lock import measurement_lock\nimport time\n"
                                                "with measurement_lock('a measurement'):\n    time.sleep(1)\n"
                                                "placement = [5, 6, 7, 8]")]
    nbformat.write(notebook, path)
    try:
        report = grade(PINNING.name, path, timeout=5)
    finally:
        holder.kill()
        holder.wait()
    assert not report.cell_errors, report.cell_errors
    path.write_text(path.read_text().replace("time.sleep(1)", "time.sleep(8)"))
    report = grade(PINNING.name, path, timeout=5)
    assert report.cell_errors[0].startswith("code cell 1 was still running when the grade's budget of 5 s ran out")


def test_the_check_button_grades_within_the_exercises_budget(monkeypatch):
    import subprocess

    import perflab.grading as grading

    ran = []
    monkeypatch.setattr(
        grading.subprocess, "run", lambda argv, **_: ran.append(argv) or subprocess.CompletedProcess(argv, 0, "", "")
    )
    monkeypatch.setenv("JPY_SESSION_NAME", str(PINNING.solution_path))
    grading.check_button(PINNING.name).children[0].click()
    assert ran[0][-2:] == ["--timeout", f"{PINNING.budget_s:g}"]


def test_a_failed_grade_shows_the_hint_perflab_hint_shows(tmp_path):
    from perflab.grading import next_hint

    first = grade(PINNING.name)  # the learner's untouched copy: failed, and recorded
    assert first.hint == PINNING.hints[0] == next_hint(PINNING)[1], "`perflab hint` shows what the grade showed"
    assert grade(PINNING.name).hint == PINNING.hints[1], "the next failure opens the next hint"


def test_a_workshop_regrade_runs_the_learners_code_as_the_learner_not_root(tmp_path, monkeypatch):
    import os
    import pwd
    import shutil
    import tempfile

    from perflab.workshop import regrade, roster

    if os.geteuid() != 0:
        pytest.skip("a re-grade switches users: run the tests as root")
    nobody = pwd.getpwnam("nobody")
    home = Path(tempfile.mkdtemp(prefix="perflab-learner-"))  # in /tmp: nobody cannot reach pytest's folders
    try:
        copy = home / "work" / "exercises" / PINNING.notebook
        copy.parent.mkdir(parents=True)
        shutil.copy(
            notebook_with(tmp_path, "import os\nopen(os.path.expanduser('~/uid'), 'w').write(str(os.geteuid()))"), copy
        )
        for path in [home, *home.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        learner = pwd.struct_passwd((*nobody[:5], str(home), nobody.pw_shell))  # nobody, with this home
        monkeypatch.setattr(regrade.pwd, "getpwnam", lambda user: learner)
        workshop = roster.Workshop("127.0.0.1", 1, 2, 3, 4, "", "", "", turns=str(home / "turns.sock"))
        outcome = regrade.grade_as_learner("alice", PINNING.name, workshop)
        assert outcome["status"] == PASSED, outcome
        assert (home / "uid").read_text() == str(nobody.pw_uid)
    finally:
        shutil.rmtree(home)


@pytest.mark.parametrize("cells", [
    ["from perflab.labs.memcpy_variant import exercises as lab\nLOSES_AT = lab.lost_sizes(result)"],
    ["from perflab.labs.memcpy_variant.exercises import lost_sizes as ls", "f = ls\nLOSES_AT = f(result)"],
    ["import perflab.labs.memcpy_variant.speedups as s\nLOSES_AT = sorted({c.size for c in s.wins(c)})"],
    ["from perflab.labs.memcpy_variant import exercises as lab\ndef mine(r):\n    return getattr(lab, 'lost_sizes')(r)"],
    ["import sys\nclass Answer:\n    sizes = sys.modules['perflab.labs.memcpy_variant.exercises'].lost_sizes"],
])
def test_a_course_function_that_computes_the_answer_is_refused_anywhere(cells):
    from perflab.grading.own_code import reached
    from perflab.labs.memcpy_variant import exercises, speedups

    assert reached(cells, (exercises.lost_sizes, speedups.wins)).startswith("your notebook uses perflab.labs.")


def test_the_answer_worked_out_from_the_notes_is_the_learners():
    from perflab.grading.own_code import reached
    from perflab.labs.memcpy_variant import exercises

    cells = ["from perflab.labs.memcpy_variant import exercises as lab\nresult = lab.measure_here()",
             "LOSES_AT = [int(n.split()[1]) for n in result['verdict']['notes'] if n.startswith('at ')]",
             "def lost_sizes(r):\n    return []"]  # a function of their own under the course's name is theirs
    assert reached(cells, (exercises.lost_sizes,)) is None


def _refusing_exercises():
    from perflab.manifest.exercises import load_manifest

    return [e for e in load_manifest().exercises if getattr(e.check_function(), "refused", ())]


@pytest.mark.parametrize("exercise", _refusing_exercises(), ids=lambda e: e.name)
def test_what_the_course_computes_for_an_answer_is_refused_under_another_name(exercise):
    import importlib

    from perflab.grading import own_work

    check = exercise.check_function()
    module = importlib.import_module(f"{exercise.lab.package}.exercises")
    for answer in check.refused:
        if callable(answer):
            where, name = answer.__module__, answer.__name__
        else:  # a constant, such as a known fix, by its name in the exercises' module
            where, name = module.__name__, next(n for n, v in vars(module).items() if v is answer)
        cells = [f"import {where} as course\nmine = course.{name}", "ANSWER = mine"]
        refused, = own_work(check, cells)
        assert refused.status == FAILED and refused.got.startswith(f"your notebook uses {where}.{name}")
    assert own_work(check, ["ANSWER = 42"]) == []


def test_the_crossover_and_the_flood_suspect_are_the_learners_own():
    from perflab.grading.own_code import refused_call
    from perflab.labs.hidden_quadratic.programs import crossover
    from perflab.labs.memory_neighbour.exercises import flood_suspect

    wrapper = "from perflab.labs.hidden_quadratic import programs\ndef crossover(*a):\n    return programs.crossover(*a)"
    assert "calls perflab.labs.hidden_quadratic.programs.crossover" in refused_call([wrapper], "crossover", crossover)
    suspect = ("from perflab.labs.memory_neighbour import exercises as lab\ndef flood_suspect(p):\n"
               "    return lab.flood_suspect(p)")
    assert "calls perflab.labs.memory_neighbour" in refused_call([suspect], "flood_suspect", flood_suspect)


@pytest.mark.parametrize("cells, typed", [
    (["NS_PER_SAMPLE = 6300"], True),
    (["NS_PER_SAMPLE: float = -6.3e3", "x = 1"], True),
    (["NS_PER_SAMPLE = 6300", "NS_PER_SAMPLE = (median - 1) / 25000 * 1e9"], False),
    (["NS_PER_SAMPLE = (median - 1) / 25000 * 1e9"], False),
    (["print('no answer')"], False),  # missing, which its own check says
])
def test_an_answer_typed_in_is_told_from_one_worked_out(cells, typed):
    from perflab.grading.own_code import typed_in

    assert typed_in(cells, "NS_PER_SAMPLE") is typed
