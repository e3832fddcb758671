"""Is a learner's function their own? Its code in the notebook, read (not run) for calls of the reference.

The kernel says where a function was defined (its __module__ must be __main__) but not what it calls, and
`def my_harmonic_mean(r): return perflab.stats.harmonic_mean(r)` is defined in the notebook too. So the
grader reads the notebook's code (the cells a grading runs, IPython's syntax turned into Python), finds the
function's `def` and every function of the notebook it names, and refuses one that reaches the reference
implementation, or a library function that is the whole answer, under any name the notebook gives it:

    s.harmonic_mean(r)       after  import perflab.stats as s
    h(r)                     after  from perflab.stats import harmonic_mean as h,  or  h = s.harmonic_mean
    getattr(perflab.stats, "harmonic_mean"),  importlib.import_module("perflab.stats").harmonic_mean,
    sys.modules["perflab.stats"].harmonic_mean,  from perflab.stats import *

A name that stands for the same object in the grader counts as the reference itself (perflab re-exports some:
perflab.labs.numa_static_data.exercises.fit is its model.fit). Names built while the code runs
("harmonic" + "_mean", exec) are not followed: a check against shortcuts.
"""

from __future__ import annotations

import ast
import sys
from typing import Callable, Iterable

Paths = set[str]  # the dotted names (perflab.stats.harmonic_mean) an expression may stand for
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def python_of(cells: Iterable[str]) -> list[ast.Module]:
    """Each code cell as Python (magics and shell escapes turned into calls); a cell that does not parse is left
    out: it raised when the notebook ran, and its error is reported."""
    from IPython.core.inputtransformer2 import TransformerManager

    transformer, trees = TransformerManager(), []
    for source in cells:
        try:
            trees.append(ast.parse(transformer.transform_cell(source)))
        except (SyntaxError, ValueError):
            continue
    return trees


