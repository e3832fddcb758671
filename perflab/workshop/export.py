"""What `perflab workshop down` keeps of a class before it removes the learners' homes.

One folder, root's alone, beside the state folder (/var/lib/perflab-workshop-exports/STAMP/):
each learner's ~/work as LEARNER.tar.gz, packed by the learner's own tar (perflab.workshop.learner_files),
the dashboard's table as class.csv (verdicts recomputed, beside the progress files and re-grades), the
re-grades themselves, and export.txt, which says what each archive holds and what was cut.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

from ..errors import PerflabError
from . import learner_files, roster
from .hub import require_root
from .regrade import regrades_path


def exports_dir() -> Path:
    state = roster.state_dir()
    return state.with_name(state.name + "-exports")


def before_down() -> list[str]:
    """What `perflab workshop down` does first: the class's export, and the line that says where; nothing when no
    class is set up here (down then says so itself)."""
    require_root("exporting a class reads every learner's work")
    workshop = roster.load()
    if workshop is None or not workshop.learners:
        return []
    return [f"exported every learner's work and the class's grades to {export_class(workshop)} (root's alone)"]


def export_class(workshop: roster.Workshop) -> Path:
    """Write the class's export; its folder. PerflabError (nothing removed yet) when it cannot be written."""
    from ..probe import probe
    from .dashboard import class_csv, class_state

    folder = exports_dir() / f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H%M%SZ}"
    try:
        exports_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(exports_dir(), 0o700)
        folder.mkdir(mode=0o700)
        said = []
        for learner in workshop.learners:
            if learner_files.of(learner) is None:
                said.append(f"{learner}: no system user left, nothing to export")
                continue
            cut = learner_files.export(roster.system_user(learner), "work", folder / f"{learner}.tar.gz")
            said.append(f"{learner}: ~/work in {learner}.tar.gz" + (f" ({cut})" if cut else ""))
        (folder / "class.csv").write_text(class_csv(class_state(list(workshop.learners), probe())))
        if regrades_path().exists():
            shutil.copyfile(regrades_path(), folder / "regrades.json")
        (folder / "export.txt").write_text("\n".join([f"perflab workshop at {workshop.url}, ended {folder.name}",
                                                      *said]) + "\n")
    except OSError as err:
        raise PerflabError(f"cannot write the class's export in {folder} ({err.strerror}): nothing was removed; "
                           "free some space and run `perflab workshop down` again, or `down --no-export` to "
                           "discard the learners' work") from None
    return folder
