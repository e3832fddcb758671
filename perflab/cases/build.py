"""Building and running sessiond: always with the course's own harness.c and service.h, so that what the learner
can change is service.c and start.sh alone; and service.c may define only the stages' functions."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path

from .. import paths, processes
from ..errors import PerflabError
from .source import COURSE_FILES, course_file

CFLAGS = ["-O2", "-g", "-Wall", "-std=gnu11", "-pthread"]
STAGE_FUNCTIONS = {"worker_new", "parse_request", "find_session", "account", "expire_sessions", "build_response",
                   "service_summary"}
STAGES = ("parse", "lookup", "account", "expire", "respond")
RUN_TIMEOUT_S = 60


def scratch(kind: str) -> AbstractContextManager[str]:
    """A case's temporary folder (perflab-case-KIND-PID-*), removed however its run ends (paths.scratch)."""
    return paths.scratch(f"case-{kind}")


def as_user(argv: list[str], user: str | None) -> list[str]:
    """argv run as `user` (a workshop's learner, whose code must never run as root), or as we are."""
    return ["runuser", "-u", user, "--", *argv] if user else argv


def build(service_c: str, binary: Path, user: str | None = None) -> None:
    """Compile `service_c` with the course's harness into `binary`, as `user` if given; PerflabError names the
    first problem."""
    with scratch("build") as folder:
        work = Path(folder)
        for name in COURSE_FILES:
            (work / name).write_text(course_file(name))
        (work / "service.c").write_text(service_c)
        if user:
            account = pwd.getpwnam(user)
            for path in (work, *work.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
        _compile(["-c", "service.c", "-o", "service.o"], work, user)
        listed = processes.run(as_user(["nm", "-g", "--defined-only", "service.o"], user), cwd=work,
                               timeout=RUN_TIMEOUT_S)
        defined = listed.stdout.split()[2::3]
        foreign = sorted(set(defined) - STAGE_FUNCTIONS)
        if foreign:
            raise PerflabError(f"service.c defines {', '.join(foreign)}: it may define only its stages' functions "
                               f"({', '.join(sorted(STAGE_FUNCTIONS))}); make the others static")
        _compile(["harness.c", "service.o", "-o", "sessiond"], work, user)
        shutil.copyfile(work / "sessiond", binary)
        binary.chmod(0o755)


def _compile(arguments: list[str], folder: Path, user: str | None) -> None:
    done = processes.run(as_user(["cc", *CFLAGS, *arguments], user), cwd=folder, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
        raise PerflabError(f"service.c does not build: {first}")


def run(argv: list[str]) -> dict:
    """One run of sessiond (argv ends in --json): its report, with the run's time as this process saw it from
    outside (wall_seconds), which no code in service.c can change."""
    start = time.monotonic()
    try:
        done = processes.run(argv, timeout=RUN_TIMEOUT_S)
        wall_seconds = time.monotonic() - start
    except subprocess.TimeoutExpired:
        raise PerflabError(f"sessiond ran over {RUN_TIMEOUT_S} s and was stopped: does every loop end?") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise PerflabError(f"sessiond failed: {said}")
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
        return {**report, "stage_ns": {stage: float(report["stage_ns"][stage]) for stage in STAGES},
                "checksum": str(report["checksum"]), "wall_seconds": wall_seconds}
    except (ValueError, IndexError, KeyError, TypeError):
        raise PerflabError("sessiond printed no report: the harness's last line should be its JSON") from None
