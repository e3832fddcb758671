"""The class dashboard's page: one row per learner (each lab's verdict, exercises, cases), the class's effects
drawn together, and every written answer beside its rubric. The state it shows is perflab.workshop.dashboard's."""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING

from ..grading import written
from ..grading.kernel import read_notebook
from ..manifest.exercises import load_manifest
from ..manifest.labs import available, find
from ..verdict import COLOURS

if TYPE_CHECKING:  # the state is the dashboard's, which serves this page
    from .dashboard import LearnerState


def class_figure(states: list[LearnerState]):
    """Each lab's effects across the class, one dot per learner in its verdict's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labs = available()
    figure, axes = plt.subplots(figsize=(8, 0.5 + 0.45 * len(labs)))
    for row, lab in enumerate(labs):
        for state in states:
            found = state.labs.get(lab)
            if found is not None and found.effect is not None:
                axes.scatter(found.effect, row, color=COLOURS.get(found.verdict, "#000"), s=50, zorder=3)
        done = [s.labs[lab] for s in states if lab in s.labs]
        reproduced = sum(1 for found in done if found.verdict == "reproduced")
        axes.annotate(
            f"{reproduced}/{len(done)} reproduced",
            (1.01, row),
            xycoords=("axes fraction", "data"),
            va="center",
            fontsize=8,
        )
    axes.set_yticks(range(len(labs)), labs)
    axes.invert_yaxis()
    axes.axvline(0, color="#999", lw=0.8)
    axes.set_xlabel("main effect of each learner's newest run (relative effects: 0.5 = +50%)")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def _cases_cell(state: LearnerState) -> str:
    """Each case of the learner's: their own last grade, and the last re-grade with the causes found and fixed."""
    lines = []
    for name in state.all_cases():
        said = [f"their grade: {state.exercises[name]}" if name in state.exercises else "not graded by them"]
        again = state.regrades.get(name)
        if again:
            said.append(f"re-graded {again['status']}" + (f" ({again['detail']})" if again.get("detail") else ""))
        lines.append(html.escape(f"{name}: {'; '.join(said)}"))
    return f"<td class=cases>{'<br>'.join(lines)}</td>" if lines else "<td class=none>none drawn</td>"


def _exercises_cell(state: LearnerState, exercises: list[str]) -> str:
    passed = [name for name, status in state.exercises.items() if status == "passed" and name in exercises]
    text = f"{len(passed)} of {len(exercises)} passed"
    regraded = [name for name in passed if name in state.regrades]
    if regraded:
        doubtful = state.passed_but_not_confirmed()
        text += f"; re-graded {len(regraded)}: {len(regraded) - len(doubtful)} confirmed"
        if doubtful:
            listed = ", ".join(f"{name} {status}" for name, status in doubtful.items())
            text += f', <b class="doubt">{len(doubtful)} not</b> ({html.escape(listed)})'
    return text


def answers_html(states: list[LearnerState]) -> str:
    """Each written question, its rubric, and every learner's newest answer to it."""
    manifest, sections = load_manifest(), []
    for exercise in manifest.exercises:
        asked = written.questions(read_notebook(exercise.exercise_path), manifest.stub_markdown)
        for question, rubric in zip(asked, exercise.rubric):
            rows = "".join(_answer_row(state, exercise.name, question.text) for state in states)
            sections.append(f"<h3><code>{html.escape(exercise.name)}</code>: {html.escape(question.text)}</h3>"
                            f"<p class=rubric><b>A good answer:</b> {html.escape(rubric)}</p><table>{rows}</table>")
    return "".join(sections)


def _answer_row(state: LearnerState, exercise: str, question: str) -> str:
    kept = state.answers.get(exercise, [])
    entry = next((e for e in kept if isinstance(e, dict) and e.get("question") == question), {})
    answer, graded = str(entry.get("answer") or ""), html.escape(str(entry.get("graded", "")))
    shown = (f"<td class=answer>{html.escape(answer)}</td><td class=none>{graded}</td>" if answer
             else "<td class=none>no answer yet</td><td></td>")
    return f"<tr><th>{html.escape(state.learner)}</th>{shown}</tr>"


