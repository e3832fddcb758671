"""The book builds with mdBook, its code comes from real files, and a typo in SUMMARY fails the build; every lab
chapter opens with what it teaches, and links each glossary term where it first uses it.

The chapter checks are functions that return the problems they find, so the tests at the end can show that each
one fails on a broken copy."""

from __future__ import annotations

import re
import shutil
import subprocess
from itertools import dropwhile, takewhile
from pathlib import Path

import pytest

from conftest import REPO
from perflab.manifest.labs import labs

MDBOOK = REPO / ".tools" / "bin" / "mdbook"
needs_mdbook = pytest.mark.skipif(not MDBOOK.exists(),
                                  reason="mdBook is not installed: run `make test`, which installs it")
SRC = REPO / "book" / "src"
GLOSSARY = SRC / "reference" / "glossary.md"
LABS_WITH_A_CHAPTER = [lab for lab in labs() if (SRC / lab.chapter).exists()]
OPENING = ("**You will be able to**", "**It assumes**", "**It takes about**")
# Each glossary entry's id, and how a chapter writes the term in the sense the entry defines: a plain-English
# "where to look" or a "round trip" is not the term.
TERMS = {
    "arm": r"\barms?\b",
    "cache-line": r"\b[Cc]ache[ -]lines?\b",
    "ccx-ccd": r"\bCC[XD]s?\b",
    "first-touch": r"\b[Ff]irst[ -]touch",
    "icount": r"(?<![\w-])icount\b",
    "ipi": r"\bIPIs?\b",
    "llc": r"\bLLCs?\b",
    "look": r"\b(?:each|every|per|first|last)[ -]looks?\b|\blooks of\b",
    "numa-node": r"\bNUMA nodes?\b",
    "pebs-ibs-spe": r"\b(?:PEBS|IBS|SPE)\b",
    "race": r"\brac(?:e|es|ed|ing)\b",
    "round": r"\brounds?\b(?! trips?)",
    "seed-case": r"\b[Ss]eed(?:'s)?\b",
    "smt": r"\bSMT\b",
    "softirq": r"\bsoftirqs?\b",
    "store-buffer": r"\bstore buffers?\b",
    "tcg": r"\bTCG\b",
    "tlb-shootdown": r"\b(?:TLB )?shootdowns?\b",
}


def _build(book, out):
    return subprocess.run(
        [str(MDBOOK), "build", str(book), "-d", str(out)], capture_output=True, text=True, timeout=120
    )


@needs_mdbook
def test_book_builds_with_included_code(tmp_path):
    done = _build(REPO / "book", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    chapter = (tmp_path / "out" / "labs" / "01-core-to-core.html").read_text()
    assert "cas_hand_over" in chapter, "the ping-pong code is included from labs/01-core-to-core/pingpong.c"
    for page in (tmp_path / "out").rglob("*.html"):
        assert "{{#include" not in page.read_text(), f"{page}: an include did not resolve"
    glossary = (tmp_path / "out" / "reference" / "glossary.html").read_text()
    assert all(f'id="{entry}"' in glossary for entry in glossary_entries()), "mdBook did not keep the entries' ids"


@needs_mdbook
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


# --- the chapter checks ----------------------------------------------------------------------------------

def glossary_entries(glossary: Path = GLOSSARY) -> list[str]:
    return re.findall(r"^## .*\{#([\w-]+)\}$", glossary.read_text(), re.M)


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group())


def _prose(text: str) -> str:
    """The text with code, headings and link targets blanked to spaces, so positions stay where they were."""
    text = re.sub(r"^```.*?^```", _blank, text, flags=re.S | re.M)
    text = re.sub(r"^#{1,6} .*$", _blank, text, flags=re.M)
    text = re.sub(r"`[^`\n]*`", _blank, text)
    return re.sub(r"(?<=\]\()[^)\s]*(?=\))", _blank, text)


def _glossary_links(text: str) -> list[tuple[int, int, str]]:
    """Each link into the glossary: where its text starts and ends, and the entry it names."""
    return [(m.start(1), m.end(1), m.group(2))
            for m in re.finditer(r"\[([^\]]+)\]\((?:\.\./reference/)?glossary\.md#([\w-]+)\)", text)]


