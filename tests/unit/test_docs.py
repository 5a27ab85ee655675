"""The README stays a newcomer's page (issue 58): at most 400 lines, with a link to every
page of docs/; and no link of the README or of a page leads nowhere (a file, an image, a
heading of a page)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import docs

MAX_README_LINES = 400
# [text](target) and ![alt](target), outside code blocks; an address with a scheme is
# not ours to check.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped
    (hyphens and underscores kept), spaces made hyphens."""
    text = CODE_BLOCK.sub("", page.read_text())
    headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def links(page: Path) -> list[str]:
    return LINK.findall(CODE_BLOCK.sub("", page.read_text()))


def test_the_readme_is_at_most_400_lines() -> None:
    assert len(docs.README.read_text().splitlines()) <= MAX_README_LINES


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {target.split("#")[0] for target in links(docs.README)}
    pages = {f"docs/{page.name}" for page in docs.pages()[1:]}
    assert pages - linked == set()


def test_every_link_leads_to_a_file_and_heading() -> None:
    broken = []
    for page in docs.pages():
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_two_paths_name_real_files_in_their_picture_list_and_count() -> None:
    """docs/architecture.md's knob and statistic paths: each picture names the files its
    numbered list names, in order, every one a file of the repository, as many as the
    sentence above it says."""
    text = docs.page("architecture.md")
    start, end = text.index("## How a knob and a statistic"), text.index("### The counts")
    section = text[start:end]
    paths = re.split(r"^### ", section, flags=re.MULTILINE)[1:]
    assert len(paths) == 2
    for path in paths:
        said = int(re.search(r"crosses (\d+) files", path).group(1))
        picture = re.search(r"```mermaid\n(.*?)```", path, re.DOTALL).group(1)
        pictured = re.findall(r"<br/>([\w/.]+\.(?:py|js))", picture)
        listed = re.findall(r"^\d+\. `([\w/.]+)`", path, re.MULTILINE)
        assert pictured == listed
        assert len(listed) == said
        assert len(set(listed)) == said
        assert [name for name in listed if not (docs.ROOT / name).is_file()] == []
