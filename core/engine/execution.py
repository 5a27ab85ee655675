"""One run, from queued to its final status: the loop a run's thread executes.

The loop owns the run's `Trainer` and its metrics writer. Between two steps it honours
stop and pause requests and applies live knob changes, so each takes effect within one
step. Every way out of the loop ends in `store.finish` with a final status: completed,
stopped, diverged (non-finite loss), failed (with the error), or interrupted (the engine
closed). Metrics logged before any of these stay in the store.

It saves checkpoints (see `core.engine.checkpoints`) on the run's schedule, and when the
run pauses, stops, is interrupted or completes. A run queued at a step S > 0 (a resumed
one, see `Store.reopen`) starts from its checkpoint of step S.
"""

from __future__ import annotations

import gc
import math
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.data import DatasetUnavailable
from core.engine.checkpoints import CheckpointSchedule, RunCheckpoints
from core.engine.lr_find import Explosion
from core.store import (
    DIVERGED_EVENT,
    HISTOGRAM_EVENT,
    KNOB_EVENT,
    LR_FIND_ENDED_EVENT,
    PER_LAYER_EVENT,
    PRIVACY_BUDGET_EVENT,
    RESTORED_EVENT,
    Store,
    StoreError,
)
from core.training import tf_import
from core.training.config import LR_FIND, RunConfig
from core.training.knob_schedule import changes_at
from core.training.per_layer_schedule import per_layer_schedule

# Final-metric keys copied from the last logged row.
FINAL_KEYS = (
    "loss",
    "accuracy",
    "mae",
    "val_loss",
    "val_accuracy",
    "val_mae",
    "param_norm",
    "grad_norm",
)
# The best of each validation score over a run, kept as `best_<key>` in its final metrics:
# the highest accuracy of a classification, the lowest absolute error of a regression, and
# the lowest loss of either (a sweep's objective: see `core.sweep.objective`).
BEST = {"val_accuracy": max, "val_mae": min, "val_loss": min}


@dataclass
class RunControl:
    """The engine's side of a run: requests in, progress out. Thread-safe."""

    run_id: str
    config: RunConfig
    step: int = 0  # the last step taken (or, before it starts, the checkpoint it resumes)
    stop_reason: str | None = None  # "stopped" or "interrupted" once requested
    paused: bool = False
    pause_at: int | None = None  # pause once this step is taken (at once if past it)
    status: str = "queued"
    node: str = field(default_factory=socket.gethostname)  # the machine that trains it
    _trained_seconds: float = 0.0  # finished training intervals, pauses excluded
    _resumed_at: float | None = None  # start of the current training interval
    # Each item the knobs of one change, applied together at one step.
    updates: queue.SimpleQueue[dict[str, float]] = field(default_factory=queue.SimpleQueue)
    wake: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    #: Called when the run has validated and stored the step's metrics.
    validated: Callable[[], None] = lambda: None

    def request_stop(self, reason: str = "stopped") -> None:
        self.stop_reason = self.stop_reason or reason
        self.wake.set()

    def request_pause(self, paused: bool) -> None:
        self.paused = paused
        self.wake.set()

    def request_pause_at(self, step: int) -> None:
        self.pause_at = step
        self.wake.set()

    def clock_continue(self, seconds: float) -> None:
        """Counts `seconds` of earlier training (a resumed run's) in its training time."""
        self._trained_seconds = seconds

    def clock_start(self) -> None:
        self._resumed_at = time.perf_counter()

    def clock_stop(self) -> None:
        if self._resumed_at is not None:
            self._trained_seconds += time.perf_counter() - self._resumed_at
            self._resumed_at = None

    @property
    def training_seconds(self) -> float:
        """Time spent training so far, pauses excluded, the current interval included."""
        current = 0.0 if self._resumed_at is None else time.perf_counter() - self._resumed_at
        return self._trained_seconds + current

    @property
    def steps_per_second(self) -> float | None:
        seconds = self.training_seconds
        return self.step / seconds if seconds > 0 and self.step else None


