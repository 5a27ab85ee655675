"""What issue 42 asked of the dashboard's code: every page is view code of at most ~200
lines, and neither a page nor a `ui/` module reaches through the engine to its store (they
are typed against `core.engine.api.Runs`, which answers what they need)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_PAGE_LINES = 200
DASHBOARD = [*sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]


def test_every_page_is_at_most_200_lines() -> None:
    long = {
        path.name: n
        for path in (ROOT / "pages").glob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_PAGE_LINES
    }
    assert long == {}


def test_no_page_or_ui_module_reads_a_store_attribute() -> None:
    reaching = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in DASHBOARD
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "store"
    ]
    assert reaching == []
