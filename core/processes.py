"""Ending a child process: asked first, then made to."""

from __future__ import annotations

import subprocess
from typing import Any


def end(process: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within `grace` seconds;
    nothing if it has exited already."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
