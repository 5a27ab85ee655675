"""`TrialRun`: one Optuna trial trained as one engine run, from launch to the trial's end.

The trial reports every new value of its objective's validation metric (the accuracy of
a classification, the mean absolute error of a regression) as an intermediate value at
the run's step. It ends with the run: a completed run tells its best value;
a run stopped because the pruner said so ends PRUNED; every other end is a FAIL, with the
run's status and the reason in the trial's user attributes. A diverged run is a FAIL too:
its configuration did not train, and a made-up value (0, or chance accuracy) would mix a
number that was never measured into what the sampler learns from and what the sweep
reports as its results.

A trial whose run was cut short by something outside its own configuration (the engine
closed, the process died, or the sweep was stopped) is marked `cut_short`, so that a
resumed sweep runs its values again instead of counting it (see `driver.py`).
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.knobs import InvalidInput
from core.store import FINAL_STATUSES, UnknownRunError
from core.sweep.objective import Objective

if TYPE_CHECKING:
    import optuna

    from core.engine import Engine, RunStatus

# Trial user attributes. `run_id` links a trial to its run in the lab's store.
RUN_ID = "run_id"
RUN_STATUS = "run_status"
REASON = "reason"
CUT_SHORT = "cut_short"
RETRY_OF = "retry_of"
#: The process whose driver started the trial's run (`core.store.owner`), so that a
#: trial its driver abandoned (the process was killed) can be told how its run ended.
DRIVER = "driver"

#: Why the sweep itself asked a run to stop.
PRUNED = "pruned"
SWEEP_STOPPED = "the sweep was stopped"


@dataclass(frozen=True)
class TrialCounts:
    """A study's trials by state. A trial cut short (by a stopped sweep or a closed
    engine) runs again on a resume: it neither finishes nor fails.

    Attributes:
        finished: Trials that have ended and count toward the budget.
        running: Trials training now (in a shared storage, other machines' too).
        pruned: Finished trials the pruner stopped.
        failed: Finished trials whose run failed (diverged, say).
        counted: Trials that count toward the budget: every one not cut short.
        queued: Trials waiting for a driver to run them (retries of those cut short).
    """

    finished: int
    running: int
    pruned: int
    failed: int
    counted: int
    queued: int

    @classmethod
    def of(cls, trials: Sequence[optuna.trial.FrozenTrial]) -> TrialCounts:
        kept = Counter(t.state.name for t in trials if not t.user_attrs.get(CUT_SHORT))
        return cls(
            finished=kept["COMPLETE"] + kept["PRUNED"] + kept["FAIL"],
            running=sum(t.state.name == "RUNNING" for t in trials),
            pruned=kept["PRUNED"],
            failed=kept["FAIL"],
            counted=kept.total(),
            queued=sum(t.state.name == "WAITING" for t in trials),
        )

    def to_run(self, n_trials: int) -> int:
        """How many trials a driver would still run for a budget of `n_trials`."""
        return max(n_trials - self.counted, 0) + self.queued


@dataclass(frozen=True)
class Outcome:
    """How a trial ends: its state, its value (COMPLETE only) and what the table shows."""

    state: str  # an optuna.trial.TrialState name: COMPLETE, PRUNED or FAIL
    value: float | None = None
    run_status: str | None = None
    reason: str | None = None
    cut_short: bool = False


class TrialRun:
    """A trial in flight and its run; used by the sweep's driver thread only."""

    def __init__(
        self,
        trial: optuna.Trial,
        run_id: str,
        objective: Objective,
        last_step: int | None = None,
    ) -> None:
        """`last_step`: the run's step up to which the trial has reported already."""
        self.trial = trial
        self.run_id = run_id
        self.objective = objective
        self.last_step = last_step  # the largest step of the run's metrics read so far
        self.stop_reason: str | None = None  # set once the sweep has asked the run to stop

    def poll(self, engine: Engine, pruning: bool) -> Outcome | None:
        """Reports the run's new objective values and asks the pruner about them
        (when `pruning`); returns the outcome once the run has ended, else None."""
        try:
            # The status first: a run's metrics are all stored before it ends, so once the
            # status is final, the read below has every value.
            status = engine.status(self.run_id)
            reported = self._report_new(engine)
        except UnknownRunError:
            return Outcome("FAIL", reason="the run was deleted from the store")
        if status.status in FINAL_STATUSES:
            return self._outcome(status)
        if pruning and reported and self.stop_reason is None and self.trial.should_prune():
            self.stop(engine, PRUNED)
        return None

    def stop(self, engine: Engine, reason: str) -> None:
        """Asks the run to stop (it does within one step); a run that has ended stays so."""
        if self.stop_reason is None:
            self.stop_reason = reason
        with contextlib.suppress(InvalidInput, UnknownRunError):
            engine.stop(self.run_id)  # raises if the run has ended: the next poll tells how

    def tell(self, study: optuna.Study, outcome: Outcome) -> None:
        """Ends the trial in the study with `outcome`."""
        from optuna.trial import TrialState

        for key, value in (
            (RUN_STATUS, outcome.run_status),
            (REASON, outcome.reason),
            (CUT_SHORT, outcome.cut_short or None),
        ):
            if value is not None:
                self.trial.set_user_attr(key, value)
        # A PRUNED trial takes its last intermediate value; FAIL has none.
        values = outcome.value if outcome.state == "COMPLETE" else None
        study.tell(self.trial, values, state=TrialState[outcome.state])

    def _report_new(self, engine: Engine) -> bool:
        metrics = engine.metrics(self.run_id, since_step=self.last_step)
        if not len(metrics):
            return False
        self.last_step = metrics.last_step
        metric = self.objective.metric
        if metric not in metrics:
            return False
        reported = False
        steps, values = metrics.steps.tolist(), metrics[metric].tolist()
        for step, value in zip(steps, values, strict=True):
            if math.isfinite(value):
                self.trial.report(value, step)
                reported = True
        return reported

    def _outcome(self, status: RunStatus) -> Outcome:
        final = status.final_metrics or {}
        best = final.get(self.objective.best_key)
        match status.status:
            case "completed" if best is not None:
                return Outcome("COMPLETE", float(best), "completed")
            case "completed":
                return Outcome("FAIL", None, "completed", "the run never validated")
            case "stopped" if self.stop_reason == PRUNED:
                return Outcome("PRUNED", None, "stopped")
            case "stopped" if self.stop_reason == SWEEP_STOPPED:
                return Outcome("FAIL", None, "stopped", SWEEP_STOPPED, cut_short=True)
            case "stopped":
                return Outcome("FAIL", None, "stopped", "the run was stopped outside the sweep")
            case "diverged":
                where = final.get("diverged_at")
                reason = "the loss diverged" + (f" at step {where}" if where is not None else "")
                return Outcome("FAIL", None, "diverged", reason)
            case "interrupted":
                reason = "the run was interrupted (its engine closed)"
                return Outcome("FAIL", None, "interrupted", reason, cut_short=True)
            case _:
                reason = (status.error or "the run failed").splitlines()[0]
                return Outcome("FAIL", None, status.status, reason)
