"""Plugin files tried in a child process before the lab imports them into its own.

A plugin runs code at import: one that loops forever, or calls `sys.exit`, would take
down whichever process imported it (the engine, a CLI). Each file is first imported by a
child process with a deadline; only a file that imports there cleanly is imported here.
A plugin folder, or file, that other users can write to, and a link that leads out of
the folder, are refused outright: whoever can change them could run code as the lab.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from core.store.paths import PROJECT_ROOT

#: A plugin imports TensorFlow and Keras: 3-4 s here when idle, 6-7 s while the test suite
#: loads both cores; three times that, so that only a plugin that hangs is skipped.
PROBE_SECONDS = 20.0
_PROBE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("optlab_plugin_probe", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["optlab_plugin_probe"] = module
spec.loader.exec_module(module)
"""


def unsafe(path: Path) -> str | None:
    """Why the plugins folder or file `path` must not be loaded, or None."""
    if path.is_symlink():
        return "is a link: only files inside the plugins folder are loaded"
    mode = path.stat().st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"can be written by other users (mode {stat.filemode(mode)}): refusing to load "
            "plugins from it, as ssh refuses such keys"
        )
    return None


def probe(path: Path, timeout: float | None = None) -> str | None:
    """None if importing `path` in a child process ends cleanly within `timeout` seconds
    (default `PROBE_SECONDS`); else why it does not."""
    timeout = PROBE_SECONDS if timeout is None else timeout
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path)],
            cwd=PROJECT_ROOT,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"did not finish importing within {timeout:g} s (tried in a child process)"
    if done.returncode == 0:
        return None
    last = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
    return f"failed to import: {last[0]}"
