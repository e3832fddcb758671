"""`perflab workshop up|add-learners|status|regrade|cases|down`: JupyterHub for a class on this machine, run as root."""

from __future__ import annotations

import argparse
import os
import sys

from .common import print_json

AS_ROOT = ("Run it as root: in a root shell as shown, or with sudo in front (`sudo .venv/bin/perflab workshop "
           "...`) where the server has sudo.")


def add_commands(commands) -> None:
    workshop = commands.add_parser(
        "workshop", help="for instructors: JupyterHub for a class on this machine (as root)",
        description="JupyterHub for a class on this machine: one system user and one JupyterLab per learner, "
                    "a measurement queue, and a class dashboard for you. " + AS_ROOT,
        examples=(".venv/bin/perflab workshop up alice bob carol",
                  "sudo .venv/bin/perflab workshop up alice bob carol   # the same, from an account with sudo",
                  ".venv/bin/perflab workshop status", ".venv/bin/perflab workshop down"))
    verbs = workshop.add_subparsers(dest="workshop_command", required=True, metavar="VERB", title="verbs")
    _add_up(verbs)

    p = verbs.add_parser(
        "add-learners", help="more learners while the workshop runs",
        description="Create a user and a login for each learner named, while the hub keeps running, and print "
                    "their passwords once. " + AS_ROOT,
        examples=(".venv/bin/perflab workshop add-learners dave",
                  "sudo .venv/bin/perflab workshop add-learners dave erin"))
    p.add_argument("learners", nargs="+", metavar="LEARNER", help="the new learners' names")
    p.set_defaults(func=cmd_add_learners)

    p = verbs.add_parser(
        "status", help="the hub and each learner's server",
        description="Whether the hub runs, its URL and dashboard, and each learner's server with its last "
                    "activity (and CPUs, where reserved). " + AS_ROOT,
        examples=(".venv/bin/perflab workshop status", "sudo .venv/bin/perflab workshop status --json"))
    p.add_argument("--json", action="store_true", help="the same as JSON")
    p.set_defaults(func=cmd_status)

    p = verbs.add_parser(
        "regrade", help="grade again, as each learner, what their progress file calls passed",
        description="Grade again each exercise a learner's progress file calls passed (every exercise with "
                    "--all), from the notebook they saved, as their own user, never as root, and each learner's "
                    "case from its sealed seed. Their progress file is not touched; the outcomes go to the "
                    "dashboard. " + AS_ROOT,
        examples=(".venv/bin/perflab workshop regrade", ".venv/bin/perflab workshop regrade alice --all",
                  "sudo .venv/bin/perflab workshop regrade alice bob"))
    p.add_argument("learners", nargs="*", metavar="LEARNER", help="whose exercises (default: every learner's)")
    p.add_argument("--all", action="store_true", help="every exercise, not only those marked passed")
    p.set_defaults(func=cmd_regrade)

    p = verbs.add_parser(
        "cases", help="a sealed case for each learner, its seed kept where only root reads it",
        description="Write a case of its own seed into each learner's work/cases (every learner's when none is "
                    "named; a learner who has one keeps it), named by a number that says nothing of the seed. "
                    "The seeds stay in the workshop's state folder: the learner's own grade checks that their "
                    "service builds, `perflab workshop regrade` grades each cause, and `perflab case reveal` "
                    "shows the truth to root. About 10 s a learner. " + AS_ROOT,
        examples=(".venv/bin/perflab workshop cases", "sudo .venv/bin/perflab workshop cases alice bob"))
    p.add_argument("learners", nargs="*", metavar="LEARNER", help="who gets one (default: every learner)")
    p.set_defaults(func=cmd_cases)

    p = verbs.add_parser(
        "down", help="stop it all, remove the learners' users, restore the machine",
        description="First export every learner's ~/work and the class's grades to a folder only root reads "
                    "(/var/lib/perflab-workshop-exports/), then stop JupyterHub and every learner's server, remove "
                    "the learners' users, home folders and cgroups and the workshop's state folder, and check that "
                    "no port is left listening. Safe to run again after a failure: it finishes what is left. "
                    + AS_ROOT,
        examples=(".venv/bin/perflab workshop down", "sudo .venv/bin/perflab workshop down",
                  ".venv/bin/perflab workshop down --no-export   # the learners' work is discarded"))
    p.add_argument("--no-export", action="store_true", help="discard the learners' work instead of exporting it")
    p.set_defaults(func=cmd_down)


