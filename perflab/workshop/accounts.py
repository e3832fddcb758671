"""A workshop's learners as system users, made and removed through the journal like a kernel setting."""

from __future__ import annotations

import os
import pwd
import signal
import time

from ..errors import PerflabError
from ..knobs import KNOBS, Knob, run_as_root

EXIT_WAIT_S = 10.0  # a killed JupyterLab with a kernel or two takes some milliseconds to go; allow for a loaded machine
USERDEL_BUSY = 8  # userdel's exit code for a user that some process still runs as


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
            # A process can take the user between the last look and userdel (a runuser forking its child, a
            # learner's loop), so a busy refusal means end them again, until the deadline.
            deadline = time.monotonic() + EXIT_WAIT_S
            self._end_processes(deadline)
            while run_as_root(["userdel", "--remove", self.target], "removing users", "passwd",
                              passing=(0, USERDEL_BUSY)) == USERDEL_BUSY:
                time.sleep(0.05)
                self._end_processes(deadline)
                if time.monotonic() > deadline:
                    raise PerflabError(f"{self.label}: userdel still finds a process of the user after "
                                       f"{EXIT_WAIT_S:.0f} s of ending them, so the user stays (run `perflab "
                                       "workshop down` again)")
        else:
            raise PerflabError(f"{self.label}: the value is present or absent, not {value!r}")

    def _end_processes(self, deadline: float) -> None:
        """SIGKILL every process the user owns and wait until they are gone: userdel refuses a user with any
        process left, and a killed process is not gone when kill(2) returns (it still has to free its memory)."""
        uid = pwd.getpwnam(self.target).pw_uid
        while pids := self._processes_of(uid):
            if time.monotonic() > deadline:
                raise PerflabError(f"{self.label}: processes {', '.join(map(str, pids))} did not end within "
                                   f"{EXIT_WAIT_S:.0f} s of SIGKILL, so the user stays (run `perflab workshop down` "
                                   "again)")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def _processes_of(self, uid: int) -> list[int]:
        """The live processes with `uid` as their real, effective or saved user: userdel checks all three, and
        passes over zombies (dead, only not yet reaped by their parent)."""
        found = []
        for entry in self.root.listdir("/proc"):
            status = self.root.read(f"/proc/{entry}/status") if entry.isdigit() else None
            fields = dict(line.split(":", 1) for line in (status or "").splitlines() if ":" in line)
            if str(uid) in fields.get("Uid", "").split()[:3] and not fields.get("State", "").strip().startswith("Z"):
                found.append(int(entry))
        return found


KINDS = {**KNOBS, LearnerAccount.kind: LearnerAccount}  # what the workshop's journal of accounts may hold
