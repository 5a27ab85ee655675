"""`PopulationHost`: the engine process drives the populations whose members it trains.

A population handed to the serving engine (`Population.submit` through a client: its
members started, labelled and told to pause at the first interval's end) is taken up here
within a poll, and driven in a thread of this process, as `SweepHost` drives sweeps: it
outlives the dashboard, or the `optlab pbt --detach` that started it. When the engine
closes, its drivers let go of their members (which the engine's end interrupts); the next
engine to serve the store takes the population up again from the store alone
(`Population.adopt`): it resumes the interrupted members from their checkpoints and meets
them at the next interval's end.

A population is taken up when a member of it has not ended and every such member is this
engine's or its owner is dead: one that another live process drives (`optlab pbt`, whose
engine trains its own members) is left to it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Final

from core.engine.engine import Engine
from core.population.lineage import PopulationView, population_names, read_population
from core.population.population import POLL_SECONDS as DRIVER_POLL_SECONDS
from core.population.population import Population
from core.store import ACTIVE_STATUSES, StoreError

#: How often the host looks for populations to take up.
POLL_SECONDS: Final = 0.5
#: A member in one of these is still to train: a population with one is to be driven.
UNFINISHED: Final = (*ACTIVE_STATUSES, "interrupted")

log = logging.getLogger(__name__)


class PopulationHost:
    """Drives, in threads of this process, the populations that `engine` trains.

    Args:
        engine: The serving engine.
        poll_interval: Seconds between two looks at the store's populations.
        driver_poll_interval: The drivers' `poll_interval` (see `Population`).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        poll_interval: float = POLL_SECONDS,
        driver_poll_interval: float = DRIVER_POLL_SECONDS,
    ) -> None:
        self.engine = engine
        self.poll_interval = poll_interval
        self.driver_poll_interval = driver_poll_interval
        self._lock = threading.Lock()  # guards `_drivers`
        self._drivers: dict[str, Population] = {}
        self._refused: set[str] = set()  # populations whose stored plan no longer holds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optlab-populations", daemon=True)
        self._thread.start()

    def busy(self) -> bool:
        """Whether a population is driven here (the engine stays up while one is)."""
        with self._lock:
            return any(driver.active for driver in self._drivers.values())

    def driving(self) -> list[str]:
        with self._lock:
            return [name for name, driver in self._drivers.items() if driver.active]

    def close(self, timeout: float = 10.0) -> None:
        """Stops looking, and lets go of every population driven here, its members left
        to the engine's end (call it before the engine closes)."""
        self._stop.set()
        self._thread.join(timeout)
        with self._lock:
            drivers = list(self._drivers.values())
        for driver in drivers:
            driver.detach()
        for driver in drivers:
            driver.wait(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval):
            # A store busy or failing: the next round tries again.
            with contextlib.suppress(StoreError):
                self._round()

    def _round(self) -> None:
        runs = self.engine.list()
        for name in population_names(runs):
            with self._lock:
                if self._stop.is_set():
                    return
                driven = name in self._drivers and self._drivers[name].active
                if driven or name in self._refused:
                    continue
            try:
                view = read_population(self.engine, name, runs)
                if view is not None and self._ours(view):
                    self._take_up(view)
            except StoreError:
                raise
            except Exception:  # stored by other hands, or unforeseen: the others go on
                log.exception("population %s cannot be driven", name)
                with self._lock:
                    self._refused.add(name)

    def _ours(self, view: PopulationView) -> bool:
        """Whether `view` is to be driven here: a member still to train, and each such
        member this engine's, or its owner's that is dead."""
        if len(view.current) < int(view.plan["population"]):
            return False  # its members are still being labelled by whoever started them
        unfinished = [s.run for s in view.current.values() if s.run.status in UNFINISHED]
        if not unfinished:
            return False
        liveness = self.engine.liveness()
        for run in unfinished:
            record = self.engine.store.get_run(run.id)
            owner = record.owner if record is not None else None
            if owner != self.engine.owner and liveness(owner):
                return False
        return True

    def _take_up(self, view: PopulationView) -> None:
        # Raises `InvalidInput` if its plan no longer holds (a knob or a model gone).
        driver = Population.adopt(self.engine, view, poll_interval=self.driver_poll_interval)
        driver.start_adopted()
        with self._lock:
            self._drivers[view.name] = driver
