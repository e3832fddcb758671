"""The command line: bad input gets one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def _one_line_error(done, *fragments):
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("command", [["probe"], ["run"], ["grade"], ["progress"], ["c2c", "analyze"], ["c2c", "heatmap"],
                                     ["system"]])
def test_help_ends_with_examples(command):
    done = run_cli(*command, "--help")
    assert done.returncode == 0
    tail = done.stdout.strip().split("examples:")[-1]
    assert "examples:" in done.stdout and "perflab" in tail


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
