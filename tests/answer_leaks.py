"""What each exercise asks for, and whether a text shows it: the finder behind tests/test_answers.py.

An exercise's answers are:
- every code line of its reference solution's solution regions (solutions/, between the BEGIN/END SOLUTION
  markers of code cells);
- the code lines of the functions its manifest entry names in `answers` ("module:function"): the grader's
  reference implementations, or the code that fixes the expected value;
- the numbers its entry lists in `answers`, found however a page writes them (500000, 500,000, 500 k, 0.5 M).

Code is compared line by line, whitespace normalised and comments left out. Lines shorter than MIN_LINE
(`else:`, `return x`) and the opening line of a call continued below (`raise PerflabError(`) could be
anyone's, so they do not count as an answer on their own.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
import tomllib
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import nbformat

from perflab.grading.authoring import BEGIN, END

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "exercises" / "manifest.toml"
MIN_LINE = 12
NUMBER_TOLERANCE = 0.01  # the graders' own tolerance for a number the learner computes
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:[,_]\d{3})+|\d+)(\.\d+)?(?:[eE]([+-]?\d+))?(?:\s?(k|thousand|M|million)\b)?")
SCALE = {None: 1, "k": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6}


@dataclass(frozen=True)
class Answer:
    exercise: str
    where: str  # where it comes from: the solution notebook, or the function the manifest names
    code: str | None = None  # a normalised code line
    number: float | None = None

    def __str__(self) -> str:
        shown = repr(self.code) if self.code is not None else f"the number {self.number:,g}"
        return f"{self.exercise}: {shown} ({self.where})"


def normalise(text: str) -> str:
    return " ".join(text.split())


def code_lines(source: str) -> list[str]:
    """The lines of `source` that could be an answer: comments left out, whitespace normalised."""
    lines = []
    for line in source.splitlines():
        code = normalise(line.split("  #")[0])
        if len(code) >= MIN_LINE and not code.startswith("#") and not code.endswith(("(", "[", "{")):
            lines.append(code)
    return lines


def solution_lines(notebook: Path) -> list[str]:
    """Every code line inside a solution region of a solution notebook's code cells."""
    lines: list[str] = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            if BEGIN.match(line):
                inside = True
            elif END.match(line):
                inside = False
            elif inside:
                lines += code_lines(line)
    return lines


def function_lines(reference: str) -> list[str]:
    """The code lines of a function's body, named "module:function"; its def line and docstring left out."""
    module, _, name = reference.partition(":")
    function = getattr(importlib.import_module(module), name)
    source = textwrap.dedent(inspect.getsource(function))
    definition = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    body = definition.body[1:] if ast.get_docstring(definition) is not None else definition.body
    return code_lines("\n".join(source.splitlines()[body[0].lineno - 1:body[-1].end_lineno]))


@cache
def exercise_answers(manifest: Path = MANIFEST) -> list[Answer]:
    """Every answer of every exercise in the manifest."""
    answers = []
    for entry in tomllib.loads(manifest.read_text())["exercise"]:
        name, solution = entry["name"], REPO / "solutions" / entry["notebook"]
        answers += [Answer(name, f"solutions/{entry['notebook']}", code=line) for line in solution_lines(solution)]
        for item in entry.get("answers", []):
            if isinstance(item, str):
                answers += [Answer(name, item, code=line) for line in function_lines(item)]
            else:
                answers.append(Answer(name, "exercises/manifest.toml", number=float(item)))
    return answers


def numbers_in(text: str) -> list[float]:
    """Every number written in `text`, with its thousands separators and its k/M suffix read."""
    found = []
    for whole, fraction, exponent, suffix in NUMBER.findall(text):
        value = float(re.sub("[,_]", "", whole) + fraction) * 10 ** int(exponent or 0)
        found.append(value * SCALE[suffix or None])
    return found


def shown_in(text: str, answers: list[Answer]) -> list[Answer]:
    """The answers that `text` shows."""
    flat = normalise(text)
    numbers = numbers_in(flat)
    return [a for a in answers
            if (a.code is not None and a.code in flat)
            or (a.number is not None and any(abs(n - a.number) <= NUMBER_TOLERANCE * abs(a.number) for n in numbers))]


class _TextOf(HTMLParser):
    """The text a reader sees in an HTML page: tags dropped, entities decoded, scripts and styles left out."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def html_text(page: str) -> str:
    parser = _TextOf()
    parser.feed(page)
    return "".join(parser.parts)


def notebook_text(notebook: nbformat.NotebookNode) -> str:
    """Every cell's source and every text its outputs show (printed, returned, or drawn as HTML)."""
    parts = []
    for cell in notebook.cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            data = output.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/markdown", ""), html_text(data.get("text/html", ""))]
    return "\n".join(parts)
