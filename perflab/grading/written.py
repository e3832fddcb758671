"""Written answers: the questions an exercise asks in words, what the learner wrote, and where it is kept.

A written question is a Markdown cell with a solution region in the solution notebook; the learner's copy has
the manifest's stub_markdown (YOUR ANSWER HERE) in its place, and the text around the stub is the question as
handed out. The grader finds that cell in the learner's notebook by the question's text and takes what stands
where the stub stood. While that is empty or still the stub, the answer's check fails and the grade says
"code passed, written answer missing". The grader does not judge the words: the instructor reads them (the
class dashboard shows every learner's answers beside the manifest's rubric, as nbgrader's manual grading does).

Each grade of the learner's own copy keeps the answers it found in answers.json, beside the progress file:
{exercise: [{"question", "answer", "graded"}]}, the newest answer written to each question (an empty one never
replaces a written one).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PerflabError
from ..manifest.exercises import BEGIN, END
from ..results import write_atomic
from . import FAILED, PASSED, Check
from .progress import progress_path

if TYPE_CHECKING:
    import nbformat


@dataclass(frozen=True)
class Question:
    before: str  # the cell's text before the answer: its heading and the question
    after: str  # the cell's text after the answer, usually none

    @property
    def text(self) -> str:
        """The question without its heading, on one line."""
        return " ".join(line.strip() for line in self.before.splitlines() if line.strip() and not line.startswith("#"))

    @property
    def heading(self) -> str:
        return next((line.strip() for line in reversed(self.before.splitlines()) if line.startswith("#")), "")


@dataclass(frozen=True)
class Answer:
    question: Question
    text: str | None  # None: no cell of the notebook holds the question any more

    @property
    def written(self) -> bool:
        return bool(self.text and re.search(r"\w", self.text))


def questions(handed_out: nbformat.NotebookNode, stub: str) -> list[Question]:
    """The written questions of an exercise notebook as handed out: each Markdown cell with the stub in it."""
    found = []
    for cell in handed_out.cells:
        if cell.cell_type == "markdown" and stub in cell.source:
            before, _, after = cell.source.partition(stub)
            found.append(Question(before.strip(), after.strip()))
    return found


def answer_to(question: Question, notebook: nbformat.NotebookNode, stub: str) -> Answer:
    """What the learner wrote where the stub stood, without the stub or the solution's markers."""
    for cell in notebook.cells:
        source = cell.source.strip()
        if cell.cell_type != "markdown" or not source.startswith(question.before):
            continue
        text = source[len(question.before):]
        if question.after and text.rstrip().endswith(question.after):
            text = text.rstrip()[:-len(question.after)]
        lines = [line for line in text.replace(stub, "").splitlines() if not (BEGIN.match(line) or END.match(line))]
        return Answer(question, "\n".join(lines).strip())
    return Answer(question, None)


def answers(handed_out: nbformat.NotebookNode, notebook: nbformat.NotebookNode, stub: str) -> list[Answer]:
    return [answer_to(question, notebook, stub) for question in questions(handed_out, stub)]


def check(answer: Answer, stub: str) -> Check:
    """Passed once the learner wrote something in their own words; the grader reads no further."""
    name = f"your answer in words: {answer.question.text}"
    expected = f"your own words in place of {stub} (your instructor reads them; the grader only sees they are there)"
    where = f"the cell under '{answer.question.heading}'" if answer.question.heading else "its cell"
    if answer.text is None:
        return Check(name, FAILED, expected, "the question is no longer in your notebook: put it back as it was "
                                             "handed out, or `perflab reset` the exercise", written=True)
    if not answer.written:
        return Check(name, FAILED, expected, f"no answer yet: write it in place of {stub}, in {where}", written=True)
    words = len(answer.text.split())
    return Check(name, PASSED, expected, f"{words} word{'s' * (words != 1)}", written=True)


def answers_path(progress: Path | None = None) -> Path:
    """answers.json, beside the progress file (this learner's, or `progress`)."""
    return (progress or progress_path()).with_name("answers.json")


def kept(path: Path | None = None) -> dict[str, list[dict]]:
    """Every exercise's kept answers, from this learner's file or `path`; {} when there is none."""
    path = path or answers_path()
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise PerflabError(f"cannot read {path} ({err}): move it away; your next grade writes it anew") from None
    return found if isinstance(found, dict) else {}


def kept_in(text: str) -> dict[str, list[dict]]:
    """The kept answers in a file's text read already (as root reads a learner's); {} when it holds none."""
    try:
        found = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def keep(exercise: str, answered: list[Answer]) -> None:
    """Keep the answers written in this grade beside the progress file; an empty answer keeps the one before."""
    if not answered:
        return
    path = answers_path()
    before = {entry.get("question"): entry for entry in kept(path).get(exercise, []) if isinstance(entry, dict)}
    graded = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    now = [{"question": a.question.text, "answer": a.text, "graded": graded} if a.written
           else before.get(a.question.text, {"question": a.question.text, "answer": "", "graded": ""})
           for a in answered]
    _write(path, {**kept(path), exercise: now})


def forget(exercise: str) -> None:
    """Drop an exercise's kept answers."""
    path = answers_path()
    everything = kept(path)
    if everything.pop(exercise, None) is not None:
        _write(path, everything)


def forget_all() -> None:
    path = answers_path()
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        raise PerflabError(f"cannot remove {path} ({err.strerror}): remove it yourself") from None


def _write(path: Path, everything: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(everything, indent=1, ensure_ascii=False) + "\n")
    except OSError as err:
        raise PerflabError(f"your written answers were not kept: cannot write {path} ({err.strerror}); fix its "
                           "permissions or set PERFLAB_PROGRESS to a file in a folder you own") from None
