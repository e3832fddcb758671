"""The files of a case: sessiond's source with each part planted or fixed, its start line, its build file."""

from __future__ import annotations

from pathlib import Path

from .causes import Cause

SERVICE = Path(__file__).parent / "service"
COURSE_FILES = ("harness.c", "service.h")  # the grader builds with its own copies of these
RELEASE, PREVIOUS = "1.4", "1.3"
WITHOUT_CAUSE = {"account": "local", "expire": "ring", "respond": "append", "start": "spread"}

MAKEFILE = """\
# Builds sessiond from the release's service.c and the harness that drives it.
CFLAGS = -O2 -g -Wall -Wextra -std=gnu11 -pthread

sessiond: harness.c service.c service.h
\t$(CC) $(CFLAGS) -o $@ harness.c service.c -pthread

.PHONY: clean
clean:
\trm -f sessiond
"""

START = {
    "one-cpu": ("# Pinned to CPU {cpu}: CPU 0 takes the network card's interrupts (ops, release {version}).\n"
                "exec taskset -c {cpu} ./sessiond --threads {threads} \"$@\"\n"),
    "spread": "exec ./sessiond --threads {threads} \"$@\"\n",
}


def variants(causes: list[Cause], fixed: bool) -> dict[str, str]:
    """Each part's variant: the causes' planted ones (or their fixes), the rest without a cause."""
    chosen = dict(WITHOUT_CAUSE)
    for cause in causes:
        chosen[cause.slot] = cause.fixed if fixed else cause.planted
    return chosen


def service_c(causes: list[Cause], params: dict[str, int], fixed: bool = False) -> str:
    chosen = variants(causes, fixed)
    queue = 1
    while queue < params["session_age"] + 64:
        queue *= 2
    text = (SERVICE / "service.c.in").read_text()
    replacements = {
        "@VERSION@": PREVIOUS if fixed else RELEASE,
        "@SESSION_AGE@": str(params["session_age"]),
        "@QUEUE_SIZE@": str(queue),
        "@TAGS@": str(params["tags"]),
        **{f"@{slot.upper()}@": (SERVICE / "stages" / f"{slot}.{chosen[slot]}.c").read_text().rstrip("\n")
           for slot in ("account", "expire", "respond")},
    }
    for marker, value in replacements.items():
        text = text.replace(marker, value)
    return text


def start_sh(causes: list[Cause], threads: int, cpus: list[int], fixed: bool = False) -> str:
    line = START[variants(causes, fixed)["start"]].format(cpu=cpus[-1], threads=threads, version=RELEASE)
    return ("#!/bin/sh\n# How sessiond is started in production. Extra arguments go to sessiond.\n"
            f"cd \"$(dirname \"$0\")\"\n{line}")


def course_file(name: str) -> str:
    return (SERVICE / name).read_text()
