"""Multi-resolution summaries (`core.store.summaries`): what they hold, that a chart's read
stays bounded at any run length, and that spikes survive at every level."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from core.series import CHART_BUCKETS
from core.store import Store, summaries
from core.store.metrics import Block
from core.store.summaries import BUCKET_ROWS, COUNT, FANOUT, HIGH, HIGH_STEP, LOW, LOW_STEP, SUM

KEYS = ("loss", "grad_norm", "val_accuracy")
SPIKE_STEP, INFINITE_STEP = 123_457, 150_001


def telemetry(steps: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1…`steps` of three series: two random walks logged every step (with a 100×
    spike and an infinite value) and one logged every 500 steps."""
    rng = np.random.default_rng(seed)
    values = np.exp(np.cumsum(rng.normal(0.0, 0.01, (len(KEYS), steps)), axis=1))
    values[2, np.arange(1, steps + 1) % 500 != 0] = np.nan
    if steps >= INFINITE_STEP:
        values[1, SPIKE_STEP - 1] = 100 * np.nanmax(values[1])
        values[0, INFINITE_STEP - 1] = np.inf
    return np.arange(1, steps + 1), values


def write(store: Store, run_id: str, steps: np.ndarray, values: np.ndarray, sizes=(4096,)) -> None:
    """The rows as blocks of the given sizes in turn, as flushes of a writer would commit
    them; the first key appears only from the second block on (keys grow)."""
    store.create_run(run_id, run_id, {"model": "mlp", "optimizer": "sgd"}, status="running")
    start, turn = 0, 0
    while start < len(steps):
        stop = start + sizes[turn % len(sizes)]
        keys = KEYS if turn else KEYS[1:]
        columns = values[:, start:stop] if turn else values[1:, start:stop]
        store.append_metrics(run_id, Block(keys, steps[start:stop], columns))
        start, turn = stop, turn + 1


def stored_buckets(store: Store, run_id: str) -> dict[int, summaries.Buckets]:
    """Every stored bucket of the run, by level."""
    with store.db.read() as conn:
        levels = conn.execute(
            "SELECT DISTINCT level FROM metric_summaries WHERE run_id = ?", (run_id,)
        ).fetchall()
        return {
            level: summaries.aligned(list(summaries._select(conn, run_id, level, None)))
            for (level,) in levels
        }


def in_its_bucket(steps: np.ndarray, index: int, step: int) -> bool:
    """Whether row `index` of an overview, drawn at `steps[index]`, stands for `step`: a
    bucket's two rows are at its ends, so `step` lies between the rows beside it."""
    return steps[max(index - 1, 0)] <= step <= steps[min(index + 1, len(steps) - 1)]


@pytest.fixture
def store(store_location: str):
    """A new store on each backend."""
    with Store(store_location) as store:
        yield store


@pytest.mark.parametrize("sizes", [(4096,), (1, 63, 200, 7), (100_000,)])
def test_every_bucket_holds_what_its_rows_hold(store: Store, sizes) -> None:
    steps, values = telemetry(40_000)
    write(store, "run", steps, values, sizes)
    found = stored_buckets(store, "run")
    assert sorted(found) == [1, 2, 3, 4, 5]  # 40,000 rows: 625, 156, 39, 9 and 2 buckets
    for level, buckets in found.items():
        size = BUCKET_ROWS * FANOUT ** (level - 1)
        assert len(buckets) == len(steps) // size
        for i in range(len(buckets)):
            rows = slice(i * size, (i + 1) * size)
            ends = buckets.first_steps[i], buckets.last_steps[i]
            assert ends == (steps[rows][0], steps[rows][-1])
            for k, key in enumerate(buckets.keys):
                column = values[KEYS.index(key), rows]
                if key == KEYS[0] and i * size < sizes[0]:
                    column = column.copy()
                    column[: sizes[0] - i * size] = np.nan  # not logged in the first block
                logged = ~np.isnan(column)
                stats = buckets.stats[i, k]
                assert stats[COUNT] == logged.sum()
                if not logged.any():
                    assert np.isnan(stats[SUM:]).all()
                    continue
                assert stats[SUM] == pytest.approx(column[logged].sum(), rel=1e-12)
                assert stats[LOW] == np.nanmin(column) and stats[HIGH] == np.nanmax(column)
                assert column[int(stats[LOW_STEP]) - steps[rows][0]] == stats[LOW]
                assert column[int(stats[HIGH_STEP]) - steps[rows][0]] == stats[HIGH]


def test_a_short_run_or_range_reads_every_row(store: Store) -> None:
    steps, values = telemetry(30_000)
    write(store, "run", steps, values)
    whole = store.read_metrics("run")
    short = store.read_overview("run", end=4000)
    assert np.array_equal(short.steps, steps[:4000])
    zoomed = store.read_overview("run", start=20_001, end=24_000)
    assert np.array_equal(zoomed.steps, steps[20_000:24_000])
    for key in KEYS:
        np.testing.assert_array_equal(zoomed[key], whole[key][20_000:24_000])


