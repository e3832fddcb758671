"""`perflab exercises generate|check`: for authors, the learners' notebooks and the author check."""

from __future__ import annotations

import argparse


def add_commands(commands) -> None:
    exercises = commands.add_parser(
        "exercises", help="for authors: generate learner notebooks, run the author check",
        description="For course authors: make the learners' notebooks in exercises/ from the reference "
                    "solutions in solutions/, and check that every solution passes and every untouched exercise "
                    "fails.",
        examples=("perflab exercises generate", "perflab exercises check"))
    verbs = exercises.add_subparsers(dest="exercises_command", required=True, metavar="VERB", title="verbs")

    p = verbs.add_parser(
        "generate", help="write each learner's notebook from its reference solution",
        description="Write each exercise's learner notebook in exercises/ from its reference solution in "
                    "solutions/, every BEGIN/END SOLUTION region replaced by its stub; print each notebook written.",
        examples=("perflab exercises generate",))
    p.set_defaults(func=cmd_generate)

    p = verbs.add_parser(
        "check", help="every solution passes, every untouched exercise fails",
        description="The author check: grade every reference solution (each must pass) and every untouched "
                    "learner notebook (each must fail), check that each learner notebook is what generate makes of its "
                    "solution, and that no notebook lacks a manifest entry. It measures, so it takes "
                    "minutes and queues for the measurement lock. Exit code 1 when a check fails.",
        examples=("perflab exercises check",))
    p.set_defaults(func=cmd_check)


def cmd_generate(args: argparse.Namespace) -> int:
    from ..grading import authoring

    for path in authoring.generate_all():
        print(path)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..grading import authoring

    problems = authoring.author_check()
    for problem in problems:
        print(problem)
    print("author check: " + ("FAILED" if problems else "every solution passes, every untouched exercise fails"))
    return 1 if problems else 0
