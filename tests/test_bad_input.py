"""Bad input to every `perflab` verb, and the measurement lock between users and processes.

Every bad input ends in one line on stderr (`perflab: ...` saying what to fix), exit code 2, no
traceback, and not one byte changed in the test's folders or in the repository's vm/. The table of
cases is also the book's (book/src/reference/command-line.md): `python tests/test_bad_input.py`
writes it there, and a test fails while the two differ.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from perflab import cli
from perflab.errors import PerflabError
from perflab.lock import exclusive, lock_path, measurement_lock
from perflab.vm import machine, profiles

GOOD = "description = 'x'\nsockets = 1\ncores = 1\nthreads = 1\nmemory_mib = 512\n"
CLIMB = "../" * 40  # more than enough to reach / from any folder, where further ../ stay


def files(contents: dict[str, str | bytes]):
    """A setup writing tmp/<name> for each name: content (text or bytes)."""
    def setup(tmp: Path) -> None:
        for name, content in contents.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return setup


def profile(text: str | bytes, others: dict | None = None):
    """A setup writing the test's vm/bad.toml (and other files)."""
    return files({"vm/bad.toml": text, **(others or {})})


def nothing(tmp: Path) -> None:
    pass


def traversal(tmp: Path) -> None:
    """The tester's case: a profile and a folder outside vm/, reachable through ../ in the name."""
    files({"x/p.toml": GOOD})(tmp)
    (tmp / "x" / "p").mkdir()
    (tmp / "x" / "p" / "keep.txt").write_text("perflab must not delete this")


def special(kind: str):
    def setup(tmp: Path) -> None:
        path = tmp / f"{kind}.csv"
        if kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)  # reading it would block forever
        elif kind == "zero":
            path.symlink_to("/dev/zero")  # reading it would never end
        elif kind == "sparse":
            with path.open("wb") as file:
                file.truncate(40 * 2**20)  # 40 MiB that take no disk space
    return setup


def result(matrix) -> str:
    return json.dumps({"lab": "core-to-core", "matrix": matrix})


HELD: list[int] = []  # lock files a row's setup holds, released when the row ends


