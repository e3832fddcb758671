"""The command line: every subcommand's own help and examples, the labs' tools, and bad input as one clear line."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, run_cli
from perflab import cli
from perflab.labs import available
from perflab.manifest.exercises import load_manifest
from perflab.vm.profiles import names as profile_names

# Every verb that has actions, as the issue lists them: each must be a subcommand of its own.
VERBS = {"vm list", "vm build", "vm up", "vm run", "vm shell", "vm down", "vm box", "system show", "system tune",
         "system reset", "workshop up", "workshop add-learners", "workshop status", "workshop regrade",
         "workshop down", "exercises generate", "exercises check", "c2c analyze", "c2c heatmap"}


def every_parser() -> list:
    return list(cli.walk(cli.build_parser()))


def acting_on_nothing(monkeypatch) -> list:
    """A parser tree whose handlers only record that they were called; `cli.main` builds it instead."""
    called = []
    tree = cli.build_parser()
    for parser in cli.walk(tree):
        if parser.get_default("func"):
            parser.set_defaults(func=lambda args, prog=parser.prog: called.append(prog) or 0)
    monkeypatch.setattr(cli, "build_parser", lambda: tree)
    return called


def test_every_verb_with_actions_is_a_subcommand():
    walked = {parser.prog.removeprefix("perflab ") for parser in every_parser()}
    assert VERBS <= walked, f"not subcommands of their own: {sorted(VERBS - walked)}"


@pytest.mark.parametrize("prog", [parser.prog for parser in every_parser()])
def test_help_at_every_depth_is_its_own_and_does_nothing(prog, monkeypatch, capsys):
    called = acting_on_nothing(monkeypatch)
    code = cli.main([*prog.split()[1:], "--help"])
    out = capsys.readouterr().out
    assert code == 0 and not called, f"`{prog} --help` ran {called}"
    assert out.startswith(f"usage: {prog} "), "its own usage line, not its parent's"
    assert "\nexamples:\n  " in out and "perflab" in out.split("examples:")[-1]


def example_lines() -> list[tuple[str, str]]:
    """(prog, line) for every line of every `examples:` block."""
    found = []
    for parser in every_parser():
        block = (parser.epilog or "").split("examples:\n")[-1] if "examples:" in (parser.epilog or "") else ""
        found += [(parser.prog, line.strip()) for line in block.splitlines() if line.strip()]
    return found


def as_typed(line: str) -> tuple[dict[str, str], list[str]]:
    """An example as the parser sees it: no comment, nothing after a pipe, no sudo or .venv/bin/; its VAR=value."""
    words = shlex.split(line.split("#")[0].split("|")[0])
    assigned = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        assigned[name] = value
    if words[:1] == ["sudo"]:
        words.pop(0)
    assert words and words[0].removeprefix(".venv/bin/") == "perflab", line
    return assigned, words[1:]


@pytest.mark.parametrize("prog, line", example_lines())
def test_every_example_parses_and_names_what_exists(prog, line, capsys):
    assigned, argv = as_typed(line)
    try:
        args = cli.build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"`{prog} --help` shows `{line}`, which perflab refuses: {capsys.readouterr().err}")
    exercises = {exercise.name for exercise in load_manifest().exercises}
    named = getattr(args, "exercise", None)
    is_case = named is not None and re.fullmatch(r"case(-\d+)?", named)  # `perflab grade case`: a case, not one
    assert named in exercises | {None} or is_case, f"{line}: no such exercise"
    assert getattr(args, "lab", None) in {*available(), "all", None}, f"{line}: no such lab"
    for profile in (getattr(args, "profile", None), getattr(args, "vm", None)):
        assert profile in {*profile_names(), None}, f"{line}: no such VM profile"
    in_the_checkout = [value for value in [*vars(args).values(), *assigned.values()]
                       if isinstance(value, str) and value.split("/")[0] in ("perflab", "tests", "labs", "vm")]
    assert all((REPO / value).exists() for value in in_the_checkout), f"{line}: names a file that is not there"


def test_perflab_help_lists_each_labs_tools_under_it_and_imports_no_lab():
    code = ("import sys\nfrom perflab.cli import main\nmain(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'matplotlib', 'scipy', 'nbformat')"
            " or m.startswith('perflab.labs')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stderr.strip() == "[]", done.stderr
    tools = done.stdout.split("lab tools")[1].split("examples:")[0]
    assert re.search(r"lab 1, core-to-core:\n +c2c ", tools) and re.search(r"lab 6, loop-alignment:\n +layout ", tools)


def _one_line_error(done, *fragments):
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_offline_cpu_is_refused(isolated_state):
    done = run_cli("run", "core-to-core", "-C", "0,4095")
    _one_line_error(done, "CPU 4095 is not online", "perflab probe")
    assert not (isolated_state / "results").exists(), "nothing may be written for refused input"


def test_malformed_cpu_list_is_refused():
    _one_line_error(run_cli("run", "core-to-core", "-C", "0-x"), "bad CPU list")


def test_single_cpu_is_refused():
    _one_line_error(run_cli("run", "core-to-core", "-C", "0"), "at least two CPUs")


def test_unknown_lab_and_exercise():
    _one_line_error(run_cli("run", "no-such-lab"), "unknown lab", "core-to-core")
    _one_line_error(run_cli("grade", "no-such-exercise"), "unknown exercise", "c2c-harmonic-mean")


def test_planned_lab_says_so():
    from dataclasses import replace

    from perflab.errors import PerflabError
    from perflab.labs import find

    planned = replace(find("numa-static-data"), status="planned")
    with pytest.raises(PerflabError, match="planned but not in this version"):
        planned.load()


def test_malformed_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("\n12.5,\n13.1,oops,\n")
    _one_line_error(run_cli("c2c", "analyze", str(bad)), "bad.csv", "line 3")


def test_missing_csv(tmp_path):
    done = run_cli("c2c", "analyze", str(tmp_path / "none.csv"))
    _one_line_error(done, "none.csv")


def test_probe_json_has_sources():
    done = run_cli("probe", "--json")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)["facts"]
    assert facts["online_cpus"]["source"].startswith("/sys")
    assert all("source" in fact for fact in facts.values())