def opening_problems(lab, src: Path = SRC) -> list[str]:
    """The chapter opens, under its heading, with a quoted block: what the learner will be able to do, what it
    assumes (with links into the book: an earlier lab, getting started, the reference, the glossary), and about
    how long it takes."""
    chapter = src / lab.chapter
    below_heading = dropwhile(lambda line: not line.strip(), chapter.read_text().splitlines()[1:])
    quoted = "\n".join(line[1:].strip() for line in takewhile(lambda line: line.startswith(">"), below_heading))
    paragraphs = [p.replace("\n", " ") for p in quoted.split("\n\n")]
    if len(paragraphs) != len(OPENING) or not all(p.startswith(label) for p, label in zip(paragraphs, OPENING)):
        return [f"{lab.chapter} does not open with the block {' / '.join(OPENING)} (one quoted paragraph each)"]
    problems = []
    links = re.findall(r"\]\(([^)\s]+)\)", paragraphs[1])
    if not links:
        problems.append(f"{lab.chapter}: what it assumes links no earlier chapter and no glossary entry")
    for link in links:
        target = (chapter.parent / link.split("#")[0]).resolve()
        earlier = re.match(r"(\d\d)-", target.name)
        if not target.is_file() or (target.parent.name == "labs" and earlier and int(earlier[1]) >= lab.number):
            problems.append(f"{lab.chapter}: it assumes {link}, which is not in the book or not an earlier lab")
    if not re.match(r"\*\*It takes about\*\* \d+ (?:minutes|hours?)\b", paragraphs[2]):
        problems.append(f"{lab.chapter}: say how long it takes as 'about N minutes' or 'about N hours'")
    return problems


def first_use_problems(lab, src: Path = SRC) -> list[str]:
    """The first time the chapter uses a glossary term, the term links its entry."""
    text = (src / lab.chapter).read_text()
    prose, links = _prose(text), _glossary_links(text)
    problems = []
    for entry, pattern in TERMS.items():
        first = re.search(pattern, prose)
        if first and not any(s <= first.start() and first.end() <= e and to == entry for s, e, to in links):
            line = text.count("\n", 0, first.start()) + 1
            problems.append(f"{lab.chapter}:{line}: the first {first.group()!r} does not link glossary.md#{entry}")
    return problems


def glossary_link_problems(src: Path = SRC) -> list[str]:
    """Every link into the glossary names an entry it has, and every term the checks look for has an entry."""
    glossary = src / "reference" / "glossary.md"
    entries = glossary_entries(glossary)
    problems = [f"the glossary has no entry {term!r}" for term in TERMS if term not in entries]
    problems += [f"the glossary links its own #{to}, which it does not have"
                 for to in re.findall(r"\]\(#([\w-]+)\)", glossary.read_text()) if to not in entries]
    problems += [f"the glossary's entry {entry!r} is not in TERMS: say how a chapter writes it"
                 for entry in entries if entry not in TERMS]
    for page in sorted(src.rglob("*.md")):
        problems += [f"{page.relative_to(src)} links glossary.md#{to}, which has no entry"
                     for _, _, to in _glossary_links(page.read_text()) if to not in entries]
    return problems


# --- every chapter ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lab", LABS_WITH_A_CHAPTER, ids=lambda lab: lab.name)
def test_every_lab_chapter_opens_with_what_it_teaches(lab):
    assert opening_problems(lab) == []


@pytest.mark.parametrize("lab", LABS_WITH_A_CHAPTER, ids=lambda lab: lab.name)
def test_every_lab_chapter_links_each_glossary_term_where_it_first_uses_it(lab):
    assert first_use_problems(lab) == []


def test_every_glossary_link_and_term_has_its_entry():
    assert glossary_link_problems() == []


# --- the checks can fail ----------------------------------------------------------------------------------

def _copy_of_the_book(tmp_path: Path) -> Path:
    shutil.copytree(SRC, tmp_path / "src")
    return tmp_path / "src"


@pytest.mark.parametrize("old, new, blamed", [
    ("> **It takes about**", "> **It takes**", "does not open with the block"),
    ("> **It assumes** [Lab 1](01-core-to-core.md)", "> **It assumes** [Lab 3](03-first-core-ipi.md)",
     "not an earlier lab"),
    ("> **It takes about** 90 minutes", "> **It takes about** an afternoon", "say how long it takes"),
])
def test_a_chapter_without_its_opening_block_is_caught(tmp_path, old, new, blamed):
    src = _copy_of_the_book(tmp_path)
    lab = next(lab for lab in LABS_WITH_A_CHAPTER if lab.name == "inclusive-llc")
    assert opening_problems(lab, src) == []
    chapter = src / lab.chapter
    assert old in chapter.read_text()
    chapter.write_text(chapter.read_text().replace(old, new))
    problems = opening_problems(lab, src)
    assert len(problems) == 1 and blamed in problems[0], problems


def test_a_first_use_without_its_link_and_a_link_without_its_entry_are_caught(tmp_path):
    src = _copy_of_the_book(tmp_path)
    lab = next(lab for lab in LABS_WITH_A_CHAPTER if lab.name == "page-table-levels")
    chapter = src / lab.chapter
    chapter.write_text(re.sub(r"\[TCG\]\(\.\./reference/glossary\.md#tcg\)", "TCG", chapter.read_text(), count=1))
    problems = first_use_problems(lab, src)
    assert len(problems) == 1 and "glossary.md#tcg" in problems[0], problems
    glossary = src / "reference" / "glossary.md"
    glossary.write_text(glossary.read_text().replace("{#tcg}", "{#qemu-tcg}"))
    problems = glossary_link_problems(src)
    assert "the glossary has no entry 'tcg'" in problems and any("links glossary.md#tcg" in p for p in problems)
