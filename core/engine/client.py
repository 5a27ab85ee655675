"""`EngineClient`: runs read and steered through the store, from a process that never trains.

The dashboard uses it in place of an `Engine`: the same methods to read runs and to steer
them, but every action is a command in the store (see `core.engine.commands`), carried
out by the process that trains the run: the engine process for runs started here (see
`core.engine.server`), or a CLI for its own. Nothing here imports TensorFlow, so a page
that watches a run costs the training process nothing but the store's reads.

Validation, once on this side of the store: a config is validated when it becomes a
`RunConfig` (in the dashboard's form, or here for a mapping), never again here; a fork's
changes and live knob changes are validated here, by `fork` and `update`, not by the
forms that send them. The engine validates all of it once more, on its side, as anyone
who can write the store can write a command (see `core.engine.api`).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.engine.checkpoints import RunCheckpoints
from core.engine.cluster import runs_at_once
from core.engine.engine import last_checkpoint
from core.engine.forks import create_fork
from core.engine.handover import check_handed_over
from core.engine.liveness import DASHBOARD, ENGINE, live_service
from core.engine.model_file import choose_checkpoint
from core.engine.reading import MAX_TAGS as MAX_TAGS  # where tests and scripts read it
from core.engine.reading import RunReader
from core.engine.status import RunStatus
from core.knobs import InvalidInput
from core.optimizers.optimizer_catalog import OptimizerSpec, Plugins
from core.plugin_shelf import Published
from core.store import Command, Service, Store, StoreError, owner
from core.store.paths import Location, files_base
from core.training.config import RunConfig
from core.training.live import checked_changes

POLL_SECONDS = 0.1
#: How long one read of the engine's service row answers for what it published (its
#: plugins): one script run of a page asks for them many times.
INFO_SECONDS = 1.0
#: How long `start` and `fork` wait for the engine to take a run, or to refuse it.
ACCEPT_SECONDS = 5.0
# Where each field's reason begins in an `InvalidInput`'s message.
_FIELD = re.compile(r"(?:^|; )([\w/]+): ")


def log_path(location: Location) -> Path:
    """Where the engine process serving the store at `location` logs."""
    base = files_base(location)
    return base.with_name(base.name + ".engine.log")


class EngineUnavailable(RuntimeError):
    """No engine process serves the store, and none could be started."""


class EngineClient(RunReader):
    """Reads runs from `store` and steers them with commands; see the module docstring.

    Args:
        store: The lab's store.
        launch: Starts an engine process for the store when none serves it (the
            dashboard's `core.engine.server.launch`); without it, `start` needs one
            running already.
        engine_wait: How long `start` waits for an engine to come up, in seconds.
    """

    def __init__(
        self,
        store: Store,
        *,
        launch: Callable[[], None] | None = None,
        engine_wait: float = 60.0,
    ) -> None:
        self.store = store
        self._launch = launch
        self.engine_wait = engine_wait
        self._info_lock = threading.Lock()  # the client serves every session's thread
        self._info: tuple[float, dict[str, Any]] | None = None  # read when, what
        #: Whether `close` was called.
        self.closed = False

    # The engine process ---------------------------------------------------------------

    def engine(self) -> Service | None:
        """The engine process serving the store, if any: one on this host that holds the
        store's engine lock counts however late it beats (dead ones are forgotten: see
        `core.engine.liveness`)."""
        return live_service(self.store, ENGINE)

    def ensure_engine(self, *, wait: bool = True) -> Service | None:
        """The serving engine; launches one when there is none, and waits for it to come
        up unless told not to. Raises `EngineUnavailable` if none comes in time."""
        service = self.engine()
        if service is not None:
            return service
        if self._launch is None:
            raise EngineUnavailable(
                f"no engine serves {self.store.name}: start one with `python -m core serve`"
            )
        self._launch()
        deadline = time.monotonic() + (self.engine_wait if wait else 0.0)
        while (service := self.engine()) is None and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        if service is None and wait:
            raise EngineUnavailable(
                f"the engine process for {self.store.name} did not start within "
                f"{self.engine_wait:.0f} s (see {log_path(self.store.location)})"
            )
        return service

    def register_dashboard(self) -> None:
        """Mark this process as a dashboard of the store, which keeps a launched engine
        alive while it lives (see `core.engine.server`), and beat its heartbeat from a
        daemon thread while the client is in use: by it, another host knows that the
        dashboard, and the sweeps it drives, live (see `core.store.owner`)."""
        identity = owner.current()
        self.store.register_service(identity, DASHBOARD, {})
        # A weak reference: a client dropped unclosed (Streamlit's cache cleared) stops too.
        beat = threading.Thread(
            target=_beat_while_used,
            args=(weakref.ref(self), identity),
            name="optlab-dashboard-heartbeat",
            daemon=True,
        )
        beat.start()

    def plugins(self) -> Plugins:
        """The plugin optimizers the engine process loaded, and the files that failed."""
        info = self._service_info()
        specs = [OptimizerSpec.from_description(d) for d in info.get("plugins", [])]
        return specs, dict(info.get("plugin_errors", {}))

    def plugin_models(self) -> Published:
        """The plugin models the engine process loaded, as `Shelf.published` gives them."""
        return list(self._service_info().get("plugin_models", [])), {}

    def plugin_datasets(self) -> Published:
        """The plugin datasets the engine process loaded and read."""
        return list(self._service_info().get("plugin_datasets", [])), {}

    def cluster_info(self) -> dict[str, Any] | None:
        """The Ray cluster the engine trains on: `address`, `nodes`, `cpus`, `gpus`,
        `free_cpus`, `free_gpus` (or `error` if it cannot be read); None without one."""
        return self._service_info().get("cluster")

    def loading(self) -> str | None:
        """What the serving engine loads before it can train a run handed to it now
        (`core.training.tf_import.STACK` as it starts); None once it can, or with no engine."""
        return self._service_info().get("loading")

    @property
    def max_concurrent(self) -> int | None:
        """How many runs the serving engine trains at once; None with no engine."""
        value = self._service_info().get("max_concurrent")
        return value if isinstance(value, int) else None

    def room(self, config: RunConfig) -> int | None:
        """How many runs like `config` the serving engine trains at once (see
        `Runs.room`); None with no engine."""
        at_once = self.max_concurrent
        return None if at_once is None else runs_at_once(at_once, self.cluster_info(), config)

    def _service_info(self) -> dict[str, Any]:
        """What the serving engine published, read at most once per `INFO_SECONDS`."""
        now = time.monotonic()
        with self._info_lock:
            if self._info is not None and now - self._info[0] < INFO_SECONDS:
                return self._info[1]
        service = self.engine()
        info = service.info if service is not None else {}
        with self._info_lock:
            self._info = (now, info)
        return info

    # Starting and steering runs -------------------------------------------------------

    def start(self, config: RunConfig | Mapping[str, Any]) -> str:
        """Hands a run to the engine process and returns its id. An invalid config raises
        `InvalidInput` naming every bad field, and nothing is stored; a run the engine
        refuses raises it too, and is removed (see `_await_acceptance`)."""
        return self.start_all([config])[0]

    def start_all(self, configs: Iterable[RunConfig | Mapping[str, Any]]) -> list[str]:
        """Hands runs to the engine process together (a group of repeats, the demo race),
        so that they start at once, and returns their ids. An invalid config raises
        `InvalidInput` naming every bad field, and nothing is stored (a config that would
        read outside the uploads, before this process reads it: see
        `core.engine.handover`); runs the engine refuses are removed, and the first one's
        reasons raised (see `_await_acceptance`)."""
        checked = [self._handed_over(config) for config in configs]
        service = self.ensure_engine()
        assert service is not None
        run_ids = []
        for config in checked:
            run_ids.append(self.store.new_run_id())
            self.store.create_run(
                run_ids[-1],
                config.label,
                config.to_dict(),
                status="queued",
                owner=service.owner,
                command="start",
            )
        self._await_acceptance(run_ids, service.owner)
        return run_ids

    def fork(self, run_id: str, step: int, **changes: Any) -> str:
        """Hands a fork of `run_id` from its checkpoint of `step` to the engine process,
        with knobs or run fields changed (see `core.engine.forks`); returns its id. A fork
        the engine refuses raises `InvalidInput` (see `_await_acceptance`)."""
        record = self.store.get_run(run_id)
        if record is not None:  # else create_fork says so
            check_handed_over(record.config, self.store.datasets_folder)
        service = self.ensure_engine()
        assert service is not None
        fork_id = create_fork(
            self.store, run_id, step, changes, owner=service.owner, command="start"
        )
        self._await_acceptance([fork_id], service.owner)
        return fork_id

    def _handed_over(self, config: RunConfig | Mapping[str, Any]) -> RunConfig:
        """`config` checked as the engine checks a run handed to it (what it may read);
        a mapping is validated here, a `RunConfig` was when it was made."""
        values = config.to_dict() if isinstance(config, RunConfig) else config
        check_handed_over(values, self.store.datasets_folder)
        return config if isinstance(config, RunConfig) else RunConfig.from_dict(config)

    def _await_acceptance(self, run_ids: Sequence[str], engine: str) -> None:
        """Waits up to `ACCEPT_SECONDS` for the engine `engine` to take the new runs'
        start commands. A run it refused (what it would read, or a model that cannot fit
        in its memory: see `Engine._accept`) ended failed before it started: it is
        deleted, and the first such run's reasons are raised as `InvalidInput`, as a
        local engine's `start` raises them; the others of `run_ids` are withdrawn, so that
        a group starts whole or not at all. A run not taken by then stays queued; refused
        later, it ends failed, saying why."""
        deadline = time.monotonic() + ACCEPT_SECONDS
        waiting = set(run_ids)
        while any(c.run_id in waiting for c in self.store.pending_commands(engine)):
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL_SECONDS / 2)
        refused = [
            record
            for record in map(self.store.get_run, run_ids)
            if record is not None and record.status == "failed" and record.started is None
        ]
        if not refused:
            return
        for record in refused:
            self.store.delete_run(record.id)
        self._withdraw(set(run_ids) - {record.id for record in refused})
        raise InvalidInput(_reasons(refused[0].error or "refused by the engine"))

    def _withdraw(self, run_ids: Iterable[str]) -> None:
        """Stops the runs and deletes each once it has ended (a queued one at once, one
        that started within a step; one that takes longer than `ACCEPT_SECONDS` stays,
        stopped)."""
        commands = [self.stop(run_id) for run_id in run_ids]
        deadline = time.monotonic() + ACCEPT_SECONDS
        for command in commands:
            status = self.wait(command.run_id, max(0.0, deadline - time.monotonic()))
            if not status.active:
                self.store.delete_run(command.run_id)

    def stop(self, run_id: str) -> Command:
        """Asks the run's process to stop it within one step."""
        return self._command(run_id, "stop")

    def pause(self, run_id: str, at_step: int | None = None) -> Command:
        return self._command(run_id, "pause", {} if at_step is None else {"at_step": at_step})

    def resume(self, run_id: str) -> Command | None:
        """Unpauses a paused run (a command to its process); or hands a stopped or
        interrupted run to the engine process, to continue from its last checkpoint
        (see `Engine.resume`), and returns None."""
        record = self.store.get_run(run_id)
        if record is not None and record.active:
            return self._command(run_id, "resume")
        step = last_checkpoint(self.store, run_id)
        service = self.ensure_engine()
        assert service is not None
        self.store.reopen(run_id, step, owner=service.owner, command="start")
        return None

    def update(self, run_id: str, **knobs: float) -> Command:
        """Asks for live knob changes (see `core.training.live`) from the run's next step
        on. Raises `InvalidInput` naming each bad knob, and then asks nothing: the one
        check of a change in the dashboard's process (Live's sliders send it unchecked)."""
        status = self._steerable(run_id)
        values = checked_changes(status.config, status.knobs, knobs)
        return self.store.add_command(run_id, "set", {"knobs": values})

    def model_file(self, run_id: str, checkpoint: str = "last", timeout: float = 120.0) -> Path:
        """The run's trained model at `checkpoint` (`"last"`, `"best"` or a step as text)
        as a `.keras` file, which the engine process writes the first time (this
        process never imports TensorFlow). Raises `InvalidInput` naming `checkpoint`,
        or `EngineUnavailable` when no engine writes it within `timeout` seconds."""
        chosen = choose_checkpoint(self.store, run_id, checkpoint)
        path = RunCheckpoints(self.store.checkpoint_folder(run_id)).model_path(chosen.step)
        if path.exists():
            return path
        self.ensure_engine()
        asked = self.store.add_command(run_id, "export", {"checkpoint": str(chosen.step)})
        done = self.settle(asked, timeout)
        if done.error is not None:
            raise InvalidInput({"model": done.error})
        if done.handled is None:
            raise EngineUnavailable(f"the engine did not write the model within {timeout:g} s")
        return path

    def ask_landscape(self, run_id: str, step: int) -> Command:
        """`RunReader.ask_landscape`, launching the engine process when none serves the
        store: it computes every run's landscapes, whoever trained the run."""
        command = super().ask_landscape(run_id, step)
        self.ensure_engine(wait=False)
        return command

    # Reading (see `RunReader`) ------------------------------------------------------

    def wait(self, run_id: str, timeout: float | None = None) -> RunStatus:
        """Polls until the run ends (or `timeout` passes) and returns its status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status(run_id)
            if not status.active or (deadline is not None and time.monotonic() >= deadline):
                return status
            time.sleep(POLL_SECONDS * 2)

    def close(self) -> None:
        self.closed = True
        self.store.close()

    def _steerable(self, run_id: str) -> RunStatus:
        status = self.status(run_id)
        if not status.active:
            raise InvalidInput({"run_id": f"run {run_id} has ended"})
        if not status.steerable:
            raise InvalidInput({"run_id": f"run {run_id}: the process that trains it has ended"})
        return status

    def _command(self, run_id: str, kind: str, payload: dict[str, Any] | None = None) -> Command:
        self._steerable(run_id)
        return self.store.add_command(run_id, kind, payload)


def _reasons(message: str) -> dict[str, str]:
    """Each field's reason in the message of an `InvalidInput` (`field: why; ...`); the
    whole message as `config`'s when it names no field."""
    starts = list(_FIELD.finditer(message))
    if not starts or starts[0].start() != 0:
        return {"config": message}
    ends = [match.start() for match in starts[1:]] + [len(message)]
    return {match[1]: message[match.end() : end] for match, end in zip(starts, ends, strict=True)}


def _beat_while_used(client: weakref.ref[EngineClient], identity: str) -> None:
    """Beats the dashboard `identity`'s heartbeat every `owner.HEARTBEAT_SECONDS` until
    its client is closed or gone."""
    while True:
        time.sleep(owner.HEARTBEAT_SECONDS)
        used = client()
        if used is None or used.closed:
            return
        with contextlib.suppress(StoreError):  # the store busy or failing: the next beat
            used.store.heartbeat(identity, DASHBOARD)
        del used  # not held while asleep


def use_engine_plugins(client: EngineClient | None) -> None:
    """Take the plugins (optimizers, models, datasets) as `client`'s engine process
    published them, never importing them here (None: from the plugins folder again)."""
    from core import data, models
    from core.optimizers import optimizer_catalog

    optimizer_catalog.use_plugin_source(None if client is None else client.plugins)
    models.model_catalog.PLUGINS.use_source(None if client is None else client.plugin_models)
    data.dataset_catalog.PLUGINS.use_source(None if client is None else client.plugin_datasets)