def _add_up(verbs) -> None:
    p = verbs.add_parser(
        "up", help="start the workshop: users, JupyterHub, the dashboard",
        description="Create one system user (and one cgroup, where the machine has them) per learner, start "
                    "JupyterHub with each learner's own JupyterLab and workspace, the measurement queue and the "
                    "class dashboard; print every login's password once. It listens on 127.0.0.1 unless --ip says "
                    "otherwise; serve beyond this machine only with TLS. After a crash or a reboot, `up` with no "
                    "names resumes the class as it was. " + AS_ROOT,
        examples=(".venv/bin/perflab workshop up alice bob carol",
                  ".venv/bin/perflab workshop up   # after a crash or a reboot: the same class, resumed",
                  "sudo .venv/bin/perflab workshop up alice bob carol   # the same, from an account with sudo",
                  ".venv/bin/perflab workshop up alice bob carol --reserve-cpus 4",
                  ".venv/bin/perflab workshop up alice bob carol --turn-limit 300",
                  ".venv/bin/perflab workshop up alice bob --ip 0.0.0.0 --port 443 "
                  "--ssl-cert cert.pem --ssl-key key.pem"))
    p.add_argument("learners", nargs="*", metavar="LEARNER", help="the learners' names (none: resume the class)")
    p.add_argument("--ip", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="the port learners open (default 8000)")
    p.add_argument("--ssl-cert", help="a PEM certificate: serve HTTPS (with --ssl-key)")
    p.add_argument("--ssl-key", help="the certificate's PEM key")
    p.add_argument("--reserve-cpus", type=int, default=0, metavar="N",
                   help="N CPUs of their own for each learner (not the first CPU), where the machine has enough; "
                        "each then measures without queueing behind the others")
    p.add_argument("--turn-limit", type=_seconds, metavar="SECONDS",
                   help="the longest any learner's turn to measure may take (default: each lab's budget in "
                        "labs/manifest.toml, and 600 s at most); a run still measuring then is ended and told why")
    p.set_defaults(func=cmd_up)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--turn-limit takes seconds, not {text!r}") from None
    if not 0 < seconds < 1e6:
        raise argparse.ArgumentTypeError(f"--turn-limit {text} is out of range: give more than 0 and under 1e6 seconds")
    return seconds


def cmd_up(args: argparse.Namespace) -> int:
    from ..workshop import hub

    if args.turn_limit:
        os.environ["PERFLAB_TURN_LIMIT_S"] = f"{args.turn_limit:g}"  # read where the queue starts, as when set by hand
    print("\n".join(hub.up(args.learners, args.ip, args.port, args.ssl_cert, args.ssl_key, args.reserve_cpus)))
    return 0


def cmd_add_learners(args: argparse.Namespace) -> int:
    from ..workshop import hub

    print("\n".join(hub.add_learners(args.learners)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..workshop import hub

    found = hub.status()
    print_json(found) if args.json else print(hub.render_status(found))
    return 0


def cmd_regrade(args: argparse.Namespace) -> int:
    from ..workshop.regrade import regrade

    lines = regrade(args.learners, args.all, say=lambda line: print(line, file=sys.stderr, flush=True))
    print("\n".join(lines) if lines else "nothing to re-grade: no learner's progress file calls an exercise passed")
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    from ..cases.workshop import give_cases

    print("\n".join(give_cases(args.learners, say=lambda line: print(line, file=sys.stderr, flush=True))))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from ..workshop import export, hub

    lines = ([] if args.no_export else export.before_down()) + hub.down()
    print("\n".join(lines) if lines else "perflab workshop: nothing was left to remove")
    return 0
