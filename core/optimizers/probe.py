"""Plugin files tried in a child process before the lab imports them into its own.

A plugin runs code at import: one that loops forever, or calls `sys.exit`, would take
down whichever process imported it (the engine, a CLI). The files are first imported by a
child process, one after another, each with a deadline; only a file that imports there
cleanly is imported here. A file that hangs or kills the child is reported, and a new
child tries the files after it. A plugin folder, or file, that other users can write to,
and a link that leads out of the folder, are refused outright: whoever can change them
could run code as the lab.

The deadline follows the machine (see `Deadline`): the child first imports Keras, which
every plugin imports, and times it; a machine loaded by other work, where that takes
12 s instead of 4, gives its plugins that much longer, so a plugin that is merely slow
there is not reported as broken.

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
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Final

from core.store.paths import PROJECT_ROOT


@dataclass(frozen=True)
class Deadline:
    """How long the child may take to import one plugin file: `factor` times what it took
    to import `yardstick` just before (the machine's speed now, measured in that child),
    and at least `floor` seconds; without a yardstick, `floor` seconds."""

    floor: float
    factor: float = 0.0
    yardstick: str | None = None

    def seconds(self, measured: float | None) -> float:
        """The deadline, given the seconds the yardstick's import took (None: not timed)."""
        return max(self.floor, self.factor * (measured or 0.0))

    def missed(self, measured: float | None) -> str:
        """Why a file that did not import in time is skipped: the deadline, and what set
        it (the floor, or the machine's speed)."""
        if self.yardstick is None or measured is None:
            why = "tried in a child process"
        else:
            scaled = (
                f"{self.factor:g}x the {measured:.1f} s this machine took to import "
                f"{self.yardstick} in the same child process"
            )
            why = scaled if self.factor * measured >= self.floor else f"the floor; {scaled} is less"
        return f"did not finish importing within {round(self.seconds(measured), 1):g} s ({why})"


#: A plugin imports TensorFlow and Keras (4-5 s here when idle); once the child has, a
#: file has four times what that took, and never less than the 20 s it had when the
#: deadline was fixed, so that only a plugin that hangs is skipped, on a loaded machine too.
DEADLINE: Final = Deadline(floor=20.0, factor=4.0, yardstick="keras")
#: How long the child may take to import the yardstick itself, before any plugin: a
#: machine that cannot import Keras in this long trains nothing either.
YARDSTICK_SECONDS: Final = 300.0
#: Environment variable naming the folder of the lab's caches (default `~/.cache/optlab`).
CACHE_VAR = "OPTLAB_CACHE"
#: Set in the child's environment: a plugin it imports imports `core.optimizers`, which
#: must not load (and so probe) the plugins folder again from inside the probe.
PROBING_VAR = "OPTLAB_PLUGIN_PROBE"
#: How many clean imports are remembered; the oldest are forgotten first.
CACHE_SIZE = 512
# The child: imports the yardstick named first on its command line (none if empty) and
# says `MARK measured SECONDS`; then imports each file named after it, saying `MARK ok I`
# or `MARK failed I why` on its own line after each (a plugin's `sys.exit` included).
MARK = "optlab-plugin-probe:"
_PROBE = """
import importlib, importlib.util, sys, time, traceback
MARK, YARDSTICK = sys.argv.pop(1), sys.argv.pop(1)
if YARDSTICK:
    started = time.perf_counter()
    importlib.import_module(YARDSTICK)
    print(f"{MARK} measured {time.perf_counter() - started}", flush=True)
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


def probe(paths: Sequence[Path], deadline: Deadline = DEADLINE) -> dict[Path, str | None]:
    """For each of `paths`, None if importing it in a child process ends cleanly within
    `deadline`; else why it does not. When every file imported cleanly before, unchanged,
    no child is started; else all are tried, in order, as they will be imported (a file
    may need what one before it registers)."""
    fingerprints = {path: fingerprint(path) for path in paths}
    if set(fingerprints.values()) <= set(_remembered()):
        return dict.fromkeys(paths)
    results: dict[Path, str | None] = {}
    remaining = list(paths)
    while remaining:
        tried = _probe_in_one_child(remaining, deadline)
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


def _probe_in_one_child(paths: list[Path], deadline: Deadline) -> dict[Path, str | None]:
    """Imports `paths` in order in one child, until one hangs or ends the child (that
    one is the last in the result); every one of them, if the yardstick's import fails."""
    child = subprocess.Popen(
        [sys.executable, "-c", _PROBE, MARK, deadline.yardstick or "", *map(str, paths)],
        cwd=PROJECT_ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", PROBING_VAR: "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # never read: a full pipe would stall the child
        text=True,
    )
    marks = _marks(child)
    try:
        measured: float | str | None = None
        if deadline.yardstick is not None:
            measured = _yardstick(marks, child, deadline.yardstick)
            if isinstance(measured, str):
                return dict.fromkeys(paths, measured)
        results: dict[Path, str | None] = {}
        for path in paths:
            try:
                mark = marks.get(timeout=deadline.seconds(measured))
            except queue.Empty:
                results[path] = deadline.missed(measured)
                break
            if mark is None:  # the plugin ended the child itself (os._exit, a crash)
                results[path] = f"failed to import: the process ended (exit status {child.wait()})"
                break
            verdict, rest = mark
            results[path] = (
                None if verdict == "ok" else f"failed to import: {rest.partition(' ')[2]}"
            )
        return results
    finally:
        child.kill()
        child.wait()


def _yardstick(
    marks: queue.Queue[tuple[str, str] | None], child: subprocess.Popen[str], yardstick: str
) -> float | str:
    """The seconds the child took to import `yardstick`, before any plugin; or why no
    plugin was tried."""
    not_tried = f"not tried: the child process did not import {yardstick}"
    try:
        mark = marks.get(timeout=YARDSTICK_SECONDS)
    except queue.Empty:
        return f"{not_tried} within {YARDSTICK_SECONDS:g} s"
    if mark is None:
        return f"{not_tried}: it ended (exit status {child.wait()})"
    return float(mark[1])


def _marks(child: subprocess.Popen[str]) -> queue.Queue[tuple[str, str] | None]:
    """The child's verdicts as they come, `(verdict, the rest of its line)`, read by a
    thread of their own; None once the child has ended. What a plugin prints itself is
    left out."""
    marks: queue.Queue[tuple[str, str] | None] = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith(MARK):
                verdict, _, rest = line.removeprefix(MARK).strip().partition(" ")
                marks.put((verdict, rest))
        marks.put(None)

    threading.Thread(target=read, name="optlab-plugin-probe", daemon=True).start()
    return marks
