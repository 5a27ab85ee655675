"""Summaries of a run's metrics at several resolutions, kept as the metrics are written, so
that a chart of a run of any length reads a bounded number of rows.

A level-1 bucket summarises `BUCKET_ROWS` consecutive logged rows of a run; a level-L + 1
bucket summarises `FANOUT` consecutive level-L buckets. For every key a bucket keeps how
many values were logged, their sum, the lowest and the highest, and the steps of those two
(as TensorBoard's and W&B's servers keep a range per bucket): a one-step spike, a gradient
norm 100× the rest or an infinite loss, is the highest value of every bucket above it, so
it shows at every level (the extremes are found as a chart's are: `core.series.extremes`).
A bucket is stored in the transaction that stores its last row; the rows after a level's
last bucket are covered by the levels below it, and the newest rows (fewer than
`BUCKET_ROWS`) by none.

`overview` reads a run, or a step range of it, at the finest level that has at most
`CHART_BUCKETS` buckets there (what a chart shows: `core.series.CHART_BUCKETS`), plus what
follows its last bucket from the finer levels and the newest rows: two rows a bucket, at
most about `2 · (CHART_BUCKETS + (FANOUT - 1) · levels) + BUCKET_ROWS` rows, however long
the run. A range of at most `RAW_ROWS` rows is read at full resolution.

The stored values are float64 (as the chunks'); steps are held as float64 too, exact up
to 2⁵³.
"""

import itertools
import json
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from core.series import CHART_BUCKETS, extremes
from core.store import chunks
from core.store.connections import Connection
from core.store.metrics import Block, Metrics, SeriesInfo, stack

#: Rows summarised by a level-1 bucket.
BUCKET_ROWS: Final = 64
#: Buckets of one level summarised by one bucket of the next.
FANOUT: Final = 4
#: A range of at most this many rows is read whole, at full resolution.
RAW_ROWS: Final = 4096

# A bucket's statistics of one key, in this order in its row of the stored matrix.
COUNT, SUM, LOW, LOW_STEP, HIGH, HIGH_STEP = range(6)
_STATS: Final = 6
_VALUE = np.dtype("<f8")
_FIRST, _LAST = -(2**63), 2**63 - 1
# Chunks read at a time when summarising rows: bounds the memory a backfill needs.
_CHUNKS_PER_PAGE: Final = 4


