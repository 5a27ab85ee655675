"""Which process owns a run, and whether that process still lives.

An engine stamps every run it creates with its process's identity: host, pid, and the
process's start time (so a recycled pid is not mistaken for the owner). Whether an owner
lives is told two ways. A process on this host is looked up in /proc, exactly. A process
on another host (a PostgreSQL store is shared) cannot be seen from here: every process
that owns runs, serves the store or drives a sweep writes a heartbeat into the store's
`services` table every `HEARTBEAT_SECONDS`, and lives as long as one of its heartbeats is
younger than `LIVENESS_SECONDS` by the database's clock (so the hosts' clocks need not
agree). `Liveness` tells both apart.

When an engine starts, it marks interrupted only the active runs whose owner is dead, so a
CLI run on the dashboard's store leaves the dashboard's runs alone, and the other way round.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

#: How often a process that owns runs, serves the store or drives a sweep beats.
HEARTBEAT_SECONDS: Final = 1.0
#: A process on another host whose last heartbeat is older than this is dead: ten beats
#: missed, which a busy store (a write waits its turn) or a busy process does not reach.
LIVENESS_SECONDS: Final = 10.0


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


def on_this_host(owner: str) -> bool:
    """Whether `owner` names a process of this host."""
    return owner.partition(":")[0] == socket.gethostname()


def alive(owner: str | None) -> bool:
    """Whether the process `owner` names runs on this host now (looked up in /proc).
    False without an owner, and for a process of another host, which only its heartbeats
    can tell alive (see `Liveness`)."""
    if not owner or not on_this_host(owner):
        return False
    _, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    start = start.partition(":")[0]  # without the part's name
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


class Liveness:
    """Whether owners live, as this host and the store's heartbeats tell it now.

    `beating()` returns the owners whose heartbeat is younger than `LIVENESS_SECONDS`
    (`Store.liveness` reads them); it is called once, the first time it is needed, so a
    list of runs trained on this host costs no read.
    """

    def __init__(self, beating: Callable[[], Iterable[str]]) -> None:
        self._read_beating = beating

    @functools.cached_property
    def _beating(self) -> frozenset[str]:
        return frozenset(self._read_beating())

    def __call__(self, owner: str | None) -> bool:
        """Whether the process `owner` names lives: on this host, by /proc (a stale
        heartbeat does not kill a live process, nor a fresh one revive a dead one); on
        another, by a fresh heartbeat."""
        if not owner:
            return False
        return alive(owner) if on_this_host(owner) else owner in self._beating