def _without_nested(body: list[ast.stmt]) -> Iterable[ast.AST]:
    """The nodes of a body, not descending into the functions and classes it defines."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


class Scope:
    """The names of one scope (the notebook's globals, or a function's locals over them) and what each may be."""

    def __init__(self, nodes: list[ast.AST], outer: Scope | None = None, local: Iterable[str] = ()):
        self.outer, self.local = outer, set(local)
        self.bound: dict[str, Paths] = {}
        self.stars: list[str] = []  # modules imported with *
        for _ in range(4):  # h = g; g = perflab.stats: a few passes reach every chain a notebook writes
            for node in nodes:
                self._bind(node)

    def _add(self, name: str, paths: Paths) -> None:
        self.local.add(name)
        self.bound.setdefault(name, set()).update(paths)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self._add(
                    alias.asname or alias.name.split(".")[0], {alias.name if alias.asname else alias.name.split(".")[0]}
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    self.stars.append(node.module)
                else:
                    self._add(alias.asname or alias.name, {f"{node.module}.{alias.name}"})
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    self._add(target.id, self.resolve(node.value))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self.local.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.local.add(node.name)

    def lookup(self, name: str) -> Paths:
        if name in self.local:
            return self.bound.get(name, set()) | {f"{module}.{name}" for module in self.stars}
        found = self.outer.lookup(name) if self.outer else set()
        return found | {f"{module}.{name}" for module in self.stars}

    def resolve(self, node: ast.AST) -> Paths:
        """What the expression may stand for, as dotted names."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            return {f"{path}.{node.attr}" for path in self.resolve(node.value)}
        if isinstance(node, ast.Call) and node.args:
            called = self.resolve(node.func) | ({node.func.id} if isinstance(node.func, ast.Name) else set())
            named = _text(node.args[1]) if len(node.args) > 1 else None
            if "getattr" in called and named:
                return {f"{path}.{named}" for path in self.resolve(node.args[0])}
            module = _text(node.args[0])
            if "importlib.import_module" in called and module:
                return {module}
            if "__import__" in called and module:  # the package itself, unless a fromlist asks for the module
                return {module if len(node.args) > 3 or node.keywords else module.split(".")[0]}
        if isinstance(node, ast.Subscript) and (key := _text(node.slice)):
            if "sys.modules" in self.resolve(node.value):
                return {key}
            if (
                isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id in ("globals", "vars", "locals")
            ):
                return self.lookup(key)
        return set()


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _object_at(path: str) -> object | None:
    """The object a dotted name stands for in the grader, from modules it has imported (nothing is imported for
    a name the learner wrote)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        found = sys.modules.get(".".join(parts[:cut]))
        if found is not None:
            for attribute in parts[cut:]:
                found = getattr(found, attribute, None)
            return found
    return None


def refused_call(
    cells: Iterable[str], name: str, reference: Callable, also_refused: tuple[str, ...] = ()
) -> str | None:
    """Why the notebook's `name` is not the learner's own (it is no `def`, or it reaches the reference or one of
    `also_refused`), or None."""
    trees = python_of(cells)
    top = [node for tree in trees for node in _without_nested(tree.body)]
    notebook = Scope(top)
    defined: dict[str, list[ast.AST]] = {}
    for node in top:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defined.setdefault(target.id, []).append(node.value)
    if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in defined.get(name, [])):
        return f"no `def {name}(...)` in your notebook"
    refused = {f"{reference.__module__}.{reference.__qualname__}", *also_refused}
    to_read, read = [name], set()
    while to_read:
        function = to_read.pop()
        read.add(function)
        for definition in defined.get(function, []):
            scope = _scope_of(definition, notebook)
            for node in ast.walk(definition):
                for path in _named_by(node, scope):
                    if path in refused or any(path.startswith(r + ".") for r in refused) or _is(path, reference):
                        via = "" if function == name else f" (which {name} calls)"
                        return f"{function}{via} calls {path}: write it yourself"
                if (
                    isinstance(node, ast.Name)
                    and node.id in defined
                    and node.id not in read
                    and node.id not in scope.local
                ):
                    to_read.append(node.id)
    return None


def reached(cells: Iterable[str], refused: Iterable[object]) -> str | None:
    """Which of `refused` (what in the course computes an answer the grader recomputes: functions, constants) the
    notebook's code names anywhere, at the top level or in a function, under any name; None if none."""
    answers = list(refused)
    if not answers:
        return None
    trees = python_of(cells)
    notebook = Scope([node for tree in trees for node in _without_nested(tree.body)])
    places: list[tuple[Scope, Iterable[ast.AST]]] = [(notebook, _without_nested(tree.body)) for tree in trees]
    for node in (node for tree in trees for node in ast.walk(tree)):
        if isinstance(node, FUNCTIONS):
            body = node.body if isinstance(node.body, list) else [node.body]
            places.append((_scope_of(node, notebook), _without_nested(body)))
        elif isinstance(node, ast.ClassDef):
            places.append((notebook, _without_nested(node.body)))
    for scope, nodes in places:
        for node in nodes:
            for path in _named_by(node, scope):
                if any(_is(path, answer) for answer in answers):
                    return f"your notebook uses {path}, which computes the answer: work it out yourself"
    return None


def typed_in(cells: Iterable[str], name: str) -> bool:
    """Whether the notebook gives `name` its value only as a literal (`NS_PER_SAMPLE = 6300`): typed in, not
    worked out. A name the notebook never assigns is not typed in: its check says it is missing."""
    values = [node.value for tree in python_of(cells) for node in ast.walk(tree)
              if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
              and any(isinstance(t, ast.Name) and t.id == name
                      for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    return bool(values) and all(_is_literal(value) for value in values)


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _scope_of(definition: ast.AST, notebook: Scope) -> Scope:
    arguments = definition.args
    parameters = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        if a is not None
    }
    body = definition.body if isinstance(definition.body, list) else [definition.body]
    return Scope([node for statement in body for node in ast.walk(statement)], notebook, parameters)


def _named_by(node: ast.AST, scope: Scope) -> Paths:
    if (
        isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Load)
        or isinstance(node, (ast.Attribute, ast.Call, ast.Subscript))
    ):
        return scope.resolve(node)
    return set()


def _is(path: str, reference: object) -> bool:
    found = _object_at(path)
    return found is not None and found is reference
