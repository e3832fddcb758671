"""A case: a seed, the causes it drew on the machine it was made for, and its folder in the learner's workspace.

The folder holds the release (service.c, start.sh), the harness and build file, README.md with the symptom,
an empty diagnosis.toml, and .case.json: the seed and the machine's online CPUs. The truth is drawn again
from those two, so a case's files never hold it in words; a learner studying alone can still work it out from
the seed and this package, as they can read every grader of the course."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import PerflabError
from ..lock import measurement_lock
from ..paths import workspace_dir
from ..probe import online_cpus
from . import source
from .build import build, run, scratch
from .causes import Cause, draw, eligible, parameters
from .diagnosis import StartLine, read_start, template
from .store import sealed_cases, seed_of

CASE_FILE = ".case.json"
MAX_SEED = 10**9
MAX_THREADS = 4
QUICK_REQUESTS = 1_000_000  # about half a second for the release here: enough for a grade's round


@dataclass(frozen=True)
class Case:
    seed: int | None  # None: a workshop's sealed case, read by someone who may not know its seed
    cpus: tuple[int, ...]  # the online CPUs of the machine it was made for
    folder: Path
    number: int  # in its name, case-NUMBER: the seed, or for a sealed case a number that says nothing of it

    @property
    def name(self) -> str:
        return f"case-{self.number}"

    @property
    def sealed(self) -> bool:
        return self.seed is None

    @property
    def causes(self) -> list[Cause]:
        return draw(self._seed(), eligible(len(self.cpus)))

    @property
    def params(self) -> dict[str, int]:
        return parameters(self._seed())

    def _seed(self) -> int:
        if self.seed is None:
            raise PerflabError(f"{self.name} is your workshop's: its causes are sealed; your instructor grades them")
        return self.seed

    @property
    def threads(self) -> int:
        return min(len(self.cpus), MAX_THREADS)

    def release_source(self, fixed: bool = False) -> str:
        return source.service_c(self.causes, self.params, fixed)

    def release_start(self, fixed: bool = False) -> StartLine:
        text = source.start_sh(self.causes, self.threads, list(self.cpus), fixed)
        return read_start(text, self.threads, list(self.cpus))


def cases_dir() -> Path:
    return workspace_dir() / "cases"


def new_case(seed: int | None = None, say=print, into: Path | None = None, sealed: bool = False) -> Case:
    """Draw a case for this machine and write it to work/cases/case-SEED (or into `into`); refuse to overwrite
    one. A sealed case (a workshop's) is named by a random number, and its files do not hold its seed."""
    seed = secrets.randbelow(MAX_SEED) if seed is None else seed
    if not 0 <= seed < MAX_SEED:
        raise PerflabError(f"--seed {seed} is out of range: give 0 to {MAX_SEED - 1}")
    cpus = online_cpus() or [0]
    number = secrets.randbelow(MAX_SEED) if sealed else seed
    case = Case(seed, tuple(cpus), (into or cases_dir()) / f"case-{number}", number)
    if case.folder.exists():
        raise PerflabError(f"{case.folder} exists: it may hold your work; grade it, or pick another --seed")
    say(f"{case.name}: writing sessiond {source.RELEASE} to {case.folder}")
    files = {
        "service.c": case.release_source(),
        "start.sh": source.start_sh(case.causes, case.threads, cpus),
        "Makefile": source.MAKEFILE,
        "diagnosis.toml": template(source.RELEASE),
        **{name: source.course_file(name) for name in source.COURSE_FILES},
    }
    before, after = _symptom(case, say)
    files["README.md"] = _readme(case, before, after, sealed)
    case.folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{case.name}-", dir=case.folder.parent))
    for name, text in files.items():
        (staging / name).write_text(text)
    (staging / "start.sh").chmod(0o755)
    told = {"sealed": True, "number": number} if sealed else {"seed": seed}
    (staging / CASE_FILE).write_text(json.dumps({"version": 1, **told, "cpus": cpus, "made": _now(),
                                                 "before_rps": before, "after_rps": after}, indent=1) + "\n")
    staging.rename(case.folder)  # whole or not at all: an interrupted `case new` leaves no half case
    return case


def load_case(folder: Path) -> Case:
    try:
        data = json.loads((folder / CASE_FILE).read_text())
        cpus = tuple(int(cpu) for cpu in data["cpus"])
        if data.get("sealed"):
            return Case(seed_of(int(data["number"])), cpus, folder, int(data["number"]))
        return Case(int(data["seed"]), cpus, folder, int(data["seed"]))
    except FileNotFoundError:
        raise PerflabError(f"no case {folder.name} in {folder.parent} (`perflab case list` lists yours; "
                           "PERFLAB_WORKSPACE names another workspace)") from None
    except (ValueError, KeyError, TypeError):
        raise PerflabError(f"{folder / CASE_FILE} is damaged: make a new case with the same --seed") from None


def all_cases() -> list[tuple[Case, str]]:
    """Every readable case in work/cases with the time it was made, oldest first."""
    found = []
    for path in sorted(cases_dir().glob("case-*/" + CASE_FILE)):
        try:
            found.append((load_case(path.parent), json.loads(path.read_text()).get("made", "?")))
        except (PerflabError, ValueError):
            continue  # a damaged case is named when it is graded, not here
    return sorted(found, key=lambda pair: pair[1])


def find_case(name: str) -> Case:
    """`case`: the newest case in work/cases; `case-SEED`: that one."""
    if name != "case":
        if not re.fullmatch(r"case-\d{1,9}", name):
            raise PerflabError(f"{name!r} is not a case's name: give case-SEED, as in {cases_dir()}")
        folder = cases_dir() / name
        if not (folder / CASE_FILE).exists() and os.geteuid() == 0:  # an instructor naming a learner's case
            folder = Path(sealed_cases().get(name.removeprefix("case-"), {}).get("folder", folder))
        return load_case(folder)
    made = sorted(cases_dir().glob("case-*/" + CASE_FILE), key=lambda path: path.stat().st_mtime)
    if not made:
        raise PerflabError("no case yet: `perflab case new` makes one")
    return load_case(made[-1].parent)


def _symptom(case: Case, say) -> tuple[float, float]:
    """Requests per second of this release and of the previous one here, each the median of three runs."""
    say(f"{case.name}: building both releases and timing each three times (about 10 s)")
    with scratch("symptom") as folder:
        arms = {}
        for fixed in (False, True):
            binary = Path(folder) / f"sessiond-{fixed}"
            build(case.release_source(fixed), binary)
            arms[fixed] = case.release_start(fixed).argv(binary, "--requests", str(QUICK_REQUESTS), "--json")
        rates = {fixed: [] for fixed in arms}
        with measurement_lock("perflab case new"):  # the rates in the README are timed: one measurement at a time
            for _ in range(3):
                for fixed, argv in arms.items():
                    report = run(argv)
                    rates[fixed].append(report["requests"] / report["seconds"])
    return statistics.median(rates[True]), statistics.median(rates[False])


def _readme(case: Case, before: float, after: float, sealed: bool = False) -> str:
    sealed = ("\n  This is your workshop's case: your grade checks that it builds and answers as the release does; "
              "your\n  instructor's `perflab workshop regrade` grades each cause.") if sealed else ""
    return f"""# {case.name}: sessiond {source.RELEASE} is slow

> "Since release {source.RELEASE}, sessiond serves about {after:,.0f} requests a second on this machine;
> {source.PREVIOUS} served about {before:,.0f}. Nothing in the release notes explains it. Can you find out
> why, and fix it?"

sessiond keeps a session for each client, counts the traffic, expires old sessions and answers each
request. The release is two files: `service.c` (the stages) and `start.sh` (how production starts it).
`harness.c` drives the stages and reports; the grade builds with its own copy of it.

- Build: `make`. Run as production does: `./start.sh` (extra arguments reach sessiond: `./start.sh --json`
  adds each stage's time; `./start.sh --requests 20000000` runs longer, for a tool to watch).
- Success: requests per second, as `./start.sh` prints it. The answers must not change: the checksum stays.
- Hand in: your fixes in `service.c` and `start.sh`, and `diagnosis.toml`: each cause, its evidence, its fix.
- Grade: `perflab grade {case.name}`. Each failed grade opens one more hint: `perflab hint {case.name}`.{sealed}

Made {_now()} for this machine: {len(case.cpus)} online CPUs ({",".join(map(str, case.cpus))}); its causes
are drawn from what such a machine can show. The book's part "Cases" says how to work one.
"""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
