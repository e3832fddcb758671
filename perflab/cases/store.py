"""A workshop's sealed cases: each case's seed and learner, in the workshop's state folder, which only root can
read. A learner's case folder names the case by a number that says nothing of its seed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import PerflabError
from ..results import write_atomic
from ..workshop import roster


def store_path() -> Path:
    return roster.state_dir() / "cases.json"


def sealed_cases() -> dict[str, dict]:
    """number -> {"seed", "learner", "folder"}; PerflabError when it cannot be read (not root, or damaged)."""
    try:
        return json.loads(store_path().read_text())
    except FileNotFoundError:
        return {}
    except PermissionError:
        raise PerflabError("a workshop's case is sealed: only root reads its seed") from None
    except (OSError, ValueError) as err:
        raise PerflabError(f"cannot read {store_path()} ({err}): the workshop's cases are lost") from None


def seed_of(number: int) -> int | None:
    """The seed of sealed case `number`, or None for someone who may not read it (its learner)."""
    if os.geteuid() != 0:
        return None
    entry = sealed_cases().get(str(number))
    return int(entry["seed"]) if entry else None


def remember(number: int, seed: int, learner: str, folder: Path, cpus: tuple[int, ...]) -> None:
    cases = sealed_cases()
    cases[str(number)] = {"seed": seed, "learner": learner, "folder": str(folder), "cpus": list(cpus)}
    roster.state_folder()  # root's alone (0700) before the seeds are written in it
    write_atomic(store_path(), json.dumps(cases, indent=1) + "\n")
    os.chmod(store_path(), 0o600)
