"""`perflab workshop up | add-learners | status | down`: JupyterHub for a class, on this machine.

`up` checks everything it can before it changes anything (root, names, the port, the
certificate, that learners can run the course's environment), then creates one system user per
learner through a journal kept in the state folder, then starts JupyterHub, which starts its
configurable-http-proxy and the dashboard service. A failure part-way undoes what was done.
`up` again after the hub died (a crash, a kill, a reboot) resumes the same class: it ends what the
dead hub left (its proxy, the dashboard), starts the queue if it is gone, and starts the hub on the
same roster and database, so every learner keeps their user, home, password and running server.
`down` (after `perflab workshop down` exported the class: perflab.workshop.export) stops the hub
(which stops the learners' servers and the proxy), removes exactly the users and cgroups the
journal recorded, deletes the state folder, and checks that no port is left open.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from ..errors import PerflabError
from ..journal import WORKSHOP, Journal, SystemChanges
from ..probe import online_cpus
from ..processes import alive, start_time
from ..turns import DEFAULT_SOCKET
from . import accounts, cgroups, checks, roster, turns

CONFIG = Path(__file__).with_name("jupyterhub_config.py")
START_TIMEOUT_S = 90


def accounts_journal() -> Journal:
    """Users outlive a reboot, so their journal lives in the state folder, not in /run."""
    return Journal(path=str(roster.state_dir() / "accounts.journal"),
                   kinds={**accounts.KINDS, cgroups.LearnerCgroup.kind: cgroups.LearnerCgroup})


@contextmanager
def _private_files():
    """What the workshop writes (the journal, the hub's log and database, the pid files) is root's alone."""
    before = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(before)


def up(learners: list[str], ip: str = "127.0.0.1", port: int = 8000, ssl_cert: str | None = None,
       ssl_key: str | None = None, reserve: int = 0) -> list[str]:
    """Start the workshop; return the lines to print (the URL, every login and password)."""
    require_root("starting a workshop creates system users")
    with _private_files():
        return _up(learners, ip, port, ssl_cert, ssl_key, reserve)


def _up(learners: list[str], ip: str, port: int, ssl_cert: str | None, ssl_key: str | None, reserve: int) -> list[str]:
    existing = roster.load()
    if existing is not None:
        if _hub_running(existing) and turns.running(existing):
            raise PerflabError(f"a workshop is already up here ({existing.url}): `perflab workshop status` shows it, "
                               "`perflab workshop add-learners` adds to it, `perflab workshop down` ends it")
        return _resume(existing, learners) if not _hub_running(existing) else _restart_queue(existing)
    roster.check_new_names(learners, None)
    if reserve < 0:
        raise PerflabError(f"--reserve-cpus {reserve}: give a number of CPUs per learner, or 0 to share them all")
    reserved = roster.reserve_cpus(learners, reserve, _online(), {}) if reserve else {}
    turn_limit_s = checks.turn_limit()
    if bool(ssl_cert) != bool(ssl_key):
        raise PerflabError("give both --ssl-cert and --ssl-key, or neither (then it serves plain HTTP)")
    for name, given in (("certificate", ssl_cert), ("key", ssl_key)):
        if given and not os.access(given, os.R_OK):
            raise PerflabError(f"cannot read the TLS {name} {given}: give a readable PEM file")
    checks.require_free(ip, port)
    checks.require_tools()
    checks.require_learners_can_run_the_course()
    queue = os.environ.get("PERFLAB_TURNS") or str(DEFAULT_SOCKET)
    turns.require_none_at(Path(queue))

    workshop = roster.Workshop(
        ip=ip, port=port, hub_port=checks.free_port(), proxy_api_port=checks.free_port(),
        dashboard_port=checks.free_port(),
        proxy_token=secrets.token_hex(32), cli_token=secrets.token_hex(32), instructor_hash="",
        ssl_cert=os.path.abspath(ssl_cert) if ssl_cert else None,
        ssl_key=os.path.abspath(ssl_key) if ssl_key else None, reserve=reserve, cpus=reserved,
        turns=queue, turn_limit_s=turn_limit_s)
    instructor_password = roster.new_password()
    workshop.instructor_hash = roster.hash_password(instructor_password)
    try:
        roster.state_folder()
        passwords = _add(workshop, learners)
        _start_services(workshop)
    except BaseException:
        _undo()
        raise
    return [
        f"perflab workshop: up at {workshop.url}/ (hub log: {roster.state_dir() / 'hub.log'})",
        *_service_lines(workshop),
        f"  instructor  {instructor_password}   (lands on the class dashboard, {workshop.url}/services/dashboard/)",
        *_credential_lines(passwords, workshop.cpus),
        "Each password is shown only now. After a crash or a reboot, `perflab workshop up` resumes this class; "
        "`perflab workshop down` exports the class's work, then ends the workshop and removes the learners' users.",
    ]


def _start_services(workshop: roster.Workshop) -> None:
    """The queue (unless it still runs), checked from a learner's side, then the hub, until it answers."""
    if not turns.running(workshop):
        workshop.turns_pid, workshop.turns_started = turns.start(workshop)
        roster.save(workshop)
    checks.require_learners_can_reach(Path(workshop.turns))
    workshop.hub_pid, workshop.hub_started = _start_hub()
    roster.save(workshop)
    _wait_until_serving(workshop)


def _service_lines(workshop: roster.Workshop) -> list[str]:
    limit = (f"{workshop.turn_limit_s:g} s (PERFLAB_TURN_LIMIT_S)" if workshop.turn_limit_s
             else f"its lab's budget (labs/manifest.toml), never over {turns.CLASS_LIMIT_S} s")
    return [f"Measurements queue at {workshop.turns}: one at a time, each at most {limit}.", cgroups.describe()]


def _restart_queue(workshop: roster.Workshop) -> list[str]:
    """The hub runs but the queue died: start it again (it puts every learner's CPU weight back as it starts)."""
    workshop.turns_pid, workshop.turns_started = turns.start(workshop)
    roster.save(workshop)
    checks.require_learners_can_reach(Path(workshop.turns))
    return [f"perflab workshop: the hub at {workshop.url}/ runs; started its measurement queue again "
            f"(pid {workshop.turns_pid}): learners measure again, nothing else changed.", *_service_lines(workshop)]


def _resume(workshop: roster.Workshop, learners: list[str]) -> list[str]:
    """Start the class again after its hub died: what the hub left is ended, nothing of the learners' is touched."""
    new = [name for name in learners if name not in workshop.learners]
    if new:
        raise PerflabError(f"{new[0]} is not in the class that `up` resumes here: resume it first (`perflab workshop "
                           "up`, no names), then `perflab workshop add-learners`")
    left = [pid for pid in checks.started_by(roster.state_dir())
            if not (pid == workshop.turns_pid and turns.running(workshop))]
    for pid in left:
        _stop(pid, start_time(pid) or 0, grace_s=5)
    _start_services(workshop)
    return [f"perflab workshop: resumed the class at {workshop.url}/ (hub log: {roster.state_dir() / 'hub.log'})",
            f"Ended {len(left)} processes the dead hub had left" + (f" (pids {', '.join(map(str, left))})" if left
                                                                   else "") + ".",
            *_service_lines(workshop),
            f"Every learner ({', '.join(workshop.learners)}) keeps their user, home, password and server; the "
            "instructor's password is as before."]


def add_learners(learners: list[str]) -> list[str]:
    require_root("adding learners creates system users")
    with _private_files():
        return _add_learners(learners)


def _add_learners(learners: list[str]) -> list[str]:
    workshop = roster.require()
    roster.check_new_names(learners, workshop)
    if workshop.reserve:
        workshop.cpus.update(roster.reserve_cpus(learners, workshop.reserve, _online(), workshop.cpus))
    passwords = _add(workshop, learners)
    return [f"perflab workshop: {len(learners)} added; they log in at {workshop.url}/",
            *_credential_lines(passwords, workshop.cpus)]


def _add(workshop: roster.Workshop, learners: list[str]) -> dict[str, str]:
    """Make each learner's system user (journaled), then put them in the roster; all or nothing."""
    passwords = {name: roster.new_password() for name in learners}
    made = []
    try:
        with SystemChanges(WORKSHOP, journal=accounts_journal()) as changes:
            for name in learners:
                changes.set(accounts.LearnerAccount(roster.system_user(name)), "present")
                if cgroups.LearnerCgroup(roster.system_user(name)).available():
                    changes.set(cgroups.LearnerCgroup(roster.system_user(name)), "present")
                made.append(name)
    except BaseException:
        users = {roster.system_user(name) for name in [*made, *learners[len(made):][:1]]}  # and a half-made one
        accounts_journal().restore(lambda entry: entry.target in users)
        raise
    workshop.learners.update({name: roster.hash_password(password) for name, password in passwords.items()})
    roster.save(workshop)
    return passwords


def _credential_lines(passwords: dict[str, str], cpus: dict[str, str]) -> list[str]:
    width = max(map(len, passwords), default=0)
    return [f"  {name:<{width}}  {password}" + (f"   (CPUs {cpus[name]})" if name in cpus else "")
            for name, password in passwords.items()]


def _online() -> list[int]:
    cpus = online_cpus()
    if cpus is None:
        raise PerflabError("cannot read the online CPUs (/sys/devices/system/cpu/online): is /sys mounted?")
    return cpus


def status() -> dict:
    """The hub, and every learner's server as the hub's REST API reports it."""
    workshop = roster.require()
    running = _hub_running(workshop)
    users = {}
    if running:
        try:
            users = {u["name"]: u for u in _api(workshop, "/hub/api/users")}
        except PerflabError as err:
            print(f"perflab: {err}", file=sys.stderr)
    learners = []
    for name in workshop.learners:
        user = users.get(roster.system_user(name), {})
        server = (user.get("servers") or {}).get("", {})
        learners.append({"learner": name, "system_user": roster.system_user(name), "cpus": workshop.cpus.get(name),
                         "server": "running" if server.get("ready") else ("starting" if server else "stopped"),
                         "last_activity": user.get("last_activity")})
    return {"url": workshop.url,
            "hub": "running" if running else ("not running: `perflab workshop up` resumes the class (every learner's "
                                              "user, home, password and work as they are)"),
            "queue": "running" if turns.running(workshop) else "not running: `perflab workshop up` starts it again",
            "hub_pid": workshop.hub_pid, "dashboard": f"{workshop.url}/services/dashboard/", "learners": learners}


def render_status(found: dict) -> str:
    lines = [f"workshop {found['url']}/  hub: {found['hub']}", f"measurement queue: {found['queue']}",
             f"dashboard: {found['dashboard']}", ""]
    lines += [f"  {row['learner']:<16} {row['server']:<9} last active {row['last_activity'] or 'never'}"
              + (f"  CPUs {row['cpus']}" if row["cpus"] else "") for row in found["learners"]]
    return "\n".join(lines)


def down() -> list[str]:
    """Stop everything `up` started and remove everything it made (the CLI exports the class first:
    perflab.workshop.export); safe to run again after a failure."""
    require_root("ending a workshop removes system users")
    workshop = roster.load()
    if workshop is None and not roster.state_dir().exists():
        raise PerflabError("no workshop is up here: nothing to take down")
    done = _undo()
    if accounts_journal().path.exists():  # users that stayed: restore said why, on stderr
        raise PerflabError(f"some learners' users could not be removed (said above); {roster.state_dir()} keeps their "
                           "journal: run `perflab workshop down` again")
    if workshop is not None:
        still = [port for port in (workshop.port, workshop.hub_port, workshop.proxy_api_port, workshop.dashboard_port)
                 if checks.listening(workshop.ip if port == workshop.port else "127.0.0.1", port)]
        if still:
            done.append(f"warning: ports {still} still listen: another program holds them (`ss -ltnp` names it)")
    return done


def _undo() -> list[str]:
    """Stop the hub and its children, remove the users the journal recorded, delete the state folder."""
    done = []
    workshop = roster.load()
    if workshop is not None and _hub_running(workshop):
        _stop(workshop.hub_pid, workshop.hub_started)
        done.append(f"stopped JupyterHub (pid {workshop.hub_pid}), its proxy and the learners' servers")
    if workshop is not None:
        done += turns.stop(workshop.turns_pid, workshop.turns_started, Path(workshop.turns))
    left = checks.started_by(roster.state_dir())  # what a hub that was killed left: its proxy, the dashboard
    for pid in left:
        _stop(pid, start_time(pid) or 0, grace_s=5)
    if left:
        done.append(f"stopped {len(left)} processes the hub had left (pids {', '.join(map(str, left))})")
    journal = accounts_journal()
    if journal.path.exists():
        removed = journal.restore(lambda entry: entry.owner == WORKSHOP)
        what = {accounts.LearnerAccount.kind: "the user", cgroups.LearnerCgroup.kind: "the cgroup of"}
        done += [f"removed {what.get(line.split()[0], line.split()[0])} {line.split()[1]}" for line in removed]
    if journal.path.exists():  # the record of users that stayed: deleting it would leave them for good
        return done
    if roster.state_dir().exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(roster.state_dir())], check=False)
        done.append(f"deleted {roster.state_dir()}")
    return done


