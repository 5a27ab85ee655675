"""Where sweeps are kept: Optuna storages, the studies in one, and who drives which.

By default a sweep's study lives in the lab's own SQLite file, next to the runs its trials
started (the store accepts Optuna's tables beside its own). Any SQLAlchemy URL works too:
a PostgreSQL storage lets the lab on several machines share one study.

Importing this module does not import Optuna.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from core.knobs import InvalidInput
from core.redaction import redacted
from core.store import StoreError, is_url, owner
from core.sweep.trial_run import TrialCounts

if TYPE_CHECKING:
    import optuna

    from core.engine.api import Runs
    from core.store import Store

#: The study user attribute that holds the sweep's `SweepPlan.to_dict()`.
PLAN_ATTR: Final = "optlab_plan"
#: Seconds an SQLite write waits for the file's write lock, which runs' metric writers
#: take too, before it fails.
SQLITE_TIMEOUT: Final = 30.0


@dataclass(frozen=True)
class SweepSummary:
    """One study of a storage, for a list of past and running sweeps.

    Attributes:
        study_name: The study's name; `Sweep.load` takes it.
        trials: How many trials the study holds, in every state.
        n_trials: The sweep's budget, for studies made by a `Sweep` (else None).
        sampler: `grid`, `random` or `tpe`, for studies made by a `Sweep` (else None).
        best_value: The best value of a completed trial, if any.
        started: When the first trial started, if one has.
        finished, running, pruned, failed: Trials by state, counted as `SweepStatus`
            counts them (see `TrialCounts`).
    """

    study_name: str
    trials: int
    n_trials: int | None
    sampler: str | None
    best_value: float | None
    started: datetime | None
    finished: int
    running: int
    pruned: int
    failed: int

    @property
    def loadable(self) -> bool:
        """Whether a `Sweep` made the study, so that `Sweep.load` can resume it."""
        return self.n_trials is not None


def storage_url(engine: Runs | Store, storage: str | None = None) -> str:
    """`storage`, or by default the SQLAlchemy URL of `engine`'s store (or of a `Store`
    opened without an engine): its SQLite file,
    or its PostgreSQL database through psycopg (Optuna's tables beside the lab's)."""
    if storage is not None:
        if not isinstance(storage, str) or not storage:
            raise InvalidInput({"storage": f"must be a database URL (got {storage!r})"})
        return storage
    location = engine.location
    if is_url(location):
        return "postgresql+psycopg://" + location.split("://", 1)[1]
    return f"sqlite:///{Path(location).resolve()}"


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The Optuna storage at `url`, one per URL and process (it is thread-safe).

    Creates Optuna's tables on first use: one thread at a time here, and again while
    another process creates them in the same moment (a table, or their version row, it
    made first clashes; up to `CREATION_ATTEMPTS` times). Raises
    `InvalidInput` naming `storage` when the URL cannot be opened; its message holds none
    of the URL's secrets.
    """
    with _OPENING:
        return _opened(url)


_OPENING = threading.Lock()


@functools.lru_cache(maxsize=16)
def _opened(url: str) -> optuna.storages.BaseStorage:
    import optuna

    # A store's SQLite file is shared with the training threads' metric writers: wait for
    # its write lock longer than SQLite's default 5 s.
    kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT}} if url.startswith("sqlite") else {}
    attempt = 1
    while True:
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except Exception as exc:
            # Another process creating the tables meanwhile: each try finds more of them.
            if attempt == CREATION_ATTEMPTS or not any(m in str(exc) for m in CLASHES):
                raise _unopenable(url, exc) from _cause(exc, url)
        time.sleep(0.05 * attempt)
        attempt += 1


#: Tries at creating Optuna's tables while other processes create them too; and what
#: SQLite and PostgreSQL say when one of them made a table or a row first.
CREATION_ATTEMPTS = 10
CLASHES = ("already exists", "UNIQUE constraint failed", "duplicate key value")


#: The storages seen to hold Optuna's tables (see `has_studies`).
_TABLES_SEEN: set[str] = set()


def has_studies(url: str) -> bool:
    """Whether the storage at `url` holds Optuna's tables, looked up without making them:
    opening a storage (`open_storage`) creates them, a write that a reader of the studies
    (a viewer's page), or an engine that serves a store where no sweep was ever made,
    must not make. Once seen, they are taken to stay. Raises `InvalidInput` naming
    `storage`, as `open_storage` does, when the URL cannot be opened."""
    if url in _TABLES_SEEN:
        return True
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    try:
        # No pool: a storage that never holds a sweep keeps no connection open.
        probe = sqlalchemy.create_engine(url, poolclass=NullPool)
        found = sqlalchemy.inspect(probe).has_table("studies")
    except Exception as exc:
        raise _unopenable(url, exc) from _cause(exc, url)
    if found:
        _TABLES_SEEN.add(url)
    return found


