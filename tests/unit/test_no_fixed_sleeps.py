"""The tests wait for conditions, never for a fixed time: no `time.sleep`, `asyncio.sleep`
or Playwright `wait_for_timeout` in tests/ outside `tests.waiting`, the one harness.

A sleep long enough on its author's machine is too short on a loaded CI runner (the
flakes of issue 58) and wasted time on an idle one. The scan reads each file's syntax
tree, not its text: a sleep in a comment, or in a string of code that a child process
runs (a plugin that hangs, a process that holds a lock), is not the test's own wait.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HARNESS = TESTS / "waiting.py"
SLEEPS = {("time", "sleep"), ("asyncio", "sleep")}
# The one sleep that is what a test measures, by the function that holds it.
ALLOWED = {
    # A stack sampler charges a built-in that blocks with no Python frame (sleep, which
    # lets go of the GIL for the sampler's thread) to the anchor that called it.
    ("system/test_bench.py", "test_the_sampler_charges_time_to_the_call_the_anchor_is_in"),
}


class _Sleeps(ast.NodeVisitor):
    """The fixed sleeps of one module, as (line, function or "", what)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str, str]] = []
        self.modules: dict[str, str] = {}  # a local name -> the module it names
        self.functions: dict[str, str] = {}  # a local name -> "module.sleep"
        self.within: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.modules[alias.asname or alias.name] = alias.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if (node.module, alias.name) in SLEEPS:
                self.functions[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.within.append(node.name)
        self.generic_visit(node)
        self.within.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Named, not only called: `partial(time.sleep, 1)` sleeps as surely.
        if isinstance(node.value, ast.Name) and (
            (self.modules.get(node.value.id), node.attr) in SLEEPS
        ):
            self._add(node, f"{self.modules[node.value.id]}.{node.attr}")
        elif node.attr == "wait_for_timeout":  # Playwright's page or frame
            self._add(node, ".wait_for_timeout")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.functions:
            self._add(node, self.functions[node.id])

    def _add(self, node: ast.expr, what: str) -> None:
        self.found.append((node.lineno, self.within[0] if self.within else "", what))


def fixed_sleeps(source: str) -> list[tuple[int, str, str]]:
    """The fixed sleeps in `source`, a module's code: (line, top-level function, what)."""
    sleeps = _Sleeps()
    sleeps.visit(ast.parse(source))
    return sleeps.found


def test_no_test_sleeps_outside_the_harness() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == HARNESS:
            continue
        name = str(path.relative_to(TESTS))
        for line, function, what in fixed_sleeps(path.read_text()):
            if (name, function) not in ALLOWED:
                found.append(f"tests/{name}:{line}: {what}")
    assert found == [], "wait for a condition (tests.waiting.wait_for), not a fixed time"


def test_each_allowed_sleep_is_still_there() -> None:
    """An allowance outlives its sleep silently otherwise, free for the next one."""
    for name, function in ALLOWED:
        sleeps = fixed_sleeps((TESTS / name).read_text())
        assert [what for _, within, what in sleeps if within == function], (name, function)


def test_the_scan_finds_sleeps_by_any_name_and_none_in_text() -> None:
    source = '''
import time
import time as clock
import asyncio
from time import sleep
from time import sleep as nap
import functools

# time.sleep(1) in a comment
CHILD = "import time; time.sleep(60)"  # code a child process runs

def test_it(page):
    """Never time.sleep(1) here."""
    time.sleep(0.1)
    clock.sleep(0.1)
    sleep(0.1)
    nap(0.1)
    functools.partial(time.sleep, 0.1)

async def test_async(page):
    await asyncio.sleep(0.1)
    page.wait_for_timeout(100)
    time.monotonic()
'''
    lines = source.splitlines()
    assert [(lines[n - 1].strip(), f, what) for n, f, what in fixed_sleeps(source)] == [
        ("time.sleep(0.1)", "test_it", "time.sleep"),
        ("clock.sleep(0.1)", "test_it", "time.sleep"),
        ("sleep(0.1)", "test_it", "time.sleep"),
        ("nap(0.1)", "test_it", "time.sleep"),
        ("functools.partial(time.sleep, 0.1)", "test_it", "time.sleep"),
        ("await asyncio.sleep(0.1)", "test_async", "asyncio.sleep"),
        ("page.wait_for_timeout(100)", "test_async", ".wait_for_timeout"),
    ]
