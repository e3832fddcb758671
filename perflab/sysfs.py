"""The one door to /sys and /proc.

Every read of kernel state goes through a `SysRoot`, so tests can point the
whole package at a fixture tree (`tests/fixtures/machines/NAME/`) instead of
the live machine. Set PERFLAB_SYSROOT to do the same from the command line.
"""

from __future__ import annotations

import os
from pathlib import Path


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

    def exists(self, path: str) -> bool:
        return self.path(path).exists()

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory; empty if it is missing."""
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []


def default_root() -> SysRoot:
    return SysRoot(os.environ.get("PERFLAB_SYSROOT", "/"))
