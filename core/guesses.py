"""Wrong guesses at a secret, limited per client address.

The dashboard served to a room (`optlab present`) takes the presenter's key in an address
(`?key=…`), so anyone on the network may guess at it, as fast as pages load (17 guesses a
second on one connection). `Guesses` lets an address make `limit` wrong guesses in any
`window` seconds; beyond that it refuses the address's next guesses without comparing them,
the right key included, until its oldest wrong guess of the window is `window` seconds old.
The wait is short, as Jupyter locks no one out for good: the presenter who mistypes the key
five times waits out the minute, and a guesser is held to 5 guesses a minute an address.

Each wrong guess and each refusal is logged with the address, never with what was guessed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

LOG = logging.getLogger(__name__)

#: Wrong guesses an address may make in a window: room for a few typos.
LIMIT = 5
#: The window, in seconds.
WINDOW = 60.0


class TooManyGuesses(Exception):
    """A guess refused unchecked: its address has guessed wrong too often of late."""

    def __init__(self, address: str, wait: float) -> None:
        super().__init__(f"too many wrong guesses from {address}: try again in {wait:.0f} s")
        self.address = address
        self.wait = wait  # seconds until the address may guess again


class Guesses:
    """The wrong guesses at one secret (named `what` in the log) of each address, in the
    last `window` seconds of `clock`; safe to use from any thread.

    Args:
        what: The secret's name in the log ("presenter key"); never its value.
        limit: The wrong guesses an address may make in `window`; its next guess, right
            or wrong, is refused unchecked until the oldest of them leaves the window.
        window: Seconds a wrong guess counts against its address.
        clock: Seconds, monotonic; a test passes its own to move time on.
    """

    def __init__(
        self,
        what: str,
        limit: int = LIMIT,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.limit = limit
        self.window = window
        self._clock = clock
        self._wrong: dict[str, deque[float]] = {}  # an address's wrong guesses, oldest first
        self._lock = threading.Lock()

    def check(self, address: str, right: Callable[[], bool]) -> bool:
        """Whether a guess from `address` is right, by `right()` (the comparison, given as
        a function so that a refused guess is never compared). Raises `TooManyGuesses`
        while the address has guessed wrong `limit` times in the last `window` seconds."""
        with self._lock:  # held over the comparison: two tabs cannot both take the last try
            now = self._clock()
            self._forget_before(now - self.window)
            wrong = self._wrong.get(address, deque())
            if len(wrong) >= self.limit:
                wait = wrong[0] + self.window - now
                LOG.warning(
                    "%s from %s refused unchecked: %d wrong in the last %.0f s; next try in %.0f s",
                    self.what,
                    address,
                    len(wrong),
                    self.window,
                    wait,
                )
                raise TooManyGuesses(address, wait)
            if right():
                return True
            wrong.append(now)
            self._wrong[address] = wrong
            LOG.warning(
                "a wrong %s from %s (%d of %d in %.0f s)",
                self.what,
                address,
                len(wrong),
                self.limit,
                self.window,
            )
            return False

    def _forget_before(self, start: float) -> None:
        """Drops the wrong guesses made before `start`, and the addresses left with none:
        the record holds the last window's guesses only, however many addresses guess."""
        for address in list(self._wrong):
            wrong = self._wrong[address]
            while wrong and wrong[0] <= start:
                wrong.popleft()
            if not wrong:
                del self._wrong[address]
