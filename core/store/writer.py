"""Writing metric rows: the training thread's way to log them without waiting for the
disk (`MetricsWriter`), and the store's part that hands out one writer per run or commits
rows at once (`Writers`)."""

import operator
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from core.store import chunks, summaries
from core.store.connections import Connection, ConnectionPool
from core.store.db import Database, Part
from core.store.errors import StoreError, UnknownRunError
from core.store.metrics import Block
from core.store.records import to_json


class MetricsWriter:
    """Buffers one run's metric rows and events in memory; a background thread commits them.

    `append` and `add_event` only validate and keep what they are given; a daemon thread
    owned by this writer commits everything buffered every `flush_interval` seconds, the
    rows as one chunk and the events, in one transaction, and advances the run's `step`.
    So a store locked by another process holds up this thread, never the training. A
    process that dies loses at most what was buffered in the last interval. One thread per
    writer keeps runs independent: a writer that fails stops alone, and the others go on.

    A failed commit (disk full, a lock held past the store's patience, deleted run) is not
    retried: what it held is dropped, the thread stops, and the error is raised as a
    `StoreError` by the training thread's next `append`, `add_event`, `check`, `flush` or
    `close`, so the run can fail with that reason. Steps must strictly increase, also
    across writers of the same run.
    """

    def __init__(
        self,
        pool: ConnectionPool,
        run_id: str,
        *,
        flush_interval: float = 0.5,
        last_step: int | None = None,
    ) -> None:
        """Start the flusher; `last_step` is the run's largest stored step, if any."""
        if not flush_interval > 0:
            raise ValueError(f"flush_interval must be positive; got {flush_interval!r}")
        self.run_id = run_id
        self.flush_interval = flush_interval
        self._pool = pool
        self._encoder = chunks.ChunkEncoder()
        self._lock = threading.Lock()  # guards the five fields below
        self._rows: list[chunks.Row] = []
        self._events: list[tuple[int, float, str, str]] = []  # step, time, kind, payload
        self._last_step = last_step
        self._error: StoreError | None = None
        self._closed = False
        self._flush_lock = threading.Lock()  # one flush at a time keeps chunks in step order
        self._stop = threading.Event()
        self._wake = threading.Event()  # the flusher's: commit now (see `flush_soon`)
        self._after_flush: list[Callable[[], None]] = []
        self._thread = threading.Thread(
            target=self._run, name=f"optlab-metrics-{run_id}", daemon=True
        )
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether `close` or `shutdown` has been called."""
        return self._closed

    def append(self, step: int, values: Mapping[str, float]) -> None:
        """Buffer the values logged at `step`; returns at once, without any I/O.

        Raises `StoreError` if an earlier commit failed or the writer is closed, and
        `ValueError` if `step` is not greater than the previous one. Values are converted to
        float here (NaN marks a missing value when read back); keys must be strings.
        """
        step = operator.index(step)
        row = {_check_key(key): float(value) for key, value in values.items()}
        with self._lock:
            self._raise_if_unusable()
            if self._last_step is not None and step <= self._last_step:
                raise ValueError(f"step must increase: {step} after {self._last_step}")
            self._rows.append((step, row))
            self._last_step = step

    def add_event(self, step: int, kind: str, payload: Mapping[str, Any]) -> None:
        """Buffer an event (as `Store.add_event` records it), committed with the rows
        around it; returns at once. Raises `StoreError` as `append` does."""
        event = (operator.index(step), time.time(), kind, to_json(payload))
        with self._lock:
            self._raise_if_unusable()
            self._events.append(event)

    def check(self) -> None:
        """Raise the `StoreError` of a failed commit, if any."""
        with self._lock:
            self._raise_if_failed()

    def pending(self) -> int:
        """Number of appended rows not committed yet."""
        with self._lock:
            return len(self._rows)

    def flush(self) -> None:
        """Commit the buffered rows and events now, from the calling thread."""
        with self._flush_lock:
            with self._lock:
                self._raise_if_failed()
                rows, self._rows = self._rows, []
                events, self._events = self._events, []
            if not rows and not events:
                return
            try:
                with self._pool.transaction() as conn:
                    if rows:
                        block = self._encoder.encode(rows)
                        commit_block(conn, self.run_id, block)
                        conn.execute(
                            "UPDATE runs SET step = greatest(step, ?), updated = ? WHERE id = ?",
                            (int(block.steps[-1]), time.time(), self.run_id),
                        )
                    if events:
                        conn.executemany(
                            "INSERT INTO events (run_id, step, time, kind, payload) "
                            "VALUES (?, ?, ?, ?, ?)",
                            [(self.run_id, *event) for event in events],
                        )
            except Exception as exc:  # whatever it is, the training thread must hear of it
                steps = sorted({step for step, _ in rows} | {event[0] for event in events})
                lost = f"steps {steps[0]} to {steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"
                error = StoreError(
                    f"could not save the metrics of run {self.run_id!r} ({lost} lost): {exc}"
                )
                error.__cause__ = exc
                with self._lock:
                    self._error = error
                raise error from exc

    def flush_soon(self, then: Callable[[], None]) -> None:
        """Asks the flusher to commit what is buffered now, not at its next interval, and
        to call `then` (in its thread) once it has; returns at once, so a locked store
        still holds up only the flusher. `then` is not called if the commit fails."""
        with self._lock:
            self._after_flush.append(then)
        self._wake.set()

    def close(self) -> None:
        """Commit everything buffered and stop the flusher; raise if anything was lost."""
        self.shutdown()
        self.check()

    def shutdown(self) -> None:
        """Like `close`, but leave a failure for the training thread to find."""
        with self._lock:
            self._closed = True
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
        else:
            self.shutdown()  # do not hide the exception that ended the block

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            stopping = self._stop.is_set()
            with self._lock:  # their rows, appended before they asked, are in this flush
                after, self._after_flush = self._after_flush, []
            try:
                self.flush()
            except StoreError:
                return  # kept in self._error for the training thread
            for then in after:
                then()
            if stopping:
                return

    def _raise_if_unusable(self) -> None:
        self._raise_if_failed()
        if self._closed:
            raise StoreError(f"the metrics writer of run {self.run_id!r} is closed")

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error.with_traceback(None)


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"metric names must be non-empty strings; got {key!r}")
    return key


class Writers(Part):
    """The store's metrics writers, one open per run, and rows committed at once."""

    def __init__(self, db: Database, *, flush_interval: float = 0.5) -> None:
        """`flush_interval` is the default for metrics writers, in seconds."""
        super().__init__(db)
        self.flush_interval = flush_interval
        self._writers_lock = threading.Lock()
        self._writers: dict[str, MetricsWriter] = {}

    def metrics_writer(self, run_id: str, *, flush_interval: float | None = None) -> MetricsWriter:
        """A writer for the run's metrics; one open writer per run and store at a time.

        Its steps must follow the run's largest stored step.
        """
        with self._writers_lock:
            # Closed writers are forgotten: a long-lived store sees one per run it trains.
            self._writers = {key: w for key, w in self._writers.items() if not w.closed}
            if run_id in self._writers:
                raise StoreError(f"run {run_id!r} already has an open metrics writer")
            with self.db.read() as conn:
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    raise UnknownRunError(run_id)
                last_step = chunks.last_step(conn, run_id)
            writer = MetricsWriter(
                self.db.pool,
                run_id,
                flush_interval=self.flush_interval if flush_interval is None else flush_interval,
                last_step=last_step,
            )
            self._writers[run_id] = writer
        return writer

    def append_metrics(self, run_id: str, block: Block) -> None:
        """Commit `block`, rows that follow the run's last stored step, at once: as a
        metrics writer's flush stores them (an import, a benchmark's long run). Raises
        `ValueError` for an empty block or one that does not follow the stored steps."""
        with self.db.write() as conn:
            last = chunks.last_step(conn, run_id)
            if not len(block.steps) or (last is not None and block.steps[0] <= last):
                raise ValueError(f"the rows must follow step {last} of run {run_id!r}")
            commit_block(conn, run_id, block)

    def shut_writers(self) -> None:
        """Flush and stop every metrics writer; a writer's failure stays with the writer,
        for its training thread to raise."""
        with self._writers_lock:
            writers, self._writers = list(self._writers.values()), {}
        for writer in writers:
            writer.shutdown()


def commit_block(conn: Connection, run_id: str, block: Block) -> None:
    """Store `block` as the run's next rows, with the summaries they complete."""
    chunks.append(conn, run_id, block)
    summaries.extend(conn, run_id)
