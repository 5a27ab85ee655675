"""The one downsampler (`core.series.extremes`): each bucket's extremes, found alike by
the store's summaries and by a chart, so that a spike survives both, and a chart of a run
of any length gets a bounded number of points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.charts import RunView, layer_figures
from core.series import CHART_BUCKETS, SeriesKey, downsample, envelope, extremes
from core.store import Store
from core.store.metrics import Block

NAN, INF = np.nan, np.inf


def test_extremes_are_each_buckets_first_lowest_and_highest_logged_points() -> None:
    buckets = np.array([[3, 1, 1, 5], [NAN, 2, NAN, 2], [NAN, NAN, NAN, NAN]])
    low, high = extremes(buckets)
    assert low.tolist() == [1, 1, 0] and high.tolist() == [3, 1, 0]  # nothing logged: 0


def test_a_logged_infinity_is_an_extreme_and_an_unlogged_point_never() -> None:
    # A bucket of a diverged run: nothing logged, then infinities only.
    low, high = extremes(np.array([[NAN, INF, INF], [NAN, -INF, 1.0]]))
    assert low.tolist() == [1, 1] and high.tolist() == [1, 2]


def test_extremes_of_summaries_take_the_lowest_lows_and_the_highest_highs() -> None:
    # Merged buckets: each part's own lowest and highest.
    lows, highs = np.array([[2.0, 1.0, 3.0]]), np.array([[9.0, 4.0, 5.0]])
    low, high = extremes(lows, highs)
    assert low.tolist() == [1] and high.tolist() == [0]


@pytest.mark.parametrize("buckets", [2, 10, CHART_BUCKETS])
@pytest.mark.parametrize("n", [5, 801, 10_007, 250_000])
def test_a_chart_gets_at_most_two_points_a_bucket_both_ends_and_the_spikes(
    n: int, buckets: int
) -> None:
    values = np.random.default_rng(n).normal(size=n)
    values[n // 3], values[n // 2] = 50.0, -50.0
    steps, drawn = downsample(np.arange(n), values, buckets)
    assert len(drawn) <= 2 * buckets and steps[0] == 0 and steps[-1] == n - 1
    assert drawn.max() == 50.0 and drawn.min() == -50.0
    spread = envelope(np.arange(n), values, buckets)
    if spread is not None:
        assert len(spread.mean) <= buckets and spread.high.max() == 50.0


def test_a_layers_spike_survives_the_store_and_the_live_chart(tmp_path: Path) -> None:
    n, spike = 300_000, 123_457
    key = SeriesKey("update_ratio", "inner/dense").format()  # a nested model's layer
    values = np.exp(np.random.default_rng(0).normal(-6, 0.1, n))
    values[spike] = 1.0
    with Store(str(tmp_path / "lab.sqlite")) as store:
        store.create_run("r", "r", {"model": "mlp", "optimizer": "sgd"}, status="running")
        store.append_metrics("r", Block((key,), np.arange(1, n + 1), values[None, :]))
        read = store.read_overview("r")
    assert len(read) < 3 * CHART_BUCKETS and np.nanmax(read[key]) == 1.0
    figure = layer_figures([RunView("r", "r", read)])["update_ratio"]
    assert {trace.name for trace in figure.data} == {"inner/dense"}
    assert all(len(trace.y) <= 2 * CHART_BUCKETS for trace in figure.data)
    assert max(max(trace.y) for trace in figure.data) == 1.0
