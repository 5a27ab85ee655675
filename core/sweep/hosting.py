"""`SweepHost`: the engine process drives the sweeps handed to it through the store.

The dashboard never drives a sweep: it writes a `run` command to the study (`Sweep.submit`)
and reads the study back. The engine process polls its store's studies, as it polls its
runs' commands, and drives each sweep with a `run` it has not taken up (`control.to_take_up`)
in a driver thread of its own, whose trials are runs of that engine; a `stop` is seen by
the driver itself. So a sweep outlives the dashboard that started it, and, as the engine
ends its drives as `interrupted` when it closes (and a killed engine's record stays
`running` by a dead process), the engine's next start resumes them: their trials cut short
run their values again (see `driver.py`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Final

from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, owner
from core.sweep import control
from core.sweep.control import DriverRecord
from core.sweep.driver import STOP_TIMEOUT
from core.sweep.studies import (
    PLAN_ATTR,
    driver_alive,
    open_storage,
    storage_errors,
    storage_url,
    stored_study,
)
from core.sweep.sweep import Sweep

if TYPE_CHECKING:
    import sqlalchemy

    from core.engine.api import Runs

#: How often the host looks for sweeps to take up: how late a start may begin.
POLL_SECONDS: Final = 0.5


class SweepHost:
    """Drives, in threads of this process, the sweeps of `engine`'s store handed to it.

    Args:
        engine: The engine whose runs the trials are (the serving one).
        poll_interval: Seconds between two looks at the studies.
        sweep_poll_interval: The drivers' `poll_interval` (see `Sweep`).
    """

    def __init__(
        self,
        engine: Runs,
        *,
        poll_interval: float = POLL_SECONDS,
        sweep_poll_interval: float = 0.25,
    ) -> None:
        self.engine = engine
        self.storage = storage_url(engine)
        self.poll_interval = poll_interval
        self.sweep_poll_interval = sweep_poll_interval
        self._lock = threading.Lock()  # guards `_sweeps`
        self._sweeps: dict[str, Sweep] = {}  # by study name: those started here
        self._tables_seen = False  # see `_has_studies`
        self._probe: sqlalchemy.Engine | None = None  # what looks for the tables till then
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optlab-sweeps", daemon=True)
        self._thread.start()

    def busy(self) -> bool:
        """Whether a sweep is driven here (the engine stays up while one is)."""
        with self._lock:
            return any(sweep.active for sweep in self._sweeps.values())

    def driving(self) -> list[str]:
        """The studies driven here now."""
        with self._lock:
            return [name for name, sweep in self._sweeps.items() if sweep.active]

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stops looking, and ends each drive as `interrupted` (its runs stopped, its
        trials cut short), for the engine's next start to resume; call it before the
        engine closes, whose runs the trials are."""
        self._stop.set()
        self._thread.join(timeout)
        if self._probe is not None:
            self._probe.dispose()
        with self._lock:
            sweeps = list(self._sweeps.values())
        for sweep in sweeps:
            sweep.interrupt()
        for sweep in sweeps:
            sweep.wait(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval):
            # A storage busy, failing or not yet openable: the next round tries again.
            with contextlib.suppress(StoreError, InvalidInput):
                self._take_up()

    def _take_up(self) -> None:
        """Starts a driver for each study with a `run` to take up."""
        if not self._has_studies():
            return
        with storage_errors(self.storage):
            studies = open_storage(self.storage).get_all_studies()
        for study in studies:
            name = study.study_name
            with self._lock:
                if self._stop.is_set() or (name in self._sweeps and self._sweeps[name].active):
                    continue
            alive = driver_alive(self.engine, self.storage, name)
            if PLAN_ATTR in study.user_attrs and control.to_take_up(study.user_attrs, alive):
                command = control.command_of(study.user_attrs)
                assert command is not None  # a `run`, to take up
                self._drive(name, command.id)

    def _has_studies(self) -> bool:
        """Whether Optuna's tables are in the storage: opening it creates them, which an
        engine that serves a store where no sweep was ever made must not write."""
        if not self._tables_seen:
            import sqlalchemy

            with storage_errors(self.storage):
                self._probe = self._probe or sqlalchemy.create_engine(self.storage)
                self._tables_seen = sqlalchemy.inspect(self._probe).has_table("studies")
            if self._tables_seen:
                self._probe.dispose()
        return self._tables_seen

    def _drive(self, name: str, command: str) -> None:
        """Loads the study's sweep and drives it; one that cannot be loaded (its stored
        plan no longer valid) ends failed, saying why, so it is not tried each round.
        `command`: the `run` it answers."""
        try:
            sweep = Sweep.load(self.engine, name, poll_interval=self.sweep_poll_interval)
            sweep.start(answering=command)
        except InvalidInput as exc:
            with storage_errors(self.storage):
                study = stored_study(name, open_storage(self.storage))
                why = redacted(str(exc), self.storage)
                control.write_driver(
                    study, DriverRecord(owner.current(), "failed", command, True, why)
                )
            return
        with self._lock:
            self._sweeps[name] = sweep
