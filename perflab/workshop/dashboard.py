"""The class dashboard: a JupyterHub service page for the instructor (/services/dashboard/).

For every learner it reads their workspace as root: the newest saved result of each lab,
whose verdict it recomputes from the raw samples with the lab's own judge (a result whose
provenance fails is shown as refused, not believed), and the exercise statuses their
progress file records, beside what `perflab workshop regrade` found when it graded them
again as the learner (perflab.workshop.regrade): the progress file is the learner's to edit,
the re-grades are root's. The class's effects are drawn together, one row per lab, and
/services/dashboard/class.csv exports the same table. Below it, every written question with
the manifest's rubric and each learner's answer (perflab.grading.written), for the instructor
to read: the grader only sees that an answer is there.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PerflabError
from ..grading import progress, written
from ..grading.kernel import read_notebook
from ..manifest.exercises import load_manifest
from ..manifest.labs import available, find
from ..results import provenance_problems
from ..verdict import COLOURS
from . import roster
from .regrade import load_regrades


@dataclass
class LabState:
    verdict: str  # recomputed here; "refused" when the file's provenance fails
    effect: float | None  # the main effect, relative (0.42 is +42%) or in the effect's unit
    created: str
    note: str = ""


@dataclass
class LearnerState:
    learner: str
    labs: dict[str, LabState] = field(default_factory=dict)
    exercises: dict[str, str] = field(default_factory=dict)  # name -> passed | failed | inconclusive
    regrades: dict[str, dict] = field(default_factory=dict)  # name -> {"status", "at", "detail"}, from regrade
    answers: dict[str, list[dict]] = field(default_factory=dict)  # name -> [{"question", "answer", "graded"}]

    def passed_but_not_confirmed(self) -> dict[str, str]:
        """Exercises the progress file calls passed that a re-grade did not pass: name -> the re-grade's status."""
        return {
            name: self.regrades[name]["status"]
            for name, status in self.exercises.items()
            if status == "passed" and name in self.regrades and self.regrades[name]["status"] != "passed"
        }


def newest_result(folder: Path) -> dict | None:
    """The newest result in a lab's folder that carries a verdict (a lab saves helper results too)."""
    for path in sorted(folder.glob("*.json"), reverse=True):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(result, dict) and isinstance(result.get("verdict"), dict):
            return result
    return None


def lab_state(lab_name: str, result: dict, machine) -> LabState:
    """The verdict recomputed from the result's raw samples on this machine, unless its provenance fails."""
    problems = provenance_problems(result)
    if problems:
        return LabState("refused", None, result.get("created", ""), problems[0])
    try:
        verdict = find(lab_name).load().verdict_of(machine, result)
    except Exception as err:  # a result from an older version may lack a field: say so, keep the page up
        return LabState("refused", None, result.get("created", ""), f"cannot be recomputed: {err}")
    recorded = result["verdict"].get("verdict")
    note = "" if recorded == verdict.verdict else f"the learner's run said {recorded}"
    return LabState(verdict.verdict, verdict.effect.value if verdict.effect else None, result.get("created", ""), note)


def learner_state(learner: str, workspace: Path, machine) -> LearnerState:
    state = LearnerState(learner)
    for lab in available():
        result = newest_result(workspace / "results" / lab)
        if result is not None:
            state.labs[lab] = lab_state(lab, result, machine)
    try:
        state.exercises = progress.current(workspace / "progress.txt")
    except PerflabError:  # unreadable: shown as no exercise attempted
        pass
    try:
        state.answers = written.kept(written.answers_path(workspace / "progress.txt"))
    except PerflabError:  # unreadable: shown as no answer yet
        pass
    return state


def class_state(learners: list[str], machine) -> list[LearnerState]:
    try:
        regrades = load_regrades()
    except PerflabError:  # unreadable: shown as never re-graded, and the next re-grade writes it anew
        regrades = {}
    states = []
    for learner in learners:
        workspace = roster.workspace_of(learner)
        state = learner_state(learner, workspace, machine) if workspace else LearnerState(learner)
        state.regrades = regrades.get(learner, {})
        states.append(state)
    return states


