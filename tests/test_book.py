"""The book builds with mdBook, its code comes from real files, and a typo in SUMMARY fails the build."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import REPO

MDBOOK = REPO / ".tools" / "bin" / "mdbook"
pytestmark = pytest.mark.skipif(not MDBOOK.exists(), reason="mdBook is not installed: run `make test`, which installs it")


def _build(book, out):
    return subprocess.run([str(MDBOOK), "build", str(book), "-d", str(out)], capture_output=True, text=True, timeout=120)


def test_book_builds_with_included_code(tmp_path):
    done = _build(REPO / "book", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    chapter = (tmp_path / "out" / "labs" / "01-core-to-core.html").read_text()
    assert "cas_hand_over" in chapter, "the ping-pong code is included from labs/01-core-to-core/pingpong.c"
    for page in (tmp_path / "out").rglob("*.html"):
        assert "{{#include" not in page.read_text(), f"{page}: an include did not resolve"


def test_summary_typo_fails_the_build(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(REPO / "book", book, ignore=shutil.ignore_patterns("build"))
    for folder in ("labs", "perflab"):  # the included files, at the same relative place
        (tmp_path / folder).symlink_to(REPO / folder)
    assert _build(book, tmp_path / "before").returncode == 0, "the unchanged copy builds"
    summary = book / "src" / "SUMMARY.md"
    summary.write_text(summary.read_text() + "- [Typo](labs/no-such-page.md)\n")
    done = _build(book, tmp_path / "after")
    assert done.returncode != 0 and not (book / "src" / "labs" / "no-such-page.md").exists()
