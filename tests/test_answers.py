"""No exercise's answer in the learner's reach: the built book, the lab notebooks and the pictures they draw from
recorded data show no code line and no number an exercise asks for (tests/answer_leaks.py says what counts).

The lab notebooks' outputs are checked where they are made: tests/test_notebooks.py runs each one."""

from __future__ import annotations

import html
import inspect
import subprocess
import tomllib

import nbformat
import pytest
from answer_leaks import MANIFEST, MIN_LINE, exercise_answers, function_lines, html_text, notebook_text, shown_in
from matplotlib.text import Text

from conftest import REPO
from perflab import stats

MDBOOK = REPO / ".tools" / "bin" / "mdbook"
LAB_NOTEBOOKS = sorted((REPO / "labs").glob("*/lab.ipynb"))
RECORDED = sorted(path for path in (REPO / "perflab" / "data").rglob("*") if path.suffix in (".json", ".csv", ".txt"))


@pytest.mark.skipif(not MDBOOK.exists(), reason="mdBook is not installed: run `make test`, which installs it")
def test_the_built_book_shows_no_answer(tmp_path):
    done = subprocess.run([str(MDBOOK), "build", str(REPO / "book"), "-d", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = [f"{page.relative_to(tmp_path)}: {answer}"
             for page in sorted(tmp_path.rglob("*.html")) if page.name != "print.html"  # every chapter again
             for answer in shown_in(html_text(page.read_text()), exercise_answers())]
    assert shown == [], "\n".join(shown)


@pytest.mark.parametrize("path", LAB_NOTEBOOKS, ids=lambda p: p.parent.name)
def test_a_lab_notebook_shows_no_answer(path):
    assert [str(a) for a in shown_in(notebook_text(nbformat.read(path, as_version=4)), exercise_answers())] == []


def test_the_recorded_data_a_notebook_can_load_shows_no_answer():
    """Lab 5's source data carried the cap nsd-cap-model asks for ("cap_queries_per_s": 500000), one
    `recorded.load()` away from the learner's notebook."""
    numbers = [a for a in exercise_answers() if a.number is not None]
    shown = [f"{path.relative_to(REPO)}: {a}" for path in RECORDED for a in shown_in(path.read_text(), numbers)]
    assert RECORDED and shown == []


def test_the_pictures_of_recorded_data_show_no_answer():
    """What the lab notebooks draw without measuring: every title, label, legend and note on it."""
    from perflab.labs.core_to_core.advisor import analyze
    from perflab.labs.core_to_core.figures import heatmap
    from perflab.labs.core_to_core.matrix import load
    from perflab.labs.core_to_core.run import RECORDED_EXAMPLE
    from perflab.labs.first_core_ipi.figures import original_case_figure
    from perflab.labs.inclusive_llc.figures import source_figure as stress_ng_runs_figure
    from perflab.labs.loop_alignment.figures import talk_figure
    from perflab.labs.numa_static_data.figures import source_figure
    from perflab.labs.page_table_levels.figures import relative_figure

    recorded = load(RECORDED_EXAMPLE)
    for figure in (heatmap(recorded, analyze(recorded)), original_case_figure(), source_figure(),
                   relative_figure({"kind": ""}, None), stress_ng_runs_figure(), talk_figure()):
        words = "\n".join(text.get_text() for text in figure.findobj(Text))
        assert [str(a) for a in shown_in(words, exercise_answers())] == []


# --- the finder can fail ----------------------------------------------------------------------------------

def _reference(xs):
    """A docstring the finder leaves out."""
    squares = sum(x * x for x in xs)  # and a comment
    return squares


def test_a_function_s_answer_is_its_body():
    assert function_lines(f"{__name__}:_reference") == ["squares = sum(x * x for x in xs)", "return squares"]


def test_every_exercise_has_answers_and_every_listed_item_is_a_function_with_code_or_a_number():
    for entry in tomllib.loads(MANIFEST.read_text())["exercise"]:
        for item in entry.get("answers", []):
            if isinstance(item, str):
                assert function_lines(item), f"{entry['name']}: {item} has no line of {MIN_LINE} characters or more"
            else:
                assert isinstance(item, (int, float)) and item > 0, f"{entry['name']}: {item!r} is not a number"
        assert any(a.exercise == entry["name"] for a in exercise_answers()), f"{entry['name']}: no answer to look for"


@pytest.mark.parametrize("text, found", [
    ('<pre><code>rates = [s[&quot;round_trips&quot;] * 1e9\n      / s[&quot;elapsed_ns&quot;]'
     ' for s in samples]</code></pre>', "c2c-harmonic-mean"),  # the book's old worked example, rewrapped
    ("<p>which caps it at 500,000 queries/s</p>", "nsd-cap-model"),
    ("<p>which caps it at ~500 k queries/s</p>", "nsd-cap-model"),
    ("<p>which caps it at 0.5 M queries/s</p>", "nsd-cap-model"),
    ("<p>cap: 499999.99999999994</p>", "nsd-cap-model"),
    ("<p>500 million iterations, 500 ns, 5,000 cores, return values</p>", None),
    # the opening line of alignment-slow-build's multi-line raise, as any included course code writes it
    ("<pre><code>    raise PerflabError(\n        f&quot;no such layout&quot;)</code></pre>", None),
])
def test_the_finder_sees_an_answer_however_a_page_writes_it(text, found):
    shown = {a.exercise for a in shown_in(html_text(text), exercise_answers())}
    assert shown == ({found} if found else set())


def test_the_finder_sees_a_reference_function_included_in_a_page():
    page = f"<pre><code>{html.escape(inspect.getsource(stats.harmonic_mean))}</code></pre>"
    assert {a.where for a in shown_in(html_text(page), exercise_answers())} == {"perflab.stats:harmonic_mean"}


def test_the_finder_reads_a_notebook_s_outputs():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("print(cap)", outputs=[
        nbformat.v4.new_output("stream", text="the model's cap: 500,000 queries per second\n")])]
    assert [str(a) for a in shown_in(notebook_text(notebook), exercise_answers())] == [
        "nsd-cap-model: the number 500,000 (exercises/manifest.toml)"]