@dataclass(frozen=True)
class Buckets:
    """Consecutive buckets of one level: `stats[i, k]` summarises key `keys[k]` over the
    steps `first_steps[i]` to `last_steps[i]` (count 0 and NaN where it was not logged)."""

    keys: tuple[str, ...]
    first_steps: np.ndarray  # int64, shape (n,)
    last_steps: np.ndarray  # int64, shape (n,)
    stats: np.ndarray  # float64, shape (n, len(keys), 6): COUNT, SUM, LOW, LOW_STEP, …

    def __len__(self) -> int:
        return len(self.first_steps)

    @classmethod
    def of_rows(cls, rows: Metrics, size: int) -> "Buckets":
        """Each `size` consecutive rows of `rows` as a bucket (a remainder shorter than
        `size` is left out)."""
        groups = len(rows) // size
        matrix = np.array(list(rows.series.values()), np.float64).reshape(len(rows.keys), len(rows))
        values = matrix[:, : groups * size].reshape(len(rows.keys), groups, size).transpose(1, 0, 2)
        steps = rows.steps[: groups * size].reshape(groups, 1, size).astype(np.float64)
        return cls(
            rows.keys,
            rows.steps[: groups * size : size],
            rows.steps[size - 1 :: size][:groups],
            _summary(values, values, steps, steps, ~np.isnan(values)),
        )

    def merged(self, size: int) -> "Buckets":
        """Each `size` consecutive buckets as one (a remainder shorter than `size` is left
        out)."""
        groups = len(self) // size
        # groups × keys × size, as `_summary` takes them
        stats = self.stats[: groups * size].reshape(groups, size, len(self.keys), _STATS)
        stats = stats.transpose(0, 2, 1, 3)
        merged = _summary(
            stats[..., LOW],
            stats[..., HIGH],
            stats[..., LOW_STEP],
            stats[..., HIGH_STEP],
            stats[..., COUNT] > 0,
            counts=stats[..., COUNT],
            sums=stats[..., SUM],
        )
        return Buckets(
            self.keys,
            self.first_steps[: groups * size : size],
            self.last_steps[size - 1 :: size][:groups],
            merged,
        )

    def as_metrics(self, *, means: bool = False) -> Metrics:
        """Two rows a bucket, at its first and its last step, holding each key's two
        extremes in the order they were logged: what a chart draws of the bucket, a point
        at most one bucket away from its step. With `means`, one row a bucket, at its last
        step, holding each key's mean there: what statistics across runs average."""
        if means:
            with np.errstate(invalid="ignore", divide="ignore"):
                columns = (self.stats[..., SUM] / self.stats[..., COUNT]).T
            return stack([Block(self.keys, self.last_steps, columns)])
        low, high = self.stats[..., LOW], self.stats[..., HIGH]
        low_first = self.stats[..., LOW_STEP] <= self.stats[..., HIGH_STEP]
        earlier, later = np.where(low_first, low, high), np.where(low_first, high, low)
        # A single value is drawn once, at the end of the bucket nearer its step.
        single = self.stats[..., COUNT] == 1
        nearer_end = 2 * self.stats[..., LOW_STEP] > (self.first_steps + self.last_steps)[:, None]
        earlier = np.where(single & nearer_end, np.nan, earlier)
        later = np.where(single & ~nearer_end, np.nan, later)
        columns = np.stack([earlier, later], axis=1).reshape(2 * len(self), len(self.keys)).T
        steps = np.stack([self.first_steps, self.last_steps], axis=1).reshape(-1)
        return stack([Block(self.keys, steps, columns)])


def _summary(
    lows: np.ndarray,
    highs: np.ndarray,
    low_steps: np.ndarray,
    high_steps: np.ndarray,
    logged: np.ndarray,
    *,
    counts: np.ndarray | None = None,
    sums: np.ndarray | None = None,
) -> np.ndarray:
    """Statistics of groups × keys × parts of summarised parts (a row is a part whose
    count is 1 and whose sum, low and high are its value) over their last axis."""
    stats = np.empty((*logged.shape[:2], _STATS))
    stats[..., COUNT] = logged.sum(axis=2) if counts is None else counts.sum(axis=2)
    stats[..., SUM] = np.where(logged, lows if sums is None else sums, 0.0).sum(axis=2)
    low, high = extremes(np.where(logged, lows, np.nan), np.where(logged, highs, np.nan))
    for value, step, values, steps, at in (
        (LOW, LOW_STEP, lows, low_steps, low),
        (HIGH, HIGH_STEP, highs, high_steps, high),
    ):
        chosen = at[..., None]
        stats[..., value] = np.take_along_axis(values, chosen, axis=2)[..., 0]
        steps = np.broadcast_to(steps, values.shape)
        stats[..., step] = np.take_along_axis(steps, chosen, axis=2)[..., 0]
    stats[stats[..., COUNT] == 0, SUM:] = np.nan
    return stats


def aligned(parts: list[Buckets]) -> Buckets:
    """`parts`, consecutive, as one `Buckets` over the union of their keys."""
    keys = tuple(dict.fromkeys(key for part in parts for key in part.keys))
    stats = np.full((sum(map(len, parts)), len(keys), _STATS), np.nan)
    stats[..., COUNT] = 0
    start = 0
    for part in parts:
        columns = [keys.index(key) for key in part.keys]
        stats[start : start + len(part), columns] = part.stats
        start += len(part)
    first = np.concatenate([part.first_steps for part in parts]) if parts else np.empty(0, np.int64)
    last = np.concatenate([part.last_steps for part in parts]) if parts else np.empty(0, np.int64)
    return Buckets(keys, first.astype(np.int64), last.astype(np.int64), stats)


# Writing


