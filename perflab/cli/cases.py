"""`perflab case new|list|hint|reveal`: an unknown slow program to diagnose and fix (`perflab grade case` grades it)."""

from __future__ import annotations

import argparse


def add_commands(commands) -> None:
    case = commands.add_parser(
        "case", help="a slow service to diagnose and fix with the course's tools",
        description="A case is a small multi-threaded C service, sessiond, whose new release is slow for two or "
                    "three reasons drawn from the course's labs (those this machine can show). Find each with the "
                    "tools, fix it, name it in diagnosis.toml, and `perflab grade case` races your fix against "
                    "the release. The book's part \"Cases\" says how to work one.",
        examples=("perflab case new", "perflab case new --seed 7", "perflab grade case", "perflab case hint",
                  "perflab case list"))
    verbs = case.add_subparsers(dest="case_command", required=True, metavar="VERB", title="verbs")

    p = verbs.add_parser(
        "new", help="write a new case to work/cases/case-SEED",
        description="Draw a case for this machine from SEED (random when not given), write it to "
                    "work/cases/case-SEED, build the release and the previous one, and time each (about 10 s) "
                    "for the symptom in its README.md. A case folder that exists is never overwritten.",
        examples=("perflab case new", "perflab case new --seed 7"))
    p.add_argument("--seed", type=_seed, help="the case's seed, 0 to 999999999: the same seed on a machine like "
                                              "this one makes the same case")
    p.set_defaults(func=cmd_new)

    p = verbs.add_parser(
        "list", help="your cases, each with its best grade",
        description="Every case in work/cases: when it was made, its best grade (a pass stays passed), and its "
                    "folder.",
        examples=("perflab case list",))
    p.set_defaults(func=cmd_list)

    p = verbs.add_parser(
        "hint", help="the hints of a case opened so far (one more after each failed grade)",
        description="The method first (which resource, where the time goes, which lab fits), then the part of "
                    "the release that still holds a cause your diagnosis.toml does not name.",
        examples=("perflab case hint", "perflab case hint case-7 --all"))
    p.add_argument("case", nargs="?", default="case", help="case-SEED (default: the newest case)")
    p.add_argument("--all", action="store_true", help="every hint opened so far, not only the latest")
    p.set_defaults(func=cmd_hint)

    p = verbs.add_parser(
        "reveal", help="the case's causes and the generator's fix (it spoils the case)",
        description="Print the causes the case planted and the generator's own fix as a diff of the release: "
                    "for instructors, and for learners who choose to stop. It changes nothing.",
        examples=("perflab case reveal case-7",))
    p.add_argument("case", help="case-SEED, as in work/cases/")
    p.set_defaults(func=cmd_reveal)


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed takes a number, not {text!r}") from None
    if not 0 <= seed < 10**9:
        raise argparse.ArgumentTypeError(f"--seed {text} is out of range: give 0 to 999999999")
    return seed


def cmd_new(args: argparse.Namespace) -> int:
    from ..cases.case import new_case

    case = new_case(args.seed)
    print(f"{case.name}: ready in {case.folder}; read its README.md, then `cd {case.folder} && make`")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from ..cases.case import all_cases
    from ..formatting import table
    from ..grading import progress

    cases, standing = all_cases(), progress.standing()
    if not cases:
        print("no case yet: `perflab case new` makes one")
        return 0
    rows = [[case.name, made, standing[case.name].status if case.name in standing else "not graded",
             str(case.folder)] for case, made in cases]
    print(table([["case", "made", "status", "folder"], *rows]))
    return 0


def cmd_hint(args: argparse.Namespace) -> int:
    from ..cases.case import find_case
    from ..cases.diagnosis import read_diagnosis
    from ..cases.hints import all_hints
    from ..errors import PerflabError
    from ..grading import progress

    case = find_case(args.case)
    try:
        named = read_diagnosis(case.folder / "diagnosis.toml")
    except PerflabError:
        named = []
    hints = all_hints(case, named, progress.failures(case.name))
    for number, hint in enumerate(hints, 1):
        if args.all or number == len(hints):
            print(f"hint {number}: {hint}")
    return 0


def cmd_reveal(args: argparse.Namespace) -> int:
    from ..cases.case import find_case
    from ..cases.reveal import truth

    print(truth(find_case(args.case)))
    return 0
