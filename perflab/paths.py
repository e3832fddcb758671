"""Where the course keeps its files: the checkout, the build output, the learner's workspace, the results."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"  # the labs' programs, built by make and read by every user
# What perflab compiles as it runs (build variants, a learner's version of a lab's C file): a workshop gives
# each learner a folder of their own, so they need no write access to the checkout and never overwrite
# each other's builds.
RUN_BUILD_DIR = Path(os.environ.get("PERFLAB_BUILD_DIR") or BUILD_DIR)
LABS_DIR = REPO_ROOT / "labs"
DATA_DIR = Path(__file__).resolve().parent / "data"
LAB_PACKAGES = Path(__file__).resolve().parent / "labs"
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def lab_package(name: str) -> str:
    """The Python package of the lab named `name`, under perflab/labs/: its name with _ for -, and a leading
    digit spelled out, since a module's name cannot start with one ('4k-aliasing' is four_k_aliasing)."""
    package = name.replace("-", "_")
    return f"{DIGITS[int(package[0])]}_{package[1:]}" if package[:1].isdigit() else package


def lock_path() -> Path:
    """The same file for every user and environment, or the lock would not exclude anyone.

    Chosen by the folders' modes, not by this user's access or TMPDIR, which differ between users.
    """
    if "PERFLAB_LOCK" in os.environ:
        return Path(os.environ["PERFLAB_LOCK"])
    try:
        shared = os.stat("/run/lock").st_mode & 0o1777 == 0o1777  # sticky and writable by all, as on Debian
    except OSError:
        shared = False
    return Path("/run/lock" if shared else "/tmp") / "perflab-measure.lock"


def workspace_dir() -> Path:
    """The learner's own copies of the notebooks and their progress: work/ unless PERFLAB_WORKSPACE says otherwise."""
    return Path(os.environ.get("PERFLAB_WORKSPACE", REPO_ROOT / "work"))


def results_dir() -> Path:
    """Results go under results/ in the checkout unless PERFLAB_RESULTS says otherwise."""
    return Path(os.environ.get("PERFLAB_RESULTS", REPO_ROOT / "results"))


@contextmanager
def environment(name: str, value: str):
    """The environment variable `name` set to `value` while the block runs (a workspace, quick mode), then as
    it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


# A scratch folder's name: perflab-KIND-PID-XXXXXXXX, XXXXXXXX as tempfile makes it.
SCRATCH_NAME = re.compile(r"perflab-[a-z0-9-]+-[0-9]+-[a-z0-9_]{8}")


@contextmanager
def scratch(kind: str) -> Iterator[str]:
    """A temporary folder for one run (perflab-KIND-PID-*), removed when the block ends, however it ends.

    The run holds a lock on the folder while it lives, and a kill -9 frees that lock with the process; so every
    new scratch folder first removes the folders left unlocked, of any kind. The lock, not the PID, decides:
    a PID may be reused, or be another PID namespace's."""
    for left in Path(tempfile.gettempdir()).iterdir():
        if SCRATCH_NAME.fullmatch(left.name):
            _remove_if_abandoned(left)
    hidden = Path(tempfile.mkdtemp(prefix=f".perflab-{kind}-{os.getpid()}-"))  # no sweep takes it before it is locked
    lock = os.open(hidden, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder = hidden.with_name(hidden.name[1:])
        hidden.rename(folder)
        try:
            yield str(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(lock)


def _remove_if_abandoned(folder: Path) -> None:
    """Remove a scratch folder whose run is gone (its lock is free); a live run's, a symlink or another user's
    folder stays."""
    try:
        lock = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(folder, ignore_errors=True)
    except OSError:
        pass  # locked: its run is alive
    finally:
        os.close(lock)
