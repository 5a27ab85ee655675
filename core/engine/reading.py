"""`RunReader`: runs as the store holds them, what an engine and its clients answer alike."""

from __future__ import annotations

from core.engine.checkpoints import Checkpoint, RunCheckpoints
from core.engine.status import Progress, RunStatus
from core.knobs import InvalidInput
from core.store import Event, Metrics, RunRecord, Store, UnknownRunError
from core.store.owner import Liveness


class RunReader:
    """Reads runs, their metrics and events from `store`. An engine adds the progress of
    the runs it trains (`_live`), fresher than the store's."""

    store: Store

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

    def events(self, run_id: str) -> list[Event]:
        """Knob changes, pauses, divergence and the run's initial fingerprints, by step."""
        return self.store.events(run_id)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        """The run's saved checkpoints, by step: what it can resume or fork from."""
        saved = saved_checkpoints(self.store, run_id)
        return saved.list() if saved is not None else []

    def disk_bytes(self, run_id: str) -> int:
        """What the run's checkpoints take on disk."""
        saved = saved_checkpoints(self.store, run_id)
        return saved.size() if saved is not None else 0

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
