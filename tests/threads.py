"""Thread accounting for tests that check a run leaves no thread behind.

Counting threads is not enough: a trainer lets go of its batch iterator in a thread of its
own (`Trainer.close`), which ends on its own a little later, so a count taken while an
earlier run's release is alive can drop below the starting one and never match it.
"""

from __future__ import annotations

import threading
import time

from core.training.trainer import RELEASE_THREAD
from tests.waiting import met_within, scaled


def new_threads(before: set[threading.Thread], timeout: float = 0.0) -> list[str]:
    """Names of live threads not among `before`, after waiting up to `timeout` nominal
    seconds (`tests.waiting.scaled`) for them to end."""

    def started() -> set[threading.Thread]:
        return set(threading.enumerate()) - before

    met_within(lambda: not started(), timeout)
    return sorted(thread.name for thread in started())


def settle_releases(timeout: float = 60.0) -> None:
    """Waits up to `timeout` nominal seconds for the trainers' iterator releases to end."""
    deadline = time.monotonic() + scaled(timeout)
    for thread in threading.enumerate():
        if thread.name == RELEASE_THREAD:
            thread.join(max(0.0, deadline - time.monotonic()))
