"""`Engine`: starts runs in background threads, queues the rest, and answers for them.

With a Ray address, its runs train as actors on the cluster's nodes instead, each
steered from a thread here (see `core.engine.cluster`).

At most `max_concurrent` runs train at once; the others wait in a FIFO queue. Every
method is thread-safe and returns at once (except `wait` and `close`): a server, a CLI
and tests all drive the same object. Runs and metrics live in the `Store`; the engine
keeps only the control state of runs that have not ended. It also takes the commands
other processes write to the store for its runs (see `core.engine.commands`), so a
dashboard steers any run, whichever process trains it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.engine.checkpoints import RunCheckpoints
from core.engine.cluster import ClusterError, RayCluster, runs_at_once
from core.engine.commands import CommandListener
from core.engine.execution import RunControl, RunExecution
from core.engine.forks import create_fork
from core.engine.handover import check_handed_over
from core.engine.reading import RunReader
from core.engine.status import Progress, RunStatus
from core.knobs import InvalidInput
from core.store import ACTIVE_STATUSES, Command, Store, UnknownRunError, owner
from core.store.paths import check_run_id
from core.training import tf_import
from core.training.config import RunConfig
from core.training.footprint import check_fits
from core.training.live import checked_changes


class Engine(RunReader):
    """Runs training in background threads; see the module docstring.

    Args:
        store: A `Store`, or a path or `postgresql://` URL for one (default: `$OPTLAB_STORE`, else
            `runs/optlab.sqlite`). Runs left active by a process that died are marked
            interrupted when the engine starts; other live processes' runs are not.
        max_concurrent: How many runs train at the same time.
        ray_address: A Ray cluster to train on (see `core.engine.cluster`): each run
            becomes an actor on a node with the run's `num_cpus` and `num_gpus` free,
            instead of a thread here. Raises `ClusterError` if it cannot be joined, or
            cannot reach this store.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        max_concurrent: int = 2,
        ray_address: str | None = None,
    ) -> None:
        if isinstance(max_concurrent, bool) or not 1 <= int(max_concurrent) <= 64:
            raise ValueError(f"max_concurrent: must be in [1, 64] (got {max_concurrent!r})")
        self.store = store if isinstance(store, Store) else Store(store)
        self.max_concurrent = int(max_concurrent)
        try:
            self.cluster = RayCluster(ray_address, self.store) if ray_address else None
        except ClusterError:
            if not isinstance(store, Store):  # the store it opened, not the caller's
                self.store.close()
            raise
        self.owner = owner.current()
        self.interrupted_at_start = self.store.mark_interrupted()
        self._lock = threading.RLock()
        self._milestone = threading.Condition(self._lock)
        #: How many times one of this engine's runs validated or ended (see
        #: `wait_for_milestone`).
        self.milestones = 0
        self._controls: dict[str, RunControl] = {}
        self._queue: deque[str] = deque()
        self._running: set[str] = set()
        self._closed = False
        self._serving = False  # see `serve_store`
        self._listener = CommandListener(self.store, self.owner, self.handle, self._speeds)

    # Starting and controlling runs ------------------------------------------------------

    def start(self, config: RunConfig | Mapping[str, Any]) -> str:
        """Queues a run and returns its id. An invalid config, or one whose model cannot
        fit in the memory available (see `core.training.footprint`), raises `InvalidInput`
        naming every bad field, and nothing is stored."""
        return self.start_all([config])[0]

    def start_all(self, configs: Iterable[RunConfig | Mapping[str, Any]]) -> list[str]:
        """Queues runs together (a group of repeats, the demo race) and returns their ids:
        every config is checked as `start` checks one before any is stored, so that they
        start whole or not at all. A mapping is validated here, once; a `RunConfig` was
        when it was made."""
        checked = [
            config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
            for config in configs
        ]
        for config in checked:
            self._check_fits(config)
        run_ids = []
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            for config in checked:
                run_ids.append(self.store.new_run_id())
                self.store.create_run(
                    run_ids[-1], config.label, config.to_dict(), status="queued", owner=self.owner
                )
                self._enqueue(run_ids[-1], config)
        return run_ids

    def handle(self, command: Command) -> None:
        """Carries out a command written to the store for one of this engine's runs.
        Raises `InvalidInput` (or `UnknownRunError`) to refuse it."""
        if command.kind == "start":
            if not self._serving:
                raise InvalidInput(
                    {"run_id": f"run {command.run_id}: this process serves no store"}
                )
            self._accept(command.run_id, handed_over=True)
        elif command.kind == "stop":
            self.stop(command.run_id)
        elif command.kind == "pause":
            self.pause(command.run_id, command.payload.get("at_step"))
        elif command.kind == "resume":
            self.resume(command.run_id)
        elif command.kind == "set":
            self.update(command.run_id, **command.payload.get("knobs", {}))
        elif command.kind == "export":
            self._export(command.run_id, command.payload.get("checkpoint", "last"))
        elif command.kind == "landscape":
            self._landscape(command.run_id, int(command.payload.get("step", 0)))
        else:
            raise InvalidInput({"command": f"unknown command {command.kind!r}"})

    def stop(self, run_id: str) -> None:
        """Stops a run within one step (a queued run never starts)."""
        with self._lock:
            control = self._active(run_id)
            if run_id in self._queue:
                self._queue.remove(run_id)
                self._end_queued(control, "stopped")
            else:
                control.request_stop("stopped")

    def pause(self, run_id: str, at_step: int | None = None) -> None:
        """Pauses a run after its current step; a queued run pauses when it starts. With
        `at_step`, once it has taken that step instead (at once if it is past it), with
        a checkpoint of it: where a population's members meet (`core.population`). Raises
        `InvalidInput` naming `at_step` for a step that is not a whole number ≥ 0."""
        control = self._active(run_id)
        if at_step is None:
            control.request_pause(True)
            return
        if isinstance(at_step, bool) or not isinstance(at_step, int) or at_step < 0:
            raise InvalidInput({"at_step": f"must be a whole number ≥ 0 (got {at_step!r})"})
        control.request_pause_at(at_step)

    def resume(self, run_id: str) -> None:
        """Unpauses a paused run of this engine; or queues a stopped or interrupted run
        again, in this engine, to continue from its last checkpoint (the metrics it
        logged after that checkpoint are replaced by the resumed run's). Raises
        `InvalidInput` for a run that cannot be resumed."""
        with self._lock:
            control = self._controls.get(run_id)
        if control is not None:
            control.request_pause(False)
            return
        step = last_checkpoint(self.store, run_id)
        self.store.reopen(run_id, step, owner=self.owner)
        self._accept(run_id)

    def fork(self, run_id: str, step: int, **changes: Any) -> str:
        """Starts a fork of `run_id` from its checkpoint of `step`, in this engine, with
        knobs or run fields changed (see `core.engine.forks`); returns its id. Raises
        `InvalidInput` naming every change it cannot make, and then stores nothing."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            fork_id = create_fork(self.store, run_id, step, changes, owner=self.owner)
            self._accept(fork_id)
        return fork_id

    def model_file(self, run_id: str, checkpoint: str = "last") -> Path:
        """The run's trained model at `checkpoint` (`"last"`, `"best"` or a step as
        text) as a `.keras` file, written beside the checkpoint the first time (see
        `core.engine.model_file`). Raises `InvalidInput` naming `checkpoint`."""
        from core.engine.model_file import kept_model

        return kept_model(self.store, run_id, checkpoint)

    def _export(self, run_id: str, checkpoint: str) -> None:
        """`model_file` for a command: any failure refuses the command, with its reason,
        and leaves the command listener at work."""
        self._check_rebuilt(run_id)
        try:
            self.model_file(run_id, checkpoint)
        except (InvalidInput, UnknownRunError):
            raise
        except Exception as exc:  # a full disk, a layer Keras cannot save
            raise ValueError(f"model: not written ({type(exc).__name__}: {exc})") from exc

    def _landscape(self, run_id: str, step: int) -> None:
        """Computes and keeps the loss landscape of a checkpoint (`landscape` commands;
        see `core.engine.landscape`); any failure refuses the command, with its reason."""
        from core.engine.landscape import kept_landscape

        self._check_rebuilt(run_id)
        try:
            kept_landscape(self.store, run_id, step)
        except (InvalidInput, UnknownRunError):
            raise
        except Exception as exc:  # a full disk, a model that cannot be rebuilt
            raise ValueError(f"landscape: not computed ({type(exc).__name__}: {exc})") from exc

    def serve_store(self) -> None:
        """Makes this the engine that serves its store (see `core.engine.server`): it takes
        the runs handed to it through the store (`start` commands, which any other engine
        refuses, so that a service row naming it, written by hand, hands it nothing), and
        writes the models and landscapes asked for of every run of the store (`export`
        and `landscape` commands), whoever trained it, as it has TensorFlow at hand."""
        self._serving = True
        self._listener.any_run = ("export", "landscape")

    def update(self, run_id: str, **knobs: float) -> None:
        """Changes live knobs (see `core.training.live`) from the run's next step on; each
        change becomes an event at the first step that uses it. Raises `InvalidInput`
        naming each bad knob, and then changes nothing: the engine's check of a change,
        asked here or through the store (a `set` command). The optimizer's `set_knob`,
        its own public API, guards the value it is handed too."""
        control = self._active(run_id)
        values = checked_changes(control.config.to_dict(), self.status(run_id).knobs, knobs)
        if values:
            control.updates.put(values)  # one change: all its knobs at one step

    # Reading --------------------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any] | None:
        """The Ray cluster the runs train on: `address`, `nodes`, `cpus`, `gpus`,
        `free_cpus`, `free_gpus` (or `address` and `error` if it cannot be read); None
        without one."""
        if self.cluster is None:
            return None
        try:
            return self.cluster.info().to_dict()
        except Exception as exc:  # a cluster that went away: say so
            return {"address": self.cluster.address, "error": str(exc)}

    def room(self, config: RunConfig) -> int:
        """How many runs like `config` train here at once (see `Runs.room`)."""
        return runs_at_once(self.max_concurrent, self.cluster_info(), config)

    def loading(self) -> str | None:
        """What a run started here now waits for before it builds its model: TensorFlow,
        until this process has imported it (`core.training.tf_import`)."""
        return None if tf_import.loaded() else tf_import.STACK

    def busy(self) -> bool:
        """Whether a run is queued or training."""
        with self._lock:
            return bool(self._controls)

    def wait(self, run_id: str, timeout: float | None = None) -> RunStatus:
        """Blocks until the run ends (or `timeout` passes) and returns its status."""
        with self._lock:
            control = self._controls.get(run_id)
        if control is not None:
            control.done.wait(timeout)
        return self.status(run_id)

    def wait_for_milestone(self, seen: int, timeout: float) -> None:
        """Blocks until `milestones` passes `seen` (a run of this engine validated, with
        its metrics stored, or ended), or `timeout` seconds pass. A sweep's driver waits
        so between two looks at its trials: it reports a validation to the pruner, tells
        a trial's end and starts the next as soon as they happen. Raises `RuntimeError`
        once the engine is closed: the runs it ended then were cut short, and no other
        will start."""
        with self._milestone:
            self._milestone.wait_for(lambda: self.milestones > seen or self._closed, timeout)
            if self._closed:
                raise RuntimeError("the engine is closed")

    def _reached_milestone(self) -> None:
        """Counts a run's validation or end, and wakes `wait_for_milestone`."""
        with self._milestone:
            self.milestones += 1
            self._milestone.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Ends every run that has not ended as interrupted, then closes the store. The
        command listener, and the heartbeat by which other hosts know the runs' process
        alive, stop once the runs have ended (a start it takes meanwhile is refused)."""
        with self._lock:
            self._closed = True
            self._milestone.notify_all()
            while self._queue:
                run_id = self._queue.popleft()
                self._end_queued(self._controls[run_id], "interrupted")
            controls = list(self._controls.values())
        for control in controls:
            control.request_stop("interrupted")
        deadline = time.monotonic() + timeout
        for control in controls:
            control.done.wait(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        if self.cluster is not None:
            self.cluster.close()
        self.store.close()

    # Internals ------------------------------------------------------------------------

    def _active(self, run_id: str) -> RunControl:
        with self._lock:
            control = self._controls.get(run_id)
        if control is None:
            record = self.store.get_run(run_id)
            if record is None:
                raise UnknownRunError(run_id)
            if record.status in ACTIVE_STATUSES:  # stored, its start command not read yet
                raise InvalidInput(
                    {"run_id": f"run {run_id} is {record.status}, not yet in this engine"}
                )
            raise InvalidInput({"run_id": f"run {run_id} has ended"})
        return control

    def _accept(self, run_id: str, *, handed_over: bool = False) -> None:
        """Queues a run stored for this engine: a resume or a fork asked here, or, when
        `handed_over`, a `start` command another process wrote (whose config may read
        only what `core.engine.handover` allows). One whose id names no folder (a row
        written by hand) is refused. A config refused (`InvalidInput`) ends the run
        before anything is read or trained, saying why: failed, or interrupted if it
        trained before (a resume: it stays resumable, as the memory it lacked may come
        free)."""
        check_run_id(run_id)
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(run_id)
        if record.status != "queued":
            raise InvalidInput({"run_id": f"run {run_id} is {record.status}"})
        try:
            if handed_over:
                check_handed_over(record.config, self.store.datasets_folder)
            config = RunConfig.from_dict(record.config)
            self._check_fits(config)
        except InvalidInput as exc:
            status = "failed" if record.started is None else "interrupted"
            self.store.finish(run_id, status, {"steps": record.step}, str(exc))
            raise
        with self._lock:
            if self._closed:
                raise InvalidInput({"run_id": "the engine is closing"})
            if run_id not in self._controls:
                self._enqueue(run_id, config, record.step)

    def _check_rebuilt(self, run_id: str) -> None:
        """Refuses to rebuild a run from its stored config for a command through the store
        (an export, a landscape), as a run handed over is refused: when the config reads
        what `core.engine.handover` does not allow (only a local `optlab export` reads
        any path), or its model cannot fit."""
        record = self.store.get_run(run_id)
        if record is None:
            raise UnknownRunError(run_id)
        check_handed_over(record.config, self.store.datasets_folder)
        self._check_fits(RunConfig.from_dict(record.config))

    def _check_fits(self, config: RunConfig) -> None:
        """Refuses a run whose model cannot fit in this machine's memory; a Ray cluster's
        run trains on a node of its own, which measures it against its own (see
        `core.engine.cluster.RunActor`)."""
        if self.cluster is not None:
            return
        if config.strategy == "multiworker":
            # TensorFlow sets up collectives only before its context starts, which
            # measuring the model starts: the strategy comes first (one per process).
            from core.training.strategies import make_strategy

            make_strategy(config.strategy)
        check_fits(config)

    def _enqueue(self, run_id: str, config: RunConfig, step: int = 0) -> None:
        """Adds a stored, queued run to the queue, to start after `step` (lock held)."""
        self._controls[run_id] = RunControl(run_id, config, step, validated=self._reached_milestone)
        self._queue.append(run_id)
        self._schedule()

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
            if self.cluster is not None:
                self.cluster.execute(control, self.store)
            else:
                RunExecution(control, self.store)()
        finally:
            with self._lock:
                self._running.discard(control.run_id)
                del self._controls[control.run_id]
                control.done.set()
                self._reached_milestone()
                if not self._closed:
                    self._schedule()

    def _end_queued(self, control: RunControl, status: str) -> None:
        control.status = status
        self.store.finish(control.run_id, status, {"steps": 0})
        del self._controls[control.run_id]
        control.done.set()
        self._reached_milestone()

    def _live(self) -> dict[str, Progress]:
        """(status, step, steps/s) of every run not ended, copied at once."""
        with self._lock:
            return {
                run_id: Progress(c.status, c.step, c.steps_per_second)
                for run_id, c in self._controls.items()
            }

    def _speeds(self) -> dict[str, tuple[int, float | None]]:
        """(step, steps/s) of the runs training now, for the command listener to publish."""
        return {
            run_id: (progress.step, progress.steps_per_second)
            for run_id, progress in self._live().items()
            if progress.status == "running"
        }


def last_checkpoint(store: Store, run_id: str) -> int:
    """The step of the run's last checkpoint, to resume from; raises `InvalidInput` when
    it has none (`UnknownRunError` when there is no such run)."""
    record = store.get_run(run_id)
    if record is None:
        raise UnknownRunError(run_id)
    checkpoint = RunCheckpoints(store.checkpoint_folder(run_id)).last()
    if checkpoint is None:
        raise InvalidInput({"run_id": f"run {run_id} has no checkpoint to resume from"})
    return checkpoint.step
