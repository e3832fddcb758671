"""Reading a learner's files as root, as the dashboard and the re-grade must: only what the learner owns.

Root may open anything, so a learner's link to another learner's results, or to a root-only file,
would be read as the learner's own, and a FIFO or a device in their place would block the reader.
Every path here is walked one component at a time from the learner's home, without following a
link; each folder and the file must be owned by the learner and sit on the home's own file system
(no mount of theirs, such as a FUSE file that never answers); the file must be a plain one, no
larger than the cap. Anything else reads as absent.
"""

from __future__ import annotations

import io
import os
import pwd
import signal
import stat
import subprocess
import tarfile
import time
from pathlib import Path

from .. import processes
from ..errors import PerflabError

RESULT_CAP = 64 << 20  # a lab's saved result with every raw sample is a few MiB
TEXT_CAP = 4 << 20  # a progress file, a written answers file, a notebook
EXPORT_CAP = 1 << 30  # one learner's work in `down`'s export: a day's notebooks and results are a few MiB
EXPORT_TIMEOUT_S = 120
GIVE_TIMEOUT_S = 60


class LearnerFiles:
    """The files below one learner's home, `home`, as that learner (`uid`) owns them."""

    def __init__(self, home: Path, uid: int):
        self.home, self.uid = Path(home), uid

    def read(self, relative: str, cap: int = TEXT_CAP) -> bytes | None:
        """The file's bytes, or None when it is missing, not a plain file of the learner's, or over `cap`."""
        *folders, name = Path(relative).parts
        folder = self._folder(folders)
        if folder is None:
            return None
        try:
            if not self._theirs(os.stat(name, dir_fd=folder, follow_symlinks=False), stat.S_ISREG, cap):
                return None
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=folder)
        except OSError:
            return None
        finally:
            os.close(folder)
        try:
            if not self._theirs(os.fstat(fd), stat.S_ISREG, cap):  # swapped between the look and the open
                return None
            data = os.read(fd, cap + 1)
            return data if len(data) <= cap else None
        finally:
            os.close(fd)

    def text(self, relative: str, cap: int = TEXT_CAP) -> str:
        """The file's text ("" when read() gives None): what a missing progress or answers file reads as."""
        data = self.read(relative, cap)
        return "" if data is None else data.decode(errors="replace")

    def names(self, relative: str) -> list[str]:
        """The entries of one of the learner's folders, sorted; [] when it is not one."""
        folder = self._folder(Path(relative).parts)
        if folder is None:
            return []
        try:
            return sorted(os.listdir(folder))
        finally:
            os.close(folder)

    def _folder(self, parts) -> int | None:
        """An open descriptor of the folder home/parts, each step a folder of the learner's; None otherwise."""
        try:
            fd = os.open(self.home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None
        self.device = os.fstat(fd).st_dev
        for part in parts:
            try:
                if part in ("..", "/") or not self._theirs(os.stat(part, dir_fd=fd, follow_symlinks=False),
                                                           stat.S_ISDIR):
                    raise OSError
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = inner
        return fd

    def _theirs(self, info: os.stat_result, kind, cap: int | None = None) -> bool:
        return (kind(info.st_mode) and info.st_uid == self.uid and info.st_dev == self.device
                and (cap is None or info.st_size <= cap))


def of(learner: str) -> LearnerFiles | None:
    """The learner's files, or None when their system user is gone."""
    from . import roster

    try:
        account = pwd.getpwnam(roster.system_user(learner))
    except KeyError:
        return None
    return LearnerFiles(Path(account.pw_dir), account.pw_uid)


def give(user: str, folder: Path, into: str) -> None:
    """Copy root's `folder` into ~user/`into`/ as the learner: tar unpacks it with their rights alone, so a link or
    a file they put in the way is theirs to fall into, never root's."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(folder, arcname=folder.name, filter=_as_plain_files)
    done = processes.run(["runuser", "-u", user, "--", "sh", "-c", 'mkdir -p -- "$1" && tar -x -C "$1"', "sh",
                          into], input=archive.getvalue(), text=False, cwd=pwd.getpwnam(user).pw_dir,
                         timeout=GIVE_TIMEOUT_S)
    if done.returncode != 0:
        said = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[0]
        raise PerflabError(f"cannot put {folder.name} in {user}'s ~/{into} ({said}): is it a folder of theirs?")


def export(user: str, relative: str, archive: Path, cap: int = EXPORT_CAP) -> str:
    """~user/`relative` as a gzipped tar in root's `archive`, packed by the learner's own tar (links stay links,
    FIFOs stay FIFOs, nothing the learner cannot read is read); "" when whole, else what was left out."""
    process = processes.start(["runuser", "-u", user, "--", "tar", "-cz", "--ignore-failed-read", "-C",
                               pwd.getpwnam(user).pw_dir, relative], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    written, deadline, whole = 0, time.monotonic() + EXPORT_TIMEOUT_S, False
    fd = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while written <= cap and time.monotonic() < deadline:
            chunk = process.stdout.read1(1 << 20)
            if not chunk:
                whole = True
                break
            written += os.write(fd, chunk)
        if whole:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:  # its output closed, but it never exited
                whole = False
    finally:
        os.close(fd)
        code = processes.stop(process, signal.SIGKILL, grace=0)
    if written > cap:
        return f"cut at {cap >> 20} MiB"
    if not whole:
        return f"cut after {EXPORT_TIMEOUT_S} s"
    return "" if code in (0, 1) else f"tar exited {code}"  # 1: a file changed while it was read


def _as_plain_files(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Only folders and plain files, owned by whoever unpacks them."""
    if not (member.isdir() or member.isfile()):
        return None
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member
