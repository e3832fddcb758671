"""Every lab has the same files and follows the contract of perflab/labs/__init__.py, and every list of labs
(README, landing page, the book's SUMMARY and introduction, the exercises) and every heading that names a lab
(its chapter, README and notebook: "Lab N: <title>") agrees with labs/manifest.toml.

The checks are functions that return the problems they find, so the tests at the end can show that each
one fails on a broken copy: a missing file, a hand-edited README row.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import importlib
import inspect
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import REPO
from perflab import results
from perflab.bounds import bound_problems
from perflab.cli import labtools
from perflab.labs import Bound, Lab, LabInfo, labs
from perflab.manifest.exercises import load_manifest
from perflab.paths import lab_package
from perflab.verdict import Verdict

READY = [lab for lab in labs() if lab.ready]
PACKAGE_FILES = ("__init__.py", "run.py", "figures.py", "exercises.py")
FOLDER_FILES = ("Makefile", "README.md", "example-output.txt", "lab.ipynb")
MAX_LINES = 300


# --- the checks -----------------------------------------------------------------------------------------

def file_problems(lab: LabInfo, repo: Path = REPO) -> list[str]:
    """The files every lab has, and none too long to read."""
    package = repo / "perflab" / "labs" / lab_package(lab.name)
    problems = [f"{package / name} is missing" for name in PACKAGE_FILES if not (package / name).is_file()]
    problems += [
        f"{repo / lab.folder / name} is missing" for name in FOLDER_FILES if not (repo / lab.folder / name).is_file()
    ]
    if not (repo / "book" / "src" / lab.chapter).is_file():
        problems.append(f"the chapter book/src/{lab.chapter} is missing")
    for path in sorted(package.glob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            problems.append(f"{path} has {lines} lines: split it (a lab's file stays under {MAX_LINES})")
    return problems


def contract_problems(lab: LabInfo) -> list[str]:
    """LAB is a Lab with this name, its settings are frozen dataclasses, it writes its own steps and only those."""
    instance = lab.load()
    kind = type(instance)
    problems = []
    if not isinstance(instance, Lab) or instance.name != lab.name:
        return [f"{lab.package}.LAB is not the Lab named {lab.name!r}"]
    for name in ("choose_cpus", "watched_cpus", "measure", "judge"):
        if getattr(kind, name) is getattr(Lab, name):
            problems.append(f"{kind.__name__} does not write its own {name}")
    try:  # Lab.run passes the chosen options to watched_cpus as to measure
        inspect.signature(kind.watched_cpus).bind(instance, None, **{o: v[0] for o, v in instance.OPTIONS.items()})
    except TypeError:
        problems.append(f"{kind.__name__}.watched_cpus(placement, **options) does not take its OPTIONS")
    if kind.run is not Lab.run:
        problems.append(f"{kind.__name__} overrides run: the skeleton is the same for every lab")
    quick, full = instance.QUICK, instance.FULL
    if not (dataclasses.is_dataclass(quick) and type(quick) is type(full) and type(quick).__dataclass_params__.frozen):
        problems.append(f"{kind.__name__}.QUICK and FULL must be instances of one frozen dataclass")
    else:
        fields = {f.name for f in dataclasses.fields(quick)}
        unknown = [name for name in instance.RUNS if name not in fields]
        problems += [f"RUNS names {name!r}, not a setting" for name in unknown]
        if not unknown and any(getattr(instance.settings_for(True, 7), name) != 7 for name in instance.RUNS):
            problems.append("settings_for(quick, runs) does not set the RUNS fields")
    if not all(isinstance(values, tuple) and values for values in instance.OPTIONS.values()):
        problems.append("OPTIONS maps each option to a non-empty tuple of values, the default first")
    if not instance.BOUNDS:
        problems.append(f"{kind.__name__} declares no BOUNDS: the physical bounds of its raw samples")
    problems += [f"BOUNDS: {b!r} is not a Bound from low to high (below high) with the physics that sets it"
                 for b in instance.BOUNDS if not (isinstance(b, Bound) and b.low < b.high and b.why)]
    if not callable(getattr(importlib.import_module(f"{lab.package}.figures"), "figures", None)):
        problems.append(f"{lab.package}.figures has no figures(verdict)")
    checks = importlib.import_module(f"{lab.package}.exercises")
    problems += [
        f"{lab.package}.exercises has no check {e.checks!r} for {e.name}"
        for e in load_manifest().exercises
        if e.name in lab.exercises and not callable(getattr(checks, e.checks, None))
    ]
    return problems


def tool_problems(path: Path) -> list[str]:
    """A lab's cli.py, loaded alone by its path for every `perflab` command: add_commands(commands), the standard
    library only at its top, and no relative import anywhere (its package is not imported)."""
    tree = ast.parse(path.read_text())
    problems = [] if any(isinstance(node, ast.FunctionDef) and node.name == "add_commands" for node in tree.body) \
        else [f"{path} has no add_commands(commands)"]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            problems.append(f"{path}:{node.lineno} imports relatively; import perflab.labs... inside the handler")
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and not node.level else []
        problems += [f"{path}:{node.lineno} imports {name} at the top: only the standard library there, the rest "
                     "inside the handlers" for name in names
                     if name.split(".")[0] not in sys.stdlib_module_names | {"__future__"}]
    return problems


def _rows(text: str, start: str) -> list[list[str]]:
    """The cells of the Markdown table that starts with the header line `start`."""
    lines = text[text.index(start):].splitlines()[2:]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]


def list_problems(repo: Path = REPO) -> list[str]:
    """Every place that lists the labs, against the manifest."""
    problems = []
    readme = [[r[0], r[1].strip("`"), r[2], r[3]] for r in _rows((repo / "README.md").read_text(), "| # | name |")]
    expected = [[str(lab.number), lab.name, lab.title, lab.status] for lab in labs()]
    if readme != expected:
        problems.append(f"README.md's table of labs differs from labs/manifest.toml: {readme} != {expected}")
    intro = _rows((repo / "book/src/introduction.md").read_text(), "| # | Lab |")
    expected = [[str(lab.number), f"[{lab.name}]({lab.chapter})" if lab.ready else lab.name,
                 lab.phenomenon + ("" if lab.ready else " (coming)")] for lab in labs()]
    if intro != expected:
        problems.append(f"the introduction's table differs from labs/manifest.toml: {intro} != {expected}")
    summary = (repo / "book/src/SUMMARY.md").read_text()
    part = summary[summary.index("# Labs"):].split("\n# ", 1)[0]  # to the next part (Cases)
    listed = re.findall(r"^- \[(.*)\]\((.*)\)$", part, re.M)
    expected = [(lab.heading, lab.chapter if lab.ready else "") for lab in labs()]
    if listed != expected:
        problems.append(f"the book's SUMMARY lists other labs than labs/manifest.toml: {listed} != {expected}")
    return problems


def title_problems(repo: Path = REPO) -> list[str]:
    """Every heading that names a lab says "Lab N: <the manifest's title>": its chapter, its README, its notebook.

    (The README's table and the SUMMARY are checked above; the landing page and the report read the manifest.)"""
    problems = []
    for lab in READY:  # a planned lab has no folder and no chapter yet
        notebook = nbformat.read(repo / lab.folder / "lab.ipynb", as_version=4)
        headings = {f"book/src/{lab.chapter}": (repo / "book" / "src" / lab.chapter).read_text(),
                    f"{lab.folder}/README.md": (repo / lab.folder / "README.md").read_text(),
                    f"{lab.folder}/lab.ipynb": notebook.cells[0].source}
        for where, text in headings.items():
            first = text.splitlines()[0] if text else ""
            if first != f"# {lab.heading}":
                problems.append(f"{where} opens with {first!r}, not the manifest's '# {lab.heading}'")
    return problems


def exercise_problems() -> list[str]:
    """Each exercise belongs to exactly one lab, and each lab's exercises exist."""
    names = [e.name for e in load_manifest().exercises]
    owners = {name: [lab.name for lab in labs() if name in lab.exercises] for name in names}
    problems = [f"exercise {n} is listed by {len(o)} labs: {o}" for n, o in owners.items() if len(o) != 1]
    problems += [f"{lab.name} lists exercise {e}, which exercises/manifest.toml lacks"
                 for lab in labs() for e in lab.exercises if e not in names]
    return problems


# --- every lab ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.name)
def test_every_lab_has_the_same_files(lab):
    assert file_problems(lab) == []


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.name)
def test_every_lab_follows_the_contract(lab):
    assert contract_problems(lab) == []


