"""The engine lock (`core.engine.lock`): who holds it, as this host tells it, and a check
that never makes a starting engine give up."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

from core.engine import lock
from core.store import owner

ROOT = Path(__file__).resolve().parents[2]
# Holds the engine lock of the store named on its command line until its stdin closes.
HOLDER = """
import sys
from core.engine import lock
held = lock.hold(sys.argv[1])
print("held" if held else "taken", flush=True)
sys.stdin.read()
"""


def test_the_holder_is_the_process_that_holds_the_lock_and_none_once_it_ends(tmp_path) -> None:
    store = str(tmp_path / "lab.sqlite")
    assert lock.holder(store) is None  # no file: nothing was created by asking
    assert not lock.lock_path(store).exists()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        holder = lock.holder(store)
        assert holder is not None and holder.split(":")[1] == str(child.pid)
        assert owner.alive(holder)
        assert lock.hold(store) is None  # a second engine: its start gives up
    finally:
        child.communicate("")
    assert lock.holder(store) is None  # its process ended: the kernel let go


def test_this_process_holding_the_lock_is_seen_by_its_own_check(tmp_path) -> None:
    """An engine served in the dashboard's process (the tests') is found too: each check
    opens the file anew, and `flock`s of two openings exclude each other."""
    store = str(tmp_path / "lab.sqlite")
    held = lock.hold(store)
    assert held is not None
    try:
        assert lock.holder(store) == owner.current()
    finally:
        held.close()
    assert lock.holder(store) is None


def test_a_start_that_meets_a_check_takes_the_lock_all_the_same(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check holds the lock shared for an instant when it is free: a start that finds it
    taken then tries again (before, it said "an engine already serves" and exited)."""
    store = str(tmp_path / "lab.sqlite")
    tries: list[int] = []
    flock = fcntl.flock

    def checked_once(file, operation: int) -> None:
        tries.append(operation)
        if len(tries) == 1:  # a check holds it now
            raise BlockingIOError
        flock(file, operation)

    monkeypatch.setattr(lock.fcntl, "flock", checked_once)
    held = lock.hold(store)
    assert held is not None and len(tries) == 2
    held.close()
