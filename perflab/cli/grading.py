"""`perflab grade`, `hint`, `reset` and `progress`: a learner's exercises."""

from __future__ import annotations

import argparse
import sys

from ..errors import PerflabError
from .common import print_json


def add_commands(commands) -> None:
    p = commands.add_parser(
        "grade", help="grade an exercise notebook",
        description="Run your copy of an exercise notebook (work/exercises/...) from the top in a fresh kernel, "
                    "check what it produced and that each question in words has your answer, and record the grade "
                    "in your progress file (a pass stays passed). Each failed grade of your own copy opens one more "
                    "hint (`perflab hint`); a --no-record grade opens none. Exit code 0 when it passed, 1 when it "
                    "did not.",
        examples=("perflab grade c2c-harmonic-mean", "perflab grade c2c-pipeline-pinning --json",
                  "perflab grade c2c-measure-pair --notebook my-copy.ipynb", "perflab grade case"))
    p.add_argument("exercise", help="exercise name, as in exercises/manifest.toml (`perflab list` shows them); "
                                    "`case` grades your newest case, `case-SEED` that one")
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
        "reset", help="a fresh copy of an exercise notebook (yours kept in work/.backup/), and its progress if you say",
        description="Replace your copy of an exercise notebook in work/exercises/ with a fresh one; yours is "
                    "copied to work/.backup/ first. On a terminal it then asks whether to clear the exercise's "
                    "progress too: its grades, the hints they opened and its kept written answers; --progress or "
                    "--keep-progress answers for a script (without either and without a terminal, progress is "
                    "kept). --all does the same for the whole workspace: every exercise and lab notebook. It says "
                    "what it cleared.",
        examples=("perflab reset c2c-harmonic-mean", "perflab reset c2c-harmonic-mean --progress",
                  "perflab reset --all --keep-progress"))
    p.add_argument("exercise", nargs="?", help="exercise name, as `perflab list` shows it")
    p.add_argument("--all", action="store_true", help="every notebook of the workspace instead of one exercise")
    choice = p.add_mutually_exclusive_group()
    choice.add_argument("--progress", dest="clear_progress", action="store_true", default=None,
                        help="clear the progress too, without asking")
    choice.add_argument("--keep-progress", dest="clear_progress", action="store_false",
                        help="keep the progress, without asking")
    p.set_defaults(func=cmd_reset)

    p = commands.add_parser(
        "progress", help="which exercises you have passed",
        description="Every exercise with its status, from your progress file (work/progress.txt: plain text you "
                    "can read). The status is the best grade: a pass stays passed, and later grades are listed "
                    "beside it. --reset forgets it all, the written answers kept beside it too.",
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

    if _is_case(args.exercise):
        from ..cases.case import find_case
        from ..cases.grade import grade_case

        if args.notebook or args.timeout:
            raise PerflabError("a case is graded from its folder, in at most a minute: --notebook and --timeout "
                               "are for exercises")
        report = grade_case(find_case(args.exercise), record=not args.no_record)
    else:
        report = grade(args.exercise, notebook=args.notebook, record=not args.no_record, timeout=args.timeout)
    if args.json:
        print_json(report.to_json())
    else:
        print(report.render())
    return 0 if report.status == "passed" else 1


def _is_case(name: str) -> bool:
    return name == "case" or name.startswith("case-")


def cmd_hint(args: argparse.Namespace) -> int:
    from ..grading import next_hint
    from ..manifest.exercises import load_manifest

    if _is_case(args.exercise):
        from .cases import cmd_hint as case_hint

        return case_hint(argparse.Namespace(case=args.exercise, all=args.all))
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
    from ..workspace import course_notebooks, reset

    if bool(args.exercise) == args.all:
        raise PerflabError("give one exercise to reset, or --all for the whole workspace (not both)")
    exercises = load_manifest().exercises if args.all else (load_manifest().find(args.exercise),)
    notebooks = course_notebooks() if args.all else [(e.exercise_path, e.learner_path) for e in exercises]
    clear = args.clear_progress
    held = "" if clear is False else _progress_of(exercises)  # --keep-progress needs no readable progress file
    if clear is None and held and sys.stdin.isatty():  # asked before anything changes: Ctrl-C here changes nothing
        clear = _yes(f"Clear {'the whole workspace' if args.all else args.exercise}'s progress too ({held})? [y/N] ")
    replaced = False
    for course, mine in notebooks:
        backup = reset(course, mine)
        replaced |= backup is not None
        print(f"{mine}: a fresh copy" + (f"; yours is kept in {backup}" if backup else ""))
    if replaced:  # a first copy replaced nothing a notebook tab could be showing
        print("reload open notebooks in JupyterLab (File > Reload Notebook from Disk) before you go on")
    if clear is False and not held:
        print("progress kept, as --keep-progress says")
    elif not held:
        print("no progress recorded: nothing to clear")
    elif clear:
        _clear_progress(exercises, every=args.all)
        print(f"cleared: {held}; hints start again from the first")
    else:
        again = f"perflab reset {'--all' if args.all else args.exercise} --progress"
        print(f"progress kept ({held}); `{again}` clears it")
    return 0


def _progress_of(exercises) -> str:
    """What progress the exercises hold, in words: "3 grades, best passed; hint 2 of 3 opened; 1 written answer",
    or "" when none."""
    from ..grading import next_hint, progress, written

    standing, kept = progress.standing(), written.kept()
    graded = [e for e in exercises if e.name in standing]
    if not graded:
        return ""
    grades = sum(standing[e.name].grades for e in graded)
    hints = {e.name: next_hint(e) for e in graded}
    answers = sum(1 for e in graded for entry in kept.get(e.name, [])
                  if isinstance(entry, dict) and entry.get("answer"))
    if len(exercises) == 1:
        opened = hints[graded[0].name]
        said = [f"{grades} grade{'s' * (grades != 1)}, best {standing[graded[0].name].status}"]
        said += [f"hint {opened[0]} of {len(graded[0].hints)} opened"] if opened and opened[0] > 1 else []
    else:
        passed = sum(standing[e.name].status == "passed" for e in graded)
        said = [f"{grades} grades of {len(graded)} exercises, {passed} passed"]
        beyond = sum(opened[0] - 1 for opened in hints.values() if opened)
        said += [f"{beyond} hint{'s' * (beyond != 1)} opened beyond the first"] if beyond else []
    said += [f"{answers} written answer{'s' * (answers != 1)}"] if answers else []
    return "; ".join(said)


def _clear_progress(exercises, every: bool) -> None:
    """Forget the exercises' grades (and so the hints they opened) and their kept written answers."""
    from ..grading import progress, written

    if every:
        progress.reset()
        written.forget_all()
        return
    for exercise in exercises:
        progress.forget(exercise.name)
        written.forget(exercise.name)


def _yes(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:  # Ctrl-D: no
        print()
        return False


def cmd_progress(args: argparse.Namespace) -> int:
    from ..grading import progress
    from ..overview import exercise_rows, render_exercises

    if args.reset:
        from ..grading import written

        progress.reset()
        written.forget_all()
        print(f"progress reset ({progress.progress_path()}), with the written answers kept beside it")
    else:
        print(render_exercises(exercise_rows()))
    return 0