def lock_held(tmp: Path) -> None:
    """Another run's turn: the measurement lock (PERFLAB_LOCK, in the test's folder) held while the row runs."""
    fd = os.open(tmp / "measure.lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    HELD.append(fd)


A_PAIR = files({"m.csv": "\n52.5\n"})  # two CPUs, their one pair measured: a matrix the heatmap can draw


# (description, setup(tmp), argv with {tmp} for the test's folder, what the one line must say)
CASES = [
    # -- profile names: a name is a file in vm/ and a folder perflab deletes, never a path
    (
        "vm down: a name climbing out of vm/ (it deleted that folder)",
        traversal,
        ["vm", "down", CLIMB + "{tmp}/x/p"],
        "is not a VM profile name",
    ),
    ("vm up: a name with a folder in it", nothing, ["vm", "up", "sub/default"], "is not a VM profile name"),
    ("vm run: an absolute path", nothing, ["vm", "run", "/etc/passwd", "--", "true"], "is not a VM profile name"),
    ("vm shell: ..", nothing, ["vm", "shell", ".."], "is not a VM profile name.*default"),
    ("vm up: an empty name", nothing, ["vm", "up", ""], "needs a profile"),
    (
        "vm up: an unknown name lists the profiles",
        nothing,
        ["vm", "up", "numa3"],
        "unknown VM profile 'numa3'.*default",
    ),
    (
        "run --vm: a path as the profile",
        nothing,
        ["run", "loop-alignment", "--vm", "../default"],
        "is not a VM profile name",
    ),
    (
        "extends: a path",
        profile(GOOD + "extends = '../../x/p'\n"),
        ["vm", "up", "bad"],
        r"extends = '\.\./\.\./x/p' is not allowed",
    ),
    (
        "extends: an unknown profile",
        profile("extends = 'nosuch'\n"),
        ["vm", "up", "bad"],
        "unknown VM profile 'nosuch'.*default",
    ),
    ("extends: a loop", profile("extends = 'bad'\n"), ["vm", "up", "bad"], "loops back"),
    ("a profile that is a folder", files({"vm/bad.toml/keep": "x"}), ["vm", "up", "bad"], "unknown VM profile 'bad'"),
    # -- profile values: each key's type and range, then the shape as a whole
    (
        "sockets as a string",
        profile(GOOD.replace("sockets = 1", 'sockets = "2"')),
        ["vm", "up", "bad"],
        r"bad\.toml: sockets = '2' is not allowed; sockets must be a whole number from 1 to 256",
    ),
    (
        "sockets as a bool",
        profile(GOOD.replace("sockets = 1", "sockets = true")),
        ["vm", "up", "bad"],
        "sockets = True is not allowed",
    ),
    (
        "numa_nodes = 0 (divided by zero)",
        profile(GOOD + "numa_nodes = 0\n"),
        ["vm", "up", "bad"],
        "numa_nodes = 0 is not allowed",
    ),
    (
        "numa_nodes not dividing the sockets",
        profile(GOOD.replace("sockets = 1", "sockets = 2") + "numa_nodes = 3\n"),
        ["vm", "up", "bad"],
        "2 sockets do not split evenly into 3 NUMA nodes",
    ),
    ("more NUMA nodes than sockets", profile(GOOD + "numa_nodes = 2\n"), ["vm", "up", "bad"], "do not split evenly"),
    (
        "memory not splitting across the nodes",
        profile(GOOD.replace("sockets = 1", "sockets = 2").replace("512", "1025") + "numa_nodes = 2\n"),
        ["vm", "up", "bad"],
        "memory_mib = 1025 must split",
    ),
    (
        "kernel_args as a string",
        profile(GOOD + 'kernel_args = "quiet splash"\n'),
        ["vm", "up", "bad"],
        "kernel_args = 'quiet splash' is not allowed; kernel_args must be a list of words",
    ),
    (
        "kernel_args with two words in one item",
        profile(GOOD + 'kernel_args = ["quiet splash"]\n'),
        ["vm", "up", "bad"],
        "kernel_args = .* is not allowed",
    ),
    (
        "kernel_args with a number",
        profile(GOOD + 'kernel_args = ["quiet", 1]\n'),
        ["vm", "up", "bad"],
        "kernel_args = .* is not allowed",
    ),
    (
        "negative memory",
        profile(GOOD.replace("512", "-1024")),
        ["vm", "up", "bad"],
        "memory_mib = -1024 is not allowed.*256 to 65536",
    ),
    (
        "a petabyte of memory",
        profile(GOOD.replace("512", "1000000000")),
        ["vm", "up", "bad"],
        "memory_mib = 1000000000 is not allowed",
    ),
    (
        "10^10 vCPUs",
        profile(GOOD.replace("cores = 1", "cores = 10000000000")),
        ["vm", "up", "bad"],
        "cores = 10000000000 is not allowed",
    ),
    (
        "512 vCPUs in all",
        profile(
            GOOD.replace("sockets = 1", "sockets = 16")
            .replace("cores = 1", "cores = 16")
            .replace("threads = 1", "threads = 2")
        ),
        ["vm", "up", "bad"],
        "512 vCPUs; at most 256",
    ),
    (
        "numa_distance below local",
        profile(GOOD + "numa_distance = 5\n"),
        ["vm", "up", "bad"],
        "numa_distance = 5 is not allowed",
    ),
    (
        "la57 as a string",
        profile(GOOD + 'la57 = "yes"\n'),
        ["vm", "up", "bad"],
        "la57 = 'yes' is not allowed; la57 must be true or false",
    ),
    (
        "an unknown kernel",
        profile(GOOD + 'kernel = "lts"\n'),
        ["vm", "up", "bad"],
        "kernel = 'lts' is not allowed.*standard",
    ),
    (
        "description as a number",
        profile(GOOD.replace("'x'", "3")),
        ["vm", "up", "bad"],
        "description = 3 is not allowed",
    ),
    (
        "boot_timeout_s = 0",
        profile(GOOD + "boot_timeout_s = 0\n"),
        ["vm", "up", "bad"],
        "boot_timeout_s = 0 is not allowed",
    ),
    (
        "an unknown key lists the known ones",
        profile(GOOD + "colour = 'red'\n"),
        ["vm", "up", "bad"],
        "unknown key 'colour'; a profile may set extends, description, sockets",
    ),
    ("name set in the file", profile(GOOD + "name = 'other'\n"), ["vm", "up", "bad"], "unknown key 'name'"),
    (
        "a required key missing",
        profile(GOOD.replace("memory_mib = 512\n", "")),
        ["vm", "up", "bad"],
        "memory_mib missing",
    ),
    ("not TOML", profile("sockets = [\n"), ["vm", "up", "bad"], "bad.toml is not valid TOML"),
    ("not UTF-8", profile(b"\xff\xfe\x00sockets = 1\n"), ["vm", "up", "bad"], "bad.toml is not valid TOML"),
    (
        "a bad value in the profile it extends names that file",
        profile("extends = 'base'\n", {"vm/base.toml": GOOD + 'la57 = "no"\n'}),
        ["vm", "up", "bad"],
        r"base\.toml: la57 = 'no' is not allowed",
    ),
    # -- c2c: files that cannot be a latency matrix, refused before they are read whole
    ("a missing CSV", nothing, ["c2c", "analyze", "{tmp}/nope.csv"], "cannot read .*nope.csv: No such file"),
    ("a missing JSON", nothing, ["c2c", "analyze", "{tmp}/nope.json"], "cannot read .*nope.json: No such file"),
    ("a folder named .csv", special("dir"), ["c2c", "analyze", "{tmp}/dir.csv"], "is not a file"),
    ("a pipe named .csv", special("fifo"), ["c2c", "analyze", "{tmp}/fifo.csv"], "is not a file"),
    ("/dev/zero behind a .csv link", special("zero"), ["c2c", "analyze", "{tmp}/zero.csv"], "is not a file"),
    ("a 40 MiB CSV", special("sparse"), ["c2c", "analyze", "{tmp}/sparse.csv"], "is 40 MiB or more.*under 32 MiB"),
    (
        "2000 rows: the 1.1 TiB allocation",
        files({"tall.csv": "1\n" * 2000}),
        ["c2c", "analyze", "{tmp}/tall.csv"],
        "more than 1024 rows or columns",
    ),
    (
        "one line of 5000 cells",
        files({"wide.csv": ",".join(["1"] * 5000) + "\n"}),
        ["c2c", "analyze", "{tmp}/wide.csv"],
        "more than 1024 rows or columns",
    ),
    (
        "a binary CSV",
        files({"bin.csv": bytes(range(256)) * 8}),
        ["c2c", "analyze", "{tmp}/bin.csv"],
        "is not a text CSV",
    ),
    ("a CSV of NUL bytes", files({"nul.csv": b"\0" * 4096}), ["c2c", "analyze", "{tmp}/nul.csv"], "is not a text CSV"),
    ("an empty CSV", files({"empty.csv": ""}), ["c2c", "analyze", "{tmp}/empty.csv"], "empty.csv is empty"),
    (
        "a CSV with the upper triangle",
        files({"upper.csv": ",5\n5,\n"}),
        ["c2c", "analyze", "{tmp}/upper.csv"],
        "lower triangle",
    ),
    ("an empty JSON", files({"empty.json": ""}), ["c2c", "analyze", "{tmp}/empty.json"], "is not valid JSON"),
    ("invalid JSON", files({"bad.json": '{"matrix":'}), ["c2c", "analyze", "{tmp}/bad.json"], "is not valid JSON"),
    (
        "a binary JSON",
        files({"bin.json": bytes(range(256)) * 8}),
        ["c2c", "analyze", "{tmp}/bin.json"],
        "is not valid JSON",
    ),
    (
        "JSON nested 100000 deep",
        files({"deep.json": "[" * 100000 + "]" * 100000}),
        ["c2c", "analyze", "{tmp}/deep.json"],
        "nests too deeply",
    ),
    ("JSON without a matrix", files({"list.json": "[1, 2]"}), ["c2c", "analyze", "{tmp}/list.json"], "no matrix in it"),
    (
        "JSON with 2000 CPUs",
        files({"many.json": result({"cpus": list(range(2000)), "one_way_ns": []})}),
        ["c2c", "analyze", "{tmp}/many.json"],
        "2000 CPU ids, but a matrix covers at most 1024",
    ),
    (
        "JSON with CPU Infinity",
        files({"inf.json": '{"matrix": {"cpus": [Infinity], "one_way_ns": [[null]]}}'}),
        ["c2c", "analyze", "{tmp}/inf.json"],
        "no matrix in it",
    ),
    (
        "JSON with a 400-digit latency",
        files({"huge.json": '{"matrix": {"cpus": [0, 1], "one_way_ns": [[null, 1' + "0" * 400 + '], [null, null]]}}'}),
        ["c2c", "analyze", "{tmp}/huge.json"],
        "not a number or null",
    ),
    ("a .txt file", files({"m.txt": "1\n"}), ["c2c", "analyze", "{tmp}/m.txt"], "unknown kind of file"),
    ("heatmap of a missing file", nothing, ["c2c", "heatmap", "{tmp}/nope.csv", "-o", "{tmp}/out.png"], "cannot read"),
    (
        "heatmap into a missing folder",
        files({"m.csv": "0,1\n1,0\n"}),
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "{tmp}/no/such/out.png"],
        "does not exist or is not writable",
    ),
    (
        "heatmap into a file that is not a PNG",
        files({"m.csv": "0,1\n1,0\n"}),
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "{tmp}/out.pdf"],
        "ending in .png",
    ),
    # perflab run
    ("run an unknown lab", nothing, ["run", "no-such-lab"], "unknown lab|choose one of"),
    ("run with an empty CPU list", nothing, ["run", "core-to-core", "-C", ""], "empty CPU list"),
    ("run with a CPU list of words", nothing, ["run", "core-to-core", "-C", "first"], "bad CPU list"),
    ("run with a reversed CPU range", nothing, ["run", "core-to-core", "-C", "3-1"], "bad CPU list"),
    ("run with a billion CPUs", nothing, ["run", "core-to-core", "-C", "0-999999999999"], "beyond any machine"),
    ("run on an offline CPU", nothing, ["run", "core-to-core", "-C", "4000"], "not online"),
    ("run with --runs 0", nothing, ["run", "core-to-core", "--runs", "0"], "out of range"),
    ("run with --runs -1", nothing, ["run", "loop-alignment", "--runs", "-1"], "out of range"),
    ("run with --runs 10**12", nothing, ["run", "core-to-core", "--runs", "1000000000000"], "out of range"),
    ("run with --runs of words", nothing, ["run", "core-to-core", "--runs", "many"], "whole number"),
    ("run with an empty --runs", nothing, ["run", "core-to-core", "--runs", ""], "whole number"),
    ("run with PERFLAB_RUNS of words", nothing, ["run", "core-to-core", "--quick"], "PERFLAB_RUNS='many' is out"),
    ("run with PERFLAB_RUNS 0", nothing, ["run", "memcpy-variant", "--quick"], "PERFLAB_RUNS='0' is out of range"),
    ("run lab 3 with PERFLAB_RUNS 1", nothing, ["run", "first-core-ipi", "--quick"], "needs 2 to"),
    (
        "run with a results folder that is a file",
        files({"results-file": "not a folder"}),
        ["run", "core-to-core", "--quick"],
        "cannot write results",
    ),
    ("run all in a VM", nothing, ["run", "all", "--vm", "default"], "one lab at a time"),
    ("run with an unknown option", nothing, ["run", "core-to-core", "--fast"], "unrecognized arguments"),
    # perflab grade, hint, reset, list, progress
    ("grade an unknown exercise", nothing, ["grade", "no-such-exercise"], "unknown exercise"),
    (
        "grade a missing notebook",
        nothing,
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/nope.ipynb"],
        "is not a file",
    ),
    (
        "grade a folder",
        files({"folder/x": ""}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/folder"],
        "is not a file",
    ),
    (
        "grade a CSV",
        files({"data.csv": "a,b\n1,2\n"}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/data.csv"],
        "not a notebook",
    ),
    (
        "grade invalid JSON",
        files({"bad.ipynb": "{cells: ["}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/bad.ipynb"],
        "not a notebook",
    ),
    (
        "grade JSON that is no notebook",
        files({"list.ipynb": "[1, 2, 3]"}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/list.ipynb"],
        "not a notebook",
    ),
    (
        "grade a binary",
        files({"x.ipynb": bytes(range(256)) * 4}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/x.ipynb"],
        "not a notebook",
    ),
    (
        "grade an empty file",
        files({"empty.ipynb": ""}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/empty.ipynb"],
        "not a notebook",
    ),
    ("grade with --timeout 0", nothing, ["grade", "c2c-harmonic-mean", "--timeout", "0"], "out of range"),
    ("grade with --timeout of words", nothing, ["grade", "c2c-harmonic-mean", "--timeout", "soon"], "takes seconds"),
    ("hint for an unknown exercise", nothing, ["hint", "no-such-exercise"], "unknown exercise"),
    # perflab case, and grade and hint of a case
    ("case new with a seed of words", nothing, ["case", "new", "--seed", "seven"], "--seed takes a number"),
    ("case new with a seed out of range", nothing, ["case", "new", "--seed", "1000000000"], "out of range"),
    ("case new over a case that exists", files({"work/cases/case-3/.case.json": "{}"}),
     ["case", "new", "--seed", "3"], "exists: it may hold your work"),
    ("grade a case name climbing out of work/cases", nothing, ["grade", "case-../../etc"], "is not a case's name"),
    ("grade a case that was never made", nothing, ["grade", "case-99"], "no case case-99 in"),
    ("grade the newest case when there is none", nothing, ["grade", "case"], "no case yet"),
    ("grade a case with --notebook", nothing, ["grade", "case", "--notebook", "x.ipynb"], "are for exercises"),
    ("grade a case whose .case.json is damaged", files({"work/cases/case-4/.case.json": "{\"seed\": \"x\"}"}),
     ["grade", "case-4"], "is damaged"),
    ("case reveal of a case that was never made", nothing, ["case", "reveal", "case-5"], "no case case-5 in"),
    ("case hint with a name that is no case", nothing, ["case", "hint", "lab-3"], "is not a case's name"),
    ("reset an unknown exercise", nothing, ["reset", "no-such-exercise"], "unknown exercise"),
    ("reset into a workspace that is a file", files({"work-file": "not a folder"}),
     ["reset", "c2c-harmonic-mean"], "cannot write"),
    ("reset an exercise and --all", nothing, ["reset", "c2c-harmonic-mean", "--all"],
     "give one exercise to reset, or --all for the whole workspace"),
    ("reset with no exercise", nothing, ["reset", "--progress"], "give one exercise to reset, or --all"),
    ("reset both clearing and keeping progress", nothing, ["reset", "c2c-harmonic-mean", "--progress", "--keep-progress"],
     "--keep-progress: not allowed with argument --progress"),
    ("list with a progress file that is a folder", files({"progress-folder/x": ""}), ["list"], "cannot read"),
    ("progress with a progress file that is a folder", files({"progress-folder/x": ""}), ["progress"], "cannot read"),
    # perflab layout, probe, system, exercises, and no verb at all
    ("layout of a missing binary", nothing, ["layout", "{tmp}/nope", "main"], "no such binary"),
    ("layout of a text file", files({"notes.txt": "hello\n"}), ["layout", "{tmp}/notes.txt", "main"], "ELF|objdump"),
    (
        "layout of an unknown function",
        nothing,
        ["layout", sys.executable, "no_such_function_here"],
        "no_such_function_here",
    ),
    ("probe of a missing sysroot", nothing, ["probe"], "PERFLAB_SYSROOT|sysroot"),
    ("an unknown system action", nothing, ["system", "fix"], "invalid choice"),
    ("an unknown exercises action", nothing, ["exercises", "grade"], "invalid choice"),
    ("an unknown verb", nothing, ["fly"], "invalid choice"),
    ("no verb at all", nothing, [], "required"),
    # -- words a verb does not take (each verb is a subcommand of its own; `vm box nosuch` started a build)
    ("vm list with a word after it", nothing, ["vm", "list", "nosuch"], "vm list: unrecognized arguments: nosuch"),
    ("vm build with a profile", nothing, ["vm", "build", "nosuchprofile"], "vm build: unrecognized arguments"),
    ("vm box with a word after it", nothing, ["vm", "box", "nosuch"], "vm box: unrecognized arguments: nosuch"),
    ("vm down with a second word", nothing, ["vm", "down", "default", "extra"], "vm down: unrecognized arguments"),
    (
        "workshop down with an option of up",
        nothing,
        ["workshop", "down", "--reserve-cpus", "2"],
        "workshop down: unrecognized arguments: --reserve-cpus",
    ),
    (
        "workshop up with a turn limit that is no time",
        nothing,
        ["workshop", "up", "ann", "--turn-limit", "ten"],
        "--turn-limit takes seconds, not 'ten'",
    ),
    (  # no names resumes a class; with none to resume, it says what `up` needs (as root; else that it needs root)
        "workshop up with no learner and no class to resume",
        nothing,
        ["workshop", "up"],
        "name at least one learner|run it as root",
    ),
    # -- c2c: where the heatmap goes, and matrices too empty to advise from
    (
        "heatmap into /proc (root may write there, the kernel says no)",
        A_PAIR,
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "/proc/x.png"],
        "cannot write /proc/x.png: the folder /proc takes no new file",
    ),
    (
        "heatmap into /sys",
        A_PAIR,
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "/sys/x.png"],
        "cannot write /sys/x.png: the folder /sys takes no new file",
    ),
    (
        "heatmap into a name ending in / (it wrote dir.png)",
        A_PAIR,
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "{tmp}/dir.png/"],
        "dir.png/ is a folder",
    ),
    (
        "heatmap onto a folder named .png",
        files({"m.csv": "\n52.5\n", "shots.png/keep": ""}),
        ["c2c", "heatmap", "{tmp}/m.csv", "-o", "{tmp}/shots.png"],
        "shots.png is a folder",
    ),
    (
        "a CSV two thirds nan",
        files({"nan.csv": "\n52.5\nnan,nan\n"}),
        ["c2c", "analyze", "{tmp}/nan.csv"],
        r"only 1 of its 3 pairs of CPUs are measured \(33%; empty, nan and null cells mean not measured\)",
    ),
    (
        "a CSV two thirds empty",
        files({"gaps.csv": "\n52.5\n,\n"}),
        ["c2c", "heatmap", "{tmp}/gaps.csv", "-o", "{tmp}/g.png"],
        "only 1 of its 3 pairs",
    ),
    (
        "a result JSON mostly NaN",
        files(
            {
                "nan.json": '{"matrix": {"cpus": [0, 1, 2], "one_way_ns": '
                '[[null, 50, NaN], [50, null, NaN], [NaN, NaN, null]]}}'
            }
        ),
        ["c2c", "analyze", "{tmp}/nan.json"],
        "only 1 of its 3 pairs",
    ),
    # -- run: a CPU this machine lacks is refused before the measurement queue (it waited 6.6 s for its turn)
    (
        "run on an offline CPU while another run holds the lock",
        lock_held,
        ["run", "core-to-core", "-C", "0,4000", "--no-wait"],
        "CPU 4000 is not online",
    ),
    # perflab grade: JSON that nbformat reads but that is no valid notebook
    (
        "grade JSON with no cells",
        files({"a.ipynb": '{"a": 1}'}),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/a.ipynb"],
        "not a (valid )?notebook",
    ),
    (
        "grade a notebook with a cell lacking its source",
        files(
            {
                "nosource.ipynb": json.dumps(
                    {
                        "nbformat": 4,
                        "nbformat_minor": 5,
                        "metadata": {},
                        "cells": [{"cell_type": "markdown", "metadata": {}}],
                    }
                )
            }
        ),
        ["grade", "c2c-harmonic-mean", "--notebook", "{tmp}/nosource.ipynb"],
        "not a valid notebook.*'source'",
    ),
]

ENVIRONMENT = {  # the rows whose bad input is in the environment rather than on the command line
    "run with a results folder that is a file": ("PERFLAB_RESULTS", "{tmp}/results-file"),
    "run with PERFLAB_RUNS of words": ("PERFLAB_RUNS", "many"),
    "run with PERFLAB_RUNS 0": ("PERFLAB_RUNS", "0"),
    "run lab 3 with PERFLAB_RUNS 1": ("PERFLAB_RUNS", "1"),
    "reset into a workspace that is a file": ("PERFLAB_WORKSPACE", "{tmp}/work-file"),
    "list with a progress file that is a folder": ("PERFLAB_PROGRESS", "{tmp}/progress-folder"),
    "progress with a progress file that is a folder": ("PERFLAB_PROGRESS", "{tmp}/progress-folder"),
    "probe of a missing sysroot": ("PERFLAB_SYSROOT", "{tmp}/no-such-machine"),
    "workshop up with no learner and no class to resume": ("PERFLAB_WORKSHOP_DIR", "{tmp}/no-workshop"),
}


def snapshot(*folders: Path) -> dict:
    """Every entry under the folders: its type and mode, and a regular file's bytes (links and pipes not followed)."""
    seen = {}
    for folder in folders:
        for root, dirs, names in os.walk(folder):
            for name in dirs + names:
                path = Path(root) / name
                info = path.lstat()
                digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else ""
                seen[str(path)] = (info.st_mode, digest)
    return seen


@pytest.fixture
def vm_folders(tmp_path, monkeypatch):
    """The test's own vm/ (a copy of default.toml in it) and VM cache, both in tmp_path."""
    (tmp_path / "vm").mkdir()
    shutil.copy(REPO / "vm" / "default.toml", tmp_path / "vm" / "default.toml")
    monkeypatch.setattr(profiles, "PROFILES_DIR", tmp_path / "vm")
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_every_row_is_named_once():
    assert len({description for description, *_ in CASES}) == len(CASES)
    assert set(ENVIRONMENT) <= {description for description, *_ in CASES}


@pytest.mark.parametrize("description, setup, argv, says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(vm_folders, capsys, monkeypatch, description, setup, argv,
                                                          says):
    tmp = vm_folders
    setup(tmp)
    if description in ENVIRONMENT:
        variable, value = ENVIRONMENT[description]
        monkeypatch.setenv(variable, value.replace("{tmp}", str(tmp)))
    before = snapshot(tmp, REPO / "vm")
    try:
        code = cli.main([arg.replace("{tmp}", str(tmp)) for arg in argv])
    finally:
        while HELD:
            os.close(HELD.pop())
    out, err = capsys.readouterr()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("perflab: "), err
    assert "Traceback" not in out + err
    assert re.search(says, err), err
    after = snapshot(tmp, REPO / "vm")
    for seen in (before, after):  # the machine-wide lock file is infrastructure, not the learner's,
        seen.pop(str(tmp / "measure.lock"), None)  # and so is the folder of running programs' records beside it
        seen.pop(str(tmp / "measure.lock.processes"), None)
    assert after == before, "a refused command changed files"


# -- the book's table of bad inputs is this table ------------------------------------------------------

BOOK_PAGE = REPO / "book" / "src" / "reference" / "command-line.md"
TABLE_START, TABLE_END = "<!-- bad inputs: from tests/test_bad_input.py -->", "<!-- end of bad inputs -->"


def _as_typed(description: str, argv: list[str]) -> str:
    """The row's command as a learner would type it, in a folder holding the row's files."""
    words = [{sys.executable: "python3"}.get(arg, arg.replace(CLIMB, "../../…/").replace("{tmp}/", ""))
             for arg in ["perflab", *argv]]
    variable, value = ENVIRONMENT.get(description, (None, ""))
    return (f"{variable}={value.replace('{tmp}/', '')} " if variable else "") + shlex.join(words)


def _readable(says: str) -> str:
    """A row's pattern in words: `a|b` as "a or b", `.*` as "…", escapes dropped."""
    return re.sub(r"\\(.)", r"\1", says.replace(".*", " … ").replace("|", " or "))


def book_table() -> str:
    rows = [f"| {description} | `{_as_typed(description, argv)}` | {_readable(says)} |"
            for description, _, argv, says in CASES]
    return "\n".join([TABLE_START, "| bad input | as typed | the one line says |", "|---|---|---|", *rows, TABLE_END])


def test_the_books_table_is_this_table():
    page = BOOK_PAGE.read_text()
    shown = page[page.index(TABLE_START):page.index(TABLE_END) + len(TABLE_END)]
    assert shown == book_table(), f"the table in {BOOK_PAGE} differs from CASES: run `.venv/bin/python {__file__}`"


def test_the_course_profiles_still_load():
    for name in profiles.names():
        profiles.load(name)


def test_a_hand_built_profile_cannot_name_a_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFLAB_VM_CACHE", str(tmp_path))
    evil = profiles.Profile(name="../../x", description="x", sockets=1, cores=1, threads=1, memory_mib=512)
    with pytest.raises(PerflabError, match="is not a VM profile name"):
        machine.VM(evil).folder


# -- the measurement lock --------------------------------------------------------------------------

@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_lock_files_are_created_0666_despite_the_umask(tmp_path, umask_022):
    with measurement_lock("test"):
        assert stat.S_IMODE(lock_path().stat().st_mode) == 0o666
    with exclusive(tmp_path / "vms" / "default.lock", "busy"):
        assert stat.S_IMODE((tmp_path / "vms" / "default.lock").stat().st_mode) == 0o666


def test_a_0644_lock_file_of_ours_is_opened_up(umask_022):
    lock_path().write_text("")
    assert stat.S_IMODE(lock_path().stat().st_mode) == 0o644  # as an older perflab left it
    with measurement_lock("test"):
        pass
    assert stat.S_IMODE(lock_path().stat().st_mode) == 0o666


NOBODY_PYTHON = "/usr/bin/python3"  # the venv's interpreter may sit in /root, where user nobody cannot reach


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(NOBODY_PYTHON, os.X_OK),
                    reason="locking as another user needs root (to switch users) and a system python3")
def test_another_user_can_lock_after_us_and_an_unopenable_lock_is_one_line(monkeypatch, umask_022):
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are 0700: nobody could reach it
    code = ("from perflab.lock import measurement_lock\nfrom perflab.errors import PerflabError\n"
            "try:\n with measurement_lock('nobody', wait=False): print('locked')\n"
            "except PerflabError as err: print(err)")

    def as_nobody(lock: Path) -> str:
        done = subprocess.run(
            [NOBODY_PYTHON, "-c", code],
            user=65534,
            group=65534,
            extra_groups=[],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO), "PERFLAB_LOCK": str(lock)},
            timeout=30,
        )
        assert done.returncode == 0 and not done.stderr, done.stderr
        return done.stdout.strip()

    try:
        folder.chmod(0o755)
        monkeypatch.setenv("PERFLAB_LOCK", str(folder / "measure.lock"))
        with measurement_lock("root's run"):
            pass
        assert as_nobody(folder / "measure.lock") == "locked"
        (folder / "old.lock").write_text("")  # 0644, as the first user's umask left it before
        refused = as_nobody(folder / "old.lock")
        assert "\n" not in refused and refused.startswith(f"cannot open the measurement lock {folder / 'old.lock'}")
        assert "chmod 666" in refused
    finally:
        shutil.rmtree(folder)


