"""A `Store` that notes when runs start and when each logged step reaches it: a clock on
the engine's steps.

The engine appends a run's metrics row right after the step that produced it and its
telemetry read (with `log_every=1`, after every step). The time of each `append` therefore
marks the end of that step, and two logged steps give the steady rate between them,
without what a run does before (building the model, tracing the first step) and without
changing the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from core.store import MetricsWriter, Store


class ClockedStore(Store):
    """A `Store` that records `time.perf_counter()` when a run starts running and at
    every append of its metrics writers.

    Args:
        *args, **kwargs: `Store`'s.
        on_append: Called as `on_append(run_id, step)` after each append, in the thread
            that appended (the run's own): a hook to start or stop watching that thread.
    """

    def __init__(
        self, *args: Any, on_append: Callable[[str, int], None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.on_append = on_append
        # Written by each run's own thread, read after the run ends.
        self._started: dict[str, float] = {}  # run id → time
        self._times: dict[str, dict[int, float]] = {}  # run id → step → time

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        # The engine sets "running" first thing, before it builds the run's model.
        if status == "running":
            self._started.setdefault(run_id, time.perf_counter())
        super().set_status(run_id, status, error)

    def metrics_writer(self, run_id: str, *, flush_interval: float | None = None) -> ClockedWriter:
        writer = super().metrics_writer(run_id, flush_interval=flush_interval)
        times = self._times.setdefault(run_id, {})
        return ClockedWriter(writer, times, lambda step: self._appended(run_id, step))

    def started(self, run_id: str) -> float:
        """When the run first became `running`; `KeyError` if it never did."""
        return self._started[run_id]

    def times(self, run_id: str) -> dict[int, float]:
        """Step → `time.perf_counter()` when it was logged, for every logged step so far."""
        return dict(self._times.get(run_id, {}))

    def steady_rate(self, run_id: str, first: int, last: int) -> float:
        """Steps per second from the append of step `first` to that of step `last`.

        Raises `KeyError` if either step was not logged.
        """
        times = self._times[run_id]
        return (last - first) / (times[last] - times[first])

    def _appended(self, run_id: str, step: int) -> None:
        if self.on_append is not None:
            self.on_append(run_id, step)


class ClockedWriter:
    """Wraps a `MetricsWriter`: notes the time of each `append`, passes it on, then calls
    `appended(step)`."""

    def __init__(
        self,
        writer: MetricsWriter,
        times: dict[int, float],
        appended: Callable[[int], None],
    ) -> None:
        self._writer = writer
        self._times = times
        self._appended = appended

    def append(self, step: int, values: Mapping[str, float]) -> None:
        self._times[step] = time.perf_counter()
        self._writer.append(step, values)
        self._appended(step)

    def __getattr__(self, name: str) -> Any:
        # Everything but `append` (close, closed, flush, …) is the writer's own.
        return getattr(self._writer, name)
