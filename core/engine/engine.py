"""`Engine`: starts runs in background threads, queues the rest, and answers for them.

At most `max_concurrent` runs train at once; the others wait in a FIFO queue. Every
method is thread-safe and returns at once (except `wait` and `close`): a dashboard with
many sessions, a CLI and tests all drive the same object. Runs and metrics live in the
`Store`; the engine keeps only the control state of runs that have not ended.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.engine import owner
from core.engine.config import RunConfig
from core.engine.execution import RunControl, RunExecution
from core.knobs import InvalidHyperparameters, live_change
from core.store import ACTIVE_STATUSES, Event, Metrics, RunRecord, Store, UnknownRunError


class Progress(NamedTuple):
    """A live run's progress, as the engine's control of it says."""

    status: str
    step: int
    steps_per_second: float | None


@dataclass(frozen=True)
class RunStatus:
    """A run as a caller sees it: the stored record, with live progress while it trains."""

    id: str
    name: str
    status: str
    config: dict[str, Any]
    step: int
    total_steps: int | None
    created: float
    started: float | None
    finished: float | None
    error: str | None
    final_metrics: dict[str, Any] | None
    steps_per_second: float | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def progress(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the current speed, while the run trains."""
        if not self.steps_per_second or self.total_steps is None or not self.active:
            return None
        return (self.total_steps - self.step) / self.steps_per_second