def test_a_lock_that_cannot_be_opened_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_LOCK", str(tmp_path))  # a folder, not a file
    with pytest.raises(PerflabError) as err:
        with measurement_lock("test"):
            pass
    assert str(tmp_path) in str(err.value) and "PERFLAB_LOCK" in str(err.value) and "\n" not in str(err.value)


def test_the_lock_path_is_the_same_whatever_tmpdir_says(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFLAB_LOCK")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # differs between users (libpam-tmpdir)
    assert lock_path() in (Path("/run/lock/perflab-measure.lock"), Path("/tmp/perflab-measure.lock"))


@pytest.fixture
def held_by_another_process():
    """A separate process holding the measurement lock (PERFLAB_LOCK comes from conftest) until the test ends."""
    code = "from perflab.lock import measurement_lock\nwith measurement_lock('the other run'):\n print('held', flush=True)\n input()"
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.stdin.close()  # input() ends, the block exits, the process ends
        holder.wait(timeout=10)


def test_wait_false_refuses_while_another_process_holds_the_lock(held_by_another_process):
    with pytest.raises(PerflabError, match="another measurement is running \\(\\w+'s the other run, pid "
                                           f"{held_by_another_process.pid}\\)"):
        with measurement_lock("test", wait=False):
            pass


def test_no_wait_run_refuses_while_another_process_holds_the_lock(held_by_another_process, tmp_path):
    done = run_cli("run", "loop-alignment", "--quick", "--no-wait", env={"PERFLAB_RESULTS": str(tmp_path / "results")})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()] and "another measurement is running" in done.stderr
    assert not list((tmp_path / "results").rglob("*.json")), "a refused run saved a result"


