"""The command line, called in this process as a shell would call it."""

from __future__ import annotations

import contextlib
import io
import os

from core.cli import main


def run_main(*argv: object) -> tuple[int, str, str]:
    """`main(argv)` with its stdout and stderr captured: (exit status, stdout, stderr).
    As from a shell, the command's changes to the environment (the thread pools an engine
    chooses) end with it, rather than reach the engines later tests start."""
    out, err = io.StringIO(), io.StringIO()
    environment = dict(os.environ)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(arg) for arg in argv])
    finally:
        for added in os.environ.keys() - environment.keys():
            del os.environ[added]
        os.environ.update(environment)
    return code, out.getvalue(), err.getvalue()
