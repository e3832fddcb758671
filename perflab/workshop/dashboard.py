"""The class dashboard: a JupyterHub service page for the instructor (/services/dashboard/).

For every learner it reads their workspace as root, only the plain files they own
(perflab.workshop.learner_files: no link, FIFO or device is followed): the newest saved result of each lab,
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

import csv
import io
import json
import os
from dataclasses import dataclass, field

from ..errors import PerflabError
from ..grading import progress, written
from ..manifest.labs import available, find
from ..results import provenance_problems
from . import learner_files, roster
from .learner_files import RESULT_CAP, LearnerFiles
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
    cases: list[str] = field(default_factory=list)  # the case folders in their work/cases, drawn by them or given

    def all_cases(self) -> list[str]:
        """Every case of theirs: drawn or given (a folder), graded by them (progress) or re-graded."""
        named = [*self.cases, *self.exercises, *self.regrades]
        return sorted({name for name in named if is_case(name)}, key=named.index)

    def passed_but_not_confirmed(self) -> dict[str, str]:
        """Exercises the progress file calls passed that a re-grade did not pass: name -> the re-grade's status."""
        return {
            name: self.regrades[name]["status"]
            for name, status in self.exercises.items()
            if status == "passed" and name in self.regrades and self.regrades[name]["status"] != "passed"
        }


def is_case(name: str) -> bool:
    return name.startswith("case-")


def newest_result(files: LearnerFiles, lab: str) -> dict | None:
    """The newest result in the learner's folder of a lab that carries a verdict (a lab saves helper results too)."""
    folder = f"work/results/{lab}"
    for name in reversed([name for name in files.names(folder) if name.endswith(".json")]):
        try:
            result = json.loads(files.read(f"{folder}/{name}", RESULT_CAP) or b"")
        except ValueError:
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


def learner_state(learner: str, files: LearnerFiles, machine) -> LearnerState:
    """What the learner's own files say: a file that is not a plain one of theirs reads as absent."""
    state = LearnerState(learner)
    for lab in available():
        result = newest_result(files, lab)
        if result is not None:
            state.labs[lab] = lab_state(lab, result, machine)
    state.exercises = progress.current(text=files.text("work/progress.txt"))
    state.cases = [name for name in files.names("work/cases") if is_case(name)]
    state.answers = written.kept_in(files.text("work/answers.json"))
    return state


def class_state(learners: list[str], machine) -> list[LearnerState]:
    try:
        regrades = load_regrades()
    except PerflabError:  # unreadable: shown as never re-graded, and the next re-grade writes it anew
        regrades = {}
    states = []
    for learner in learners:
        files = learner_files.of(learner)
        state = learner_state(learner, files, machine) if files else LearnerState(learner)
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
        exercises = [name for name in [*state.exercises, *state.regrades] if not is_case(name)]
        for name in [*dict.fromkeys(exercises), *state.all_cases()]:
            again = state.regrades.get(name)
            note = f"re-graded {again['status']} {again['at']} {again['detail']}".strip() if again else ""
            status = state.exercises.get(name, "not graded by the learner" if again or not is_case(name) else "drawn")
            writer.writerow([state.learner, "case" if is_case(name) else "exercise", name, status, "", "", note])
    return out.getvalue()


def main() -> None:
    """Run as a JupyterHub-managed service: only users the hub grants access to the service get in."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    from ..probe import probe
    from .dashboard_page import render_html

    machine = probe()
    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]

    def states() -> list[LearnerState]:
        workshop = roster.load()
        return class_state(list(workshop.learners) if workshop else [], machine)

    class Page(HubOAuthenticated, web.RequestHandler):
        @web.authenticated
        def get(self) -> None:
            self.set_header("Cache-Control", "no-cache")
            hub = url_path_join(os.environ.get("JUPYTERHUB_BASE_URL", "/"), "hub/")
            self.finish(render_html(states(), prefix, hub))

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
