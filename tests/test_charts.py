"""Downsampling keeps spikes and ends; the Live charts draw what the runs logged."""

from __future__ import annotations

import numpy as np
import pytest

from core.charts import (
    INSTRUMENT_HELP,
    RunView,
    hyperparameter_figure,
    instrument_figures,
    live_figures,
)
from core.series import downsample, flags_to_steps
from core.store import Event, Metrics


@pytest.mark.parametrize("n", [10, 2000, 2001, 2500, 50_000, 300_001])
def test_downsample_keeps_spikes_and_both_ends(n: int) -> None:
    rng = np.random.default_rng(n)
    steps = np.arange(1, n + 1)
    values = rng.normal(size=n)
    values[n // 3], values[n // 2] = 50.0, -50.0
    x, y = downsample(steps, values)
    assert len(x) <= 2000
    assert x[0] == 1 and x[-1] == n
    assert y.max() == 50.0 and y.min() == -50.0
    assert np.all(np.diff(x) > 0)
    np.testing.assert_array_equal(values[x - 1], y)  # real points, not averages


def test_downsample_drops_missing_points_and_keeps_infinities() -> None:
    steps = np.arange(10)
    values = np.array([1, np.nan, 2, np.inf, np.nan, 3, 4, 5, 6, 7], dtype=float)
    x, y = downsample(steps, values, max_points=4)
    assert not np.isnan(y).any() and np.inf in y
    assert x[0] == 0 and x[-1] == 9


def test_flags_become_steps() -> None:
    steps = np.arange(1, 11)
    flags = np.array([0, 1, 0, np.nan, 1, 0, 0, 0, 1, 0], dtype=float)
    assert flags_to_steps(steps, flags).tolist() == [2, 5, 9]


def metrics(n: int = 100, **extra: np.ndarray) -> Metrics:
    steps = np.arange(1, n + 1)
    series = {
        "loss": np.linspace(2, 0.1, n),
        "accuracy": np.linspace(0.1, 0.9, n),
        "grad_norm": np.full(n, 3.0),
        "grad_norm_clipped": np.full(n, 1.0),
        "clip_norm": np.full(n, 1.0),
        "param_norm": np.full(n, 5.0),
        "radius": np.full(n, 5.0),
        "projection_active": (steps % 10 == 0).astype(float),
        "step_norm/conv1": np.full(n, 0.1),
        "step_norm/logits": np.full(n, 0.2),
        "val_accuracy": np.where(steps % 50 == 0, 0.8, np.nan),
        **extra,
    }
    return Metrics(steps=steps, series=series)


def test_live_figures_draw_every_series_and_mark_knob_changes() -> None:
    change = Event(
        id=1,
        run_id="a",
        step=40,
        time=0.0,
        kind="knob",
        payload={"name": "radius", "value": 2.0, "previous": 5.0},
    )
    runs = [RunView("a", "run a", metrics(), [change]), RunView("b", "run b", metrics())]
    figures = live_figures(runs)
    assert set(figures) == {
        "loss",
        "accuracy",
        "grad_norm",
        "param_norm",
        "step_norm",
        "update_ratio",
        "sparsity",
    }
    names = {key: [t.name for t in figure.data] for key, figure in figures.items()}
    assert names["step_norm"] == [
        "run a · conv1",
        "run a · logits",
        "run b · conv1",
        "run b · logits",
    ]
    assert "run a · clip threshold" in names["grad_norm"]
    assert "run b · radius" in names["param_norm"]
    projected = next(t for t in figures["param_norm"].data if t.name == "run a · projected")
    assert list(projected.x) == list(range(10, 101, 10))
    validation = next(t for t in figures["accuracy"].data if t.name == "run a · validation")
    assert list(validation.x) == [50, 100]
    for key, figure in figures.items():
        assert figure.layout.uirevision == key
        assert [s.x0 for s in figure.layout.shapes] == [40]
        assert "radius → 2" in figure.layout.annotations[0].text
    assert figures["step_norm"].layout.yaxis.type == "log"
    assert figures["update_ratio"].data == ()  # nothing logged: an empty chart says so
    assert figures["update_ratio"].layout.annotations[-1].text == "no data yet"


def test_hyperparameter_figure_keeps_varying_columns_and_logs_wide_ranges() -> None:
    rows = [
        {"learning_rate": lr, "batch_size": 64.0, "val_accuracy": acc}
        for lr, acc in [(1e-4, 0.8), (1e-2, 0.9), (1.0, 0.3)]
    ]
    (parcoords,) = hyperparameter_figure(rows, "val_accuracy").data
    labels = [d.label for d in parcoords.dimensions]
    assert labels == ["log₁₀ learning_rate", "val_accuracy"]
    np.testing.assert_allclose(parcoords.dimensions[0].values, [-4, -2, 0])


def test_instrument_figures_draw_the_instruments_and_the_heat_strips() -> None:
    n = 100
    steps = np.arange(1, n + 1)
    every = lambda k: np.where(steps % k == 0, 1.0, np.nan)  # noqa: E731
    logged = metrics(
        n,
        learning_rate=np.full(n, 0.1),
        distance_from_init=np.linspace(0, 2, n),
        **{"distance_from_init/conv1": np.linspace(0, 1, n)},
        alpha=every(10) * 0.3,
        sharpness=every(50) * 12.0,
        noise_scale=every(5) * 40.0,
    )
    histogram = Event(
        id=2,
        run_id="a",
        step=50,
        time=0.0,
        kind="histogram",
        payload={
            "edges": [-2.0, -1.0, 0.0],
            "grad": {"conv1": [3, 1], "logits": [0, 4]},
            "weight": {"conv1": [1, 1], "logits": [2, 2]},
        },
    )
    figures = instrument_figures([RunView("a", "run a", logged, [histogram], batch_size=64)])
    assert set(figures) == set(INSTRUMENT_HELP)
    names = {key: [t.name for t in figure.data] for key, figure in figures.items()}
    assert names["sharpness"] == ["run a · sharpness", "run a · 2/η"]
    np.testing.assert_allclose(figures["sharpness"].data[1].y, 20.0)
    assert names["noise_scale"] == ["run a · B", "run a · batch size"]
    assert list(figures["noise_scale"].data[1].y) == [64, 64]
    assert list(figures["alpha"].data[0].x) == list(range(10, 101, 10))
    assert [s.y0 for s in figures["alpha"].layout.shapes] == [-1, 0, 1]
    assert names["distance_from_init"] == ["run a · all layers", "run a · conv1"]
    (strip,) = figures["histogram/grad"].data
    assert list(strip.x) == [50]
    # conv1: 3/4 and 1/4, a gap, then logits: 0 and 1, a gap.
    np.testing.assert_allclose(
        np.asarray(strip.z, dtype=float)[:, 0], [0.75, 0.25, np.nan, 0.0, 1.0, np.nan]
    )
    assert list(figures["histogram/grad"].layout.yaxis.ticktext) == ["conv1", "logits"]
