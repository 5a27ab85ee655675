"""The engine process: `python -m core serve`, where the dashboard's runs train.

Streamlit ends every script run (each tab's refresh, every second) with full garbage
collections, and with `keras.backend.clear_session()` whenever Keras is imported, which
stalls every thread of its process; a run that trains there crawls while it is watched.
So the dashboard never trains: it hands runs to this process through the store and reads
them back from it (see `core.engine.client`).

One engine serves a store at a time: it holds the store's engine lock for its whole life
(see `core.engine.lock`), so a second one exits at once. It registers itself in the
store's `services` table (the dashboard finds it there, after a reload or a restart of
Streamlit), beats a heartbeat every second (a dashboard on another host trusts the row
only while it beats; on this host, also while the engine's process holds the lock: see
`core.engine.liveness`), takes over the runs of processes that died, on any host, every
`UPKEEP_SECONDS` (see `core.store.owner`), and imports TensorFlow, loads the
plugins and the default dataset in the background at start, so that the first run does
not wait for them (until TensorFlow is in, its service row says `loading`, for Live to
tell a run handed over meanwhile what it waits for); the optimizer plugins it loaded are
published in its service row for the dashboard's forms. It also hosts what the layers
above give it to run beside its runs (`Hosted`: the sweeps it drives,
`core.sweep.hosting`), closed before its runs are.
Launched by a dashboard (`launch`), it exits once no run is queued or training, nothing
hosted is at work, and no dashboard process of the store lives, after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from core import presenter
from core.engine import liveness, lock
from core.engine.client import log_path
from core.engine.engine import Engine
from core.engine.liveness import DASHBOARD, ENGINE, live_service
from core.engine.lock import lock_path as lock_path  # where tests and scripts read it
from core.store import Store, StoreError, canonical, is_url, modes, shown
from core.store.owner import HEARTBEAT_SECONDS, LIVENESS_SECONDS
from core.store.paths import ENV_VAR, PROJECT_ROOT, Location
from core.training import tf_import, threads

#: How often the serving engine ends the runs of processes found dead since (its own
#: start did it once) and takes the queue of a dead engine: a run handed to an engine
#: in the seconds it was dying but not yet silent long enough is taken within this.
#: The cluster's nodes and free resources are published as often.
UPKEEP_SECONDS = LIVENESS_SECONDS / 2
IDLE_GRACE_SECONDS = 60.0  # a dashboard restarting within this finds its engine again


class Hosted(Protocol):
    """Work the engine process does beside its runs, with its engine: started with the
    service, kept up while `busy`, and closed before the engine."""

    def busy(self) -> bool: ...

    def close(self) -> None: ...


#: What makes a `Hosted` for the serving engine (`core.sweep.hosting.SweepHost`).
Host = Callable[[Engine], Hosted]


def absolute(location: Location) -> str:
    """The store's location as another process finds it from any folder (`LocationError`
    for one that is no store's: see `core.store.canonical`)."""
    location = canonical(location)
    return location if is_url(location) else str(Path(location).resolve())


