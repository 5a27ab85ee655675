"""Two threads parse at once, with a garbage collection in the middle of each tree's build:
unserialized, CPython before 3.13 raises `SystemError`; with `serialize_ast_parse`, never."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from core.training import ast_lock

# Each collection runs Python code that lets the other thread in (`time.sleep(0)` drops
# the GIL), as a finalizer can in a run's thread; collections come every 100 objects.
_RACE = textwrap.dedent(
    """
    import ast, gc, sys, threading, time
    from pathlib import Path

    from core.training.ast_lock import serialize_ast_parse

    if sys.argv[1] == "serial":
        serialize_ast_parse()
    source = Path(ast.__file__).read_text()
    errors = []
    gc.callbacks.append(lambda phase, info: time.sleep(0))
    gc.set_threshold(100)

    def parse() -> None:
        try:
            for _ in range(25):
                ast.parse(source)
                if errors:
                    return
        except SystemError as error:
            errors.append(error)

    threads = [threading.Thread(target=parse) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"errors: {len(errors)} {errors[:1]}")
    """
)


def _race(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _RACE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_parsing_in_two_threads_is_safe_once_serialized() -> None:
    assert _race("serial") == "errors: 0 []"


@pytest.mark.skipif(not ast_lock.NEEDED, reason="this Python keeps the depth per parse")
def test_the_race_shows_unserialized_on_this_python() -> None:
    """The control: the race above is the bug, not a harmless loop."""
    assert "AST constructor recursion depth mismatch" in _race("plain")


def test_serializing_twice_wraps_once() -> None:
    import ast

    plain = ast.parse
    try:
        ast_lock.serialize_ast_parse()
        once = ast.parse
        ast_lock.serialize_ast_parse()
        assert ast.parse is once
        assert ast.dump(ast.parse("x = 1")) == ast.dump(plain("x = 1"))
    finally:
        ast.parse = plain