SHORT = {"reproduced": "yes", "not-reproduced": "no", "inconclusive": "?", "cannot-show": "n/a"}  # 12 labs in 1280 px


def render_html(states: list[LearnerState], prefix: str = "", hub: str = "/hub/") -> str:
    exercises = [e.name for e in load_manifest().exercises]
    labs = available()
    head = "".join(f'<th title="{html.escape(find(lab).heading)}">{find(lab).number}</th>' for lab in labs)
    key = " · ".join(f"{find(lab).number} {html.escape(lab)}" for lab in labs)
    legend = " ".join(f'<span class=badge style="background:{colour}">{SHORT[verdict]}</span> {verdict}'
                      for verdict, colour in COLOURS.items())
    rows = []
    for state in states:
        cells = []
        for lab in labs:
            found = state.labs.get(lab)
            if found is None:
                cells.append("<td class=none>–</td>")
                continue
            colour = COLOURS.get(found.verdict, "#b00")
            title = html.escape(f"{lab}: {found.verdict} {found.created} {found.note}".strip())
            shown = SHORT.get(found.verdict, found.verdict)
            cells.append(f'<td title="{title}"><span class=badge style="background:{colour}">{shown}</span></td>')
        learner, done = html.escape(state.learner), _exercises_cell(state, exercises)
        rows.append(f"<tr><th>{learner}</th>{''.join(cells)}<td>{done}</td>{_cases_cell(state)}</tr>")
    picture = io.BytesIO()
    class_figure(states).savefig(picture, format="png", dpi=90)
    image = base64.b64encode(picture.getvalue()).decode()
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>perflab class dashboard</title>
<style>body{{font-family:sans-serif;margin:0 2rem 2rem;line-height:1.4;max-width:1216px}}
td,th{{padding:.25rem .35rem;text-align:left;vertical-align:top}} img{{max-width:100%}}
.badge{{color:white;padding:.1rem .35rem;border-radius:.3rem;font-size:.85rem;white-space:nowrap}} .none{{color:#888}}
table{{border-collapse:collapse;width:100%}} tr{{border-bottom:1px solid #ddd}} .doubt{{color:#b00}}
.cases{{font-size:.85rem;max-width:18rem}} .key{{font-size:.85rem;color:#444}}
.answer{{white-space:pre-wrap;max-width:50rem}} .rubric{{color:#444}}
nav{{display:flex;gap:1.5rem;padding:.6rem 0;border-bottom:1px solid #ddd;margin-bottom:1rem}}
nav .right{{margin-left:auto}}</style></head><body>
<nav><b>perflab workshop</b><a href="{hub}home">Hub home</a><a href="{hub}admin">Admin (learners' servers)</a>
<a class=right href="{hub}logout">Log out</a></nav>
<h1>Class dashboard</h1>
<p>{len(states)} learners. Verdicts are recomputed here from each learner's newest saved result (its raw samples);
a result whose provenance fails is shown as refused. Exercises are as each learner's progress file says, which they
can edit; <code>sudo .venv/bin/perflab workshop regrade</code> grades them again as the learner and the outcome is
shown beside it. <a href="{prefix}class.csv">Download as CSV</a>.</p>
<p class=key>Labs: {key}.<br>Each lab's newest verdict: {legend}; – not run; refused: its file was changed.</p>
<table><tr><th>learner</th>{head}<th>exercises</th><th>cases</th></tr>
{''.join(rows)}
</table>
<h2>The class's measurements</h2>
<img alt="each lab's effects across the class" src="data:image/png;base64,{image}">
<h2>Written answers</h2>
<p>The grader only sees that an answer is there; read them here, beside what a good answer says (the rubric in
<code>exercises/manifest.toml</code>). Each is the learner's newest written answer, as their last grade found it.</p>
{answers_html(states)}
</body></html>"""