class Engine:
    """Runs training in background threads; see the module docstring.

    Args:
        store: A `Store`, or a path for one (default: `$OPTLAB_STORE`, else
            `runs/optlab.sqlite`). Runs left active by a process that died are marked
            interrupted when the engine starts; other live processes' runs are not.
        max_concurrent: How many runs train at the same time.
    """

    def __init__(
        self, store: Store | str | os.PathLike[str] | None = None, *, max_concurrent: int = 2
    ) -> None:
        if isinstance(max_concurrent, bool) or not 1 <= int(max_concurrent) <= 64:
            raise ValueError(f"max_concurrent: must be in [1, 64] (got {max_concurrent!r})")
        self.store = store if isinstance(store, Store) else Store(store)
        self.max_concurrent = int(max_concurrent)
        self.interrupted_at_start = self.store.mark_interrupted(is_alive=owner.alive)
        self._lock = threading.RLock()
        self._controls: dict[str, RunControl] = {}
        self._queue: deque[str] = deque()
        self._running: set[str] = set()
        self._closed = False

    # Starting and controlling runs ------------------------------------------------------

    def start(self, config: RunConfig | Mapping[str, Any]) -> str:
        """Queues a run and returns its id. An invalid config raises
        `InvalidHyperparameters` naming every bad field, and nothing is stored."""
        if not isinstance(config, RunConfig):
            config = RunConfig.from_dict(config)
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            run_id = self._new_id()
            self.store.create_run(
                run_id, config.label, config.to_dict(), status="queued", owner=owner.current()
            )
            self._controls[run_id] = RunControl(run_id, config)
            self._queue.append(run_id)
            self._schedule()
        return run_id

    def stop(self, run_id: str) -> None:
        """Stops a run within one step (a queued run never starts)."""
        with self._lock:
            control = self._active(run_id)
            if run_id in self._queue:
                self._queue.remove(run_id)
                self._end_queued(control, "stopped")
            else:
                control.request_stop("stopped")

    def pause(self, run_id: str) -> None:
        """Pauses a run after its current step; a queued run pauses when it starts."""
        self._active(run_id).request_pause(True)

    def resume(self, run_id: str) -> None:
        self._active(run_id).request_pause(False)

    def update(self, run_id: str, **knobs: float) -> None:
        """Changes live optimizer knobs from the run's next step on; each change becomes an
        event at the first step that uses it. Raises `InvalidHyperparameters` naming each
        bad knob, and then changes nothing."""
        from core import optimizers

        control = self._active(run_id)
        spec = optimizers.get_spec(control.config.optimizer)
        errors, values = {}, {}
        for name, value in knobs.items():
            was_on = control.config.hyperparameters.get(name) is not None
            try:
                values[name] = live_change(spec.knobs, name, value, was_on=was_on)
            except ValueError as exc:
                errors[name] = str(exc)
        if errors:
            raise InvalidHyperparameters(errors)
        for name, value in values.items():
            control.updates.put((name, value))

    # Reading --------------------------------------------------------------------------

    def status(self, run_id: str) -> RunStatus:
        live = self._progress()
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(f"run_id: no run {run_id!r}")
        return self._status(record, live.get(run_id))

    def list(self) -> list[RunStatus]:
        """Every run in the store, newest first."""
        live = self._progress()
        return [self._status(record, live.get(record.id)) for record in self.store.list_runs()]

    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        """The run's logged metrics, only those after `since_step` when given."""
        return self.store.read_metrics(run_id, since_step)

    def events(self, run_id: str) -> list[Event]:
        """Knob changes, pauses, divergence and the run's initial fingerprints, by step."""
        return self.store.events(run_id)

    def wait(self, run_id: str, timeout: float | None = None) -> RunStatus:
        """Blocks until the run ends (or `timeout` passes) and returns its status."""
        with self._lock:
            control = self._controls.get(run_id)
        if control is not None:
            control.done.wait(timeout)
        return self.status(run_id)

    def close(self, timeout: float = 30.0) -> None:
        """Ends every run that has not ended as interrupted, then closes the store."""
        with self._lock:
            self._closed = True
            while self._queue:
                run_id = self._queue.popleft()
                self._end_queued(self._controls[run_id], "interrupted")
            controls = list(self._controls.values())
        for control in controls:
            control.request_stop("interrupted")
        deadline = time.monotonic() + timeout
        for control in controls:
            control.done.wait(max(0.0, deadline - time.monotonic()))
        self.store.close()

    # Internals ------------------------------------------------------------------------

    def _new_id(self) -> str:
        while True:
            run_id = time.strftime("%m%d-") + secrets.token_hex(3)
            if run_id not in self._controls and self.store.get_run(run_id) is None:
                return run_id

    def _active(self, run_id: str) -> RunControl:
        with self._lock:
            control = self._controls.get(run_id)
        if control is None:
            if self.store.get_run(run_id) is None:
                raise UnknownRunError(f"run_id: no run {run_id!r}")
            raise InvalidHyperparameters({"run_id": f"run {run_id} has ended"})
        return control

    def _schedule(self) -> None:
        """Starts queued runs while there is room (lock held)."""
        while self._queue and len(self._running) < self.max_concurrent:
            run_id = self._queue.popleft()
            self._running.add(run_id)
            thread = threading.Thread(
                target=self._execute,
                args=(self._controls[run_id],),
                name=f"run-{run_id}",
                daemon=True,
            )
            thread.start()

    def _execute(self, control: RunControl) -> None:
        try:
            RunExecution(control, self.store)()
        finally:
            with self._lock:
                self._running.discard(control.run_id)
                del self._controls[control.run_id]
                control.done.set()
                if not self._closed:
                    self._schedule()

    def _end_queued(self, control: RunControl, status: str) -> None:
        control.status = status
        self.store.finish(control.run_id, status, {"steps": 0})
        del self._controls[control.run_id]
        control.done.set()

    def _progress(self) -> dict[str, Progress]:
        """(status, step, steps/s) of every run not ended, copied at once. Read before the
        store's records: a run that ends in between then shows its final record."""
        with self._lock:
            return {
                run_id: Progress(c.status, c.step, c.steps_per_second)
                for run_id, c in self._controls.items()
            }

    def _status(self, record: RunRecord, live: Progress | None) -> RunStatus:
        step, speed, status = record.step, None, record.status
        if live is not None and record.status in ACTIVE_STATUSES:
            step = max(step, live.step)
            status = live.status if live.status in ACTIVE_STATUSES else status
            speed = live.steps_per_second
        elif record.final_metrics:
            speed = record.final_metrics.get("steps_per_second")
            step = record.final_metrics.get("steps", step)
        return RunStatus(
            id=record.id,
            name=record.name,
            status=status,
            config=record.config,
            step=step,
            total_steps=record.total_steps,
            created=record.created,
            started=record.started,
            finished=record.finished,
            error=record.error,
            final_metrics=record.final_metrics,
            steps_per_second=speed,
        )
