"""The project's documentation as tests read it: README.md and the pages in docs/.

A promise may move between the README and a page without its test changing: tests that
check what the documentation says read `text()`, the README first, then the pages by name
(so the README's code blocks come first, in its own order); a test of one page's section
reads `page(name)`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """README.md, then docs/*.md by name."""
    return [README, *sorted(DOCS.glob("*.md"))]


def text() -> str:
    """Every page's text, in `pages()`' order, each ending with a newline."""
    return "".join(path.read_text().rstrip("\n") + "\n\n" for path in pages())


def page(name: str) -> str:
    """The text of `docs/NAME` (e.g. "security.md")."""
    return (DOCS / name).read_text()