def class_csv(states: list[LearnerState]) -> str:
    """One row per learner and lab or exercise: learner, kind, name, status, effect, created, note."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["learner", "kind", "name", "status", "effect", "created", "note"])
    for state in states:
        for lab, found in state.labs.items():
            writer.writerow(
                [
                    state.learner,
                    "lab",
                    lab,
                    found.verdict,
                    "" if found.effect is None else f"{found.effect:.4g}",
                    found.created,
                    found.note,
                ]
            )
        for exercise in [*state.exercises, *(e for e in state.regrades if e not in state.exercises)]:
            again = state.regrades.get(exercise)
            note = f"re-graded {again['status']} {again['at']} {again['detail']}".strip() if again else ""
            writer.writerow(
                [state.learner, "exercise", exercise, state.exercises.get(exercise, "not graded"), "", "", note]
            )
    return out.getvalue()


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
    """Each sealed case's last re-grade: its status and the causes found and fixed."""
    graded = {name: outcome for name, outcome in state.regrades.items() if name.startswith("case-")}
    if not graded:
        return "<td class=none>not re-graded</td>"
    return "<td>" + "<br>".join(html.escape(f"{name}: {o['status']}; {o.get('detail', '')}".rstrip("; "))
                                for name, o in graded.items()) + "</td>"


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


def render_html(states: list[LearnerState], prefix: str = "") -> str:
    exercises = [e.name for e in load_manifest().exercises]
    labs = available()
    head = "".join(f"<th>{html.escape(lab)}</th>" for lab in labs)
    rows = []
    for state in states:
        cells = []
        for lab in labs:
            found = state.labs.get(lab)
            if found is None:
                cells.append("<td class=none>not run</td>")
                continue
            colour = COLOURS.get(found.verdict, "#b00")
            title = html.escape(f"{found.created} {found.note}".strip())
            cells.append(
                f'<td title="{title}"><span class=badge style="background:{colour}">{found.verdict}</span></td>'
            )
        learner, done = html.escape(state.learner), _exercises_cell(state, exercises)
        rows.append(f"<tr><th>{learner}</th>{''.join(cells)}<td>{done}</td>{_cases_cell(state)}</tr>")
    picture = io.BytesIO()
    class_figure(states).savefig(picture, format="png", dpi=90)
    image = base64.b64encode(picture.getvalue()).decode()
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>perflab class dashboard</title>
<style>body{{font-family:sans-serif;margin:2rem;line-height:1.4}} td,th{{padding:.25rem .5rem;text-align:left}}
.badge{{color:white;padding:.1rem .4rem;border-radius:.3rem;font-size:.85rem}} .none{{color:#888}}
table{{border-collapse:collapse}} tr{{border-bottom:1px solid #ddd}} .doubt{{color:#b00}}
.answer{{white-space:pre-wrap;max-width:50rem}} .rubric{{color:#444}}</style></head><body>
<h1>perflab class dashboard</h1>
<p>{len(states)} learners. Verdicts are recomputed here from each learner's newest saved result (its raw samples);
a result whose provenance fails is shown as refused. Exercises are as each learner's progress file says, which they
can edit; <code>sudo .venv/bin/perflab workshop regrade</code> grades them again as the learner and the outcome is
shown beside it. <a href="{prefix}class.csv">Download as CSV</a>.</p>
<table><tr><th>learner</th>{head}<th>exercises</th><th>case (causes found and fixed)</th></tr>
{''.join(rows)}
</table>
<h2>The class's measurements</h2>
<img alt="each lab's effects across the class" src="data:image/png;base64,{image}">
<h2>Written answers</h2>
<p>The grader only sees that an answer is there; read them here, beside what a good answer says (the rubric in
<code>exercises/manifest.toml</code>). Each is the learner's newest written answer, as their last grade found it.</p>
{answers_html(states)}
</body></html>"""


def main() -> None:
    """Run as a JupyterHub-managed service: only users the hub grants access to the service get in."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    from ..probe import probe

    machine = probe()
    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]

    def states() -> list[LearnerState]:
        workshop = roster.load()
        return class_state(list(workshop.learners) if workshop else [], machine)

    class Page(HubOAuthenticated, web.RequestHandler):
        @web.authenticated
        def get(self) -> None:
            self.set_header("Cache-Control", "no-cache")
            self.finish(render_html(states(), prefix))

    class Export(HubOAuthenticated, web.RequestHandler):
        @web.authenticated
        def get(self) -> None:
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="perflab-class.csv"')
            self.finish(class_csv(states()))

    app = web.Application(
        [
            (prefix, Page),
            (url_path_join(prefix, "class.csv"), Export),
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
        ],
        cookie_secret=os.urandom(32),
    )
    url = os.environ["JUPYTERHUB_SERVICE_URL"].rsplit(":", 1)
    app.listen(int(url[1].strip("/")), "127.0.0.1")
    ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
