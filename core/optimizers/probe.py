"""Plugin files tried in a child process before the lab imports them into its own.

A plugin runs code at import: one that loops forever, or calls `sys.exit`, would take
down whichever process imported it (the engine, a CLI). The files are first imported by a
child process, one after another (TensorFlow imported once for all), each with a
deadline; only a file that imports there cleanly is imported here. A file that hangs or
kills the child is reported, and a new child tries the files after it. A plugin folder, or
file, that other users can write to, and a link that leads out of the folder, are refused
outright: whoever can change them could run code as the lab.

A clean import is remembered (in `cache_file()`) by the file's path and bytes and the
Python and TensorFlow it ran under; when every file imported cleanly before, unchanged, no
child is started: its TensorFlow import would cost every engine start and every CLI run of
a plugin seconds.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import queue
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

from core.store.paths import PROJECT_ROOT

#: A plugin imports TensorFlow and Keras: 3-4 s here when idle, 6-7 s while the test suite
#: loads both cores; three times that, so that only a plugin that hangs is skipped. Each
#: file has this long; the first also imports TensorFlow within it.
PROBE_SECONDS = 20.0
#: Environment variable naming the folder of the lab's caches (default `~/.cache/optlab`).
CACHE_VAR = "OPTLAB_CACHE"
#: Set in the child's environment: a plugin it imports imports `core.optimizers`, which
#: must not load (and so probe) the plugins folder again from inside the probe.
PROBING_VAR = "OPTLAB_PLUGIN_PROBE"
#: How many clean imports are remembered; the oldest are forgotten first.
CACHE_SIZE = 512
# The child: imports each file named on its command line, saying `MARK ok I` or
# `MARK failed I why` on its own line after each (a plugin's `sys.exit` included).
MARK = "optlab-plugin-probe:"
_PROBE = """
import importlib.util, sys, traceback
MARK = sys.argv.pop(1)
for index, path in enumerate(sys.argv[1:]):
    name = f"optlab_plugin_probe_{index}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        why = traceback.format_exception_only(type(exc), exc)[-1].strip().replace("\\n", " ")
        print(f"{MARK} failed {index} {why}", flush=True)
    else:
        print(f"{MARK} ok {index}", flush=True)
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


def probe(paths: Sequence[Path], timeout: float | None = None) -> dict[Path, str | None]:
    """For each of `paths`, None if importing it in a child process ends cleanly within
    `timeout` seconds (default `PROBE_SECONDS`); else why it does not. When every file
    imported cleanly before, unchanged, no child is started; else all are tried, in
    order, as they will be imported (a file may need what one before it registers)."""
    timeout = PROBE_SECONDS if timeout is None else timeout
    fingerprints = {path: fingerprint(path) for path in paths}
    if set(fingerprints.values()) <= set(_remembered()):
        return dict.fromkeys(paths)
    results: dict[Path, str | None] = {}
    remaining = list(paths)
    while remaining:
        tried = _probe_in_one_child(remaining, timeout)
        results |= tried
        remaining = remaining[len(tried) :]
    _remember(fingerprints[path] for path in paths if results[path] is None)
    return results


def cache_file() -> Path:
    """Where clean imports are remembered: `plugin-probes.json` in `$OPTLAB_CACHE`, else in
    `optlab/` of `$XDG_CACHE_HOME` (default `~/.cache`)."""
    folder = os.environ.get(CACHE_VAR) or (
        Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "optlab"
    )
    return Path(folder).expanduser() / "plugin-probes.json"


def fingerprint(path: Path) -> str | None:
    """What a clean import of `path` is remembered by (None if it cannot be read): its
    resolved path, its bytes, and the Python and TensorFlow versions."""
    digest = hashlib.sha256()
    try:
        for part in (str(path.resolve()), sys.version, _tensorflow_version()):
            digest.update(part.encode() + b"\0")
        digest.update(path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


@functools.cache
def _tensorflow_version() -> str:
    try:
        return metadata.version("tensorflow")
    except metadata.PackageNotFoundError:
        return "none"


def _remembered() -> list[str]:
    """The fingerprints of clean imports, oldest first; none from a cache file that
    others could write to (they could mark a file clean)."""
    path = cache_file()
    try:
        if unsafe(path.parent) or unsafe(path):
            return []
        clean = json.loads(path.read_text())["clean"]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # none yet, or unreadable: every file is tried
    return [item for item in clean if isinstance(item, str)] if isinstance(clean, list) else []


def _remember(fingerprints: Iterable[str | None]) -> None:
    """Adds clean imports to the cache file, written whole and swapped in (two processes
    that write at once each keep their own, and lose only a later probe's time)."""
    new = [item for item in fingerprints if item is not None]
    if not new:
        return
    path = cache_file()
    clean = [item for item in _remembered() if item not in new] + new
    with contextlib.suppress(OSError):  # a read-only home: the files are tried next time
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                json.dump({"clean": clean[-CACHE_SIZE:]}, file)
            os.replace(temporary, path)
        finally:
            Path(temporary).unlink(missing_ok=True)


def _probe_in_one_child(paths: list[Path], timeout: float) -> dict[Path, str | None]:
    """Imports `paths` in order in one child, until one hangs or ends the child (that
    one is the last in the result)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _PROBE, MARK, *map(str, paths)],
        cwd=PROJECT_ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", PROBING_VAR: "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line)
        lines.put(None)  # the child ended

    threading.Thread(target=read, name="optlab-plugin-probe", daemon=True).start()
    results: dict[Path, str | None] = {}
    try:
        while len(results) < len(paths):
            path = paths[len(results)]
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                results[path] = (
                    f"did not finish importing within {timeout:g} s (tried in a child process)"
                )
                break
            if line is None:  # the plugin ended the child itself (os._exit, a crash)
                child.wait()
                results[path] = (
                    f"failed to import: the process ended (exit status {child.returncode})"
                )
                break
            if not line.startswith(MARK):
                continue  # the plugin's own printing
            verdict, _, rest = line.removeprefix(MARK).strip().partition(" ")
            why = rest.partition(" ")[2]
            results[path] = None if verdict == "ok" else f"failed to import: {why}"
    finally:
        child.kill()
        child.wait()
    return results