def _unopenable(url: str, exc: Exception) -> InvalidInput:
    """Why the storage at `url` cannot be opened, naming `storage`, without its secrets."""
    return InvalidInput({"storage": redacted(f"cannot open {url}: {exc}", url)})


@contextlib.contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Raises a failure of the storage at `url` (Optuna's `StorageInternalError`, or
    SQLAlchemy's error) as a `StoreError` that names the storage and says why, without
    the URL's secrets."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        # Optuna's says only that a commit failed; SQLAlchemy's, behind it, says why.
        why = exc.__cause__ if isinstance(exc, optuna.exceptions.StorageInternalError) else exc
        message = redacted(f"the sweeps' storage {url} failed: {why or exc}", url)
        raise StoreError(message) from _cause(exc, url)


def _cause(exc: BaseException, url: str) -> BaseException | None:
    """`exc`, to chain, unless its text quotes a secret of `url` (then nothing)."""
    return exc if redacted(str(exc), url) == str(exc) else None


def list_studies(engine: Runs, storage: str | None = None) -> list[SweepSummary]:
    """Every study in `storage` (default: `engine`'s store), the most recent first; none
    where no sweep was ever made. It only reads: trials a killed driver left running
    are the engine's to settle (`core.sweep.hosting`), so a page that lists the sweeps,
    a viewer's, writes nothing. Raises `InvalidInput` naming `storage` if it cannot be
    opened, `StoreError` (see `storage_errors`) if it fails."""
    url = storage_url(engine, storage)
    if not has_studies(url):
        return []
    result = []
    with storage_errors(url):
        opened = open_storage(url)
        for study in opened.get_all_studies():
            # What `optuna.get_all_study_summaries` reads (its trials by `_study_id`, as it
            # does), counted by state here.
            trials = opened.get_all_trials(study._study_id, deepcopy=False)
            result.append(_summary(study, trials))
    return sorted(result, key=lambda s: s.started or datetime.max, reverse=True)


def stored_study(study_name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """The study `study_name` of `storage`, as Optuna opens it (`KeyError` if none)."""
    import optuna

    return optuna.load_study(study_name=study_name, storage=storage)


def _summary(
    study: optuna.study.FrozenStudy, trials: Sequence[optuna.trial.FrozenTrial]
) -> SweepSummary:
    plan: dict[str, Any] = study.user_attrs.get(PLAN_ATTR) or {}
    counts = TrialCounts.of(trials)
    return SweepSummary(
        study_name=study.study_name,
        trials=len(trials),
        n_trials=plan.get("n_trials"),
        sampler=plan.get("sampler"),
        best_value=_best_value(study, trials),
        started=min((t.datetime_start for t in trials if t.datetime_start), default=None),
        finished=counts.finished,
        running=counts.running,
        pruned=counts.pruned,
        failed=counts.failed,
    )


def _best_value(
    study: optuna.study.FrozenStudy, trials: Sequence[optuna.trial.FrozenTrial]
) -> float | None:
    if len(study.directions) != 1:
        return None  # several objectives have no single best
    values = [t.value for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    best = max if study.direction.name == "MAXIMIZE" else min
    return best(values, default=None)


class DriverRegistry:
    """The studies a driver thread of this process is running, so that no study gets two
    drivers telling the same trials."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._studies: set[tuple[str, str]] = set()

    def claim(self, url: str, study_name: str) -> None:
        """Registers a driver for the study; raises `InvalidInput` if it has one."""
        with self._lock:
            if (url, study_name) in self._studies:
                raise InvalidInput(
                    {"study_name": f"{study_name} is already being run by this process"}
                )
            self._studies.add((url, study_name))

    def release(self, url: str, study_name: str) -> None:
        with self._lock:
            self._studies.discard((url, study_name))

    def driving(self, url: str, study_name: str) -> bool:
        """Whether a driver thread of this process runs the study now."""
        with self._lock:
            return (url, study_name) in self._studies


DRIVERS = DriverRegistry()


def driver_alive(engine: Runs, url: str, study_name: str) -> Callable[[str], bool]:
    """Whether a process that recorded itself as the study's driver still drives it:
    this process when a driver thread of it does, another while it lives."""
    liveness, here = engine.liveness(), owner.current()

    def alive(process: str) -> bool:
        return DRIVERS.driving(url, study_name) if process == here else liveness(process)

    return alive
