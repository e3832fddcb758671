"""A workshop's learners as system users, made and removed through the journal like a kernel setting."""

from __future__ import annotations

import pwd
import subprocess

from ..errors import PerflabError
from ..knobs import KNOBS, Knob, run_as_root


class LearnerAccount(Knob):
    """A workshop learner's system user with a private home: learners cannot read each other's work.

    Journaled like a kernel setting, so `perflab workshop down` removes exactly the users it made.
    """

    kind = "learner_account"
    TARGET = r"perflab-[a-z][a-z0-9-]{0,23}"
    MEANINGS = {"absent": "no such user", "present": "a learner's user, home folder mode 0700"}

    @property
    def path(self) -> str:
        return "/etc/passwd"

    def read(self) -> str | None:
        try:
            pwd.getpwnam(self.target)
            return "present"
        except KeyError:
            return "absent"

    def write(self, value: str) -> None:
        if not self.root.is_live:
            raise PerflabError(f"{self.label}: system users exist only on the live machine, not in {self.root.root}")
        if value == "present":
            run_as_root(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash",
                         "--comment", "perflab workshop learner", self.target], "creating users", "passwd")
            home = pwd.getpwnam(self.target).pw_dir
            run_as_root(["chmod", "0700", home], "creating users", "coreutils")
        elif value == "absent":
            subprocess.run(
                ["pkill", "-KILL", "-u", self.target], capture_output=True
            )  # userdel refuses a user with processes
            run_as_root(["userdel", "--remove", self.target], "removing users", "passwd")
        else:
            raise PerflabError(f"{self.label}: the value is present or absent, not {value!r}")


KINDS = {**KNOBS, LearnerAccount.kind: LearnerAccount}  # what the workshop's journal of accounts may hold