@pytest.mark.parametrize("lab", [lab for lab in READY if labtools.tool_module_path(lab.name).is_file()],
                         ids=lambda lab: lab.name)
def test_every_labs_tools_follow_the_contract(lab):
    assert tool_problems(labtools.tool_module_path(lab.name)) == []


def test_the_cli_finds_the_tools_of_the_labs_the_manifest_lists():
    assert labtools.ready_labs() == [(lab.number, lab.name) for lab in READY], "the CLI's light reading of the manifest"
    assert {labtools.tool_module_path(lab.name).parent for lab in READY} == \
        {REPO / "perflab" / "labs" / lab_package(lab.name) for lab in READY}


def test_planned_labs_have_no_package_yet():
    for lab in labs():
        if not lab.ready:
            assert not (REPO / "perflab" / "labs" / lab_package(lab.name)).exists(), lab.name


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.name)
def test_every_lab_round_trips_through_run_the_report_and_its_notebook(lab, every_lab_quick):
    summary, _ = every_lab_quick
    data = next(v for v in summary["labs"] if v["lab"] == lab.name)
    assert Verdict.from_json(data).to_json() == data, "the --json verdict reads back as the same verdict"
    if data["results"]:
        saved = results.load(data["results"])
        assert saved["lab"] == lab.name and saved["verdict"]["verdict"] == data["verdict"], (
            "the file carries its verdict"
        )
        bounds = lab.load().BOUNDS
        assert bound_problems(bounds, saved) == [] and list(bounds[0].values(saved)), "a real run is within its bounds"
    page = Path(summary["report"]).read_text()
    assert f"<h2>{html.escape(lab.heading)}</h2>" in page
    section = page.split(f"<h2>{html.escape(lab.heading)}</h2>")[1].split("<h2>")[0]
    assert data["verdict"] in section
    notebook = nbformat.read(REPO / lab.folder / "lab.ipynb", as_version=4)
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert f"from {lab.package} import LAB" in first_code, "the notebook runs this lab's LAB"


