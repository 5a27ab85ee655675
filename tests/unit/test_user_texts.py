"""What the dashboard says names ideas, not the lab's private history: no "the article's
TestGD" or "the seeds' reason for ε", which mean nothing to a user (issue 39, item 9)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOWN = ("app.py", "pages", "ui", "core", "plugins")  # where the dashboard's texts live
# The lab's founding documents, named as if a user had read them.
PRIVATE = re.compile(r"\bTestGD\b|\bseed articles?\b|\bseeds'|\barticle's\b", re.IGNORECASE)


def texts(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module that are not docstrings, with their lines."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_no_text_shown_speaks_of_the_articles_or_the_seeds() -> None:
    files = [
        path
        for name in SHOWN
        for path in ((ROOT / name).rglob("*.py") if (ROOT / name).is_dir() else [ROOT / name])
    ]
    private = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in files
        for line, text in texts(path)
        if PRIVATE.search(text)
    ]
    assert private == []