def test_a_long_run_reads_a_bounded_number_of_rows_and_its_spikes_at_every_level(
    store: Store,
) -> None:
    steps, values = telemetry(400_000)
    write(store, "run", steps, values)
    levels = max(stored_buckets(store, "run"))
    bound = 2 * CHART_BUCKETS + 2 * (FANOUT - 1) * levels + BUCKET_ROWS
    overview = store.read_overview("run")
    assert len(overview) <= bound
    assert overview.steps[0] == 1 and overview.steps[-1] == 400_000
    # Each level in turn, from the finest that fits 5,000 buckets to the coarsest.
    with store.db.read() as conn:
        for max_buckets in (5000, 1000, 300, 80, 20, 5):
            seen = summaries.overview(conn, "run", max_buckets=max_buckets)
            assert np.all(np.diff(seen.steps) > 0)
            spike = int(np.nanargmax(seen["grad_norm"]))
            assert seen["grad_norm"][spike] == values[1, SPIKE_STEP - 1]
            assert in_its_bucket(seen.steps, spike, SPIKE_STEP)
            (infinite,) = np.flatnonzero(np.isinf(seen["loss"]))
            assert in_its_bucket(seen.steps, infinite, INFINITE_STEP)
            assert np.nanmin(seen["loss"]) == np.nanmin(values[0])  # the lowest, too
            logged = np.count_nonzero(~np.isnan(seen["val_accuracy"]))
            assert 0 < logged <= np.count_nonzero(~np.isnan(values[2]))


def test_means_over_buckets_are_the_rows_means(store: Store) -> None:
    steps, values = telemetry(100_000)
    write(store, "run", steps, values)
    means = store.read_overview("run", means=True)
    # A bucket's mean sits at its last step: the rows up to it since the previous one.
    previous = 0
    for step, mean in zip(means.steps[:50], means["grad_norm"][:50], strict=True):
        rows = values[1, previous:step]
        assert mean == pytest.approx(rows.mean(), rel=1e-12)
        previous = step


def test_a_resumed_run_keeps_the_summaries_of_one_written_straight(store: Store) -> None:
    steps, values = telemetry(50_000)
    write(store, "straight", steps, values)
    write(store, "resumed", steps[:33_333], values[:, :33_333])
    store.set_status("resumed", "stopped")
    store.reopen("resumed", 20_000, owner="me")
    store.append_metrics("resumed", Block(KEYS, steps[20_000:], values[:, 20_000:]))
    straight, resumed = stored_buckets(store, "straight"), stored_buckets(store, "resumed")
    assert sorted(straight) == sorted(resumed)
    for level, buckets in straight.items():
        np.testing.assert_array_equal(resumed[level].last_steps, buckets.last_steps)
        np.testing.assert_array_equal(resumed[level].stats, buckets.stats)


def test_a_store_written_before_summaries_gets_them_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    steps, values = telemetry(20_000)
    with Store(path) as store:
        write(store, "run", steps, values)
        expected = stored_buckets(store, "run")
    with closing(sqlite3.connect(path)) as conn:  # as schema version 4 left it
        conn.execute("DROP TABLE metric_summaries")
        conn.execute("ALTER TABLE runs ADD COLUMN epoch INTEGER")
        conn.execute("PRAGMA user_version = 4")
        conn.commit()
    with Store(path) as store:
        found = stored_buckets(store, "run")
        assert sorted(found) == sorted(expected)
        for level, buckets in expected.items():
            np.testing.assert_array_equal(found[level].stats, buckets.stats)
        assert len(store.read_overview("run")) < 1500


def test_deleting_a_run_deletes_its_summaries(store: Store) -> None:
    steps, values = telemetry(5000)
    write(store, "run", steps, values)
    store.set_status("run", "completed")
    store.delete_run("run")
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM metric_summaries").fetchone()[0] == 0


def test_rows_without_values_are_summarised_as_nothing_logged(store: Store) -> None:
    store.create_run("run", "run", {}, status="running")
    with store.metrics_writer("run") as writer:
        for step in range(1, 200):
            writer.append(step, {} if step < 100 else {"loss": 1.0 / step})
    (buckets,) = stored_buckets(store, "run").values()
    assert buckets.stats[0, 0, COUNT] == 0 and buckets.stats[2, 0, COUNT] == 64
    assert np.count_nonzero(~np.isnan(store.read_overview("run")["loss"])) == 100


def test_appended_rows_must_follow_the_stored_ones(store: Store) -> None:
    steps, values = telemetry(100)
    write(store, "run", steps, values)
    with pytest.raises(ValueError, match="must follow step 100"):
        store.append_metrics("run", Block(KEYS, steps[-10:], values[:, -10:]))
    assert len(store.read_metrics("run")) == 100