# -- Ctrl-C once the command is done -----------------------------------------------------------------

def _interrupted(script: str) -> subprocess.CompletedProcess:
    """`perflab list` as its own process (sys.argv), with a Ctrl-C that the script sends itself."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import atexit, os, signal, sys, time\nfrom perflab.cli import main\n"
            "sys.argv = ['perflab', 'list']\n" + script,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_ctrl_c_just_after_the_output_is_the_one_line_and_130():
    done = _interrupted("code = main()\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\nsys.exit(code)")
    assert done.returncode == 130 and done.stderr == cli.INTERRUPTED_AFTER + "\n", (done.returncode, done.stderr)
    assert "c2c-harmonic-mean" in done.stdout, "what it printed before is all there"


def test_ctrl_c_while_python_tears_down_changes_nothing():
    """From Python's exit handlers on, a Ctrl-C is ignored: it printed a traceback there, and later in the teardown
    ended the process by the signal (exit -2) without a word."""
    done = _interrupted("atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), "
                        "time.sleep(1)))\nsys.exit(main())")
    assert done.returncode == 0 and done.stderr == "", (done.returncode, done.stderr)


if __name__ == "__main__":  # write CASES into the book's table
    text = BOOK_PAGE.read_text()
    BOOK_PAGE.write_text(text[:text.index(TABLE_START)] + book_table() + text[text.index(TABLE_END) + len(TABLE_END):])
    print(f"{BOOK_PAGE}: {len(CASES)} bad inputs")
