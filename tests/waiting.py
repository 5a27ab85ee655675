"""Waiting in tests for what another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 60.0,
    what: str = "the condition",
    interval: float = 0.02,
) -> None:
    """Polls `predicate` every `interval` seconds until it is true; fails the test,
    naming `what`, when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not met within {timeout:g} s")
        time.sleep(interval)
