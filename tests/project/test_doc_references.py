"""The documentation's references hold: files the code names exist, links resolve.

A docstring or comment in ``memtui/`` that names a ``.md`` file names it by its
path in the repository (``docs/design.md``), and a "section N" of the design is a
numbered heading there. Every relative link of README.md, SECURITY.md and
docs/*.md reaches a file, and a ``#fragment`` a heading of it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 250

MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]*\w\.md)\b")
SECTIONS = re.compile(r"design\.md\s+sections?\s+(\d+)(?:\s*(?:and|,)\s*(\d+))*")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def code_mentions() -> list[tuple[Path, int, str]]:
    """Every ``*.md`` name in memtui's source, with where it is."""
    found = []
    for path in sorted((ROOT / "memtui").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in MD_NAME.findall(line):
                found.append((path, number, name))
    return found


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"\s", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def test_every_markdown_file_the_code_names_exists():
    mentions = code_mentions()
    assert mentions, "no file named in memtui/: the scan finds nothing"
    missing = [
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path, number, name in mentions
        if not (ROOT / name).is_file()
    ]
    assert not missing, "the code names files that are not in the repository:\n" + "\n".join(
        missing
    )


def test_every_design_section_the_code_names_is_a_heading_of_the_design():
    headings = set(re.findall(r"^## (\d+)\. ", (DOCS / "design.md").read_text(), re.M))
    named = []
    for path in sorted((ROOT / "memtui").rglob("*.py")):
        text = " ".join(path.read_text().split())
        for match in SECTIONS.finditer(text):
            named.extend((path, n) for n in re.findall(r"\d+", match.group(0)))
    assert named
    missing = [f"{path.relative_to(ROOT)}: section {n}" for path, n in named if n not in headings]
    assert not missing, "docs/design.md has no such section:\n" + "\n".join(missing)


def test_every_relative_link_of_the_docs_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            where, _, fragment = target.partition("#")
            linked = (page.parent / where).resolve() if where else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_short_and_links_every_page_of_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = set(LINK.findall(text))
    pages = sorted(DOCS.glob("*.md"))
    assert pages
    assert not [p.name for p in pages if f"docs/{p.name}" not in linked]
    assert "SECURITY.md" in linked


TEST_PATH = re.compile(r"\btests/[\w/*.-]+\.py\b")


def test_every_test_file_the_docs_name_exists():
    """SECURITY.md and the docs say which tests pin a claim: those files exist."""
    named = [(page, name) for page in PAGES for name in TEST_PATH.findall(page.read_text())]
    assert named, "no test file named in the docs: the scan finds nothing"
    missing = [
        f"{page.relative_to(ROOT)}: {name}" for page, name in named if not list(ROOT.glob(name))
    ]
    assert not missing, "the docs name test files that do not exist:\n" + "\n".join(missing)
