"""What root reads of a learner's: only plain files the learner owns, below their home, never through a link.

Each attack a learner can plant where root reads (the dashboard, the re-grade, the export) is tried here:
a link to a root-only folder, a link to another learner's results, a FIFO, a huge file, a device node,
a file of someone else's. Each reads as absent, at once.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from perflab.workshop import dashboard, learner_files
from perflab.workshop.learner_files import LearnerFiles

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="root reads learners' files: run the tests as root")
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def home(tmp_path) -> Path:
    """A learner's home, owned by the user running the test (root here stands for the learner)."""
    (tmp_path / "work" / "results" / "numa-static-data").mkdir(parents=True)
    return tmp_path


def test_a_plain_file_of_the_learners_is_read_and_the_rest_reads_as_absent(home):
    files = LearnerFiles(home, os.getuid())
    (home / "work" / "progress.txt").write_text("c2c-harmonic-mean passed 2026-01-01T00:00:00Z\n")
    assert files.text("work/progress.txt").startswith("c2c-harmonic-mean passed")
    assert files.names("work/results") == ["numa-static-data"]
    assert files.read("work/missing.txt") is None and files.names("work/missing") == []
    assert files.read("work/../work/progress.txt") is None, "a path that climbs out is not walked"


def test_a_link_to_a_root_only_folder_or_file_is_not_followed(home, tmp_path_factory):
    secret = tmp_path_factory.mktemp("root-only")
    (secret / "shadow").write_text("root's")
    secret.chmod(0o700)
    files = LearnerFiles(home, os.getuid())
    (home / "work" / "cases").symlink_to(secret)
    (home / "work" / "progress.txt").symlink_to(secret / "shadow")
    assert files.names("work/cases") == [] and files.read("work/cases/shadow") is None
    assert files.read("work/progress.txt") is None


def test_a_fifo_a_device_and_a_huge_file_read_as_absent_at_once(home):
    files = LearnerFiles(home, os.getuid())
    os.mkfifo(home / "work" / "progress.txt")  # nobody ever writes into it: an open that waited would hang
    with (home / "work" / "answers.json").open("wb") as huge:
        huge.truncate(learner_files.TEXT_CAP + 1)  # sparse: a learner's 4 GiB file costs them nothing
    began = time.monotonic()
    assert files.read("work/progress.txt") is None and files.read("work/answers.json") is None
    if os.geteuid() == 0:
        os.mknod(home / "work" / "tty", 0o600 | stat.S_IFCHR, os.makedev(5, 0))  # /dev/tty: opening it acts
        assert files.read("work/tty") is None
    assert time.monotonic() - began < 1


@as_root
def test_a_file_of_someone_elses_in_the_learners_home_is_not_theirs(home):
    (home / "work" / "progress.txt").write_text("c2c-harmonic-mean passed\n")
    os.chown(home / "work" / "progress.txt", NOBODY.pw_uid, NOBODY.pw_gid)  # a hard link to bo's file looks so
    assert LearnerFiles(home, os.getuid()).read("work/progress.txt") is None
    shutil.chown(home / "work", NOBODY.pw_uid, NOBODY.pw_gid)
    assert LearnerFiles(home, os.getuid()).names("work") == [], "a folder of someone else's"


def test_a_link_to_another_learners_results_earns_no_credit(home, tmp_path_factory):
    """ana's ~/work/results links to bo's: the dashboard credits ana with nothing."""
    bo = tmp_path_factory.mktemp("bo")
    result = {"verdict": {"verdict": "reproduced"}, "created": "2026-01-01T00:00:00Z"}
    (bo / "numa-static-data").mkdir()
    (bo / "numa-static-data" / "2026-01-01.json").write_text(json.dumps(result))
    shutil.rmtree(home / "work" / "results")
    (home / "work" / "results").symlink_to(bo)
    (home / "work" / "progress.txt").mkdir()  # a folder where a file should be: no traceback either
    state = dashboard.learner_state("ana", LearnerFiles(home, os.getuid()), machine=None)
    assert state.labs == {} and state.exercises == {}


@as_root
def test_a_learners_export_keeps_links_as_links_and_reads_nothing_they_cannot(tmp_path):
    """`down`'s export is packed by the learner's own tar: a link to a root-only file stays a link."""
    user = f"perflab-t{os.getpid() % 100000}"
    subprocess.run(["useradd", "--create-home", "--user-group", user], check=True)
    try:
        home = Path(pwd.getpwnam(user).pw_dir)
        subprocess.run(["runuser", "-u", user, "--", "sh", "-c",
                        "mkdir -p ~/work && echo mine > ~/work/notes.txt && ln -s /etc/shadow ~/work/shadow && "
                        "mkfifo ~/work/fifo"], check=True, cwd=home)
        archive = tmp_path / "export.tar.gz"
        assert learner_files.export(user, "work", archive) == ""
        listed = subprocess.run(["tar", "-tvzf", str(archive)], capture_output=True, text=True, check=True).stdout
        assert "work/notes.txt" in listed and "work/shadow -> /etc/shadow" in listed and "work/fifo" in listed
        unpacked = tmp_path / "out"
        unpacked.mkdir()
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(unpacked)], check=True)
        assert (unpacked / "work" / "notes.txt").read_text() == "mine\n"
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600 and archive.stat().st_uid == 0
        assert learner_files.export(user, "work", tmp_path / "small.tar.gz", cap=10).startswith("cut at")
    finally:
        subprocess.run(["userdel", "--remove", user], capture_output=True)
