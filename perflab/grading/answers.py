"""Checks that several exercises share: a learner's function against a reference, a learner's saved result."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from .. import results
from ..bounds import bound_problems
from ..errors import PerflabError
from ..manifest.labs import find
from ..paths import results_dir
from . import FAILED, PASSED, Answers, Check
from .kernel import CallError, FunctionAnswer
from .numbers import digits_for, shown
from .own_code import refused_call


def close(got: Any, expected: float, rel: float = 1e-6) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and math.isclose(got, expected, rel_tol=rel)


def _same(got: Any, expected: Any, rel: float) -> bool:
    if isinstance(expected, bool):  # a yes or no is not a number close to 1 or 0
        return isinstance(got, bool) and got == expected
    if isinstance(expected, tuple):
        return isinstance(got, (tuple, list)) and len(got) == len(expected) and all(
            close(g, e, rel) for g, e in zip(got, expected))
    return close(got, expected, rel)


def function_check(answers: Answers, name: str, reference: Callable, rel: float,
                   also_refused: tuple[str, ...] = ()) -> Check:
    """The learner's function, called in their kernel on the grader's fresh inputs, against the reference here.
    It must be their own: defined by a `def` in the notebook, calling neither the reference nor any of
    `also_refused` (dotted names of library functions that are the whole answer)."""
    learner = answers.get(name)
    if not isinstance(learner, FunctionAnswer):
        return Check(f"{name} is defined", FAILED, "a function defined in your notebook", "not defined")
    own = "a function written in your notebook"
    if learner.module != "__main__":
        return Check(f"{name} is your own", FAILED, own, f"a function from {learner.module}")
    if learner.qualname != name:
        return Check(f"{name} is your own", FAILED, f"{own}, as `def {name}(...)`",
                     f"the name is bound to {learner.qualname or 'a function without a name'}")
    refused = refused_call(answers.code, name, reference, also_refused)
    if refused:
        return Check(f"{name} is your own", FAILED, f"{own}, not a call of the answer", refused)
    inputs = answers.inputs[name]
    for arguments, got in zip(inputs, learner.results):
        expected = reference(*arguments)
        if isinstance(got, CallError) or not _same(got, expected, rel):
            digits = digits_for(rel)
            return Check(f"{name} on fresh data {_start_of(arguments)}", FAILED, shown(expected, digits),
                         shown(got, digits))
    return Check(f"{name} on {len(inputs)} fresh data sets", PASSED, "matches the reference", "matches")


def _start_of(arguments: list) -> str:
    """The start of a fresh input, for the report: its first five numbers, or the first 80 characters."""
    first = arguments[0] if arguments else arguments
    if isinstance(first, list) and len(first) > 5 and all(isinstance(v, (int, float)) for v in first[:5]):
        return f"{shown(first[:5])[:-1]}, ...]"
    text = shown(arguments)
    return text if len(text) <= 80 else text[:77] + "..."


def saved_result(answers: Answers, made_by: str, key: str = "result") -> tuple[dict | None, Check]:
    """The learner's saved result, reloaded from disk, if perflab wrote it here and nobody changed it since."""
    name = "your measurement, saved by perflab on this machine"
    result = answers.get(key)
    path = result.get("path") if isinstance(result, dict) else None
    if not path:
        return None, Check(name, FAILED, f"`{key}` from {made_by}", shown(result)[:80])
    try:
        saved = results.load(path)
    except PerflabError as err:
        return None, Check(name, FAILED, "a readable result file", str(err))
    problems = results.provenance_problems(saved)
    if problems:
        return None, Check(name, FAILED, f"the file {made_by} wrote, unchanged", f"{path}: {'; '.join(problems)}")
    try:
        bounds = find(saved.get("lab")).load().BOUNDS
    except PerflabError as err:
        return None, Check(name, FAILED, "a result of one of the course's labs", f"{path}: {err}")
    problems = bound_problems(bounds, saved)
    if problems:
        return None, Check(name, FAILED, "samples a machine can measure", f"{path}: {'; '.join(problems)}")
    return saved, Check(name, PASSED, "a result file with its provenance, its samples within physical bounds", path)


def learner_source_copy(lab: str, original: Path) -> Path:
    """The learner's own copy of a lab's C file to edit, results/LAB/my-NAME (made from the original the first
    time, then never overwritten)."""
    path = results_dir() / lab / f"my-{original.name}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(original.read_text())
    return path
