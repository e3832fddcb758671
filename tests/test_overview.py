"""Where the learner stands, as `perflab list` and the landing page show it: lab by lab, each named by its number."""

from __future__ import annotations

import re

from conftest import REPO, run_cli
from perflab import landing, overview
from perflab.manifest.labs import labs

IN_LAB_ORDER = [(lab.number, name) for lab in labs() for name in lab.exercises]


def test_exercises_come_lab_by_lab_in_the_order_each_lab_lists_them():
    assert [(row.lab_number, row.name) for row in overview.exercise_rows()] == IN_LAB_ORDER


def test_perflab_list_shows_the_exercises_by_lab_with_the_labs_number():
    done = run_cli("list")
    assert done.returncode == 0, done.stderr
    exercises = done.stdout.split("\n\n")[1]
    shown = re.findall(r"^(\d+) [a-z0-9-]+ +([a-z][a-z0-9-]*) ", exercises, re.M)  # a lab name may start with a digit
    assert [(int(number), name) for number, name in shown] == IN_LAB_ORDER


def test_the_landing_page_shows_the_exercises_by_lab_with_the_labs_number():
    page = landing.render_html(REPO)
    exercises = page.split("<h2>Exercises")[1]
    shown = re.findall(r"<tr><td>(\d+)</td><td><a [^>]*>[^<]*</a></td><td><code>([\w-]+)</code>", exercises)
    assert [(int(number), name) for number, name in shown] == IN_LAB_ORDER
