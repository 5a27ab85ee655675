"""`RunReader`: runs as the store holds them, what an engine and its clients answer alike.

Besides the reads, what needs no training process is done here too, the same for both:
tags, the record of a launch, deleting an ended run, waiting for a command's answer, and
the leave to steer sweeps (which only a viewer's read-only wrapper refuses).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.engine import following
from core.engine.checkpoints import Checkpoint, RunCheckpoints
from core.engine.following import PresenterView
from core.engine.landscape import Landscape, landscape_path, read_progress
from core.engine.status import Progress, RunStatus
from core.knobs import InvalidInput
from core.store import (
    LAUNCH_EVENT,
    Command,
    Event,
    Metrics,
    RunRecord,
    Store,
    UnknownRunError,
)
from core.store.owner import Liveness
from core.store.paths import Location

MAX_TAGS = 20  # per run: the runs table shows them all
SETTLE_POLL_SECONDS = 0.05  # how often `settle` looks at a command


class RunReader:
    """Reads runs, their metrics and events from `store`. An engine adds the progress of
    the runs it trains (`_live`), fresher than the store's."""

    store: Store

    @property
    def location(self) -> Location:
        """Where the store lives: its SQLite file, or its PostgreSQL URL."""
        return self.store.location

    @property
    def datasets_folder(self) -> Path:
        """Where datasets uploaded from the dashboard are kept (`Store.datasets_folder`)."""
        return self.store.datasets_folder

    def liveness(self) -> Liveness:
        """Whether the processes that own runs live (`Store.liveness`)."""
        return self.store.liveness()

    def status(self, run_id: str) -> RunStatus:
        live = self._live()
        alive = self.store.liveness()
        record = self.store.get_run(run_id, alive=alive)
        if record is None:
            raise UnknownRunError(run_id)
        return self._status(record, live.get(run_id), self.store.latest_knobs(run_id), alive)

    def list(self) -> list[RunStatus]:
        """Every run in the store, newest first (the owners' heartbeats read at most once)."""
        live = self._live()
        changed = self.store.latest_knobs()
        alive = self.store.liveness()
        return [
            self._status(record, live.get(record.id), changed, alive)
            for record in self.store.list_runs(alive=alive)
        ]

    def metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        """The run's logged metrics, only those after `since_step` when given."""
        return self.store.read_metrics(run_id, since_step)

    def overview(
        self,
        run_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> Metrics:
        """The run's metrics from step `start` to `end` for a chart, read at a resolution
        that keeps the read bounded however long the run (see `Store.read_overview`)."""
        return self.store.read_overview(run_id, start=start, end=end, means=means)

    def publish_view(self, view: PresenterView) -> None:
        """Writes what the presenter shows, for viewers to follow (`core.engine.following`)."""
        following.publish(self.store, view)

    def presenter_view(self) -> PresenterView | None:
        """What the presenter shows now, None when no presenter's view beats."""
        return following.latest(self.store)

    def last_logged_step(self, run_id: str) -> int | None:
        """The largest step of the run's stored metrics, None before its first: what a
        chart of it drew last, for figures shared across sessions to be keyed by."""
        return self.store.last_step(run_id)

    def events(self, run_id: str, kind: str | None = None) -> list[Event]:
        """Knob changes, pauses, divergence, the launch the run was started in, by step;
        only those of `kind` (`core.store.KNOB_EVENT`, …) when given."""
        return self.store.events(run_id, kind)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        """The run's saved checkpoints, by step: what it can resume or fork from."""
        saved = saved_checkpoints(self.store, run_id)
        return saved.list() if saved is not None else []

    def disk_bytes(self, run_id: str) -> int:
        """What the run's checkpoints take on disk."""
        saved = saved_checkpoints(self.store, run_id)
        return saved.size() if saved is not None else 0

    def landscape(self, run_id: str, step: int) -> Landscape | None:
        """The loss landscape of the run's checkpoint of `step` if it has been computed
        (see `core.engine.landscape`), else None."""
        path = landscape_path(self.store, run_id, step)
        return Landscape.load(path) if path.exists() else None

    def landscape_progress(self, run_id: str, step: int) -> float | None:
        """The fraction computed of a landscape under way; None when none is."""
        return read_progress(self.store, run_id, step)

    def ask_landscape(self, run_id: str, step: int) -> Command:
        """Asks for the landscape of the run's checkpoint of `step`, as a `landscape`
        command, which the engine that serves the store (or the run's own) computes in
        the background: poll `landscape` and `landscape_progress`. Raises `InvalidInput`
        naming `checkpoint` when the run has no such checkpoint."""
        if RunCheckpoints(self.store.checkpoint_folder(run_id)).find(step) is None:
            raise InvalidInput({"checkpoint": f"run {run_id} has no checkpoint of step {step}"})
        return self.store.add_command(run_id, "landscape", {"step": step})

    def get_command(self, command_id: int) -> Command | None:
        """A command written to the store (see `core.engine.commands`), as it is now."""
        return self.store.get_command(command_id)

    def settle(self, command: Command, timeout: float = 2.0) -> Command:
        """The command once its run's process has handled it (or as it is after
        `timeout` seconds): `handled` is then set, and `error` says why it was refused."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.store.get_command(command.id) or command
            if current.handled is not None or time.monotonic() >= deadline:
                return current
            time.sleep(SETTLE_POLL_SECONDS)

    # Bookkeeping, which needs no training process -----------------------------------

    def delete(self, run_id: str) -> None:
        """Deletes an ended run, or one whose process is dead, with its metrics, events
        and checkpoints."""
        alive = self.store.liveness()
        record = self.store.get_run(run_id, alive=alive)
        if record is None:
            raise UnknownRunError(run_id)
        if record.active and alive(record.owner):
            raise InvalidInput({"run_id": f"run {run_id} is {record.status}: stop it"})
        self.store.delete_run(run_id)

    def steer_sweeps(self) -> None:
        """An engine, and a dashboard's client, may start and stop sweeps: it passes."""

    def set_tags(self, run_id: str, tags: Iterable[str]) -> None:
        """Replaces the run's tags: at most `MAX_TAGS`, each 1 to 40 printable characters
        (blank ones are dropped, repeats kept once). Raises `InvalidInput` naming `tags`."""
        clean = list(dict.fromkeys(tag.strip() for tag in tags if tag.strip()))
        for tag in clean:
            if len(tag) > 40 or not tag.isprintable():
                raise InvalidInput({"tags": f"a tag is 1 to 40 printable characters (got {tag!r})"})
        if len(clean) > MAX_TAGS:
            raise InvalidInput({"tags": f"a run has at most {MAX_TAGS} tags (got {len(clean)})"})
        self.store.set_tags(run_id, clean)

    def record_launch(self, run_ids: Sequence[str], launch: Mapping[str, Any]) -> None:
        """Records on each of `run_ids` the launch they were started in together (a
        recipe's, as plain data), as a `LAUNCH_EVENT` at step 0: every session, and every
        process of the store, then finds the whole launch from any of its runs. Raises
        `UnknownRunError` for a run that is not in the store."""
        for run_id in run_ids:
            self.store.add_event(run_id, 0, LAUNCH_EVENT, launch)

    def _live(self) -> dict[str, Progress]:
        """Progress of runs training in this process, copied at once; read before the
        store's records, so that a run ending in between shows its final record."""
        return {}

    @staticmethod
    def _status(
        record: RunRecord,
        live: Progress | None,
        changed: dict[str, dict[str, object]],
        alive: Liveness,
    ) -> RunStatus:
        steerable = record.active and alive(record.owner)
        return RunStatus.of(record, live, changed.get(record.id), steerable=steerable)


def saved_checkpoints(store: Store, run_id: str) -> RunCheckpoints | None:
    """The run's checkpoints, for a listing; None for a run whose id names no folder (a
    row written into the store by hand, see `Store.checkpoint_folder`): it is listed, with
    nothing saved, and every action on its files is refused."""
    try:
        return RunCheckpoints(store.checkpoint_folder(run_id))
    except InvalidInput:
        return None
