"""Who is in the workshop and where it runs: one JSON file in the workshop's state folder, readable by root only.

The state folder (/var/lib/perflab-workshop) is root's alone, mode 0700, and so is everything in
it: the roster, the hub's log and database, the accounts journal, the pid files, the re-grades
and the measurement queue's durations. Learners' requests, the class list and the tokens are
there.

Passwords are printed once, when a learner is added, and kept only as scrypt hashes. A learner
"alice" logs in as alice; her hub user and her system user are both perflab-alice, so a
workshop never touches an existing account.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pwd
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import PerflabError
from ..paths import REPO_ROOT
from ..results import write_atomic
from ..turns import DEFAULT_SOCKET

INSTRUCTOR = "instructor"
VENV_BIN = REPO_ROOT / ".venv" / "bin"
PREFIX = "perflab-"
MARK = "PERFLAB_WORKSHOP_OF"  # in the environment of every process a workshop starts, naming its state folder
NAME = re.compile(r"[a-z][a-z0-9-]{0,23}")


def state_dir() -> Path:
    return Path(os.environ.get("PERFLAB_WORKSHOP_DIR", "/var/lib/perflab-workshop"))


def state_folder() -> Path:
    """The state folder, made root's alone (0700) before anything is written in it, whoever made it first."""
    folder = state_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def system_user(learner: str) -> str:
    return PREFIX + learner


def learner_of(user: str) -> str:
    return user.removeprefix(PREFIX)


@dataclass
class Workshop:
    ip: str
    port: int
    hub_port: int
    proxy_api_port: int
    dashboard_port: int
    proxy_token: str
    cli_token: str
    instructor_hash: str
    learners: dict[str, str] = field(default_factory=dict)  # name -> password hash
    ssl_cert: str | None = None
    ssl_key: str | None = None
    turns: str = str(DEFAULT_SOCKET)  # the measurement queue's socket (perflab.workshop.turns)
    turn_limit_s: float | None = None  # every learner's turn at most this long; None: each lab's budget
    turns_pid: int | None = None
    turns_started: int | None = None  # the queue's process start time: a reused pid is not the queue
    hub_pid: int | None = None
    hub_started: int | None = None  # the hub's process start time: a reused pid is not the hub
    reserve: int = 0  # CPUs reserved for each learner; 0: every learner measures on all CPUs, in one queue
    cpus: dict[str, str] = field(default_factory=dict)  # learner -> their reserved CPUs, as a cpulist

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_cert else "http"
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{scheme}://{host}:{self.port}"


def workspace_of(learner: str) -> Path | None:
    """The learner's ~/work, or None when their system user is gone."""
    try:
        return Path(pwd.getpwnam(system_user(learner)).pw_dir) / "work"
    except KeyError:
        return None


def learner_environment(workshop: Workshop, learner: str, home: str) -> dict[str, str]:
    """What every process of a learner's sees, their server's and a re-grade's alike: their workspace (~/work) with
    its results, the course's tools first on PATH, the class's measurement queue, and the CPUs reserved for them,
    if any."""
    work = os.path.join(home, "work")
    env = {
        "PERFLAB_WORKSPACE": work,
        "PERFLAB_RESULTS": os.path.join(work, "results"),
        "PERFLAB_BUILD_DIR": os.path.join(home, ".cache", "perflab", "build"),  # not the checkout: root's, shared
        "PERFLAB_LEARNER": learner,
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "PERFLAB_TURNS": workshop.turns,
    }
    reserved = workshop.cpus.get(learner)
    if reserved:  # their own CPUs, so no queue: a lock of their own, in their home where no one else can hold it
        env["PERFLAB_CPUS"] = reserved
        env["PERFLAB_TURNS"] = ""
        env["PERFLAB_LOCK"] = os.path.join(home, ".cache", "perflab", "measure.lock")
    return env


def path() -> Path:
    return state_dir() / "workshop.json"


def load() -> Workshop | None:
    try:
        return Workshop(**json.loads(path().read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as err:
        raise PerflabError(
            f"cannot read {path()} ({err}): run `perflab workshop down` to clean up, then `up` again"
        ) from None


def require() -> Workshop:
    workshop = load()
    if workshop is None:
        raise PerflabError("no workshop is up here: start one with `perflab workshop up LEARNER...`")
    return workshop


def save(workshop: Workshop) -> None:
    state_folder()
    write_atomic(path(), json.dumps(asdict(workshop), indent=2))  # mkstemp makes it 0600


def new_password() -> str:
    return secrets.token_urlsafe(9)  # 12 characters, 72 bits


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    return f"scrypt${salt.hex()}${_scrypt(password, salt).hex()}"


def password_matches(password: str, stored: str) -> bool:
    try:
        kind, salt, digest = stored.split("$")
        return kind == "scrypt" and hmac.compare_digest(_scrypt(password, bytes.fromhex(salt)).hex(), digest)
    except ValueError:
        return False


def _scrypt(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1)


def reserve_cpus(learners: list[str], per_learner: int, online: list[int], taken: dict[str, str]) -> dict[str, str]:
    """Give each learner `per_learner` CPUs of their own, none of them the first CPU (the hub's, the proxy's and
    the system's) or one already given; PerflabError when the machine has too few."""
    from ..cpulist import format_cpulist, parse_cpulist

    used = {cpu for cpus in taken.values() for cpu in parse_cpulist(cpus)}
    free = [cpu for cpu in online[1:] if cpu not in used]
    needed = per_learner * len(learners)
    if needed > len(free):
        raise PerflabError(
            f"reserving {per_learner} CPUs for each of {len(learners)} more learners needs {needed} "
            f"free CPUs besides CPU {online[0]} (the hub's); this machine has {len(free)}: reserve fewer, "
            "or start without --reserve-cpus, and every learner measures in one queue"
        )
    return {name: format_cpulist(free[i * per_learner:(i + 1) * per_learner]) for i, name in enumerate(learners)}


def check_new_names(names: list[str], workshop: Workshop | None) -> None:
    """Refuse, before anything is created, a name that is malformed, repeated, taken in the workshop or on the
    machine."""
    import pwd

    if not names:
        raise PerflabError("name at least one learner, e.g. `perflab workshop up alice bob carol`")
    for name in names:
        if not NAME.fullmatch(name):
            raise PerflabError(f"learner name {name!r}: use lower-case letters, digits and '-', starting with a "
                               "letter, at most 24 characters")
        if name == INSTRUCTOR:
            raise PerflabError(f"{INSTRUCTOR!r} is the instructor's login: choose another learner name")
        if names.count(name) > 1:
            raise PerflabError(f"learner {name!r} is named twice: give each learner once")
        if workshop is not None and name in workshop.learners:
            raise PerflabError(f"learner {name!r} is already in this workshop: `perflab workshop status` lists them")
        try:
            pwd.getpwnam(system_user(name))
        except KeyError:
            continue
        raise PerflabError(f"a system user {system_user(name)} already exists and this workshop did not make it: "
                           "choose another name, or remove that user (`userdel --remove`)")
