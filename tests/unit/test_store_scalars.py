"""The series reader (`core.store.scalars`): `list_series` tells each series' count and
last step exactly from the summaries, and `read_series` reads what `read_metrics` and
`read_overview` read, for several runs and only the series asked for."""

from __future__ import annotations

import numpy as np
import pytest

from core.series import CHART_BUCKETS
from core.store import SeriesInfo, Store
from core.store.metrics import Block, Metrics

KEYS = ("loss", "val_loss", "lr", "never")
STEPS = 30_000  # five levels of summaries, and newest rows after the last bucket


def telemetry(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1…`steps`: a loss every step, a validation loss every 500 steps up to step
    9,000 only (its last value deep inside coarse buckets), a learning rate at step 1,
    and a series only ever logged as NaN."""
    step = np.arange(1, steps + 1)
    values = np.full((len(KEYS), steps), np.nan)
    values[0] = np.linspace(2.0, 0.1, steps)
    logged = (step % 500 == 0) & (step <= 9_000)
    values[1, logged] = 1.0 / step[logged]
    values[2, 0] = 1e-3
    return step, values


def write(store: Store, run_id: str, steps: np.ndarray, values: np.ndarray) -> None:
    store.create_run(run_id, run_id, {}, status="running")
    for start in range(0, len(steps), 4096):
        stop = start + 4096
        store.append_metrics(run_id, Block(KEYS, steps[start:stop], values[:, start:stop]))


def expected(metrics: Metrics) -> dict[str, SeriesInfo]:
    """Each series' count and last step, counted in every row."""
    found = {}
    for key in metrics:
        logged = metrics.steps[~np.isnan(metrics[key])]
        found[key] = SeriesInfo(len(logged), int(logged[-1]) if len(logged) else None)
    return found


@pytest.fixture
def store(store_location: str):
    with Store(store_location) as store:
        yield store


def test_list_series_counts_and_finds_the_last_step_of_every_series(store) -> None:
    write(store, "long", *telemetry(STEPS))
    write(store, "short", *telemetry(700))
    store.create_run("empty", "empty", {})
    listed = store.list_series()
    assert list(listed) == ["long", "short"]  # runs with metrics, by id
    for run_id in ("long", "short"):
        assert listed[run_id] == expected(store.read_metrics(run_id))
        assert list(listed[run_id]) == list(KEYS)
    assert listed["long"]["val_loss"] == SeriesInfo(18, 9_000)
    assert listed["long"]["never"] == SeriesInfo(0, None)
    assert store.list_series(["empty", "unknown"]) == {"empty": {}, "unknown": {}}


def test_list_series_follows_a_run_cut_back_by_reopen(store) -> None:
    write(store, "run", *telemetry(STEPS))
    store.finish("run", "stopped", {})
    store.reopen("run", 8_700, owner="someone")
    assert store.list_series(["run"])["run"]["val_loss"] == SeriesInfo(17, 8_500)
    assert store.list_series(["run"])["run"] == expected(store.read_metrics("run"))


def test_read_series_reads_what_the_metric_reads_read(store) -> None:
    write(store, "a", *telemetry(STEPS))
    write(store, "b", *telemetry(900))
    both = store.read_series(["a", "b"])
    for run_id in ("a", "b"):
        whole = store.read_metrics(run_id)
        assert np.array_equal(both[run_id].steps, whole.steps)
        assert all(np.array_equal(both[run_id][k], whole[k], equal_nan=True) for k in KEYS)
    overview = store.read_series(["a"], downsample=CHART_BUCKETS, start=10, end=20_000)
    expected_overview = store.read_overview("a", start=10, end=20_000)
    assert np.array_equal(overview["a"].steps, expected_overview.steps)
    coarse = store.read_series(["a"], downsample=8)["a"]
    assert len(coarse) < len(store.read_overview("a")) < STEPS
    unknown = store.read_series(["unknown"])
    assert list(unknown) == ["unknown"] and len(unknown["unknown"]) == 0


def test_read_series_keeps_only_the_tags_asked_for_and_their_rows(store) -> None:
    write(store, "run", *telemetry(STEPS))
    read = store.read_series(["run"], ["val_loss", "missing", "lr"])["run"]
    assert read.keys == ("val_loss", "lr")
    assert read.steps.tolist() == [1, *range(500, 9_001, 500)]
    assert store.read_series(["run"], ["missing"])["run"].keys == ()
