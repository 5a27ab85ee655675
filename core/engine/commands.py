"""Commands through the store: how any process steers a run that another process trains.

A dashboard, a CLI in another terminal, or a script writes a command (`Store.add_command`:
start, stop, pause, resume, set knobs, or export its model) for a run. The process that
owns the run polls the store for its runs' commands, carries each out with the same engine
methods a local caller uses, and marks it handled, with the reason when it refuses one
(an export is the serving engine's, whoever owns the run); knob changes then
become events at the step that first uses them, as any change does. The same loop
publishes the progress (step, steps per second) of the runs the process trains, so that
readers in other processes see it without asking, and, on a store that machines share,
beats the process's heartbeat, by which readers on other hosts know that it still trains
its runs (see `core.store.owner`; on a SQLite file every owner is this host's, looked up
in /proc, and a beat would only contend with the metrics' writes).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping

from core.knobs import InvalidInput
from core.store import Command, Store, StoreError, UnknownRunError, is_url
from core.store.owner import HEARTBEAT_SECONDS

POLL_SECONDS = 0.1  # a command is taken within this, plus the run's current step
PUBLISH_SECONDS = 0.5  # progress is written this often (the metrics flush's own pace)
RUNS = "runs"  # the service role of a process (or part of one) that trains runs

Handler = Callable[[Command], None]
ProgressSource = Callable[[], Mapping[str, tuple[int, float | None]]]


class CommandListener:
    """A daemon thread that carries out `owner`'s commands, publishes its progress, and
    on a PostgreSQL store beats its heartbeat (a `RUNS` service row, from before its first
    run is stored until it closes).

    `handle(command)` carries a command out, raising `InvalidInput`,
    `UnknownRunError` or `ValueError` to refuse it (the message becomes the command's
    error). `progress()` returns `{run_id: (step, steps_per_second)}` of the runs training.
    A store error (a lock held too long, a full disk) skips one round; the next retries.
    Commands of the kinds in `any_run` (settable while it listens) are taken for every
    run of the store, whoever owns it: the serving engine's `export`.
    """

    def __init__(self, store: Store, owner: str, handle: Handler, progress: ProgressSource) -> None:
        self.store = store
        self.owner = owner
        self._handle = handle
        self._progress = progress
        self.any_run: tuple[str, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optlab-commands", daemon=True)
        self._beats = is_url(store.location)
        if self._beats:
            store.heartbeat(owner, RUNS)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        # A store gone or full keeps the row: it goes silent, which reads as dead alike.
        if self._beats:
            with contextlib.suppress(StoreError):
                self.store.remove_service(self.owner, RUNS)

    def _run(self) -> None:
        rounds_per_publish = max(1, round(PUBLISH_SECONDS / POLL_SECONDS))
        rounds_per_beat = max(1, round(HEARTBEAT_SECONDS / POLL_SECONDS))
        rounds = 0
        while not self._stop.wait(POLL_SECONDS):
            rounds += 1
            try:
                if self._beats and rounds % rounds_per_beat == 0:
                    self.store.heartbeat(self.owner, RUNS)
                for command in self.store.pending_commands(self.owner, any_run=self.any_run):
                    self.store.mark_handled(command.id, self._carry_out(command))
                if rounds % rounds_per_publish == 0:
                    self.store.publish_progress(self._progress())
            except StoreError:
                continue  # the store is busy or failing; the next round tries again

    def _carry_out(self, command: Command) -> str | None:
        """Carries `command` out; returns why it was refused, or None."""
        try:
            self._handle(command)
        except (InvalidInput, UnknownRunError, ValueError) as exc:
            return str(exc)
        return None