def _start_hub() -> tuple[int, int]:
    """JupyterHub's pid and start time."""
    folder = roster.state_folder()
    log = open(folder / "hub.log", "ab")
    env = {**os.environ, "PERFLAB_WORKSHOP_DIR": str(folder), roster.MARK: str(folder),  # the proxy inherits it
           "PATH": f"{roster.VENV_BIN}:{os.environ.get('PATH', '')}"}
    process = subprocess.Popen([str(roster.VENV_BIN / "jupyterhub"), "-f", str(CONFIG)], cwd=folder, env=env,
                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)  # Ctrl-C in the instructor's terminal must not stop the class
    log.close()
    return process.pid, start_time(process.pid) or 0


def _wait_until_serving(workshop: roster.Workshop) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _hub_running(workshop):
            raise PerflabError(f"JupyterHub exited while starting: {_log_tail()}")
        try:
            _api(workshop, "/hub/api/")
            return
        except PerflabError:
            time.sleep(0.5)
    raise PerflabError(f"JupyterHub did not answer within {START_TIMEOUT_S} s: {_log_tail()}")


def _api(workshop: roster.Workshop, path: str):
    """GET the hub's REST API through the proxy with the CLI service's token."""
    host = "127.0.0.1" if workshop.ip in ("0.0.0.0", "::", "") else workshop.ip
    url = f"{workshop.url.split('://')[0]}://{host}:{workshop.port}{path}"
    request = urllib.request.Request(url, headers={"Authorization": f"token {workshop.cli_token}"})
    context = None
    if workshop.ssl_cert:
        import ssl

        context = ssl._create_unverified_context()  # our own hub, by its own address: the name check is moot
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as reply:
            return json.load(reply)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise PerflabError(f"the hub at {url} does not answer ({err})") from None


def _log_tail() -> str:
    try:
        lines = (roster.state_dir() / "hub.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    errors = [line for line in lines if "ERROR" in line or "Error" in line]
    return (errors or lines or ["an empty log"])[-1][-300:]


def _stop(pid: int, started: int, grace_s: float = 30) -> None:
    """SIGTERM (JupyterHub then stops the servers and the proxy it started), SIGKILL the group if it lingers."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and alive(pid, started):
        time.sleep(0.2)
    if alive(pid, started):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it was our child (in the same process as `up`)
    except ChildProcessError:
        pass


def _hub_running(workshop: roster.Workshop) -> bool:
    return bool(workshop.hub_pid) and workshop.hub_started is not None and alive(workshop.hub_pid, workshop.hub_started)


def require_root(why: str) -> None:
    if os.geteuid() != 0:
        raise PerflabError(f"{why}: run it as root (sudo .venv/bin/perflab workshop ...)")
