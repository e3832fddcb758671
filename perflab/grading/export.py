"""Runs inside the learner's kernel, after their cells: writes out what the checks need, as plain data.

Every global whose value is plain data (numbers, text, lists, dicts, tuples, sets, None; numpy numbers and
arrays and paths are turned into those) is written as a Python literal, which the grader reads back with
ast.literal_eval: nothing the learner's code built can run in the grader. A function the checks need is
called here, on the grader's fresh inputs, and only its results leave the kernel. Standard library only:
the grader, not this module, decides what the answers are worth.
"""

from __future__ import annotations

import ast
import json
from pathlib import PurePath

SKIPPED = {"In", "Out", "exit", "quit", "get_ipython"}


def plain(value, depth: int = 0):
    """The value as plain data, or raise TypeError."""
    if depth > 20:
        raise TypeError("nested too deeply")
    if value is None:
        return value
    for kind in (bool, int, float, str, bytes):  # the base type: numpy's float64 is a float whose repr is a call
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays and numbers
        return plain(value.tolist(), depth + 1)
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__}")


def literal(value) -> dict:
    """{"literal": repr} when the value reads back as itself, else {"unreadable": what it is}."""
    try:
        text = repr(plain(value))
        ast.literal_eval(text)
        return {"literal": text}
    except (TypeError, ValueError, SyntaxError, RecursionError, MemoryError) as err:
        return {"unreadable": str(err) or type(value).__name__}


def call(function, arguments: list) -> dict:
    try:
        return literal(function(*arguments))
    except BaseException as err:  # the learner's function may raise anything, even SystemExit
        return {"error": f"{type(err).__name__}: {err}"}


def export(namespace: dict, functions: dict[str, list[list]], path: str) -> None:
    values = {name: literal(value) for name, value in namespace.items()
              if not name.startswith("_") and name not in SKIPPED and not callable(value)
              and type(value).__name__ != "module"}
    called = {}
    for name, inputs in functions.items():
        function = namespace.get(name)
        if not callable(function):
            called[name] = {"missing": True}
        else:
            called[name] = {"module": getattr(function, "__module__", None),
                            "calls": [call(function, list(arguments)) for arguments in inputs]}
    with open(path, "w") as out:
        json.dump({"values": values, "functions": called}, out)
