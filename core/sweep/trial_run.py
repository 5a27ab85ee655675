"""`TrialRun`: one Optuna trial trained as engine runs, from launch to the trial's end:
one run, or the repeats of its config over seeds (`SweepPlan.repeats`), whose mean is
the trial's value, so that the sampler does not chase a lucky seed.

The trial reports every new value of its objective's validation metric (accuracy, loss,
mean absolute error; time to target's, the metric its target is on) as an intermediate value at
the run's step (the mean over its runs, at the steps that every one has logged, so that
pruning compares means). It ends with its runs: completed runs tell their best value
(the mean of their best values, with the half-width of its 95% t-interval as `spread`);
time to target's are valued by the first step at which the runs reached the target, and
a run that never reached it fails; a run stopped because the pruner said so ends PRUNED;
every other end is a FAIL, with the
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

from core.group_comparison import mean_interval
from core.knobs import InvalidInput
from core.store import FINAL_STATUSES, UnknownRunError
from core.sweep.objective import TIME_TO_TARGET, Objective

if TYPE_CHECKING:
    import optuna

    from core.engine import RunStatus
    from core.engine.api import Runs

# Trial user attributes. `run_id` links a trial to its (first) run in the lab's store;
# `run_ids`, to every run of a trial of repeats.
RUN_ID = "run_id"
RUN_IDS = "run_ids"
SPREAD = "spread"
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
    spread: float | None = None  # over the runs of a trial of repeats: see `combined`


def combined(outcomes: Sequence[Outcome]) -> Outcome:
    """A trial's outcome from its runs': the first cut short, else the first failure,
    else pruned if any was, else COMPLETE with the mean of their values (and the
    half-width of its 95% t-interval as `spread`)."""
    if len(outcomes) == 1:
        return outcomes[0]
    for ended in (
        next((o for o in outcomes if o.cut_short), None),
        next((o for o in outcomes if o.state == "FAIL"), None),
        next((o for o in outcomes if o.state == "PRUNED"), None),
    ):
        if ended is not None:
            return ended
    mean, margin = mean_interval([o.value for o in outcomes if o.value is not None])
    return Outcome("COMPLETE", mean, "completed", spread=margin)


class TrialRun:
    """A trial in flight and its runs; used by the sweep's driver thread only."""

    def __init__(
        self,
        trial: optuna.Trial,
        run_ids: str | Sequence[str],
        objective: Objective,
        last_step: int | None = None,
    ) -> None:
        """`run_ids`: the trial's run, or runs; `last_step`: the step up to which the
        trial has reported already."""
        self.trial = trial
        self.run_ids = (run_ids,) if isinstance(run_ids, str) else tuple(run_ids)
        self.objective = objective
        self.last_step = last_step  # the last step reported to the trial
        # Each run's metrics are read from where the last read ended; a value waits in
        # `pending` (step → run → value) until every run has logged its step.
        self._read: dict[str, int | None] = dict.fromkeys(self.run_ids, last_step)
        self._pending: dict[int, dict[str, float]] = {}
        self.stop_reason: str | None = None  # set once the sweep has asked the runs to stop

    @property
    def run_id(self) -> str:
        """The trial's (first) run."""
        return self.run_ids[0]

    def poll(self, engine: Runs, pruning: bool) -> Outcome | None:
        """Reports the runs' new objective values and asks the pruner about them (when
        `pruning`); returns the outcome once every run has ended, else None."""
        try:
            # The statuses first: a run's metrics are all stored before it ends, so once
            # its status is final, the read below has every value.
            statuses = [engine.status(run_id) for run_id in self.run_ids]
            reported = self._report_new(engine)
        except UnknownRunError:
            return Outcome("FAIL", reason="the run was deleted from the store")
        if all(status.status in FINAL_STATUSES for status in statuses):
            return combined([self._outcome(engine, status) for status in statuses])
        if pruning and reported and self.stop_reason is None and self.trial.should_prune():
            self.stop(engine, PRUNED)
        return None

    def stop(self, engine: Runs, reason: str) -> None:
        """Asks the runs to stop (they do within one step); a run that has ended stays so."""
        if self.stop_reason is None:
            self.stop_reason = reason
        for run_id in self.run_ids:
            with contextlib.suppress(InvalidInput, UnknownRunError):
                engine.stop(run_id)  # raises if the run has ended: the next poll tells how

    def tell(self, study: optuna.Study, outcome: Outcome) -> None:
        """Ends the trial in the study with `outcome`."""
        from optuna.trial import TrialState

        for key, value in (
            (RUN_STATUS, outcome.run_status),
            (REASON, outcome.reason),
            (CUT_SHORT, outcome.cut_short or None),
            (SPREAD, outcome.spread),
        ):
            if value is not None:
                self.trial.set_user_attr(key, value)
        # A PRUNED trial takes its last intermediate value; FAIL has none.
        values = outcome.value if outcome.state == "COMPLETE" else None
        study.tell(self.trial, values, state=TrialState[outcome.state])

    def _report_new(self, engine: Runs) -> bool:
        """Reports the mean over the runs at each new step that every run has a finite
        value of the objective's metric at; whether it reported any."""
        metric = self.objective.metric
        for run_id in self.run_ids:
            metrics = engine.metrics(run_id, since_step=self._read[run_id])
            if not len(metrics):
                continue
            self._read[run_id] = metrics.last_step
            if metric not in metrics:
                continue
            for step, value in zip(metrics.steps.tolist(), metrics[metric].tolist(), strict=True):
                if math.isfinite(value):
                    self._pending.setdefault(step, {})[run_id] = value
        reported = False
        for step in sorted(self._pending):
            values = self._pending[step]
            if len(values) == len(self.run_ids):
                self.trial.report(sum(values.values()) / len(values), step)
                self.last_step = step
                reported = True
                del self._pending[step]
        return reported

    def _outcome(self, engine: Runs, status: RunStatus) -> Outcome:
        final = status.final_metrics or {}
        best = final.get(self.objective.best_key)
        match status.status:
            case "completed" if self.objective.name == TIME_TO_TARGET:
                return self._time_to_target(engine, status)
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

    def _time_to_target(self, engine: Runs, status: RunStatus) -> Outcome:
        """A completed run's time to target: the first step it validated at with the
        target reached (read from its stored metrics); a FAIL if it never did."""
        metric, metrics = self.objective.metric, engine.metrics(status.id)
        reached = None
        if metric in metrics:
            steps, values = metrics.steps.tolist(), metrics[metric].tolist()
            reached = self.objective.reached_at(steps, values)
        if reached is None:
            reason = f"never reached the target ({self.objective.label}) in {status.step} steps"
            return Outcome("FAIL", None, "completed", reason)
        return Outcome("COMPLETE", float(reached), "completed")
