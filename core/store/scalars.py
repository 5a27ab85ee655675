"""Reading the runs' metric series back, shaped like TensorBoard's `DataProvider`
(`list_scalars`, `read_scalars`): `list_series` tells which series each run holds, without
their values, and `read_series` reads some of them, whole or downsampled through the
run's summaries (see `core.store.summaries`), however long the run.

Not to be confused with `core.series`, which names a series and thins it for a chart.
"""

from collections.abc import Iterable

from core.series import CHART_BUCKETS
from core.store import chunks, summaries
from core.store.connections import Connection
from core.store.db import Part
from core.store.metrics import Metrics, SeriesInfo, stack


class Scalars(Part):
    """The runs' metric series, as their writers committed them (see
    `core.store.writer`); a run not stored reads as one without metrics."""

    def list_series(self, run_ids: Iterable[str] | None = None) -> dict[str, dict[str, SeriesInfo]]:
        """Each run's series, by run id, then by name in the order they first appeared:
        how many values, and the last step (see `summaries.tally`, which reads a bounded
        number of rows however long the run). By default every run that has metrics;
        a run without maps to `{}`."""
        with self.db.read() as conn:
            if run_ids is None:
                found = conn.execute("SELECT DISTINCT run_id FROM metric_chunks").fetchall()
                run_ids = sorted(run_id for (run_id,) in found)
            return {run_id: summaries.tally(conn, run_id) for run_id in run_ids}

    def read_series(
        self,
        run_ids: Iterable[str],
        tags: Iterable[str] | None = None,
        *,
        downsample: int | None = None,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> dict[str, Metrics]:
        """The series `tags` (every one by default) of each run, by run id, from step
        `start` to `end` (the whole run by default); with `tags`, only the rows that hold
        a value of one of them.

        Every row when `downsample` is None. Else, for a range of more than about
        `summaries.RAW_ROWS` rows, at most about `downsample` buckets of the run's
        summaries and the rows after them (see `summaries.overview`): two rows a bucket,
        its extremes, or with `means` one, its mean.
        """
        tags = None if tags is None else list(tags)
        read = {}
        with self.db.read() as conn:
            for run_id in run_ids:
                metrics = _read(conn, run_id, start, end, downsample, means)
                read[run_id] = metrics if tags is None else metrics.only(tags)
        return read

    def read_metrics(self, run_id: str, since_step: int | None = None) -> Metrics:
        """The run's committed metrics, only the steps after `since_step` if given.

        An unknown run reads as empty metrics.
        """
        start = None if since_step is None else since_step + 1
        return self.read_series([run_id], start=start)[run_id]

    def read_overview(
        self,
        run_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        means: bool = False,
    ) -> Metrics:
        """The run's committed metrics from step `start` to `end` (all by default), as a
        chart needs them: every row of a short range, else at most about `CHART_BUCKETS`
        buckets (what a chart shows), each as its extremes, or with `means` its mean (see
        `core.store.summaries.overview`), whatever the run's length. An unknown run reads
        as empty metrics."""
        read = self.read_series(
            [run_id], downsample=CHART_BUCKETS, start=start, end=end, means=means
        )
        return read[run_id]

    def last_step(self, run_id: str) -> int | None:
        """The largest step of the run's committed metrics, None if it has none."""
        with self.db.read() as conn:
            return chunks.last_step(conn, run_id)


def _read(
    conn: Connection,
    run_id: str,
    start: int | None,
    end: int | None,
    downsample: int | None,
    means: bool,
) -> Metrics:
    """`Scalars.read_series` of one run, every series."""
    if downsample is None:
        return stack(chunks.select(conn, run_id, None if start is None else start - 1, until=end))
    return summaries.overview(
        conn, run_id, start=start, end=end, max_buckets=downsample, means=means
    )