def extend(conn: Connection, run_id: str) -> None:
    """Store the buckets that the run's rows, as now stored, complete at every level."""
    carried = Metrics()
    since = _last_step(conn, run_id, 1)
    while page := chunks.select(conn, run_id, since, limit=_CHUNKS_PER_PAGE):
        since = int(page[-1].steps[-1])
        rows = carried.concat(stack(page)) if len(carried) else stack(page)
        whole = len(rows) // BUCKET_ROWS * BUCKET_ROWS
        if whole:
            _insert(conn, run_id, 1, Buckets.of_rows(rows, BUCKET_ROWS))
            _extend_above(conn, run_id)
        carried = rows.rows(whole, len(rows))


def _extend_above(conn: Connection, run_id: str) -> None:
    level = 1
    while True:
        below = aligned(list(_select(conn, run_id, level, _last_step(conn, run_id, level + 1))))
        if len(below) < FANOUT:
            return
        level += 1
        _insert(conn, run_id, level, below.merged(FANOUT))


def backfill(conn: Connection) -> None:
    """Summarise every run's stored rows (once, for a store written before summaries)."""
    for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM metric_chunks").fetchall():
        extend(conn, run_id)


def truncate(conn: Connection, run_id: str, step: int) -> None:
    """Forget the buckets that reach past `step` (the rows after it are being deleted)."""
    conn.execute("DELETE FROM metric_summaries WHERE run_id = ? AND last_step > ?", (run_id, step))


def _insert(conn: Connection, run_id: str, level: int, buckets: Buckets) -> None:
    keys = json.dumps(buckets.keys)
    conn.executemany(
        "INSERT INTO metric_summaries (run_id, level, first_step, last_step, keys, stats)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [
            (run_id, level, int(first), int(last), keys, np.asarray(stats, _VALUE).tobytes())
            for first, last, stats in zip(
                buckets.first_steps, buckets.last_steps, buckets.stats, strict=True
            )
        ],
    )


# Reading


def overview(
    conn: Connection,
    run_id: str,
    *,
    start: int | None = None,
    end: int | None = None,
    max_buckets: int = CHART_BUCKETS,
    means: bool = False,
) -> Metrics:
    """The run's metrics from step `start` to `end` (the whole run by default) for a chart:
    every row when the range holds at most about `RAW_ROWS` of them, else each bucket of
    the finest level with at most `max_buckets` buckets there (see `Buckets.as_metrics`,
    which `means` is passed to), followed by the finer levels' buckets and the rows after
    the last bucket."""
    low, high = _FIRST if start is None else start, _LAST if end is None else end
    since = None if start is None else start - 1
    level = _level_for(conn, run_id, low, high, max_buckets)
    if level == 0:
        return stack(chunks.select(conn, run_id, since, until=end))
    parts, since = _cover(conn, run_id, level, since, until=high)
    tail = stack(chunks.select(conn, run_id, since, until=end))
    drawn = [buckets.as_metrics(means=means) for _, buckets in parts]
    return stack(part.as_block() for part in [*drawn, tail])


def tally(conn: Connection, run_id: str) -> dict[str, SeriesInfo]:
    """Each key's `SeriesInfo` in the run, by key in the order they first appeared: counted
    from the coarsest buckets that cover the run, the finer ones after them and the newest
    rows (as `overview` reads a whole run); a key not logged in those rows finds its last
    step down its last buckets, one of each finer level, to their rows."""
    parts, since = _cover(conn, run_id, _top_level(conn, run_id), None)
    rows = stack(chunks.select(conn, run_id, since))
    keys = dict.fromkeys([*(key for _, buckets in parts for key in buckets.keys), *rows.keys])
    counts = dict.fromkeys(keys, 0)
    last: dict[str, int] = {}
    for key in rows.keys:
        logged = rows.steps[~np.isnan(rows[key])]
        counts[key] += len(logged)
        if len(logged):
            last[key] = int(logged[-1])
    for level, buckets in reversed(parts):  # the newest first
        for column, key in enumerate(buckets.keys):
            found = buckets.stats[:, column, COUNT]
            counts[key] += int(found.sum())
            if key not in last and found.any():
                i = np.flatnonzero(found)[-1]
                span = int(buckets.first_steps[i]), int(buckets.last_steps[i])
                last[key] = _last_logged(conn, run_id, key, level, *span)
    return {key: SeriesInfo(counts[key], last.get(key)) for key in keys}


