"""The loop a sweep's driver thread executes: ask trials, start runs, watch them, tell.

Every `poll_interval` seconds the driver reads each in-flight run's new objective values
(reporting them, and stopping the run if the pruner says so), tells the study
how each ended run went, and starts new trials while fewer than `parallel` are in flight
and the budget is not spent. The budget counts every trial of the study (across resumes,
and across machines sharing a storage) except those cut short from outside, whose values
are queued again when the driver starts. Only this thread touches Optuna `Trial` objects.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal

from core.engine import Engine
from core.engine.repeats import repeat_configs
from core.knobs import InvalidInput
from core.store import UnknownRunError, owner
from core.sweep.objective import OBJECTIVE_ATTR, named
from core.sweep.trial_run import (
    CUT_SHORT,
    DRIVER,
    REASON,
    RETRY_OF,
    RUN_ID,
    RUN_IDS,
    SWEEP_STOPPED,
    Outcome,
    TrialCounts,
    TrialRun,
)

if TYPE_CHECKING:
    import optuna

    from core.engine.api import Runs
    from core.sweep.plan import SweepPlan

#: How long stopping waits for in-flight runs to end before it fails their trials anyway.
STOP_TIMEOUT: Final = 60.0


class Driver:
    """Runs a sweep's trials to the end of its budget, or until `stop_requested` is set
    or `stop_asked()` says a stop came through the store (see `control.py`).

    Args:
        engine: Where the trials' runs train.
        study: The Optuna study that samples the trials and is told their values.
        plan: The sweep's checked plan: the base config, the space, the budget, how
            many trials at once, the objective.
        poll_interval: Seconds between two looks at the in-flight runs' new values.
        stop_requested: Set in this process to stop the sweep, and its runs in flight.
        stop_asked: Whether a stop came through the store (from any process); read
            between two looks.
    """

    def __init__(
        self,
        engine: Runs,
        study: optuna.Study,
        plan: SweepPlan,
        *,
        poll_interval: float,
        stop_requested: threading.Event,
        stop_asked: Callable[[], bool] = lambda: False,
    ) -> None:
        self.engine = engine
        self.study = study
        self.plan = plan
        self.poll_interval = poll_interval
        self.stop_requested = stop_requested
        self.stop_asked = stop_asked
        self.in_flight: dict[int, TrialRun] = {}  # by trial number
        # An engine in this process wakes the driver when a run validates or ends.
        self.local_engine = engine if isinstance(engine, Engine) else None

    def __call__(self) -> Literal["done", "stopped"]:
        """Drives the sweep in the calling thread; returns how it ended. Whatever it
        raises, every trial it started has been told first (as far as storage allows)."""
        try:
            # The only driver of the study in this process (`DRIVERS`) has started nothing
            # yet: trials of this process left running are an earlier driver's.
            settle_abandoned(self.engine, self.study, driven_here=False)
            self._queue_retries()
            while not self.stop_requested.is_set():
                seen = self._milestones()
                self._poll()
                while len(self.in_flight) < self.plan.parallel and self._budget_left():
                    self._launch()
                if not self.in_flight and not self._budget_left():
                    return "done"
                if self.stop_asked():
                    break
                self._rest(seen)
            return "stopped"
        finally:
            self._stop_all()

    def _milestones(self) -> int:
        return self.local_engine.milestones if self.local_engine is not None else 0

    def _rest(self, seen: int) -> None:
        """Waits `poll_interval` before the next look, or less. On an engine in this
        process, until a run validates or ends after `seen` milestones, so that the
        pruner judges its value, or its trial is told and the next one started, at once
        (a stop asked for meanwhile is seen within the interval). Waiting out the interval
        cost a trial of 100 steps of mlp on digits 0.3 s of its 1.6 s, and a trial the
        pruner stopped ran on meanwhile. On another engine, until a stop is asked for."""
        if self.local_engine is not None:
            self.local_engine.wait_for_milestone(seen, self.poll_interval)
        else:
            self.stop_requested.wait(self.poll_interval)

    # Trials in flight ---------------------------------------------------------------------

    def _launch(self) -> None:
        """Asks for a trial and starts its run; a trial whose run cannot start fails."""
        trial = self.study.ask(self.plan.distributions())
        name = f"sweep {self.study.study_name} #{trial.number}"
        try:
            configs = repeat_configs(
                self.plan.trial_config(trial.params, name=name), self.plan.repeats
            )
            run_ids = []
            for config in configs:
                run_ids.append(self.engine.start(config))
        except InvalidInput as exc:  # a repeat refused: the trial's others are withdrawn
            for run_id in run_ids:
                self.engine.stop(run_id)
            trial.set_user_attr(REASON, f"invalid config: {exc}")
            self.study.tell(trial, state=_state("FAIL"))
            return
        except Exception:
            # The engine closed (or worse): the values were never tried, so a resume retries.
            trial.set_user_attr(CUT_SHORT, True)
            self.study.tell(trial, state=_state("FAIL"))
            raise
        trial.set_user_attr(DRIVER, owner.current())  # before the run id: see `settle_abandoned`
        if len(run_ids) > 1:
            trial.set_user_attr(RUN_IDS, run_ids)
        trial.set_user_attr(RUN_ID, run_ids[0])
        self.in_flight[trial.number] = TrialRun(trial, run_ids, self.plan.objective)

    def _poll(self) -> None:
        for number, trial_run in list(self.in_flight.items()):
            outcome = trial_run.poll(self.engine, self.plan.pruning)
            if outcome is not None:
                self._finish(number, outcome)

    def _finish(self, number: int, outcome: Outcome) -> None:
        trial_run = self.in_flight.pop(number)
        trial_run.tell(self.study, outcome)

    def _stop_all(self) -> None:
        """Stops every in-flight run, waits for them to end, and tells their trials. It
        runs on every way out, an error's included, so it raises nothing itself: a trial
        that storage cannot update is left running, for the engine (or a resume) to settle."""
        for trial_run in self.in_flight.values():
            with contextlib.suppress(Exception):  # e.g. a closed store; the poll drops it
                trial_run.stop(self.engine, SWEEP_STOPPED)
        deadline = time.monotonic() + STOP_TIMEOUT
        while self.in_flight and time.monotonic() < deadline:
            for number, trial_run in list(self.in_flight.items()):
                self._quietly(number, functools.partial(trial_run.poll, self.engine, False))
            if self.in_flight:
                time.sleep(min(self.poll_interval, 0.1))
        for number in list(self.in_flight):
            self._quietly(number, lambda: Outcome("FAIL", reason=SWEEP_STOPPED, cut_short=True))

    def _quietly(self, number: int, outcome: Callable[[], Outcome | None]) -> None:
        """Finishes trial `number` with `outcome()` if it has one; drops it on any error."""
        try:
            if (result := outcome()) is not None:
                self._finish(number, result)
        except Exception:
            self.in_flight.pop(number, None)

    # The budget and resuming ----------------------------------------------------------------

    def _budget_left(self) -> bool:
        """Whether the study holds fewer counted trials than the budget, or queued ones."""
        trials = self.study.get_trials(deepcopy=False)
        return TrialCounts.of(trials).to_run(self.plan.n_trials) > 0

    def _queue_retries(self) -> None:
        """Queues the values of trials cut short that have no retry yet, as many as the
        budget has room for, the earliest first."""
        trials = self.study.get_trials(deepcopy=False)
        retried = {t.user_attrs.get(RETRY_OF) for t in trials}
        cut_short = [t for t in trials if t.user_attrs.get(CUT_SHORT) and t.number not in retried]
        room = self.plan.n_trials - TrialCounts.of(trials).counted
        for trial in cut_short[: max(room, 0)]:
            self.study.enqueue_trial(trial.params, user_attrs={RETRY_OF: trial.number})


def settle_abandoned(engine: Runs, study: optuna.Study, *, driven_here: bool) -> int:
    """Tells `study` how the runs of its abandoned trials ended; returns how many it told.

    A trial is abandoned when it is left RUNNING by a driver that no longer drives: its
    process is gone (a sweep killed mid-trial), or it is this process and `driven_here` is
    false (a driver whose storage failed). Once its run has ended, the trial ends as the
    run did (see `TrialRun`): COMPLETE with its best objective value, or FAIL, cut
    short when the run was interrupted so that a resume runs its values again. Trials whose
    run still trains, or is not in this store (another machine's), stay as they are; so
    do trials of a driver at work here when `driven_here`, and of live processes.
    """
    import optuna

    told = 0
    objective = named(study.user_attrs.get(OBJECTIVE_ATTR))
    for frozen in study.get_trials(deepcopy=False, states=(_state("RUNNING"),)):
        if not abandoned(engine, frozen, driven_here=driven_here):
            continue
        # Optuna has no public way to take over a running trial after a restart.
        trial = optuna.Trial(study, frozen._trial_id)
        last_step = max(frozen.intermediate_values, default=None)
        trial_run = TrialRun(trial, run_ids_of(frozen), objective, last_step)
        try:
            if (outcome := trial_run.poll(engine, pruning=False)) is not None:
                trial_run.tell(study, outcome)
                told += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another process settled it first
    return told


def abandoned(engine: Runs, frozen: optuna.trial.FrozenTrial, *, driven_here: bool) -> bool:
    """Whether a trial is abandoned and its run has ended, so that `settle_abandoned`
    would settle it (see there): a cheap check on a trial as read from storage.

    Args:
        engine: The runs' engine, for their statuses and other processes' liveness.
        frozen: The trial as the storage holds it; only a RUNNING one can be abandoned.
        driven_here: Whether a driver of this process is at work on the study: a trial
            this process drove is abandoned only when none is.
    """
    if frozen.state.name != "RUNNING":
        return False
    run_ids, driver = run_ids_of(frozen), frozen.user_attrs.get(DRIVER)
    here = driver == owner.current()
    if not run_ids or (driven_here if here else engine.liveness()(driver)):
        return False
    try:
        return not any(engine.status(run_id).active for run_id in run_ids)
    except UnknownRunError:
        return False


def run_ids_of(frozen: optuna.trial.FrozenTrial) -> list[str]:
    """The runs of a trial, once started: its repeats', or its one."""
    run_id = frozen.user_attrs.get(RUN_ID)
    return list(frozen.user_attrs.get(RUN_IDS) or ([run_id] if run_id is not None else []))


def _state(name: str) -> optuna.trial.TrialState:
    from optuna.trial import TrialState

    return TrialState[name]