@pytest.mark.parametrize("given, expected", [(None, 6), ("9", 9)])
@pytest.mark.parametrize("name", ["hidden-quadratic", "first-core-ipi"])  # Lab's settings_for, and one of its own
def test_perflab_runs_caps_the_rounds_of_a_run_that_gives_none(isolated_state, monkeypatch, name, given, expected):
    """PERFLAB_RUNS stands in for --runs when a run gives none (the notebook tests' runs); --runs still wins."""
    lab = next(lab for lab in READY if lab.name == name).load()
    monkeypatch.setenv("PERFLAB_RUNS", "6")
    seen = []

    class Measured(Exception):
        pass

    def measure(machine, placement, settings, progress, **options):
        seen.append(settings)
        raise Measured

    monkeypatch.setattr(lab, "measure", measure)
    with pytest.raises(Measured):
        lab.run(quick=True, runs=int(given) if given else None, progress=False)
    assert lab.RUNS and [getattr(seen[0], field) for field in lab.RUNS] == [expected] * len(lab.RUNS)


# --- the lists of labs ------------------------------------------------------------------------------------

def test_every_list_of_labs_agrees_with_the_manifest():
    assert list_problems() == []
    assert title_problems() == []
    assert exercise_problems() == []


# --- the checks can fail ----------------------------------------------------------------------------------