class EngineService:
    """Makes `engine` the one that serves its store: registers it, takes over the queued
    runs of a serving engine that died (at start, and every `UPKEEP_SECONDS`, when
    its runs are also ended), beats its heartbeat, publishes the optimizer
    plugins once TensorFlow is warm, and writes the models asked for of any run. Works in
    any process (tests serve an in-process engine this way); `serve` adds the lock and
    the exit. `hosts` make what it hosts beside the runs (see `Hosted`)."""

    def __init__(self, engine: Engine, *, warm_up: bool = True, hosts: Sequence[Host] = ()) -> None:
        self.engine = engine
        self.store = engine.store
        self.owner = engine.owner
        self.info: dict[str, Any] = {
            "pid": os.getpid(),
            "max_concurrent": engine.max_concurrent,
            "ready": False,
            # What a run handed over now waits for (half a minute on a loaded laptop), for
            # the dashboard to say; until `_warm_up` has imported it.
            **({"loading": tf_import.STACK} if warm_up else {}),
        }
        self.store.register_service(self.owner, ENGINE, self.info)
        engine.serve_store()
        # The queue of an engine that died goes on here, in its order.
        self.requeued = self.store.requeue(self.owner)
        self._stop = threading.Event()
        # The beat has a thread of its own: the upkeep's writes and Ray's answers may take
        # their time, and a row that misses beats for LIVENESS_SECONDS takes no more runs.
        self._threads = [
            threading.Thread(target=self._heartbeat, name="optlab-heartbeat", daemon=True),
            threading.Thread(target=self._upkeep, name="optlab-upkeep", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        if warm_up:
            threading.Thread(target=self._warm_up, name="optlab-warm-up", daemon=True).start()
        else:
            self._publish_plugins()
        self.hosted = [make(engine) for make in hosts]

    def busy(self) -> bool:
        """Whether something hosted is at work (a sweep driven here)."""
        return any(hosted.busy() for hosted in self.hosted)

    def close(self) -> None:
        for hosted in self.hosted:  # before the engine: their work is its runs
            hosted.close()
        self._stop.set()
        for thread in self._threads:
            thread.join(5.0)
        # If the store is gone or full, the row dies with the process (the owner check).
        with contextlib.suppress(StoreError):
            self.store.remove_service(self.owner, ENGINE)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(StoreError):  # busy or failing: the next beat
                self.store.heartbeat(self.owner, ENGINE, self.info)

    def _upkeep(self) -> None:
        """With a cluster, its nodes now and every `UPKEEP_SECONDS`; as often, the runs of
        the processes that died since and a dead engine's queue (see `_take_over`)."""
        while True:
            if self.engine.cluster is not None:
                self._publish_cluster()
            if self._stop.wait(UPKEEP_SECONDS):
                return
            with contextlib.suppress(StoreError):  # busy or failing: the next round
                self._take_over()

    def _take_over(self) -> None:
        """Ends the runs of the processes that died (on this host or, silent for
        `LIVENESS_SECONDS`, on another), takes the queue an engine left, and forgets the
        rows of services that died (its own stays while it holds the lock, however late
        its heartbeat: see `core.engine.liveness`)."""
        self.store.mark_interrupted()
        self.store.requeue(self.owner)
        liveness.forget_dead(self.store)

    def _publish_cluster(self) -> None:
        """The Ray cluster's nodes and free CPUs and GPUs, for the Home page."""
        self.info = {**self.info, "cluster": self.engine.cluster_info()}

    def _warm_up(self) -> None:
        """What every first run would otherwise wait for: TensorFlow, the trainer's
        modules, the plugins, the default dataset and a first trace."""
        from core import data

        try:
            tf_import.load()
        finally:  # a run handed over now builds its model at once (or says why it cannot)
            self.info = {key: value for key, value in self.info.items() if key != "loading"}
        self._publish_plugins()
        with contextlib.suppress(data.DatasetUnavailable):  # a run that needs it says why
            data.load(data.DEFAULT_DATASET)
            rehearse(data.DEFAULT_DATASET)
        self.info = {**self.info, "ready": True}

    def _publish_plugins(self) -> None:
        """What the plugins add, for the dashboard, which never imports them: optimizers,
        models, and datasets (loaded here, to publish their shapes and sizes)."""
        from core import data, models
        from core.optimizers import registry

        plugins, errors = registry.loaded_plugins()
        plugin_models, model_errors = models.model_catalog.PLUGINS.published()
        plugin_datasets, dataset_errors = data.dataset_catalog.PLUGINS.published()
        self.info = {
            **self.info,
            "plugins": [spec.describe() for spec in plugins],
            "plugin_models": plugin_models,
            "plugin_datasets": plugin_datasets,
            "plugin_errors": errors | model_errors | dataset_errors,
        }
        self.store.heartbeat(self.owner, ENGINE, self.info)


def rehearse(dataset: str) -> None:
    """Trains one logged step of a small model on `dataset` with every instrument, and
    throws it away: what every first trace in a process pays once (Keras's layer
    machinery, TensorFlow's op registrations and kernels) is then paid before a run waits
    for it (the time to a first point after it is bench figure 15 in `bench/results.md`)."""
    import tensorflow as tf

    from core.training.config import RunConfig
    from core.training.instruments import INSTRUMENTS
    from core.training.trainer import Trainer

    every_step = {f"{name}_every": 1 for name in INSTRUMENTS}
    config = RunConfig(model="mlp", dataset=dataset, optimizer="adamw", max_steps=1, **every_step)
    trainer = Trainer(config, tf.distribute.get_strategy())
    try:
        trainer.step(1, log=True)
    finally:
        trainer.close()


def serve(
    location: Location,
    *,
    max_concurrent: int,
    exit_when_idle: bool = False,
    stop: threading.Event | None = None,
    ray_address: str | None = None,
    hosts: Sequence[Host] = (),
) -> int:
    """Serves the store until SIGTERM, SIGINT, `stop`, or (with `exit_when_idle`) no work
    and no dashboard; then interrupts what still trains. With `ray_address`, its runs
    train on that Ray cluster; `hosts` make what it hosts beside them (see `Hosted`).
    Returns an exit status: 0, also when another engine serves the store already."""
    location = absolute(location)
    held = lock.hold(location)
    if held is None:
        print(f"an engine already serves {shown(location)}", file=sys.stderr, flush=True)
        return 0
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _setter(stop))
    try:
        if ray_address is None and (pools := threads.share_cores(max_concurrent)):
            print(f"training threads: {pools}", file=sys.stderr, flush=True)
        engine = Engine(Store(location), max_concurrent=max_concurrent, ray_address=ray_address)
        service = EngineService(engine, hosts=hosts)
        print(f"engine {engine.owner} serves {engine.store.name}", file=sys.stderr, flush=True)
        idle_since: float | None = None
        while not stop.wait(HEARTBEAT_SECONDS):
            if not exit_when_idle:
                continue
            if engine.busy() or service.busy() or live_service(engine.store, DASHBOARD) is not None:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_GRACE_SECONDS:
                break
        print(f"engine {engine.owner} stopping", file=sys.stderr, flush=True)
        service.close()
        engine.close()
        print(f"engine {engine.owner} stopped", file=sys.stderr, flush=True)
    finally:
        held.close()
    return 0


def launch(location: Location, *, max_concurrent: int) -> subprocess.Popen[bytes]:
    """Starts `python -m core serve` for the store in a session of its own (so that it
    outlives a restart of the dashboard), logging to `STORE.engine.log`. The store's
    location goes in the environment, where a URL's password is not on show as
    command-line arguments are."""
    location = absolute(location)
    log_file = log_path(location)
    log = modes.open_file(log_file, "ab")  # its owner's alone (see `core.store.modes`)
    command = [
        sys.executable,
        "-m",
        "core",
        "serve",
        "--max-concurrent",
        str(max_concurrent),
        "--exit-when-idle",
    ]
    with log:
        return subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**presenter.without_key(os.environ), ENV_VAR: location},
        )


def _setter(event: threading.Event) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        event.set()

    return handler
