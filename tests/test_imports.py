"""The package's import graph, read from the source (ast), not by importing it: no cycle, and the labs on top.

Every import counts, also one inside a function (it runs as soon as the function does), and importing a module
runs its packages' __init__.py first, so those are edges too. Only imports under `if TYPE_CHECKING:` are left
out: they never run. Labs sit on the core: no module outside perflab/labs/ imports perflab.labs or a lab package
(a lab is loaded by its name from the manifest, perflab.manifest.labs), and no lab imports another.
Each rule is shown to fail on a copy of the package broken by hand.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "perflab"
LABS = "perflab.labs"


def module_files(package: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name; a package by its __init__.py."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runs(node: ast.AST) -> bool:
    """False for an `if TYPE_CHECKING:` block, whose imports never run."""
    return not (
        isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import statement that can run, anywhere in the file."""
    for node in ast.iter_child_nodes(tree):
        if not _runs(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that importing `name` imports (its own package's __init__s excepted)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
            continue
        base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
        source = ".".join(part for part in (base, node.module or "") if part)
        targets.add(source)
        targets |= {f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules}
    edges = set()
    for target in targets:
        parts = target.split(".")
        for end in range(1, len(parts) + 1):  # a module's packages run first, unless the importer is inside them
            ancestor = ".".join(parts[:end])
            if ancestor in modules and ancestor != name and not name.startswith(ancestor + "."):
                edges.add(ancestor)
    return edges


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(package)
    return {name: imported(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles found by a depth-first walk, each as the names around it (first and last the same)."""
    found, finished = [], set()
    for start in sorted(graph):
        path, steps = [start], [iter(sorted(graph[start]))]
        while steps:
            step = next(steps[-1], None)
            if step is None:
                finished.add(path.pop())
                steps.pop()
            elif step in path:
                found.append(path[path.index(step):] + [step])
            elif step not in finished and step in graph:
                path.append(step)
                steps.append(iter(sorted(graph[step])))
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports that reach up into the labs: the core importing perflab.labs, or one lab importing another."""
    problems = []
    for module, targets in sorted(graph.items()):
        inside = module == LABS or module.startswith(LABS + ".")
        for target in sorted(targets):
            into_labs = target == LABS or target.startswith(LABS + ".")
            if into_labs and not inside:
                problems.append(f"{module} imports {target}")
            elif inside and _lab_of(target, graph) not in (None, _lab_of(module, graph)):
                problems.append(f"{module} imports {target}, another lab's")
    return problems


def _lab_of(module: str, graph: dict[str, set[str]]) -> str | None:
    """The lab package a module is part of; None for the core and for the labs' own machinery (the contract,
    perflab/labs/__init__.py, and its helpers such as bounds.py)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["perflab", "labs"]:
        return None
    package = ".".join(parts[:3])
    return parts[2] if any(name.startswith(package + ".") for name in graph) else None


GRAPH = import_graph()


def test_the_package_has_no_import_cycle():
    assert cycles(GRAPH) == []


def test_nothing_imports_up_into_the_labs():
    assert upward_imports(GRAPH) == []


def test_the_manifest_readers_are_a_leaf():
    """perflab.manifest reads the two manifests with the standard library and the two smallest modules alone."""
    leaf = {name for name in GRAPH if name.startswith("perflab.manifest")}
    assert leaf and all(GRAPH[name] <= leaf | {"perflab.errors", "perflab.paths"} for name in leaf)


def _broken_copy(tmp_path: Path, module: str, line: str) -> dict[str, set[str]]:
    copy = tmp_path / "perflab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "native", "data"))
    path = copy.joinpath(*module.split(".")[1:]).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}\n")
    return import_graph(copy)


@pytest.mark.parametrize("module, line, blamed", [
    ("perflab.overview", "from .labs import Lab", "perflab.overview imports perflab.labs"),
    ("perflab.stats.descriptive", "def later():\n    from perflab.labs.core_to_core import advisor",
     "perflab.stats.descriptive imports perflab.labs.core_to_core.advisor"),
    ("perflab.labs.core_to_core.advisor", "from ..loop_alignment import layout",
     "perflab.labs.core_to_core.advisor imports perflab.labs.loop_alignment.layout, another lab's"),
])
def test_an_upward_import_added_by_hand_is_caught(tmp_path, module, line, blamed):
    assert blamed in upward_imports(_broken_copy(tmp_path, module, line))


def test_a_cycle_added_by_hand_is_caught(tmp_path):
    """paths is imported by most of the package: making it import one of them closes a loop."""
    found = cycles(_broken_copy(tmp_path, "perflab.paths", "def later():\n    from . import workspace"))
    assert any(cycle[0] == cycle[-1] and "perflab.paths" in cycle for cycle in found)