class RunExecution:
    """Executes one run in the calling thread (see the module docstring)."""

    def __init__(self, control: RunControl, store: Store) -> None:
        self.control = control
        self.store = store
        self.run_id = control.run_id
        self.config = control.config
        self.last: dict[str, float] = {}
        self.best: dict[str, float] = {}  # see `BEST`
        self.diverged_at: int | None = None
        self.checkpoints = RunCheckpoints(store.checkpoint_folder(self.run_id))
        self.schedule = CheckpointSchedule(self.config.checkpoint_every)
        self.per_layer = per_layer_schedule(self.config)
        self.planned = changes_at(self.config.knob_schedule)  # the knob schedule's, by step
        self.trainer: Any = None
        self.writer: Any = None  # the run's metrics writer, while it trains
        # A range test (kind lr_find) watches its loss and skips validation.
        self.explosion = Explosion() if self.config.kind == LR_FIND else None

    def __call__(self) -> str:
        """Trains until the run ends; returns its final status."""
        status, error = "failed", None
        writer = None
        try:
            tf_import.load()
            from core.training.strategies import make_strategy
            from core.training.trainer import Trainer

            self._set_status("running")  # preparing data and model is part of the run
            self.store.set_node(self.run_id, self.control.node)
            start = self.control.step
            trainer = Trainer(self.config, make_strategy(self.config.strategy), start=start)
            self.trainer = trainer
            self.store.set_progress(self.run_id, start, total_steps=trainer.data.total_steps)
            if start:
                self._restore(trainer, start)
            else:
                self.store.add_event(self.run_id, 0, "init", _init_event(trainer))
            writer = self.writer = self.store.metrics_writer(self.run_id)
            try:
                status = self._train(trainer, writer)
            finally:
                trainer.close()
                self.trainer = None
                gc.collect()  # what is left of the run now, while it is little
            writer.close()
        except StoreError as exc:
            # Metrics that could not be written: the run never ends `completed`.
            status, error = "failed", f"store: {exc}"
        except DatasetUnavailable as exc:
            error = str(exc)  # says what to do; where in the lab it was raised does not help
        except Exception as exc:
            error = _summary(exc)
        finally:
            if writer is not None and not writer.closed:
                try:
                    writer.close()
                except StoreError as exc:
                    status, error = "failed", f"store: {exc}"
            if error is not None and error.startswith("store:"):
                error += self._unsaved()
        self.control.status = status
        self.store.finish(self.run_id, status, self._final_metrics(), error)
        return status

    def _restore(self, trainer: Any, step: int) -> None:
        """Takes up the run where its checkpoint of `step` left it, and what its stored
        metrics up to there say (the last and best values of its final metrics)."""
        checkpoint = self.checkpoints.find(step)
        if checkpoint is None:
            raise RuntimeError(f"run {self.run_id} has no checkpoint of step {step} to resume")
        trainer.restore(checkpoint.prefix)
        record = self.store.get_run(self.run_id)
        if record is not None and record.forked_at == step:
            self._branch(trainer)
        self.control.clock_continue(checkpoint.seconds)
        self.schedule = CheckpointSchedule(self.config.checkpoint_every, checkpoint.seconds)
        metrics = self.store.read_metrics(self.run_id)
        for key in metrics.keys:
            known = metrics[key][~np.isnan(metrics[key])]
            if len(known):
                self.last[key] = float(known[-1])
        for key, pick in BEST.items():
            known = metrics[key][np.isfinite(metrics[key])] if key in metrics else []
            if len(known):
                self.best[key] = float(pick(known))
        self.store.add_event(self.run_id, step, RESTORED_EVENT, {"seconds": checkpoint.seconds})

    def _branch(self, trainer: Any) -> None:
        """A fork starting from its parent's state: the knobs its config changes become
        live changes at its first step, marked on its charts where the branch begins."""
        changes = {}
        for knob in trainer.optimizer.knobs:
            value = self.config.hyperparameters.get(knob.name)
            if knob.live and value is not None and value != trainer.optimizer.get_knob(knob.name):
                changes[knob.name] = value
        if changes:
            self.control.updates.put(changes)

    def _checkpoint(self, step: int, val_accuracy: float | None = None) -> None:
        """Saves the checkpoint of `step` (unless checkpoints are off), with the step's
        validation accuracy if it validated, and prunes."""
        if self.config.checkpoint_every == 0 or self.trainer is None or step == 0:
            return
        began = time.perf_counter()
        # The metrics up to the checkpoint are stored before it: a process (or node) lost
        # after it leaves no gap between them and a resume from it.
        if self.writer is not None:
            self.writer.flush()
        seconds = self.control.training_seconds
        self.checkpoints.save(step, seconds, self.trainer.save, val_accuracy)
        self.schedule.saved(time.perf_counter() - began, self.control.training_seconds)
        # Kept beside the last few: those forks were taken from, and the best validated.
        kept = self.store.fork_points(self.run_id)
        if (best := self.checkpoints.best()) is not None:
            kept.add(best.step)
        self.checkpoints.prune(protected=kept)

    def _unsaved(self) -> str:
        """What the store lacks of a run a store error stopped, said for its error."""
        try:
            stored = self.store.last_step(self.run_id) or 0
        except StoreError:
            return ""
        return (
            f" (metrics after step {stored} were not saved; it stopped at step {self.control.step})"
        )

    def _train(self, trainer: Any, writer: Any) -> str:
        self.control.clock_start()
        try:
            return self._loop(trainer, writer)
        finally:
            self.control.clock_stop()

    def _loop(self, trainer: Any, writer: Any) -> str:
        control, config = self.control, self.config
        if config.telemetry:
            writer.add_event(control.step, PER_LAYER_EVENT, self._per_layer_interval())
        for step in range(control.step + 1, trainer.data.total_steps + 1):
            if control.pause_at is not None and step - 1 >= control.pause_at:
                control.pause_at, control.paused = None, True
            if control.paused and control.stop_reason is None:
                control.clock_stop()
                self._wait_while_paused(step - 1)
                control.clock_start()
            # Before a stop too: a change its sender was told was taken is recorded, and
            # the stop's checkpoint holds it for a resume.
            self._apply_updates(trainer, writer, step)
            if control.stop_reason is not None:
                self._checkpoint(control.step)
                return control.stop_reason

            if trainer.private is not None and step > trainer.private.last_step:
                self.store.add_event(
                    self.run_id, step - 1, PRIVACY_BUDGET_EVENT, trainer.private.record()
                )
                self._checkpoint(control.step)
                return "completed"  # the next step would spend more than the budget

            last_step = step == trainer.data.total_steps
            # A step that measures logs too: its instruments' values beside the loss,
            # and a divergence it finds beside the loss that shows it.
            measures = trainer.measures(step)
            log = step % config.log_every == 0 or last_step or measures
            # Without telemetry there are no per-layer statistics to schedule.
            timed = log and config.telemetry and not measures  # an instrument's step differs
            per_layer = log and config.telemetry and self.per_layer.due(step, last=last_step)
            began = time.perf_counter()
            measured = trainer.step(step, log=log, per_layer=per_layer)
            took = time.perf_counter() - began
            if timed and self.per_layer.timed(took, per_layer=per_layer):
                writer.add_event(step, PER_LAYER_EVENT, self._per_layer_interval())
            row = dict(measured.values)
            if log:
                row["epoch"] = step / trainer.data.steps_per_epoch
                row["wall_time"] = time.time()  # when the step was logged (Unix seconds)
            if measured.histograms is not None:
                writer.add_event(step, HISTOGRAM_EVENT, measured.histograms)
            validate_every = config.val_every or trainer.data.steps_per_epoch
            validates = (step % validate_every == 0 or last_step) and self.explosion is None
            if validates:
                row |= trainer.evaluate()
            if row:
                writer.append(step, row)
                self._remember(row)
            if validates:
                # Committed at once, not at the writer's next interval: a sweep's pruner
                # (which `validated` wakes once it is) judges a trial by it, and the run
                # trains meanwhile. The writer's thread commits it, so a locked store
                # still holds up only that thread.
                writer.flush_soon(control.validated)
            self.diverged_at = measured.diverged_at or self.diverged_at
            control.step = step
            if self.explosion is not None and (reason := self._exploded(row)):
                self.store.add_event(self.run_id, step, LR_FIND_ENDED_EVENT, {"reason": reason})
                return "completed"  # the range test's end; its curve is complete
            if self.diverged_at is not None:
                self.store.add_event(
                    self.run_id, self.diverged_at, DIVERGED_EVENT, {"loss": row.get("loss")}
                )
                return "diverged"  # no checkpoint: its weights are not finite
            if last_step or self.schedule.due(step, control.training_seconds):
                self._checkpoint(step, row.get("val_accuracy"))
        return "completed"

    def _per_layer_interval(self) -> dict[str, Any]:
        """What a per-layer interval event records: the interval, and what set it."""
        return {"every": self.per_layer.every, "budget": self.per_layer.budget_share}

    def _exploded(self, row: dict[str, float]) -> str | None:
        """Why a range test ends at the step of `row`: its loss exploded, or it diverged."""
        assert self.explosion is not None
        if self.diverged_at is not None:
            return f"the loss or the weights stopped being finite at step {self.diverged_at}"
        return self.explosion.ended(row["loss"]) if "loss" in row else None

    def _wait_while_paused(self, step: int) -> None:
        self._checkpoint(step)
        self._set_status("paused")
        self.store.add_event(self.run_id, step, "paused", {})
        while self.control.paused and self.control.stop_reason is None:
            self.control.wake.wait(timeout=1.0)
            self.control.wake.clear()
        if self.control.stop_reason is None:
            self._set_status("running")
            self.store.add_event(self.run_id, step, "resumed", {})

    def _apply_updates(self, trainer: Any, writer: Any, step: int) -> None:
        """The knob schedule's changes for `step`, then the live changes sent (a person's
        change outlasts a planned one of the same step), each recorded as an event at the
        first step that uses it."""
        pending = [self.planned[step]] if step in self.planned else []
        while True:
            try:
                pending.append(self.control.updates.get_nowait())
            except queue.Empty:
                break
        for changes in pending:
            for name, value in changes.items():
                holder = trainer.knob_holder(name)
                previous = holder.get_knob(name)
                value = holder.set_knob(name, value)
                writer.add_event(
                    step, KNOB_EVENT, {"name": name, "value": value, "previous": previous}
                )

    def _set_status(self, status: str) -> None:
        self.control.status = status
        self.store.set_status(self.run_id, status)

    def _remember(self, row: dict[str, float]) -> None:
        self.last |= row
        for key, pick in BEST.items():
            value = row.get(key)
            if value is not None and math.isfinite(value):
                self.best[key] = pick(self.best.get(key, value), value)

    def _final_metrics(self) -> dict[str, Any]:
        final: dict[str, Any] = {k: self.last[k] for k in FINAL_KEYS if k in self.last}
        final["steps"] = self.control.step
        final["seconds"] = round(self.control.training_seconds, 3)
        if self.control.steps_per_second:
            final["steps_per_second"] = self.control.steps_per_second
        final |= {f"best_{key}": value for key, value in self.best.items()}
        if self.diverged_at is not None:
            final["diverged_at"] = self.diverged_at
        return final


def _init_event(trainer: Any) -> dict[str, Any]:
    """What a run records at step 0: fingerprints of its start, and its shape."""
    return {
        "weights_sha256": trainer.weights_sha256,
        "first_batch_sha256": trainer.data.first_batch_sha256,
        "layers": trainer.layers,
        "steps_per_epoch": trainer.data.steps_per_epoch,
        "instrument_intervals": trainer.instrument_intervals,
        "replicas": trainer.strategy.num_replicas_in_sync,
        **({"privacy": trainer.private.record()} if trainer.private is not None else {}),
    }


def _summary(exc: BaseException, frames: int = 4) -> str:
    """`Type: message`, then the innermost frames: what a failed run shows."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    stack = traceback.extract_tb(exc.__traceback__)[-frames:]
    where = "\n".join(f"  {f.filename}:{f.lineno} in {f.name}" for f in stack)
    return f"{head}\n{where}" if where else head
