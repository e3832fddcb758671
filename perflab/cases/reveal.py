"""The truth of a case, for `perflab case reveal` and for the author check: its causes in words, and the
generator's own fix written into the case folder as a learner would hand it in."""

from __future__ import annotations

import difflib

from . import source
from .case import Case
from .causes import KINDS


def truth(case: Case) -> str:
    """Each cause: its kind, where it is, the lab it comes from; then the fix as a diff of the release."""
    lines = [f"{case.name}: {len(case.causes)} causes"]
    for number, cause in enumerate(case.causes, 1):
        lines.append(f"  {number}. {cause.kind} in {' / '.join(cause.where)} ({cause.name}): {KINDS[cause.kind]}")
    for name, release, fixed in _files(case):
        lines += difflib.unified_diff(release.splitlines(), fixed.splitlines(), f"release/{name}", f"fixed/{name}",
                                      lineterm="")
    return "\n".join(lines)


def solve(case: Case) -> None:
    """Write the generator's fix and a diagnosis naming every cause into the case's folder."""
    for name, _, fixed in _files(case):
        (case.folder / name).write_text(fixed)
    blocks = [f'[[cause]]\nkind = "{c.kind}"\nwhere = "{c.where[0]}"\n'
              f'evidence = "the generator planted it ({c.name})"\nfix = "the generator\'s own fix"\n'
              for c in case.causes]
    (case.folder / "diagnosis.toml").write_text("\n".join(blocks))


def _files(case: Case) -> list[tuple[str, str, str]]:
    cpus = list(case.cpus)
    return [("service.c", case.release_source(), case.release_source(fixed=True)),
            ("start.sh", source.start_sh(case.causes, case.threads, cpus),
             source.start_sh(case.causes, case.threads, cpus, fixed=True))]
