"""`LabCallback`: any script's `model.fit` as a lab run, on the dashboard and steerable.

    from core.engine.callback import LabCallback
    model.fit(x, y, epochs=5, validation_data=(xv, yv), callbacks=[LabCallback(name="mine")])

The run is recorded in the lab's store (`store`, else `$OPTLAB_STORE`, else
`runs/optlab.sqlite`) like the runs the lab trains itself: its config made from the model
and the optimizer, its status, the loss and metrics of every `log_every`-th batch (each
batch's own value, as the lab's own runs log them, not Keras's mean since the epoch began:
see `core.training.batch_values`) and the validation metrics of each epoch. With one of
the lab's optimizers made with `telemetry=True`, each logged step also records the
optimizer's live knobs and statistics (gradient norm before and after clipping, parameter
norm, ...) and the per-layer statistics (step and parameter norms, update ratio,
sparsity, distance from the start), as the lab's own runs do.

The run takes commands from any process, through the store, between two batches: stop,
pause and resume, and live knob changes (`set`) for the lab's optimizers, each recorded
as an event at the step that first uses it. It ends `completed`, or `stopped`; a script
that raises or is killed leaves it `interrupted` once its process has ended. Commands
go to the process, so a process runs one `fit` with a `LabCallback` at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import keras

from core.engine.commands import CommandListener
from core.engine.execution import FINAL_KEYS
from core.knobs import InvalidInput
from core.optimizers.registry import spec_of
from core.store import KNOB_EVENT, Command, Store, owner
from core.training.batch_values import BatchValues
from core.training.telemetry import LayerStatistics, optimizer_readings

#: The `dataset` of a run that a script trains: the data is the script's own.
SCRIPT_DATA = "script"


class LabCallback(keras.callbacks.Callback):
    """Records a `model.fit` as a lab run and lets the dashboard or the CLI steer it.

    Args:
        name: The run's name; default: the model's name and the optimizer's.
        store: The store's path or `postgresql://` URL; default: `$OPTLAB_STORE`, else
            `runs/optlab.sqlite`.
        log_every: Log every this many batches (the last batch of a fit always logs).

    After `fit`, `run_id` names the run (`python -m core runs` lists it).
    """

    def __init__(
        self,
        name: str | None = None,
        store: str | Path | None = None,
        *,
        log_every: int = 1,
    ) -> None:
        super().__init__()
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise InvalidInput({"log_every": f"must be an integer ≥ 1 (got {log_every!r})"})
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidInput({"name": f"must be a non-empty text (got {name!r})"})
        self.name = name
        self.store_path = store
        self.log_every = log_every
        self.run_id: str | None = None
        self.step = 0
        self._store: Store | None = None
        self._writer: Any = None
        self._listener: CommandListener | None = None
        self._statistics: LayerStatistics | None = None
        self._batch_values: BatchValues | None = None
        self._changes: list[tuple[str, float]] = []
        self._lock = threading.Lock()  # guards `_changes`, `_paused`, `_stop`
        self._paused = False
        self._stop = False
        self._wake = threading.Event()
        self._last: dict[str, float] = {}
        self._row: dict[str, float] = {}  # the current step's, until it is written
        self._started = 0.0

    # Keras's hooks ------------------------------------------------------------------------

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        # Each `fit` is a run of its own, from step 1.
        self.step, self._last, self._row = 0, {}, {}
        self._paused = self._stop = False
        store = self._store = Store(self.store_path)
        optimizer = self.model.optimizer
        spec = spec_of(optimizer)
        config = self._config(spec)
        self.run_id = store.new_run_id()
        # The fit's own owner name: an engine in this process takes only its own runs'
        # commands, and this listener only this run's. It beats before the run is
        # stored, so that no host ever sees the run without a live owner.
        identity = owner.current(f"fit-{self.run_id}")
        self._listener = CommandListener(store, identity, self._handle, self._progress)
        try:
            store.create_run(self.run_id, config["name"], config, status="running", owner=identity)
            store.set_progress(self.run_id, 0, total_steps=self.total_steps)
            self._writer = store.metrics_writer(self.run_id)
        except BaseException:  # no run to beat for: the fit fails, the listener goes
            self._listener.close()
            self._listener = None
            raise
        telemetry = spec is not None and optimizer.telemetry
        self._statistics = LayerStatistics(self.model, optimizer) if telemetry else None
        self._batch_values = BatchValues(self.model)
        shape = {"layers": self._layers(), "steps_per_epoch": self.params.get("steps")}
        self._writer.add_event(0, "init", shape)
        self._started = time.monotonic()

    def on_train_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._wait_while_paused()
        with self._lock:
            changes, self._changes = self._changes, []
        for name, value in changes:
            self._apply(name, value)
        if self._logs(self.step + 1):
            assert self._batch_values is not None
            self._batch_values.before(batch)

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._write()
        self.step += 1
        if self._logs(self.step):
            self._row = self._logged(logs or {})
        with self._lock:
            if self._stop:
                self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        validated = {k: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        self._row |= validated  # beside the epoch's last step: one row per step
        self._write()

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        assert self._store is not None and self.run_id is not None
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            status = "stopped" if self._stop else "completed"
        self._write()
        self._writer.close()
        final = {k: self._last[k] for k in FINAL_KEYS if k in self._last}
        final["steps"] = self.step
        final["seconds"] = round(time.monotonic() - self._started, 3)
        self._store.finish(self.run_id, status, final)
        self._store.close()

    # Commands from other processes ----------------------------------------------------

    def _handle(self, command: Command) -> None:
        """Takes a command for the run; its effect comes between two batches."""
        if command.run_id != self.run_id:
            raise InvalidInput({"run_id": f"run {command.run_id} is not this script's"})
        with self._lock:
            if command.kind == "stop":
                self._stop = True
            elif command.kind == "pause":
                if command.payload.get("at_step") is not None:
                    raise InvalidInput({"at_step": "a script's run pauses between batches only"})
                self._paused = True
            elif command.kind == "resume":
                self._paused = False
            elif command.kind == "set":
                if spec_of(self.model.optimizer) is None:
                    raise InvalidInput({"knobs": "only the lab's optimizers have live knobs"})
                self._changes.extend(command.payload.get("knobs", {}).items())
            else:
                raise InvalidInput({"command": f"a script's run cannot {command.kind}"})
        self._wake.set()

    def _progress(self) -> dict[str, tuple[int, float | None]]:
        seconds = time.monotonic() - self._started
        return {self.run_id: (self.step, self.step / seconds if seconds > 0 else None)}

    def _wait_while_paused(self) -> None:
        with self._lock:
            paused = self._paused and not self._stop
        if not paused:
            return
        assert self._store is not None and self.run_id is not None
        self._store.set_status(self.run_id, "paused")
        self._writer.add_event(self.step, "paused", {})
        while True:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            with self._lock:
                if not self._paused or self._stop:
                    break
        self._store.set_status(self.run_id, "running")
        self._writer.add_event(self.step, "resumed", {})

    def _apply(self, name: str, value: float) -> None:
        """A live knob change, recorded at the step that first uses it."""
        optimizer = self.model.optimizer
        previous = optimizer.get_knob(name)
        try:
            value = optimizer.set_knob(name, value)
        except InvalidInput:
            return  # checked by whoever asked; a knob turned off here stays off
        self._writer.add_event(
            self.step + 1, KNOB_EVENT, {"name": name, "value": value, "previous": previous}
        )

    # What is recorded -----------------------------------------------------------------

    def _config(self, spec: Any) -> dict[str, Any]:
        """The run's config, as far as a script's fit has one: the model, the optimizer
        and its knobs, and `fit`'s length; the data is the script's."""
        optimizer = self.model.optimizer
        if spec is not None:
            optimizer_name = spec.name
            knobs = {knob.name: optimizer.get_knob(knob.name) for knob in spec.knobs}
        else:
            optimizer_name = f"keras:{type(optimizer).__name__}"
            knobs = {"learning_rate": float(keras.ops.convert_to_numpy(optimizer.learning_rate))}
        return {
            "name": self.name or f"{optimizer_name} · {self.model.name} (script)",
            "optimizer": optimizer_name,
            "hyperparameters": knobs,
            "model": self.model.name,
            "dataset": SCRIPT_DATA,
            "batch_size": None,
            "epochs": self.params.get("epochs"),
            "max_steps": self.total_steps,
            "seed": None,
            "log_every": self.log_every,
            "telemetry": bool(getattr(optimizer, "telemetry", False)),
        }

    def _layers(self) -> list[str]:
        if self._statistics is not None:
            return self._statistics.layers
        return [layer.name for layer in self.model.layers if layer.trainable_weights]

    def _logs(self, step: int) -> bool:
        """Whether `step` is logged: every `log_every`-th, and the fit's last."""
        return step % self.log_every == 0 or step == self.total_steps

    def _logged(self, logs: Mapping[str, Any]) -> dict[str, float]:
        """The row of the step just taken: its batch's loss and metrics, and the lab's
        telemetry."""
        assert self._batch_values is not None
        row = self._batch_values.of({k: float(v) for k, v in logs.items() if _number(v)})
        if self._statistics is not None:
            per_layer = self._statistics()
            readings = optimizer_readings(self.model.optimizer, per_layer)
            row |= {k: float(v) for k, v in readings.items()} | self._statistics.row(per_layer)
        row["epoch"] = self.step / self.params["steps"] if self.params.get("steps") else 0.0
        row["wall_time"] = time.time()
        return row

    def _write(self) -> None:
        """Writes the row of the current step, held until the step is over (the epoch's
        validation joins the row of its last step)."""
        if self._row:
            self._writer.append(self.step, self._row)
            self._last |= self._row
            self._row = {}

    @property
    def total_steps(self) -> int | None:
        """`fit`'s epochs times its batches per epoch, when it knows them."""
        epochs, steps = self.params.get("epochs"), self.params.get("steps")
        return epochs * steps if epochs and steps else None


def _number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
