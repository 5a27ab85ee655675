"""The command line, called in this process as a shell would call it."""

from __future__ import annotations

import contextlib
import io

from core.cli import main


def run_main(*argv: object) -> tuple[int, str, str]:
    """`main(argv)` with its stdout and stderr captured: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()
