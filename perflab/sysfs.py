"""The one door to /sys and /proc.

Every read of kernel state goes through a `SysRoot`, and every write too
(only through perflab.knobs, which journals it), so tests can point the whole
package at a fixture tree (`tests/fixtures/machines/NAME/`) instead of the
live machine. Set PERFLAB_SYSROOT to do the same from the command line.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import PerflabError

CPU_DIR = "/sys/devices/system/cpu"


class SysRoot:
    """A directory that stands for `/`: "/" on the live machine, a fixture tree in tests."""

    def __init__(self, root: str | os.PathLike = "/"):
        self.root = Path(root)

    @property
    def is_live(self) -> bool:
        return self.root == Path("/")

    def path(self, path: str) -> Path:
        """Map an absolute kernel path such as /sys/devices/... into this root."""
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        """The file's text, stripped; None if it is missing or unreadable."""
        try:
            return self.path(path).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def read_int(self, path: str) -> int | None:
        text = self.read(path)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    def write(self, path: str, text: str) -> None:
        """Write `text` to an existing kernel file, as one write(2); a refusal is one line saying why."""
        try:
            fd = os.open(self.path(path), os.O_WRONLY | os.O_TRUNC)
        except OSError as err:
            raise PerflabError(f"cannot open {path} for writing: {_why(err)}") from None
        try:
            os.write(fd, text.encode())
        except OSError as err:
            raise PerflabError(f"the kernel refused {text!r} for {path}: {_why(err)}") from None
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        """Whether this user can see the path; False in a folder only root may look in (a mounted tracefs)."""
        try:
            return self.path(path).exists()
        except PermissionError:
            return False

    def hidden(self, path: str) -> bool:
        """Whether the folder exists but this user may not look in it (tracefs, mounted, is root's alone)."""
        folder = self.path(path)
        return folder.is_dir() and not os.access(folder, os.X_OK)

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory; empty if it is missing."""
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []


def _why(err: OSError) -> str:
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{err.strerror}; changing it needs root: run as root or with sudo"
    if err.errno == errno.ENOENT:
        return "no such file on this kernel"
    return err.strerror or str(err)


def default_root() -> SysRoot:
    root = os.environ.get("PERFLAB_SYSROOT", "/")
    if not Path(root, "sys").is_dir() and not Path(root, "proc").is_dir():
        raise PerflabError(f"PERFLAB_SYSROOT={root} has no sys/ or proc/ folder: point it at a machine tree "
                           "such as tests/fixtures/machines/intel-2s-smt, or unset it")
    return SysRoot(root)
