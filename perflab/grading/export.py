"""Runs inside the learner's kernel: loaded before their first cell, called after their last, it writes out what
the checks need, as plain data, sealed.

Every global whose value is plain data (numbers, text, lists, dicts, tuples, sets, None; numpy numbers and
arrays and paths are turned into those) is written as a Python literal, which the grader reads back with
ast.literal_eval: nothing the learner's code built can run in the grader. A function the checks need is
called here, on the grader's fresh inputs, and only its results leave the kernel. Standard library only:
the grader, not this module, decides what the answers are worth.

The learner's cells run between loading and calling, so nothing here may be what a cell put in its place.
`sealed_export`, called before the first cell, takes the grader's one-time key (from a file it deletes at
once), the kernel's namespace, and the modules and builtins this file uses; the export it returns first
checks that sys.modules and builtins still hold those same objects, then seals what it writes with an HMAC
under the key, so the grader can tell its file from one a cell wrote. A check against shortcuts, not a
sandbox: code in the kernel can still reach into this module's objects there.
"""

from __future__ import annotations

import builtins
import sys
from ast import Name, literal_eval, parse, walk
from hmac import new as hmac_new
from json import dump, dumps
from os import unlink
from pathlib import PurePath

SKIPPED = {"In", "Out", "exit", "quit", "get_ipython"}
# Every module this file takes from (by name, when loaded: a cell patching json.dumps changes nothing here),
# and runpy, which loaded it: a cell replacing one in sys.modules meant the grader to run something else.
RELIED_ON = ("ast", "builtins", "hmac", "json", "os", "pathlib", "runpy", "sys")


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
        literal_eval(text)
        return {"literal": text}
    except (TypeError, ValueError, SyntaxError, RecursionError, MemoryError) as err:
        return {"unreadable": str(err) or type(value).__name__}


def call(function, arguments: list) -> dict:
    try:
        return literal(function(*arguments))
    except BaseException as err:  # the learner's function may raise anything, even SystemExit
        return {"error": f"{type(err).__name__}: {err}"}


def answers(namespace: dict, functions: dict[str, list[list]]) -> dict:
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
                            "qualname": getattr(function, "__qualname__", None),
                            "calls": [call(function, list(arguments)) for arguments in inputs]}
    return {"values": values, "functions": called}


def builtins_named_here() -> dict[str, object]:
    """The builtins this file's code names, as they are now."""
    with open(__file__) as source:
        tree = parse(source.read())
    return {node.id: getattr(builtins, node.id) for node in walk(tree)
            if isinstance(node, Name) and hasattr(builtins, node.id)}


def sealed_export(namespace: dict, key_path: str):
    """Before the learner's first cell: what the export will need, taken now; the export, to call after."""
    with open(key_path, "rb") as key_file:
        key = key_file.read()
    unlink(key_path)
    module_now, builtin_now = sys.modules.get, vars(builtins).get  # the two dicts' own lookups, taken now
    modules = {name: module_now(name) for name in RELIED_ON}
    named = builtins_named_here()
    write = open  # the answers go through this open, whatever a cell puts in builtins

    def changed() -> list[str]:
        """What the learner's cells (or functions) replaced of what this file relies on."""
        return ([name for name, module in modules.items() if module_now(name) is not module]
                + [f"builtins.{name}" for name, value in named.items() if builtin_now(name) is not value])

    def export(functions: dict[str, list[list]], path: str) -> None:
        answered = None if changed() else answers(namespace, functions)
        found = changed()  # again: the learner's functions ran in between
        payload = dumps({"changed": found} if found else answered)
        with write(path, "w") as out:
            dump({"payload": payload, "seal": hmac_new(key, payload.encode(), "sha256").hexdigest()}, out)

    return export
