"""Waiting in tests: for a condition, with a deadline that follows the machine's speed.

Every deadline in the tests is written in nominal seconds, those an idle reference machine
needs with room to spare, and scaled by one factor, the machine's slowness, measured once a
test session (`slowness`) or set by `OPTLAB_TEST_SLOWNESS`. A loaded CI runner then waits
longer rather than fail a test that was only slow, and a test that fails says by how much
it scaled. Fixed sleeps have no place in the tests (tests/unit/test_no_fixed_sleeps.py
fails on one): a sleep long enough for a loaded machine wastes an idle one's time and is
still too short on a machine more loaded than its author's.

- `wait_for(predicate, timeout, what)`: until something happens, or fail naming it;
  `met_within` says whether it did, for a caller that fails on its own terms.
- `scaled(nominal)`: a deadline handed to a library (a subprocess's, Playwright's in ms,
  an engine's `wait`); tests/browser.py scales Playwright's own defaults.
- `holds_for(predicate, seconds, what)`: what must not happen, watched for a window.
- `wait_for_moment(moment)`: a moment of the behaviour's own clock (a writer's commit
  about due, a cache's entry aged), the one wait that is not for a condition.
"""

from __future__ import annotations

import functools
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from core.training.threads import available_cores

SLOWNESS_VARIABLE = "OPTLAB_TEST_SLOWNESS"
# Past 4x a machine is too slow for the tests' timings to mean anything: a deadline that
# grew without bound would only postpone the failure of a test that hangs.
MAX_SLOWNESS = 4.0
# The yardstick's seconds on the reference machine idle, the 2-core AMD EPYC VM the
# tests' deadlines were written on: the fastest of 40 runs of a tenth of it, each after a
# pause (a process that has just woken is scheduled at once, loaded machine or not), x10.
YARDSTICK_REFERENCE_SECONDS = 0.050
YARDSTICK_RUNS = 5


@dataclass(frozen=True)
class Slowness:
    """How much slower than the reference machine this one is: `factor`, and `how` it
    was found, for pytest's header and a failure's message."""

    factor: float
    how: str


def _yardstick() -> int:
    """A fixed piece of pure-Python work, 50 ms on the reference machine."""
    total = 0
    for i in range(1_000_000):
        total += i * i % 7
    return total


def measure() -> Slowness:
    """The larger of two views of the machine's slowness, clamped to [1, `MAX_SLOWNESS`].

    The yardstick's median time over its reference time sees a slower core and the share
    of a core this process gets now; runs back to back, as a process that has just woken
    is scheduled ahead of busy ones and would see less than its share. The load average
    of the last minute over the cores sees the contention a longer wait will meet (a
    runnable thread gets `cores / load` of a core once load passes the cores), less
    noisy than half a second of timing. Neither alone is enough: in a container the load
    average is the host's, and the yardstick samples one moment. The larger errs toward
    waiting longer (the load of a run that ended a minute ago still counts), which costs
    time only when a test fails anyway.
    """
    seconds = []
    for _ in range(YARDSTICK_RUNS):
        started = time.perf_counter()
        _yardstick()
        seconds.append(time.perf_counter() - started)
    timed = statistics.median(seconds) / YARDSTICK_REFERENCE_SECONDS
    cores = available_cores()
    loaded = os.getloadavg()[0] / cores
    factor = round(min(max(1.0, timed, loaded), MAX_SLOWNESS), 2)
    return Slowness(
        factor,
        f"measured: a yardstick {timed:.2f}x its reference time, "
        f"load {loaded:.2f} a core over {cores}; clamped to [1, {MAX_SLOWNESS:g}]",
    )


@functools.cache
def slowness() -> Slowness:
    """This session's slowness: `OPTLAB_TEST_SLOWNESS` if set (tests/conftest.py sets it
    for pytest-xdist's workers, to the factor the session measured), else `measure()`."""
    given = os.environ.get(SLOWNESS_VARIABLE)
    if not given:
        return measure()
    try:
        factor = float(given)
    except ValueError:
        factor = 0.0
    if not factor > 0:
        raise pytest.UsageError(f"{SLOWNESS_VARIABLE}={given!r}: not a positive number")
    return Slowness(factor, f"set by {SLOWNESS_VARIABLE}={given}")


def scaled(nominal: float) -> float:
    """`nominal`, a deadline in seconds or milliseconds (Playwright's), scaled by the
    machine's slowness."""
    return nominal * slowness().factor


def overdue(what: str, nominal: float) -> str:
    """A failure's message: `what` did not happen by the deadline of `nominal` seconds,
    scaled as it was."""
    return (
        f"{what}: not met within {scaled(nominal):.1f} s "
        f"({nominal:g} s nominal x {slowness().factor:.2f}, the machine's slowness; "
        f"{slowness().how})"
    )


def met_within(
    predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.02
) -> bool:
    """Polls `predicate` every `interval` seconds until it is true (True), or until
    `timeout` nominal seconds, scaled, pass (False), for a caller that fails on its own
    terms (ending a process first, naming its log)."""
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 60.0,
    what: str = "the condition",
    interval: float = 0.02,
) -> None:
    """Polls `predicate` every `interval` seconds until it is true; fails the test,
    naming `what` and the deadline, when `timeout` nominal seconds, scaled, pass first."""
    if not met_within(predicate, timeout, interval):
        pytest.fail(overdue(what, timeout))


def holds_for(
    predicate: Callable[[], object], seconds: float, what: str, interval: float = 0.02
) -> None:
    """Checks that `predicate` stays true for `seconds`; fails the test, naming `what`, as
    soon as it is not. For what must not happen (a paused run trains, a queued run starts,
    a frozen process's run is taken from it). The window is the behaviour's, unscaled: a
    slower machine can make what it guards against less likely to show, never fail a
    test that should pass, so only deadlines grow with the machine's slowness."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            pytest.fail(f"{what}: broken within {seconds:g} s")
        time.sleep(interval)


def wait_for_moment(moment: float) -> None:
    """Waits until the monotonic clock reads `moment`, a moment the behaviour under test
    sets by its own clock (a writer's commit about due, a cache's entry aged): unscaled,
    as such a moment does not move with the machine's speed. Never for something the
    machine does: `wait_for` that."""
    time.sleep(max(0.0, moment - time.monotonic()))
