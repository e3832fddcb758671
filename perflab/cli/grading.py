"""`perflab grade`, `hint`, `reset` and `progress`: a learner's exercises."""

from __future__ import annotations

import argparse

from .common import print_json


def add_commands(commands) -> None:
    p = commands.add_parser(
        "grade", help="grade an exercise notebook",
        description="Run your copy of an exercise notebook (work/exercises/...) from the top in a fresh kernel, "
                    "check what it produced, and record a pass or a failure in your progress file. Each failed "
                    "grade opens one more hint (`perflab hint`). Exit code 0 when it passed, 1 when it did not.",
        examples=("perflab grade c2c-harmonic-mean", "perflab grade c2c-pipeline-pinning --json",
                  "perflab grade c2c-measure-pair --notebook my-copy.ipynb"))
    p.add_argument("exercise", help="exercise name, as in exercises/manifest.toml (`perflab list` shows them)")
    p.add_argument("--notebook", help="grade this notebook instead of your copy in work/exercises/ "
                                      "(recorded as progress only if it is that copy)")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="stop the grade when it has run this long: graded as failed "
                        "(default: the exercise's budget from exercises/manifest.toml)")
    p.add_argument("--no-record", action="store_true",
                   help="leave progress as it is (an instructor's re-grade, an author's check)")
    p.add_argument("--json", action="store_true", help="print each check as JSON")
    p.set_defaults(func=cmd_grade)

    p = commands.add_parser(
        "hint", help="the hints of an exercise (one more after each failed grade)",
        description="The hints of an exercise opened so far: the first from the start, one more after each "
                    "failed grade.",
        examples=("perflab hint c2c-harmonic-mean", "perflab hint alignment-slow-build --all"))
    p.add_argument("exercise", help="exercise name, as `perflab list` shows it")
    p.add_argument("--all", action="store_true", help="every hint opened so far, not only the latest")
    p.set_defaults(func=cmd_hint)

    p = commands.add_parser(
        "reset", help="a fresh copy of an exercise notebook; yours is kept in work/.backup/",
        description="Replace your copy of an exercise notebook in work/exercises/ with a fresh one; yours is "
                    "moved to work/.backup/ first. Your progress is not touched.",
        examples=("perflab reset c2c-harmonic-mean",))
    p.add_argument("exercise", help="exercise name, as `perflab list` shows it")
    p.set_defaults(func=cmd_reset)

    p = commands.add_parser(
        "progress", help="which exercises you have passed",
        description="Every exercise with its status, from your progress file (work/progress.txt: plain text you "
                    "can read); --reset forgets it all.",
        examples=("perflab progress", "perflab progress --reset"))
    p.add_argument("--reset", action="store_true", help="forget all progress")
    p.set_defaults(func=cmd_progress)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout takes seconds, not {text!r}") from None
    if not 1 <= seconds <= 86400:
        raise argparse.ArgumentTypeError(f"--timeout {text} is out of range: give 1 to 86400 seconds")
    return seconds


def cmd_grade(args: argparse.Namespace) -> int:
    from ..grading import grade

    report = grade(args.exercise, notebook=args.notebook, record=not args.no_record, timeout=args.timeout)
    if args.json:
        print_json(report.to_json())
    else:
        print(report.render())
    return 0 if report.status == "passed" else 1


def cmd_hint(args: argparse.Namespace) -> int:
    from ..grading import next_hint
    from ..manifest.exercises import load_manifest

    exercise = load_manifest().find(args.exercise)
    shown = next_hint(exercise)
    if shown is None:
        print(f"{exercise.name} has no hints; its notebook says what to do")
        return 0
    opened = shown[0]
    first = 1 if args.all else opened
    for number in range(first, opened + 1):
        print(f"hint {number} of {len(exercise.hints)}: {exercise.hints[number - 1]}")
    if opened < len(exercise.hints) and not args.all:
        print("(each failed grade opens one more hint; --all shows them all)")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from ..manifest.exercises import load_manifest
    from ..workspace import reset

    exercise = load_manifest().find(args.exercise)
    backup = reset(exercise.exercise_path, exercise.learner_path)
    print(f"{exercise.learner_path}: a fresh copy" + (f"; yours is kept in {backup}" if backup else ""))
    print("reload it in JupyterLab (File > Reload Notebook from Disk) before you go on")
    return 0


def cmd_progress(args: argparse.Namespace) -> int:
    from ..grading import progress
    from ..overview import exercise_rows, render_exercises

    if args.reset:
        progress.reset()
        print(f"progress reset ({progress.progress_path()})")
    else:
        print(render_exercises(exercise_rows()))
    return 0
