"""What the learner hands in: diagnosis.toml (each cause, its evidence, its fix) and start.sh (how the fixed
service starts). Both are read strictly: anything else in start.sh than sessiond's own start line is refused,
as the grader runs that line itself, without a shell."""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..cpulist import check_cpus, format_cpulist, parse_cpulist
from ..errors import PerflabError
from .causes import KINDS

TEMPLATE = """\
# Your diagnosis of sessiond {version}: one [[cause]] block per cause you found (there are two or three).
# kind      one of: {kinds}
# where     the function of service.c it is in, or "start.sh"
# evidence  the command you ran, and what it showed
# fix       what you changed; the change itself goes in service.c or start.sh, which the grade builds and races
#
# [[cause]]
# kind = "..."
# where = "..."
# evidence = "..."
# fix = "..."
"""

SETUP_LINES = ('cd "$(dirname "$0")"',)


@dataclass(frozen=True)
class Named:
    """One cause as the learner names it."""

    kind: str
    where: str
    evidence: str
    fix: str


def template(version: str) -> str:
    return TEMPLATE.format(version=version, kinds=", ".join(KINDS))


def read_diagnosis(path: Path) -> list[Named]:
    """The causes diagnosis.toml names; PerflabError says, in one line, what is wrong with it."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PerflabError(f"{path} is missing: write one [[cause]] block per cause you found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise PerflabError(f"{path.name} is not valid TOML ({err})") from None
    unknown = set(data) - {"cause"}
    if unknown or not isinstance(data.get("cause", []), list):
        raise PerflabError(f"{path.name} holds only [[cause]] blocks, not {', '.join(sorted(unknown)) or 'cause ='}")
    named = []
    for number, block in enumerate(data.get("cause", []), 1):
        fields = {key: str(block.get(key, "")).strip() for key in ("kind", "where", "evidence", "fix")}
        empty = [key for key, value in fields.items() if not value]
        if empty or set(block) - set(fields):
            extra = sorted(set(block) - set(fields))
            raise PerflabError(f"{path.name}, cause {number}: " + (f"{', '.join(empty)} is empty" if empty else
                               f"{', '.join(extra)} is not a field (kind, where, evidence, fix)"))
        if fields["kind"] not in KINDS:
            raise PerflabError(f"{path.name}, cause {number}: kind {fields['kind']!r} is not one of "
                               f"{', '.join(KINDS)}")
        named.append(Named(**fields))
    return named


@dataclass(frozen=True)
class StartLine:
    """sessiond's start line: the CPUs taskset allows (None: all), the CPU of each worker (None: not pinned)."""

    threads: int
    taskset: list[int] | None = None
    worker_cpus: list[int] | None = None

    def argv(self, binary: Path, *extra: str) -> list[str]:
        pinned = ["taskset", "-c", format_cpulist(self.taskset)] if self.taskset else []
        cpus = ["--cpus", ",".join(map(str, self.worker_cpus))] if self.worker_cpus else []
        return [*pinned, str(binary), "--threads", str(self.threads), *cpus, *extra]


def read_start(text: str, threads: int, online: list[int]) -> StartLine:
    """The one start line of start.sh; PerflabError says, in one line, what is refused and why."""
    lines = [line.strip() for line in text.splitlines()]
    commands = [line for line in lines if line and not line.startswith("#") and line not in SETUP_LINES]
    if len(commands) != 1:
        raise PerflabError(f"start.sh must hold one start line for sessiond, not {len(commands)}")
    try:
        words = shlex.split(commands[0])
    except ValueError as err:
        raise PerflabError(f"start.sh's start line cannot be read ({err})") from None
    words = words[1:] if words[:1] == ["exec"] else words
    words = words[:-1] if words[-1:] == ["$@"] else words
    taskset = None
    if words[:2] == ["taskset", "-c"] and len(words) > 2:
        taskset = parse_cpulist(words[2])
        check_cpus(taskset, online)
        words = words[3:]
    if words[:1] != ["./sessiond"]:
        raise PerflabError("start.sh's line runs ./sessiond, after `taskset -c CPUS` at most: "
                           f"{commands[0]!r} is not graded")
    options = dict(zip(words[1::2], words[2::2]))
    if len(words[1:]) % 2 or set(options) - {"--threads", "--cpus"}:
        raise PerflabError(f"start.sh gives sessiond {' '.join(words[1:])!r}: only --threads N and --cpus LIST are "
                           "graded (the grade picks --requests)")
    if options.get("--threads", str(threads)) != str(threads):
        raise PerflabError(f"start.sh runs {options['--threads']} threads: the service runs {threads}; fix what "
                           "they do, not how many there are")
    worker_cpus = None
    if "--cpus" in options:
        try:
            worker_cpus = [int(cpu) for cpu in options["--cpus"].split(",")]
        except ValueError:
            raise PerflabError(f"--cpus {options['--cpus']!r}: give CPU numbers, one per worker, e.g. 0,1") from None
        check_cpus(worker_cpus, taskset or online)
    return StartLine(threads, taskset, worker_cpus)
