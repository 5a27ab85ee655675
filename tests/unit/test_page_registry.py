"""The lab's pages have one registry, `ui.nav.PAGES` (issue 58, item 5): every script in
pages/ is an entry and every entry's script exists; the addresses users know (shared
links, bookmarks, the presenter's, the README's) are kept whatever the files are called;
and no other code writes a page's file or address: it names the page's entry
(`nav.LIVE.file`, `nav.LIVE.url`), so that renaming or moving a page is one line."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from ui import nav

ROOT = Path(__file__).resolve().parents[2]
#: Each page's address as users have it, by title. A page's file may be renamed; these
#: stay (this file and the registry are the only places they are written).
ADDRESSES = {
    "Home": "",
    "Train": "/Train",
    "Live": "/Live",
    "Compare": "/Compare",
    "Sweep": "/Sweep",
    "Optimizers": "/Optimizers",
    "Recipes": "/Recipes",
    "Playground": "/Playground",
}
#: The code that must name pages through the registry.
SCANNED = ("app.py", "pages", "ui", "core", "tests", "bench")
#: Where pages' files and addresses are written: the registry, and this file's pins.
REGISTRY = {(ROOT / "ui" / "nav.py").resolve(), Path(__file__).resolve()}


def _either(words: set[str]) -> str:
    return "|".join(sorted(map(re.escape, words)))


_NAMES = _either({Path(page.file).stem for page in nav.PAGES})
_PATHS = _either({page.url_path for page in nav.PAGES if page.url_path})
#: A page's file or address written out: `pages/live.py`, `live.py` (joined to a folder),
#: a numbered file of old (`2_Live.py`), `/Live` (`f"{url}/Live?runs=..."`, `"**/Live**"`)
#: and an address relative to the root (`"Live?runs=..."`). A bare `"Live"` is a title
#: as often as an address, and is left alone.
LITERAL = re.compile(
    rf"pages/\w+\.py|(?:^|[/\\])(?:{_NAMES})\.py\b|\b\d+_[A-Z]\w*\.py"
    rf"|/(?:{_PATHS})(?=$|[?#*&/\"'\\])|^(?:{_PATHS})\?"
)


def literals(source: str) -> Iterator[tuple[int, str]]:
    """Each string in the code of `source` with its line, an f-string's literal parts
    included; docstrings left out: prose may quote an address as a user types it."""
    tree = ast.parse(source)
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, documented)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        is_string = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_string and id(node) not in docstrings:
            yield node.lineno, node.value


def written_pages(source: str) -> list[tuple[int, str]]:
    """The strings of `source` that write a page's file or address out (`LITERAL`)."""
    return sorted((line, text) for line, text in literals(source) if LITERAL.search(text))


def test_every_page_file_is_an_entry_and_every_entry_has_its_file() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in (ROOT / "pages").glob("*.py")}
    entries = [page.file for page in nav.PAGES]
    assert len(set(entries)) == len(entries)
    assert set(entries) == files


def test_the_addresses_users_know_are_kept() -> None:
    assert {page.title: page.url for page in nav.PAGES} == ADDRESSES
    assert nav.PAGES[0] is nav.HOME  # the default page, at the root
    assert [page for page in nav.PAGES if page.presenters_only] == [nav.TRAIN]


def test_no_code_writes_a_pages_file_or_address_but_the_registry() -> None:
    files = [
        path
        for name in SCANNED
        for path in ([ROOT / name] if name.endswith(".py") else (ROOT / name).rglob("*.py"))
        if path.resolve() not in REGISTRY
    ]
    written = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in files
        for line, text in written_pages(path.read_text())
    ]
    assert written == [], "name the page by its entry in ui.nav (nav.LIVE.file, nav.LIVE.url)"


def test_the_scan_finds_each_way_of_writing_a_page() -> None:
    planted = '''
"""A docstring may say `/Live?runs=ID,ID`, as a user types it."""
a = "pages/live.py"
b = ROOT / "pages" / "optimizers.py"
c = "pages/2_Live.py"
d = f"{url}/Live?runs={run}"
e = "**/Live**"
f = (f"{url}/Compare", "Sweep?runs=x")
g = "Live"  # a title
h = "Live/Compare: Download .keras"  # a label
'''
    assert [line for line, _ in written_pages(planted)] == [3, 4, 5, 6, 7, 8, 8]
