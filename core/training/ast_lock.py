"""`serialize_ast_parse()`: `ast.parse` one thread at a time, on Pythons where two threads
parsing at once can fail.

CPython before 3.13 keeps the depth that `ast.parse` counts while it builds a tree's Python
objects in the interpreter's state, shared by every thread (gh-106905). When a garbage
collection runs Python code in the middle of the build (a finalizer, a `gc.callbacks` entry)
and another thread parses meanwhile, the first finds its depth changed and raises
`SystemError: AST constructor recursion depth mismatch`. In the lab, runs trace their steps
in threads of one process, and autograph parses each function it converts; in the tests the
dashboard's script runner parses its pages beside them (with Streamlit's "magic"): a Train
page's start failed so on Python 3.11.7.

Parsing is rare (autograph's conversions, a page's first compile), so one lock costs nothing
one can see. `ast.parse` is wrapped in the module's namespace, where autograph (through
`gast`), Streamlit and the standard library look it up at each call.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

#: Whether this Python needs the lock: the shared depth is per call from 3.13 on.
NEEDED = sys.version_info < (3, 13)
_LOCK = threading.RLock()  # re-entered if a finalizer run inside a parse parses too


def serialize_ast_parse() -> None:
    """Wraps `ast.parse` in a process-wide lock where `NEEDED`; calling it again does
    nothing more."""
    if not NEEDED or getattr(ast.parse, "_optlab_serial", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def serial_parse(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return parse(*args, **kwargs)

    serial_parse._optlab_serial = True  # type: ignore[attr-defined]
    ast.parse = serial_parse
