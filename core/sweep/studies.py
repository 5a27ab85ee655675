"""Where sweeps are kept: Optuna storages, the studies in one, and who drives which.

By default a sweep's study lives in the lab's own SQLite file, next to the runs its trials
started (the store accepts Optuna's tables beside its own). Any SQLAlchemy URL works too:
a PostgreSQL storage lets the lab on several machines share one study.

Importing this module does not import Optuna.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from core.knobs import InvalidHyperparameters

if TYPE_CHECKING:
    import optuna

    from core.engine import Engine

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
    """

    study_name: str
    trials: int
    n_trials: int | None
    sampler: str | None
    best_value: float | None
    started: datetime | None

    @property
    def loadable(self) -> bool:
        """Whether a `Sweep` made the study, so that `Sweep.load` can resume it."""
        return self.n_trials is not None


def storage_url(engine: Engine, storage: str | None = None) -> str:
    """`storage`, or by default the SQLAlchemy URL of `engine`'s SQLite store."""
    if storage is not None:
        if not isinstance(storage, str) or not storage:
            raise InvalidHyperparameters({"storage": f"must be a database URL (got {storage!r})"})
        return storage
    return f"sqlite:///{Path(engine.store.path).resolve()}"


@functools.lru_cache(maxsize=16)
def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The Optuna storage at `url`, one per URL and process (it is thread-safe).

    Creates Optuna's tables on first use. Raises `InvalidHyperparameters` naming
    `storage` when the URL cannot be opened.
    """
    import optuna

    # A store's SQLite file is shared with the training threads' metric writers: wait for
    # its write lock longer than SQLite's default 5 s.
    kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT}} if url.startswith("sqlite") else {}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as exc:
        raise InvalidHyperparameters({"storage": f"cannot open {url}: {exc}"}) from exc


def list_studies(engine: Engine, storage: str | None = None) -> list[SweepSummary]:
    """Every study in `storage` (default: `engine`'s store), the most recent first."""
    import optuna

    summaries = optuna.get_all_study_summaries(open_storage(storage_url(engine, storage)))
    result = [_summary(summary) for summary in summaries]
    return sorted(result, key=lambda s: s.started or datetime.max, reverse=True)


def _summary(summary: optuna.study.StudySummary) -> SweepSummary:
    plan: dict[str, Any] = summary.user_attrs.get(PLAN_ATTR) or {}
    best = summary.best_trial
    return SweepSummary(
        study_name=summary.study_name,
        trials=summary.n_trials,
        n_trials=plan.get("n_trials"),
        sampler=plan.get("sampler"),
        best_value=best.value if best is not None else None,
        started=summary.datetime_start,
    )


class DriverRegistry:
    """The studies a driver thread of this process is running, so that no study gets two
    drivers telling the same trials."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._studies: set[tuple[str, str]] = set()

    def claim(self, url: str, study_name: str) -> None:
        """Registers a driver for the study; raises `InvalidHyperparameters` if it has one."""
        with self._lock:
            if (url, study_name) in self._studies:
                raise InvalidHyperparameters(
                    {"study_name": f"{study_name} is already being run by this process"}
                )
            self._studies.add((url, study_name))

    def release(self, url: str, study_name: str) -> None:
        with self._lock:
            self._studies.discard((url, study_name))


DRIVERS = DriverRegistry()
