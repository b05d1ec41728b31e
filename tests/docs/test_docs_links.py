"""Every relative link of the README, the CHANGELOG and the docs (docs/, examples/) leads
somewhere: its file exists, relative to the page that links it, and a ``#heading`` is a heading
of that page (as GitHub makes the anchor: lower case, punctuation dropped, spaces as hyphens)."""
import re
from pathlib import Path

import pytest

from conftest import REPO

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")  # [text](target), not an image
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").glob("**/*.md"))]


def prose_lines(page: Path):
    """(line number, line) of ``page`` outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def anchors(page: Path) -> set:
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for _, line in prose_lines(page) if line.startswith("#")}


def broken_links(page: Path, root: Path = REPO) -> list:
    """Each broken link of ``page``: its place (relative to ``root``), target and what is missing."""
    broken = []
    for number, line in prose_lines(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = page.parent / path if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(root)}:{number}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(root)}:{number}: {target}: no such heading in {path or 'the page'}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(page):
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# A heading, with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading-with-code) [gone](missing.md) [bad](other.md#nothing)\n"
                    "```\n[in code](ignored.md)\n```\n")
    assert broken_links(page, root=tmp_path) == [
        "page.md:1: missing.md: no such file", "page.md:1: other.md#nothing: no such heading in other.md"]