def _copy_of_the_lists(tmp_path: Path) -> Path:
    for name in ("README.md", "book/src/introduction.md", "book/src/SUMMARY.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("name, old, new, blamed", [
    ("README.md", "| 6 | `loop-alignment` | The same loop, shifted a few bytes, runs much slower | ready |",
     "| 6 | `loop-alignment` | The same loop, shifted a few bytes, runs slower | ready |", "README.md's table"),
    ("README.md", "| 5 | `numa-static-data` | One written global caps a NUMA machine's throughput | ready |\n", "",
     "README.md's table"),
    ("book/src/SUMMARY.md", "- [Lab 5: One written global caps a NUMA machine's "
                            "throughput](labs/05-numa-static-data.md)",
     "- [Lab 5: One written global caps a NUMA machine's throughput]()", "the book's SUMMARY"),
    ("book/src/SUMMARY.md", "- [Lab 3: Interrupts", "- [Interrupts", "the book's SUMMARY"),
    ("book/src/introduction.md", "| 2 | [inclusive-llc]", "| 2 | [inclusive-LLC]", "the introduction's table"),
])
def test_a_hand_edited_list_is_caught(tmp_path, name, old, new, blamed):
    copy = _copy_of_the_lists(tmp_path)
    text = (copy / name).read_text()
    assert old in text
    (copy / name).write_text(text.replace(old, new))
    problems = list_problems(copy)
    assert len(problems) == 1 and problems[0].startswith(blamed), problems


@pytest.mark.parametrize("name, old, new", [
    ("book/src/labs/06-loop-alignment.md", "# Lab 6: The same loop, shifted", "# The same loop, shifted"),
    ("labs/02-inclusive-llc/README.md", "# Lab 2: An inclusive LLC", "# Lab 2: An inclusive last-level cache"),
    ("labs/05-numa-static-data/lab.ipynb", "# Lab 5: One written global caps a NUMA machine's throughput",
     "# Lab 5: one written global caps a machine"),
])
def test_a_drifted_title_is_caught(tmp_path, name, old, new):
    for lab in READY:
        for path in (f"book/src/{lab.chapter}", f"{lab.folder}/README.md", f"{lab.folder}/lab.ipynb"):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / path, tmp_path / path)
    assert title_problems(tmp_path) == []
    text = (tmp_path / name).read_text()
    assert old in text
    (tmp_path / name).write_text(text.replace(old, new))
    problems = title_problems(tmp_path)
    assert len(problems) == 1 and problems[0].startswith(name), problems


def test_a_lab_missing_a_file_is_caught(tmp_path):
    lab = READY[0]
    package = tmp_path / "perflab" / "labs" / lab_package(lab.name)
    shutil.copytree(REPO / "perflab" / "labs" / lab_package(lab.name), package)
    shutil.copytree(REPO / lab.folder, tmp_path / lab.folder)
    (tmp_path / "book" / "src" / "labs").mkdir(parents=True)
    shutil.copy(REPO / "book" / "src" / lab.chapter, tmp_path / "book" / "src" / lab.chapter)
    assert file_problems(lab, tmp_path) == []
    (package / "figures.py").unlink()
    (tmp_path / lab.folder / "example-output.txt").unlink()
    (package / "run.py").write_text("\n" * (MAX_LINES + 1))
    problems = file_problems(lab, tmp_path)
    assert len(problems) == 3 and "figures.py is missing" in problems[0] and "split it" in problems[2]


def test_a_lab_breaking_the_contract_is_caught(monkeypatch):
    lab = READY[0]
    kind = type(lab.load())
    monkeypatch.setattr(kind, "run", lambda self, **kw: None)
    monkeypatch.setattr(kind, "RUNS", ("no_such_setting",))
    monkeypatch.setattr(kind, "BOUNDS", ())
    problems = contract_problems(lab)
    assert any("overrides run" in p for p in problems) and any("no_such_setting" in p for p in problems)
    assert any("declares no BOUNDS" in p for p in problems)


def test_a_lab_tool_importing_its_lab_at_the_top_is_caught(tmp_path):
    tools = labtools.tool_module_path("core-to-core")
    assert tool_problems(tools) == []
    broken = tmp_path / "cli.py"
    broken.write_text(tools.read_text().replace("import argparse\n", "import argparse\nfrom .advisor import analyze\n"
                                                "import numpy\n").replace("def add_commands(", "def add_parsers("))
    problems = tool_problems(broken)
    assert len(problems) == 3 and "no add_commands" in problems[0] and "imports relatively" in problems[1]
    assert "imports numpy at the top" in problems[2], problems
