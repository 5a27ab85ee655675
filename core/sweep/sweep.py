"""`Sweep`: a hyperparameter search whose trials are engine runs, driven by a thread of
this process (`start`) or of the engine process (`submit`, see `core.sweep.hosting`)."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, UnknownRunError, owner, shown
from core.sweep import control
from core.sweep.control import DriverRecord
from core.sweep.driver import Driver, run_ids_of
from core.sweep.objective import OBJECTIVE_ATTR, Objective
from core.sweep.plan import MAX_SEED, SweepPlan
from core.sweep.studies import (
    DRIVERS,
    PLAN_ATTR,
    driver_alive,
    open_storage,
    storage_errors,
    storage_url,
)
from core.sweep.trial_run import REASON, RUN_ID, RUN_STATUS, SPREAD, TrialCounts

if TYPE_CHECKING:
    import optuna

    from core.engine import RunConfig
    from core.engine.api import Runs
    from core.sweep.space import SearchSpace

SweepState = Literal["idle", "running", "stopping", "done", "stopped", "failed", "interrupted"]
ACTIVE_STATES: Final = control.WORKING  # while a driver works (or a `run` waits for one)
MAX_STUDY_NAME: Final = 100
#: How often `wait` looks at a sweep another process drives.
WAIT_POLL_SECONDS: Final = 0.1


@dataclass(frozen=True)
class SweepStatus:
    """Where a sweep stands.

    Attributes:
        study_name: The sweep's study.
        state: `idle` (not started), `running` (or handed to the engine, which takes it
            up within a poll), `stopping` (waiting for its runs to stop), `done` (the
            budget is spent), `stopped`, `failed` (see `error`), or `interrupted` (the
            process that drove it closed or died; the engine's resumes its own).
        n_trials: The budget.
        finished, running, pruned, failed: Trials by state (see `TrialCounts`).
        best_value: The best objective value of a completed trial, if any (see
            `core.sweep.objective`: the highest accuracy, the lowest loss, MAE or steps).
        best_params: That trial's sampled values.
        best_trial: That trial's number.
        best_run_id: That trial's run.
        error: Why the driver failed, in the `failed` state.
        to_run: How many trials a driver would still run: the budget's room, and the
            retries of trials cut short (by a stop, a closed engine, a crash) queued.
    """

    study_name: str
    state: SweepState
    n_trials: int
    finished: int
    running: int
    pruned: int = 0
    failed: int = 0
    best_value: float | None = None
    best_params: dict[str, Any] | None = None
    best_trial: int | None = None
    best_run_id: str | None = None
    error: str | None = None
    to_run: int = 0

    @property
    def active(self) -> bool:
        """Whether a driver is at work (or the engine is about to take it up)."""
        return self.state in ACTIVE_STATES

    @property
    def resumable(self) -> bool:
        """Whether `Sweep.load(...).submit()` would run more trials: no driver works on
        it, and its budget is not spent (trials cut short are not counted)."""
        return not self.active and self.to_run > 0

    @property
    def progress(self) -> float:
        return min(self.finished / self.n_trials, 1.0)


@dataclass(frozen=True)
class TrialRow:
    """One trial, as a row of a live table.

    Attributes:
        number: The trial's number in its study.
        state: `WAITING`, `RUNNING`, `COMPLETE`, `PRUNED` or `FAIL`.
        params: The sampled values.
        value: The run's best objective value (COMPLETE; of repeats, the mean of their
            best values), or its last reported one (PRUNED); None otherwise.
        spread: Of repeats, the half-width of the 95% t-interval of `value`.
        run_id: The trial's (first) run, once started.
        run_ids: Every run of the trial.
        run_status: The run's status: read live while the trial runs, as it ended after.
        step: The run's step while it trains; afterwards the last step it validated at.
        total_steps: The run's length, while it trains.
        reason: Why the trial failed.
    """

    number: int
    state: str
    params: dict[str, Any]
    value: float | None
    run_id: str | None
    run_status: str | None
    step: int | None
    total_steps: int | None
    reason: str | None
    spread: float | None = None
    run_ids: tuple[str, ...] = ()


class Sweep:
    """A search over `space` around `base_config`; each trial is one run of `engine`.

    Construction checks everything and starts nothing. `submit` creates the study and
    hands it to the engine process, which drives it (the dashboard's way: it outlives
    the dashboard); `start` drives it in a thread of this process (a script's, or
    `optlab sweep`'s, see `driver.py`). Both return at once. Either way `stop` stops it
    from any process (a command in its study, see `control.py`), and `status` reads
    where it stands. Every method may be called from any thread while the driver works.

    Args:
        engine: Starts the trials' runs; its store holds them (and, by default, the study).
        base_config: What every trial runs, before the trial's values are applied.
        space: The settings to vary; checked against `base_config`.
        n_trials: How many trials to run. Default (grid only): every grid point; a
            larger number is lowered to the grid size.
        sampler: `grid`, `random` or `tpe`.
        pruning: Stop trials whose objective value trails the others' at the same
            step (`default_pruner` in `samplers.py`, unless `pruner` is given).
        pruner: An Optuna pruner to use instead of the default; needs `pruning`. It
            sees every validation accuracy a run logs, at the run's step.
        storage: An SQLAlchemy URL for the study; default: the engine's store file.
        study_name: The study's name, unique in `storage`; default: made from the time.
        parallel: How many trials train at once.
        repeats: Runs per trial, over seeds; the trial's value is their mean.
        seed: The sampler's seed; default: a fresh random one. The plan keeps the seed
            used (`sweep.plan.seed`), so a sweep can be replayed. Give each machine
            sharing a study its own.
        objective: What scores a trial (see `core.sweep.objective`): `val_accuracy`,
            `val_loss`, `val_mae` or `time_to_target`; default: the dataset's metric.
        target: Time to target's value to reach.
        poll_interval: Seconds between two looks at the runs: how late a report (and so a
            pruning decision) may come.

    Raises `InvalidInput` naming every bad argument, e.g. `learning_rate, low`.
    """

    def __init__(
        self,
        engine: Runs,
        base_config: RunConfig,
        space: SearchSpace,
        *,
        n_trials: int | None = None,
        sampler: Literal["grid", "random", "tpe"] = "tpe",
        pruning: bool = False,
        pruner: optuna.pruners.BasePruner | None = None,
        storage: str | None = None,
        study_name: str | None = None,
        parallel: int = 2,
        repeats: int = 1,
        seed: int | None = None,
        objective: str | None = None,
        target: float | None = None,
        poll_interval: float = 0.25,
    ) -> None:
        errors: dict[str, str] = {}
        plan = None
        try:
            plan = SweepPlan.create(
                base_config,
                space,
                n_trials=n_trials,
                sampler=sampler,
                pruning=pruning,
                parallel=parallel,
                seed=secrets.randbelow(MAX_SEED + 1) if seed is None else seed,
                repeats=repeats,
                objective=objective,
                target=target,
            )
        except InvalidInput as exc:
            errors |= exc.errors
        if study_name is None:
            study_name = f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        elif not isinstance(study_name, str) or not 0 < len(study_name) <= MAX_STUDY_NAME:
            errors["study_name"] = f"must be 1 to {MAX_STUDY_NAME} characters (got {study_name!r})"
        elif not study_name.isprintable():
            errors["study_name"] = "must contain only printable characters"
        if pruner is not None and not pruning:
            errors["pruner"] = "is given, but pruning is off"
        if reason := _poll_interval_error(poll_interval):
            errors["poll_interval"] = reason
        try:
            url = storage_url(engine, storage)
        except InvalidInput as exc:
            errors |= exc.errors
        if errors:
            raise InvalidInput(errors)
        assert plan is not None
        self._setup(engine, plan, url, study_name, pruner, poll_interval)

    @classmethod
    def load(
        cls,
        engine: Runs,
        study_name: str,
        storage: str | None = None,
        *,
        n_trials: int | None = None,
        parallel: int | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        poll_interval: float = 0.25,
    ) -> Sweep:
        """The sweep of an existing study, to show its trials or to resume it with `start`.

        `n_trials` and `parallel` replace the stored ones (to extend a finished sweep);
        `pruner` replaces the default one of a sweep with pruning. Trials its last
        driver left running end as their runs did (`settle_abandoned`), told by the
        engine process (`core.sweep.hosting`) and on `start`, never by a reader; those
        cut short run again on `start`.

        Raises `InvalidInput` naming `study_name` if there is no such study or
        no `Sweep` made it, or the stored plan's field that is no longer valid;
        `StoreError` if the storage fails.
        """
        import optuna

        if reason := _poll_interval_error(poll_interval):
            raise InvalidInput({"poll_interval": reason})
        url = storage_url(engine, storage)
        try:
            with storage_errors(url):
                study = optuna.load_study(study_name=study_name, storage=open_storage(url))
        except KeyError:
            where = shown(url)
            raise InvalidInput({"study_name": f"no study {study_name!r} in {where}"}) from None
        stored = study.user_attrs.get(PLAN_ATTR)
        if stored is None or len(study.directions) != 1:
            raise InvalidInput({"study_name": f"{study_name} is not an Optimizer Lab sweep"})
        plan = SweepPlan.from_dict(stored)
        if study.direction.name.lower() != plan.objective.direction:
            raise InvalidInput({"study_name": f"{study_name} is not an Optimizer Lab sweep"})
        changes = {"n_trials": n_trials, "parallel": parallel}
        plan = plan.with_changes(**{k: v for k, v in changes.items() if v is not None})
        if pruner is not None and not plan.pruning:
            raise InvalidInput({"pruner": "is given, but the sweep has no pruning"})
        sweep = cls.__new__(cls)
        sweep._setup(engine, plan, url, study_name, pruner, poll_interval, study)
        return sweep

    def _setup(
        self,
        engine: Runs,
        plan: SweepPlan,
        url: str,
        study_name: str,
        pruner: optuna.pruners.BasePruner | None,
        poll_interval: float,
        study: optuna.Study | None = None,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.storage = url
        self.study_name = study_name
        self._pruner = pruner
        self._poll_interval = float(poll_interval)
        self._lock = threading.Lock()  # guards the five fields below
        self._started = False
        self._study = study
        self._state: SweepState = "idle"
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        self._stop_requested = threading.Event()
        self._ending: SweepState = "stopped"  # what a stop asked here ends the drive as

    # Control ------------------------------------------------------------------------------

    def submit(self) -> None:
        """Hands the sweep to the engine process: creates the study (or takes up the
        loaded one, with its plan as changed by `load`) and writes a `run` command to it,
        which the engine takes up within a poll (see `core.sweep.hosting`); returns at
        once. Resumes a loaded sweep that is not at work.

        Raises `NotAllowed` for a viewer (`Runs.steer_sweeps`) before anything is
        written; `InvalidInput` naming `study_name` if a new sweep's study name is taken,
        or if a live process drives it now; `StoreError` if the storage fails.
        """
        self.engine.steer_sweeps()
        with storage_errors(self.storage):
            study = self._open_study()
            if self._stored_state(study) in ACTIVE_STATES:
                raise InvalidInput({"study_name": f"{self.study_name} is at work already"})
            study.set_user_attr(PLAN_ATTR, self.plan.to_dict())
            control.write_command(study, "run")
        with self._lock:
            self._study = study

    def start(self, *, answering: str | None = None) -> None:
        """Creates the study (or takes up the loaded one) and starts the driver thread
        in this process. `answering`: the id of the `run` command the engine process's
        `SweepHost` takes up (a stop written since stops it at once); None for a driver of
        its own (`optlab sweep`, a script), which a stop written after it starts stops.

        Raises `InvalidInput` naming `study_name` if a new sweep's study name is
        taken, or if this process already runs the study; `StoreError` if the storage
        fails; `RuntimeError` if this sweep has started before (load it again to resume it).
        """
        with self._lock:
            if self._started:
                raise RuntimeError(f"sweep {self.study_name} has started before")
            self._started = True
        try:
            DRIVERS.claim(self.storage, self.study_name)
            try:
                with storage_errors(self.storage):  # outside the lock: it may wait on it
                    study = self._open_study()
            except BaseException:
                DRIVERS.release(self.storage, self.study_name)
                raise
        except BaseException:
            with self._lock:
                self._started = False
            raise
        try:
            with storage_errors(self.storage):
                current = control.command_of(study.user_attrs)
                since = answering or (current and current.id)
                record = DriverRecord(owner.current(), "running", since, answering is not None)
                control.write_driver(study, record)
        except BaseException:
            DRIVERS.release(self.storage, self.study_name)
            with self._lock:
                self._started = False
            raise
        driver = Driver(
            self.engine,
            study,
            self.plan,
            poll_interval=self._poll_interval,
            stop_requested=self._stop_requested,
            stop_asked=lambda: control.stop_asked(study.user_attrs, record.command),
        )
        thread = threading.Thread(
            target=self._drive,
            args=(driver, record),
            name=f"sweep-{self.study_name}",
            daemon=True,
        )
        with self._lock:
            self._study, self._thread, self._state = study, thread, "running"
        thread.start()

    def stop(self) -> None:
        """Asks the driver, in whichever process, to stop the sweep and its runs (within
        a step each): a `stop` command in its study; returns at once. The stopped trials
        fail, marked to run again if the sweep is resumed. Raises `NotAllowed` for a
        viewer (`Runs.steer_sweeps`), `StoreError` if the storage fails."""
        self.engine.steer_sweeps()
        self._halt("stopped")
        if (study := self.study) is not None:
            with storage_errors(self.storage):
                control.write_command(study, "stop")

    def interrupt(self) -> None:
        """Stops the drive of this process as `stop` does, but as its process closing
        (the engine's): its record says `interrupted`, and asks no stop of the study, so
        that the engine's next start resumes a sweep it drove."""
        self._halt("interrupted")

    def wait(self, timeout: float | None = None) -> SweepStatus:
        """Blocks until the driver, in this process or another, has ended (or `timeout`
        passes); returns the status."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        else:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.active and (deadline is None or time.monotonic() < deadline):
                time.sleep(WAIT_POLL_SECONDS)
        return self.status()

    def _halt(self, ending: SweepState) -> None:
        with self._lock:
            if self._state == "running":
                self._state, self._ending = "stopping", ending
                self._stop_requested.set()

    # Reading ------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a driver is at work on the sweep: this process's thread, or, for a
        sweep driven elsewhere, as its study says; cheaper than `status().active`, which
        reads the trials too."""
        with self._lock:
            if self._thread is not None:
                return self._state in ACTIVE_STATES
            study = self._study
        return study is not None and self._stored_state(study) in ACTIVE_STATES

    @property
    def study(self) -> optuna.Study | None:
        """The Optuna study (for its plots), once started or loaded."""
        with self._lock:
            return self._study

    def status(self) -> SweepStatus:
        """Where the sweep stands, read from its study (which other machines may share);
        it writes nothing, so that any reader may ask. `StoreError` if its storage fails."""
        with self._lock:
            state, error, study = self._state, self._error, self._study
            here = self._thread is not None
        if study is not None and not here:
            state, error = self._stored_state(study), self._stored_error(study)
        trials = self._trials(study)
        counts = TrialCounts.of(trials)
        best = _best(trials, self.plan.objective)
        return SweepStatus(
            study_name=self.study_name,
            state=state,
            n_trials=self.plan.n_trials,
            finished=counts.finished,
            running=counts.running,
            pruned=counts.pruned,
            failed=counts.failed,
            best_value=best.value if best else None,
            best_params=dict(best.params) if best else None,
            best_trial=best.number if best else None,
            best_run_id=best.user_attrs.get(RUN_ID) if best else None,
            error=error,
            to_run=counts.to_run(self.plan.n_trials),
        )

    def results(self) -> list[TrialRow]:
        """Every trial of the study, by number, with its run's live progress; `StoreError`
        if its storage fails."""
        return [self._row(trial) for trial in self._trials(self.study)]

    def best_config(self) -> RunConfig:
        """The base config with the best completed trial's values; raises `LookupError`
        while no trial has completed."""
        best = _best(self._trials(self.study), self.plan.objective)
        if best is None:
            raise LookupError(f"no trial of sweep {self.study_name} has completed yet")
        return self.plan.config_for(best.params)

    # Internals ----------------------------------------------------------------------------

    def _open_study(self) -> optuna.Study:
        import optuna

        from core.sweep.samplers import default_pruner, make_sampler

        if self.plan.pruning:
            pruner = self._pruner or default_pruner(self.plan.n_trials)
        else:
            pruner = optuna.pruners.NopPruner()
        storage = open_storage(self.storage)
        loaded = self.study
        if loaded is not None:  # resume where its trials stopped
            loaded.sampler = make_sampler(self.plan, len(loaded.trials))
            loaded.pruner = pruner
            return loaded
        try:
            study = optuna.create_study(
                storage=storage,
                sampler=make_sampler(self.plan, 0),
                pruner=pruner,
                study_name=self.study_name,
                direction=self.plan.objective.direction,
            )
        except optuna.exceptions.DuplicatedStudyError:
            raise InvalidInput(
                {"study_name": f"{self.study_name} exists; Sweep.load resumes it"}
            ) from None
        study.set_user_attr(PLAN_ATTR, self.plan.to_dict())
        study.set_user_attr(OBJECTIVE_ATTR, self.plan.objective.to_dict())
        return study

    def _stored_state(self, study: optuna.Study) -> SweepState:
        """The state the study's command and driver record say (see `control`)."""
        with storage_errors(self.storage):
            attrs = study.user_attrs
        alive = driver_alive(self.engine, self.storage, self.study_name)
        return control.stored_state(attrs, alive)  # type: ignore[return-value]

    def _stored_error(self, study: optuna.Study) -> str | None:
        with storage_errors(self.storage):
            record = control.driver_of(study.user_attrs)
        return None if record is None else record.error

    def _trials(self, study: optuna.Study | None) -> list[optuna.trial.FrozenTrial]:
        """The study's trials (none before it exists); `StoreError` if its storage fails."""
        if study is None:
            return []
        with storage_errors(self.storage):
            return study.get_trials(deepcopy=False)

    def _drive(self, driver: Driver, record: DriverRecord) -> None:
        state: SweepState
        error = None
        try:
            state = driver()
        except Exception as exc:
            state, error = "failed", redacted(f"{type(exc).__name__}: {exc}", self.storage)
        with self._lock:
            if state == "stopped":
                state = self._ending
            self._state, self._error = state, error
        # How it ended, for every process that reads the study; a storage that fails
        # leaves it `running` by a process that ends: read as interrupted.
        try:
            with contextlib.suppress(StoreError), storage_errors(self.storage):
                ended = DriverRecord(record.owner, state, record.command, record.hosted, error)
                control.write_driver(driver.study, ended)
        finally:
            DRIVERS.release(self.storage, self.study_name)

    def _row(self, trial: optuna.trial.FrozenTrial) -> TrialRow:
        run_id = trial.user_attrs.get(RUN_ID)
        run_status = trial.user_attrs.get(RUN_STATUS)
        step = max(trial.intermediate_values, default=None)
        total_steps = None
        if trial.state.name == "RUNNING" and run_id is not None:
            try:
                live = self.engine.status(run_id)
                run_status, step, total_steps = live.status, live.step, live.total_steps
            except UnknownRunError:
                pass  # another machine's run, in a shared storage
        return TrialRow(
            number=trial.number,
            state=trial.state.name,
            params=dict(trial.params),
            value=trial.value,
            run_id=run_id,
            run_status=run_status,
            step=step,
            total_steps=total_steps,
            reason=trial.user_attrs.get(REASON),
            spread=trial.user_attrs.get(SPREAD),
            run_ids=tuple(run_ids_of(trial)),
        )


def _best(
    trials: list[optuna.trial.FrozenTrial], objective: Objective
) -> optuna.trial.FrozenTrial | None:
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    if not complete:
        return None
    value = objective.best([t.value for t in complete])
    return next(t for t in complete if t.value == value)


def _poll_interval_error(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 60:
        return f"must be a number of seconds in (0, 60] (got {value!r})"
    return None
