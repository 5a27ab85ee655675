"""Which process owns a run, and whether that process still lives.

An engine stamps every run it creates with its process's identity: host, pid, and the
process's start time (so a recycled pid is not mistaken for the owner). When an engine
starts, it marks interrupted only the active runs whose owner is gone, so a CLI run on the
dashboard's store leaves the dashboard's runs alone, and the other way round.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (Linux), None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces, so split after its ")".
    return stat.rsplit(")", 1)[1].split()


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22), None if unknown."""
    fields = _stat(pid)
    return fields[19] if fields else None


@functools.cache
def _process() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or '?'}"


def current(part: str | None = None) -> str:
    """This process's identity, `host:pid:start`; with `part`, `host:pid:start:part`
    names a part of the process that takes its runs' commands itself (a script's fit
    beside an engine in the same process), alive as long as the process is."""
    return _process() if part is None else f"{_process()}:{part}"


def alive(owner: str | None) -> bool:
    """Whether the process `owner` names is still running. Runs without an owner, or
    owned by a process on another host (which this host cannot see), count as dead and
    alive respectively."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    start = start.partition(":")[0]  # without the part's name
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # it exists, owned by another user
    fields = _stat(pid)
    if fields is None:
        return start == "?"
    # A zombie (state Z, field 3) has exited; its parent has not collected it yet.
    return fields[0] != "Z" and (start == "?" or fields[19] == start)
