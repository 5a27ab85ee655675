"""`SweepHost`: the engine process drives the sweeps handed to it through the store.

The dashboard never drives a sweep: it writes a `run` command to the study (`Sweep.submit`)
and reads the study back. The engine process polls its store's studies, as it polls its
runs' commands, and drives each sweep with a `run` it has not taken up (`control.to_take_up`)
in a driver thread of its own, whose trials are runs of that engine; a `stop` is seen by
the driver itself. So a sweep outlives the dashboard that started it, and, as the engine
ends its drives as `interrupted` when it closes (and a killed engine's record stays
`running` by a dead process), the engine's next start resumes them: their trials cut short
run their values again (see `driver.py`).

The host also settles the trials that a driver it does not run left running, once their
runs have ended (`settle_abandoned`): a sweep's own process killed mid-trial (`optlab
sweep`, a script), whose runs train on here. That is the engine's work alone: a reader of
the studies (a dashboard, a viewer's among them) writes nothing.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import TYPE_CHECKING, Final

from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, owner
from core.sweep import control
from core.sweep.control import DriverRecord
from core.sweep.driver import STOP_TIMEOUT, abandoned, settle_abandoned
from core.sweep.studies import (
    DRIVERS,
    PLAN_ATTR,
    driver_alive,
    has_studies,
    open_storage,
    storage_errors,
    storage_url,
    stored_study,
)
from core.sweep.sweep import Sweep

if TYPE_CHECKING:
    import optuna

    from core.engine.api import Runs

#: How often the host looks for sweeps to take up: how late a start may begin.
POLL_SECONDS: Final = 0.5
#: How often it looks for abandoned trials to settle: how late such a trial learns that
#: its run ended. Rarer than the polls: it reads every study's running trials.
SETTLE_SECONDS: Final = 5.0


class SweepHost:
    """Drives, in threads of this process, the sweeps of `engine`'s store handed to it.

    Args:
        engine: The engine whose runs the trials are (the serving one).
        poll_interval: Seconds between two looks at the studies.
        sweep_poll_interval: The drivers' `poll_interval` (see `Sweep`).
        settle_interval: Seconds between two looks for abandoned trials (the first at
            the first poll: trials a killed sweep left while no engine ran end at once).
    """

    def __init__(
        self,
        engine: Runs,
        *,
        poll_interval: float = POLL_SECONDS,
        sweep_poll_interval: float = 0.25,
        settle_interval: float = SETTLE_SECONDS,
    ) -> None:
        self.engine = engine
        self.storage = storage_url(engine)
        self.poll_interval = poll_interval
        self.sweep_poll_interval = sweep_poll_interval
        self.settle_interval = settle_interval
        self._lock = threading.Lock()  # guards `_sweeps`
        self._sweeps: dict[str, Sweep] = {}  # by study name: those started here
        self._settled_at = -math.inf  # when `_settle` last looked (monotonic seconds)
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
                self._round()

    def _round(self) -> None:
        """One look at the studies: takes up each with a `run` to take up and, every
        `settle_interval`, settles the abandoned trials of those not driven here."""
        # `has_studies`: an engine serving a store where no sweep was ever made creates
        # no table of Optuna's in it.
        if not has_studies(self.storage):
            return
        settling = time.monotonic() - self._settled_at >= self.settle_interval
        with storage_errors(self.storage):
            storage = open_storage(self.storage)
            studies = storage.get_all_studies()
            if settling:
                self._settled_at = time.monotonic()
                for study in studies:
                    self._settle(storage, study)
        for study in studies:
            self._take_up(study)

    def _take_up(self, study: optuna.study.FrozenStudy) -> None:
        """Starts a driver for the study if it has a `run` to take up."""
        name = study.study_name
        with self._lock:
            if self._stop.is_set() or (name in self._sweeps and self._sweeps[name].active):
                return
        alive = driver_alive(self.engine, self.storage, name)
        if PLAN_ATTR in study.user_attrs and control.to_take_up(study.user_attrs, alive):
            command = control.command_of(study.user_attrs)
            assert command is not None  # a `run`, to take up
            self._drive(name, command.id)

    def _settle(
        self, storage: optuna.storages.BaseStorage, study: optuna.study.FrozenStudy
    ) -> None:
        """Tells the study how the runs of its abandoned trials ended (`settle_abandoned`),
        unless a driver of this process drives it: that one settled them as it began."""
        from optuna.trial import TrialState

        if DRIVERS.driving(self.storage, study.study_name):
            return
        running = storage.get_all_trials(
            study._study_id, deepcopy=False, states=(TrialState.RUNNING,)
        )
        # Loading the study costs more than reading its trials: only for one to settle.
        if any(abandoned(self.engine, trial, driven_here=False) for trial in running):
            loaded = stored_study(study.study_name, storage)
            settle_abandoned(self.engine, loaded, driven_here=False)

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
