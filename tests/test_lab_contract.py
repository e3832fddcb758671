"""Every lab has the same files and follows the contract of perflab/labs/__init__.py, and every list of labs
(README, landing page, the book's SUMMARY and introduction, the exercises) agrees with labs/manifest.toml.

The checks are functions that return the problems they find, so the tests at the end can show that each
one fails on a broken copy: a missing file, a hand-edited README row.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from conftest import REPO
from perflab import results
from perflab.grading.manifest import load_manifest
from perflab.labs import Bound, Lab, LabInfo, labs
from perflab.labs.bounds import bound_problems
from perflab.verdict import Verdict

READY = [lab for lab in labs() if lab.ready]
PACKAGE_FILES = ("__init__.py", "run.py", "figures.py", "exercises.py")
FOLDER_FILES = ("Makefile", "README.md", "example-output.txt", "lab.ipynb")
MAX_LINES = 300


# --- the checks -----------------------------------------------------------------------------------------

def file_problems(lab: LabInfo, repo: Path = REPO) -> list[str]:
    """The files every lab has, and none too long to read."""
    package = repo / "perflab" / "labs" / lab.name.replace("-", "_")
    problems = [f"{package / name} is missing" for name in PACKAGE_FILES if not (package / name).is_file()]
    problems += [f"{repo / lab.folder / name} is missing" for name in FOLDER_FILES if not (repo / lab.folder / name).is_file()]
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
    for name in ("choose_cpus", "measure", "judge"):
        if getattr(kind, name) is getattr(Lab, name):
            problems.append(f"{kind.__name__} does not write its own {name}")
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
    problems += [f"{lab.package}.exercises has no check {e.checks!r} for {e.name}"
                 for e in load_manifest().exercises if e.name in lab.exercises and not callable(getattr(checks, e.checks, None))]
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
    part = summary[summary.index("# Labs"):summary.index("# Reference")]
    listed = re.findall(r"^- \[(.*)\]\((.*)\)$", part, re.M)
    expected = [(lab.title, lab.chapter if lab.ready else "") for lab in labs()]
    if listed != expected:
        problems.append(f"the book's SUMMARY lists other labs than labs/manifest.toml: {listed} != {expected}")
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


def test_planned_labs_have_no_package_yet():
    for lab in labs():
        if not lab.ready:
            assert not (REPO / "perflab" / "labs" / lab.name.replace("-", "_")).exists(), lab.name


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.name)
def test_every_lab_round_trips_through_run_the_report_and_its_notebook(lab, every_lab_quick):
    summary, _ = every_lab_quick
    data = next(v for v in summary["labs"] if v["lab"] == lab.name)
    assert Verdict.from_json(data).to_json() == data, "the --json verdict reads back as the same verdict"
    if data["results"]:
        saved = results.load(data["results"])
        assert saved["lab"] == lab.name and saved["verdict"]["verdict"] == data["verdict"], "the file carries its verdict"
        bounds = lab.load().BOUNDS
        assert bound_problems(bounds, saved) == [] and list(bounds[0].values(saved)), "a real run is within its bounds"
    page = Path(summary["report"]).read_text()
    assert f"<h2>{lab.number}. {html.escape(lab.title)}</h2>" in page
    section = page.split(f"<h2>{lab.number}. ")[1].split("<h2>")[0]
    assert data["verdict"] in section
    notebook = nbformat.read(REPO / lab.folder / "lab.ipynb", as_version=4)
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert f"from {lab.package} import LAB" in first_code, "the notebook runs this lab's LAB"


# --- the lists of labs ------------------------------------------------------------------------------------

def test_every_list_of_labs_agrees_with_the_manifest():
    assert list_problems() == []
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
    ("book/src/SUMMARY.md", "- [One written global caps a NUMA machine's throughput](labs/05-numa-static-data.md)",
     "- [One written global caps a NUMA machine's throughput]()", "the book's SUMMARY"),
    ("book/src/introduction.md", "| 2 | [inclusive-llc]", "| 2 | [inclusive-LLC]", "the introduction's table"),
])
def test_a_hand_edited_list_is_caught(tmp_path, name, old, new, blamed):
    copy = _copy_of_the_lists(tmp_path)
    text = (copy / name).read_text()
    assert old in text
    (copy / name).write_text(text.replace(old, new))
    problems = list_problems(copy)
    assert len(problems) == 1 and problems[0].startswith(blamed), problems


def test_a_lab_missing_a_file_is_caught(tmp_path):
    lab = READY[0]
    package = tmp_path / "perflab" / "labs" / lab.name.replace("-", "_")
    shutil.copytree(REPO / "perflab" / "labs" / lab.name.replace("-", "_"), package)
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
