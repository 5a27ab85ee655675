"""Persistence of the lab: runs, their events and their metrics, in one SQLite file or a
PostgreSQL database.

    store = Store()                       # runs/optlab.sqlite, or $OPTLAB_STORE
    store.create_run("r1", "adam lr=1e-3", config, total_steps=5000)
    with store.metrics_writer("r1") as writer:   # training thread
        writer.append(step, {"loss": 0.3, "accuracy": 0.9})
    metrics = store.read_metrics("r1")    # dashboard: metrics.steps, metrics["loss"]
    store.list_series(["r1"])             # {"r1": {"loss": SeriesInfo(count, last_step)}}
    store.read_series(["r1"], ["loss"], downsample=400)   # {"r1": Metrics}, bounded

A `Store` is built from parts over one transaction layer, `db` (connections, reads,
write transactions, the folders beside the database): `runs`, `events`, `mailbox`
(commands, services and their heartbeats, progress), `scalars` (reading metric series,
shaped like TensorBoard's `DataProvider`) and `writer` (writing them). The parts import
`db` and the modules below it, never `store`; `runs` also runs the statements of
`mailbox` and `events` inside its own transactions.

Below them: `schema` (tables, and refusing foreign files), `sqlite` and `postgres` (the
two databases), `connections` (a pool: one connection per thread at a time), `chunks`
(the on-disk metrics format), `summaries` (metrics at several resolutions), `metrics`
(what reads return), `records` (runs, events, commands, services, statuses), `owner`
(whether a run's process lives), `paths` (where a store lives), `urls` (a PostgreSQL
store's URL, checked whole before anything reads it), `modes` (the files the lab makes,
its owner's alone).
"""

from core.store.db import LOCK_PATIENCE, Database
from core.store.errors import StoreError, UnknownRunError
from core.store.metrics import Metrics, SeriesInfo
from core.store.paths import LocationError, canonical, default_location, default_path, is_url, shown
from core.store.records import (
    ACTIVE_STATUSES,
    COMMAND_KINDS,
    DIVERGED_EVENT,
    FINAL_STATUSES,
    HISTOGRAM_EVENT,
    KNOB_EVENT,
    LAUNCH_EVENT,
    LR_FIND_ENDED_EVENT,
    PER_LAYER_EVENT,
    PRIVACY_BUDGET_EVENT,
    RESTORED_EVENT,
    RESUMABLE_STATUSES,
    STATUSES,
    Command,
    Event,
    RunRecord,
    Service,
)
from core.store.schema import APPLICATION_ID, SCHEMA_VERSION
from core.store.store import Store
from core.store.writer import MetricsWriter

__all__ = [
    "ACTIVE_STATUSES",
    "APPLICATION_ID",
    "COMMAND_KINDS",
    "DIVERGED_EVENT",
    "FINAL_STATUSES",
    "HISTOGRAM_EVENT",
    "KNOB_EVENT",
    "LAUNCH_EVENT",
    "LOCK_PATIENCE",
    "LR_FIND_ENDED_EVENT",
    "PER_LAYER_EVENT",
    "PRIVACY_BUDGET_EVENT",
    "RESTORED_EVENT",
    "RESUMABLE_STATUSES",
    "SCHEMA_VERSION",
    "STATUSES",
    "Command",
    "Database",
    "Event",
    "LocationError",
    "Metrics",
    "MetricsWriter",
    "RunRecord",
    "SeriesInfo",
    "Service",
    "Store",
    "StoreError",
    "UnknownRunError",
    "canonical",
    "default_location",
    "default_path",
    "is_url",
    "shown",
]