def _last_logged(conn: Connection, run_id: str, key: str, level: int, first: int, last: int) -> int:
    """The last step at which `key` was logged in the bucket of `level` from step `first`
    to `last`, which holds values of it: looked up in its last bucket with values of
    `key` on each finer level, then in that level-1 bucket's rows."""
    for finer in range(level - 1, 0, -1):
        buckets = aligned(list(_select(conn, run_id, finer, first - 1, until=last)))
        found = np.flatnonzero(buckets.stats[:, buckets.keys.index(key), COUNT])
        first, last = int(buckets.first_steps[found[-1]]), int(buckets.last_steps[found[-1]])
    rows = stack(chunks.select(conn, run_id, first - 1, until=last))
    return int(rows.steps[~np.isnan(rows[key])][-1])


def _cover(
    conn: Connection, run_id: str, level: int, since: int | None, *, until: int = _LAST
) -> tuple[list[tuple[int, Buckets]], int | None]:
    """The buckets of `level` after step `since` up to `until`, then those of each finer
    level after them, with their level, in step order; and the last step they cover
    (`since` when there are none)."""
    parts = []
    for finer in range(level, 0, -1):
        found = list(_select(conn, run_id, finer, since, until=until))
        if found:
            parts.append((finer, aligned(found)))
            since = int(found[-1].last_steps[-1])
    return parts, since


def _top_level(conn: Connection, run_id: str) -> int:
    """The run's coarsest level of buckets; 0 when it has none."""
    (top,) = conn.execute(
        "SELECT max(level) FROM metric_summaries WHERE run_id = ?", (run_id,)
    ).fetchone()
    return top or 0


def _level_for(conn: Connection, run_id: str, low: int, high: int, max_buckets: int) -> int:
    """The finest level with at most `max_buckets` buckets in the range; 0 (the rows
    themselves) for a range of at most about `RAW_ROWS` rows. Counts from the coarsest
    level down, so that no count reads more than `max_buckets` + 1 index entries."""
    top = _top_level(conn, run_id)
    for level in range(top, 0, -1):
        (count,) = conn.execute(
            # Buckets that end in the range, one fewer than overlap it at most: counted on
            # the primary key alone, without reading a row.
            "SELECT count(*) FROM (SELECT 1 FROM metric_summaries WHERE run_id = ? AND level = ?"
            " AND last_step BETWEEN ? AND ? LIMIT ?) AS bucket",
            (run_id, level, low, high, max_buckets + 1),
        ).fetchone()
        if count > max_buckets:
            return min(level + 1, top)
        if level == 1 and count * BUCKET_ROWS <= RAW_ROWS:
            return 0
    return 1 if top else 0


def _select(
    conn: Connection, run_id: str, level: int, since: int | None, *, until: int = _LAST
) -> Iterator[Buckets]:
    """The level's buckets that end after step `since` and begin by `until`, in step
    order, grouped by their keys."""
    found = conn.execute(
        "SELECT keys, first_step, last_step, stats FROM metric_summaries WHERE run_id = ?"
        " AND level = ? AND last_step > ? AND first_step <= ? ORDER BY last_step",
        (run_id, level, _FIRST if since is None else since, until),
    ).fetchall()
    for keys_json, group in itertools.groupby(found, key=operator.itemgetter(0)):
        _, first, last, stats = zip(*group, strict=True)
        keys = tuple(json.loads(keys_json))
        matrix = np.frombuffer(b"".join(stats), _VALUE).reshape(len(first), len(keys), _STATS)
        yield Buckets(keys, np.array(first, np.int64), np.array(last, np.int64), matrix)


def _last_step(conn: Connection, run_id: str, level: int) -> int | None:
    return conn.execute(
        "SELECT max(last_step) FROM metric_summaries WHERE run_id = ? AND level = ?",
        (run_id, level),
    ).fetchone()[0]
