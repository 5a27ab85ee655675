"""Persistence of the lab: runs, their events and their metrics, in one SQLite file or a
PostgreSQL database.

    store = Store()                       # runs/optlab.sqlite, or $OPTLAB_STORE
    store.create_run("r1", "adam lr=1e-3", config, total_steps=5000)
    with store.metrics_writer("r1") as writer:   # training thread
        writer.append(step, {"loss": 0.3, "accuracy": 0.9})
    metrics = store.read_metrics("r1")    # dashboard: metrics.steps, metrics["loss"]

Modules: `store` (the `Store` facade), `schema` (tables, and refusing foreign files),
`sqlite` and `postgres` (the two databases), `connections` (a pool: one connection per
thread at a time), `writer` (buffered metrics from the training thread), `chunks` (the
on-disk metrics format), `metrics` (what reads return), `records` (runs, events,
commands, services, statuses), `paths` (where a store lives).
"""

from core.store.errors import StoreError, UnknownRunError
from core.store.metrics import Metrics
from core.store.paths import LocationError, canonical, default_location, default_path, is_url, shown
from core.store.records import (
    ACTIVE_STATUSES,
    COMMAND_KINDS,
    DIVERGED_EVENT,
    FINAL_STATUSES,
    HISTOGRAM_EVENT,
    KNOB_EVENT,
    LR_FIND_ENDED_EVENT,
    RESTORED_EVENT,
    RESUMABLE_STATUSES,
    STATUSES,
    Command,
    Event,
    RunRecord,
    Service,
)
from core.store.schema import APPLICATION_ID, SCHEMA_VERSION
from core.store.store import LOCK_PATIENCE, Store
from core.store.writer import MetricsWriter

__all__ = [
    "ACTIVE_STATUSES",
    "APPLICATION_ID",
    "COMMAND_KINDS",
    "DIVERGED_EVENT",
    "FINAL_STATUSES",
    "HISTOGRAM_EVENT",
    "KNOB_EVENT",
    "LOCK_PATIENCE",
    "LR_FIND_ENDED_EVENT",
    "RESTORED_EVENT",
    "RESUMABLE_STATUSES",
    "SCHEMA_VERSION",
    "STATUSES",
    "Command",
    "Event",
    "LocationError",
    "Metrics",
    "MetricsWriter",
    "RunRecord",
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
