"""Downsampling keeps spikes and ends; the y range ignores runaways; the Live, Instruments
and hyperparameter charts draw what the runs logged, and stay readable with several runs."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go
import pytest

from core.charts import (
    HOVER_FORMAT,
    INSTRUMENT_HELP,
    PALETTE,
    PERCENT_HOVER_FORMAT,
    PERCENT_TICK_FORMAT,
    TICK_FORMAT,
    RunView,
    group_figure,
    hyperparameter_figure,
    instrument_figures,
    layer_figures,
    live_figures,
    training_figures,
)
from core.charts.style import TOTAL_COLOUR, ColourBook, shade
from core.charts.training_panels import projected_spans
from core.charts.view_legend import view_legend
from core.series import downsample, robust_range
from core.store import Event, Metrics
from core.sweep import parallel_rows
from ui.presentation import LAYERS_SAID, LEGEND_ONLY, NEUTRAL, legend_figure

TRAINING_KEYS = {"loss", "accuracy", "grad_norm", "param_norm", "learning_rate"}
LIVE_KEYS = TRAINING_KEYS | {"step_norm", "update_ratio", "sparsity"}
PER_LAYER = ("step_norm", "update_ratio", "sparsity")


# Downsampling and ranges ------------------------------------------------------------------


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
    x, y = downsample(steps, values, buckets=2)
    assert not np.isnan(y).any() and np.inf in y
    assert x[0] == 0 and x[-1] == 9


def test_flags_become_the_stretches_they_are_on() -> None:
    steps = np.arange(1, 13)
    flags = np.array([0, 1, 1, np.nan, 1, 0, 0, 0, 1, 0, 1, 1], dtype=float)
    starts, ends = projected_spans(steps, flags)
    assert starts.tolist() == [2, 9, 11] and ends.tolist() == [5, 9, 12]  # unlogged: skipped
    starts, ends = projected_spans(np.arange(100), np.tile([1.0, 0.0], 50), max_spans=5)
    assert starts.tolist() == [0, 24, 48, 72, 98] and ends.tolist() == starts.tolist()


def test_robust_range_spans_the_values_with_a_little_room() -> None:
    low, high = robust_range(np.linspace(2.0, 4.0, 100))
    assert 1.8 < low < 2.0 and 4.0 < high < 4.2


def test_robust_range_leaves_a_runaway_tail_out() -> None:
    values = np.concatenate([np.linspace(1, 2, 990), 10.0 ** np.arange(1, 11), [np.inf, np.nan]])
    low, high = robust_range(values, log=True)
    assert low < 0 and 0.3 < high < 2  # 1 to 2 in view, and at most a decade above
    low, high = robust_range(values)
    assert 2 < high < 4  # up to half the largest value above


def test_robust_range_includes_references_and_handles_flat_or_empty_series() -> None:
    low, high = robust_range(np.full(50, 3.0), include=np.array([10.0, np.nan]))
    assert low < 3.0 and high > 10.0
    low, high = robust_range(np.full(50, 3.0))
    assert low < 3.0 < high
    low, high = robust_range(np.array([0.0, -1.0, 100.0]), log=True)  # ≤ 0: not on a log axis
    assert low < 2 < high
    assert robust_range(np.array([np.nan, np.inf])) is None


# Runs to draw -----------------------------------------------------------------------------


def metrics(
    n: int = 100, layers: Iterable[str] = ("conv1", "logits"), **extra: np.ndarray
) -> Metrics:
    steps = np.arange(1, n + 1)
    series = {
        "loss": np.linspace(2, 0.1, n),
        "accuracy": np.linspace(0.1, 0.9, n),
        "grad_norm": np.full(n, 3.0),
        "grad_norm_clipped": np.full(n, 1.0),
        "clip_norm": np.full(n, 1.0),
        "param_norm": np.full(n, 5.0),
        "radius": np.full(n, 5.0),
        "learning_rate": np.where(steps < 40, 0.01, 0.005) * np.minimum(1, steps / 10),
        "projection_active": (steps % 10 == 0).astype(float),
        "val_accuracy": np.where(steps % 50 == 0, 0.8, np.nan),
    }
    for j, layer in enumerate(layers):
        series[f"step_norm/{layer}"] = np.full(n, 0.1 * (j + 1))
        series[f"sparsity/{layer}"] = np.linspace(0, 0.1 * (j + 1), n)
    return Metrics(steps=steps, series=series | extra)


def knob(run_id: str, step: int, name: str = "radius", value: float = 2.0) -> Event:
    payload = {"name": name, "value": value, "previous": 5.0}
    return Event(id=step, run_id=run_id, step=step, time=0.0, kind="knob", payload=payload)


def diverged(run_id: str, step: int) -> Event:
    payload = {"loss": math.inf}
    return Event(id=step, run_id=run_id, step=step, time=0.0, kind="diverged", payload=payload)


def data_traces(figure: go.Figure) -> list:
    """The traces that draw metrics (not the marks' hover markers)."""
    return [t for t in figure.data if t.yaxis != "y2"]


def histogram(first: str = "conv1") -> Event:
    """Gradient and weight magnitudes of two layers, `first` and `logits`, at step 50."""
    payload = {
        "edges": [-2.0, -1.0, 0.0],
        "grad": {first: [3, 1], "logits": [0, 4]},
        "weight": {first: [1, 1], "logits": [2, 2]},
    }
    return Event(id=2, run_id="a", step=50, time=0.0, kind="histogram", payload=payload)


def mark_texts(figure: go.Figure) -> list[str]:
    return [text for t in figure.data if t.yaxis == "y2" for text in t.text]


def three_runs() -> list[RunView]:
    layers = ("conv1", "conv2", "dense1", "dense2", "logits")
    return [
        RunView(run_id, f"run {run_id}", metrics(layers=layers), [knob(run_id, step)])
        for run_id, step in (("a", 20), ("b", 40), ("c", 60))
    ]


# The Live charts ------------------------------------------------------------------------


def test_live_figures_draw_every_series_of_a_single_run_in_one_chart_each() -> None:
    figures = live_figures([RunView("a", "run a", metrics(), [knob("a", 40)])])
    assert set(figures) == LIVE_KEYS
    names = {key: [t.name for t in data_traces(figure)] for key, figure in figures.items()}
    assert names["step_norm"] == ["conv1", "logits"]  # the layers alone: one run drawn
    assert "run a · clip threshold" in names["grad_norm"]
    assert "run a · radius" in names["param_norm"]
    projected = next(t for t in figures["param_norm"].data if t.name == "run a · projected")
    assert list(projected.x) == list(range(10, 101, 10))
    validation = next(t for t in figures["accuracy"].data if t.name == "run a · validation")
    assert list(validation.x) == [50, 100]
    (rate,) = data_traces(figures["learning_rate"])  # warmup, then a live change
    assert rate.name == "run a · η" and list(rate.y[[0, 9, 38, 39]]) == [0.001, 0.01, 0.01, 0.005]
    for key, figure in figures.items():
        assert figure.layout.uirevision == key
    assert figures["step_norm"].layout.yaxis.type == "log"
    assert figures["update_ratio"].data == ()  # nothing logged: an empty chart says so
    assert [a.text for a in figures["update_ratio"].layout.annotations] == ["no data yet"]
    assert figures["update_ratio"].layout.shapes == ()  # and no marks


def test_every_chart_writes_numbers_one_way() -> None:
    runs = three_runs()
    figures = {**live_figures(runs), **instrument_figures(runs)}
    for key, figure in figures.items():
        if key.startswith("histogram/"):
            continue  # heat strips label layers, not numbers
        yaxis = figure.layout.yaxis
        if key.startswith(("accuracy", "sparsity")):
            assert (yaxis.tickformat, yaxis.hoverformat) == (
                PERCENT_TICK_FORMAT,
                PERCENT_HOVER_FORMAT,
            )
        elif yaxis.exponentformat == "power":  # a log axis over whole decades: 10⁻⁶ …
            assert (yaxis.tickformat, yaxis.hoverformat) == ("", HOVER_FORMAT), key
        else:
            assert (yaxis.tickformat, yaxis.hoverformat) == (TICK_FORMAT, HOVER_FORMAT), key
        for trace in data_traces(figure):
            # Hover shows the values as the axis formats them, not a format of its own.
            assert "%{y}" in trace.hovertemplate and "%{y:" not in trace.hovertemplate
    assert (TICK_FORMAT, HOVER_FORMAT, PERCENT_TICK_FORMAT) == (",~r", ",.4~r", "~%")


@pytest.mark.parametrize(
    ("low", "high", "dtick"), [(1e-4, 10.0, 1), (1e-12, 1e8, 3), (0.01, 1.0, "D2"), (0.3, 2, None)]
)
def test_log_axes_label_whole_decades_in_full(low: float, high: float, dtick: object) -> None:
    loss = np.geomspace(high, low, 100)
    yaxis = live_figures([RunView("a", "run a", metrics(loss=loss))])["loss"].layout.yaxis
    assert yaxis.type == "log" and yaxis.dtick == dtick
    if dtick is None:  # within a decade: its round values, never two digits in a row
        assert [round(v, 9) for v in yaxis.tickvals] == [0.3, 0.5, 1, 2]
    # Every tick in full, "0.02" rather than a bare "2" (1, 2 and 5 of each decade, or
    # Plotly's own within one decade, e.g. 0.5), and whole decades as powers of ten (10⁻⁶,
    # not 1e-6 nor 0.000001).
    assert yaxis.range[0] <= math.log10(low) and yaxis.range[1] >= math.log10(high)
    if dtick in (1, 3):
        assert (yaxis.tickformat, yaxis.exponentformat) == ("", "power")
        assert yaxis.minor.dtick == "D1" and yaxis.minor.showgrid is False  # no labels
    else:
        assert yaxis.tickformat == TICK_FORMAT


def test_sparsity_is_in_percent_from_0_to_100() -> None:
    figure = live_figures([RunView("a", "run a", metrics())])["sparsity"]
    yaxis = figure.layout.yaxis
    assert yaxis.tickformat == "~%"
    assert yaxis.range[0] <= 0 and yaxis.range[1] >= 1


def test_per_layer_charts_are_drawn_once_per_run_when_there_are_several() -> None:
    runs = three_runs()
    figures = live_figures(runs)
    split = {f"{kind}/{run_id}" for kind in ("step_norm", "sparsity") for run_id in "abc"}
    assert set(figures) == TRAINING_KEYS | {"update_ratio", *split}
    assert list(figures)[5:8] == ["step_norm/a", "step_norm/b", "step_norm/c"]
    for run in runs:
        figure = figures[f"step_norm/{run.run_id}"]
        assert figure.layout.title.text == f"Step norm ‖Δθ‖ per layer · {run.label}"
        assert figure.layout.uirevision == f"step_norm/{run.run_id}"
        traces = data_traces(figure)
        assert [t.name for t in traces] == ["conv1", "conv2", "dense1", "dense2", "logits"]
        assert all(t.hovertemplate.startswith(f"{run.label} · ") for t in traces)
    # Siblings share their scales, so that they compare at a glance.
    for kind in ("step_norm", "sparsity"):
        siblings = [figures[f"{kind}/{run_id}"].layout for run_id in "abc"]
        assert len({tuple(s.yaxis.range) for s in siblings}) == 1
        assert len({tuple(s.xaxis.range) for s in siblings}) == 1
    assert figures["update_ratio"].data == ()  # nothing logged: one empty chart


def test_per_layer_charts_join_the_steps_that_recorded_them() -> None:
    """Per-layer statistics every 4th logged step (the budget's): each layer's line holds
    those steps, one unbroken line, while the loss keeps every step."""
    every_fourth = np.arange(1, 101) % 4 == 0
    per_layer = {
        f"{kind}/{layer}": np.where(every_fourth, value, np.nan)
        for kind, value in (("step_norm", 0.1), ("sparsity", 0.05))
        for layer in ("conv1", "logits")
    }
    figures = live_figures([RunView("a", "run a", metrics(**per_layer))])
    for kind in ("step_norm", "sparsity"):
        for trace in data_traces(figures[kind]):
            assert list(trace.x) == list(range(4, 101, 4))
            assert not np.isnan(np.asarray(trace.y, dtype=float)).any()
    (loss,) = [t for t in data_traces(figures["loss"]) if t.name.endswith("train")]
    assert len(loss.x) == 100


def test_layers_are_shades_of_their_runs_colour_light_to_dark() -> None:
    names = [f"layer{j}" for j in range(5)]
    book = ColourBook()
    runs = [RunView(r, f"run {r}", metrics(layers=names), colour=book.colour(r)) for r in "ab"]
    for run in runs:
        traces = data_traces(live_figures(runs)[f"step_norm/{run.run_id}"])
        shades = [t.line.color for t in traces]
        assert shades[2] == run.colour  # the middle layer: the run's own colour
        brightness = [sum(int(c[k : k + 2], 16) for k in (1, 3, 5)) for c in shades]
        assert brightness == sorted(brightness, reverse=True)  # first layer lightest
        assert [t.line.dash for t in traces[:3]] == ["solid", "dash", "dot"]
    assert shade("#808080", 1.0) == "#ffffff" and shade("#808080", -1.0) == "#000000"
    assert shade("#f5a524", 0) == "#f5a524"


def test_a_heat_strip_names_the_run_it_draws() -> None:
    runs = [RunView(r, f"run {r}", metrics(), [histogram()]) for r in "ab"]
    titles = [f.layout.title.text for k, f in instrument_figures(runs).items() if "histogram" in k]
    assert len(titles) == 2 and all(title.endswith(" · run a") for title in titles)


@pytest.mark.parametrize("layers", [5, 13])
def test_no_two_layers_of_a_chart_look_alike_and_the_legend_sits_below(layers: int) -> None:
    names = [f"layer{j}" for j in range(layers)]
    runs = [RunView(r, f"run {r}", metrics(layers=names)) for r in "ab"]
    for key in ("step_norm/a", "sparsity/b"):
        figure = live_figures(runs)[key]
        styles = {(t.line.color, t.line.dash) for t in data_traces(figure)}
        assert len(styles) == layers
        legend = figure.layout.legend
        # At the figure's foot: the plot makes room for it (a browser test measures it).
        assert legend.orientation == "h" and (legend.yref, legend.y) == ("container", 0)


def test_knob_changes_are_marked_with_hover_text_on_the_charts_of_their_run() -> None:
    changes = [knob("a", 40), knob("a", 70, "learning_rate", 1e-5)]
    runs = [
        RunView("a", "run a", metrics(), changes),
        RunView("b", "run b", metrics(), [knob("b", 40)]),
    ]
    figures = live_figures(runs)
    for key, figure in figures.items():
        texts = mark_texts(figure)
        if not figure.data:
            continue  # nothing logged, so nothing to mark (tested above)
        if key.endswith("/b"):
            assert texts == ["radius 5 → 2 at step 40 · run b"]
            assert [s.x0 for s in figure.layout.shapes] == [40]
        elif key.endswith("/a"):
            assert texts == [
                "radius 5 → 2 at step 40 · run a",
                "learning_rate 5 → 1 × 10⁻⁵ at step 70 · run a",
            ]
        else:  # every run's, those at the same step under one marker
            assert texts == [
                "radius 5 → 2 at step 40 · run a<br>radius 5 → 2 at step 40 · run b",
                "learning_rate 5 → 1 × 10⁻⁵ at step 70 · run a",
            ]
            assert [s.x0 for s in figure.layout.shapes] == [40, 70]
        assert not figure.layout.annotations  # no labels to overlap
        (marks,) = [t for t in figure.data if t.yaxis == "y2"]
        assert list(marks.y) == [1] * len(texts) and marks.showlegend is False
        assert list(figure.layout.yaxis2.range) == [0, 1]  # the top, whatever the zoom


def test_param_norm_shows_the_norm_before_projection_against_the_radius() -> None:
    proposed = np.full(100, 5.5)
    proposed[::10] = 4.0
    proposed[50] = 1e6  # a single outlier
    before = RunView("a", "run a", metrics(param_norm_proposed=proposed, radius=np.full(100, 5.0)))
    old = RunView("b", "run b", metrics())  # logged before `param_norm_proposed` existed
    figure = live_figures([before, old])["param_norm"]
    traces = {t.name: t for t in figure.data}
    np.testing.assert_array_equal(traces["run a · ‖θ'‖ before projection"].y, proposed)
    np.testing.assert_array_equal(traces["run b · ‖θ‖ after projection"].y, np.full(100, 5.0))
    assert set(traces["run a · radius"].y) == {5.0}
    np.testing.assert_array_equal(traces["run a · projected"].y, proposed[9::10])
    low, high = figure.layout.yaxis.range
    assert low < 4.0 and 5.5 < high < 10  # the norm and the radius, not the outlier


def test_param_norm_without_a_radius_is_the_norm() -> None:
    logged = metrics(param_norm_proposed=np.full(100, 7.0))
    del logged.series["radius"]
    figure = live_figures([RunView("a", "run a", logged)])["param_norm"]
    assert [(t.name, set(t.y)) for t in figure.data] == [("run a · ‖θ‖", {7.0})]


def test_a_diverged_run_does_not_squash_the_others_and_still_shows() -> None:
    runs = [RunView(r, f"run {r}", metrics()) for r in "abc"]
    blow_up = np.concatenate([np.linspace(2, 0.5, 90), 10.0 ** np.arange(3, 30, 3), [np.inf]])
    runs.append(RunView("d", "run d", metrics(loss=blow_up), [diverged("d", 100)]))
    figures = live_figures(runs)
    low, high = figures["loss"].layout.yaxis.range
    assert low < math.log10(0.1) and math.log10(2) < high < math.log10(100)
    assert max(next(t.y for t in figures["loss"].data if t.name == "run d · train")) == np.inf
    assert "run d diverged at step 100" in mark_texts(figures["loss"])
    assert "run d diverged at step 100" in mark_texts(figures["step_norm/d"])
    assert "run d diverged at step 100" not in mark_texts(figures["step_norm/a"])


def test_a_spike_survives_downsampling_and_stays_in_view() -> None:
    n = 50_000
    grad_norm = np.full(n, 3.0) * np.exp(np.random.default_rng(0).normal(0, 0.1, n))
    grad_norm[31_337] = 30.0
    figure = live_figures([RunView("a", "run a", metrics(n, grad_norm=grad_norm))])["grad_norm"]
    # A smooth line of the means, in a band from the lowest to the highest: the spike in it.
    before = next(t for t in figure.data if t.name == "run a · before clipping")
    band = next(t for t in figure.data if t.name == "run a · before clipping, lowest to highest")
    assert len(before.y) <= 800 and max(before.y) < 3.5 and band.fill == "toself"
    assert len(band.y) <= 2000 and max(band.y) == 30.0
    assert figure.layout.yaxis.range[1] > math.log10(30.0)


def test_a_long_noisy_run_is_a_mean_line_in_its_range_and_a_short_one_is_drawn_whole() -> None:
    noisy = 1.0 + np.random.default_rng(1).normal(0, 0.3, 4000) ** 2
    long_run = metrics(4000, grad_norm=noisy)
    traces = live_figures([RunView("a", "run a", long_run)])["grad_norm"].data
    line, band = (
        next(t for t in traces if t.name == f"run a · before clipping{s}")
        for s in ("", ", lowest to highest")
    )
    buckets = noisy.reshape(len(line.y), -1)
    np.testing.assert_allclose(line.y, buckets.mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(band.y[: len(line.y)], buckets.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(band.y[len(line.y) :], buckets.min(axis=1)[::-1], rtol=1e-6)
    assert "(mean of each 10 logged points)" in line.hovertemplate
    short = live_figures([RunView("a", "run a", metrics(100))])["grad_norm"].data
    assert not any(t.name.endswith("lowest to highest") for t in short)


# Instruments and hyperparameters ----------------------------------------------------------


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
    figures = instrument_figures([RunView("a", "run a", logged, [histogram()], batch_size=64)])
    assert set(figures) == set(INSTRUMENT_HELP)
    names = {key: [t.name for t in figure.data] for key, figure in figures.items()}
    assert names["sharpness"] == ["run a · sharpness", "run a · 2/η"]
    np.testing.assert_allclose(figures["sharpness"].data[1].y, 20.0)
    assert figures["sharpness"].layout.yaxis.range[1] > math.log10(20.0)  # 2/η in view
    assert names["noise_scale"] == ["run a · B", "run a · batch size"]
    assert list(figures["noise_scale"].data[1].y) == [64, 64]
    assert list(figures["alpha"].data[0].x) == list(range(10, 101, 10))
    assert [s.y0 for s in figures["alpha"].layout.shapes] == [-1, 0, 1]
    low, high = figures["alpha"].layout.yaxis.range
    assert low < -1 and high > 1
    assert names["distance_from_init"] == ["all layers", "conv1"]
    (strip,) = figures["histogram/grad"].data
    assert list(strip.x) == [50]
    # conv1: 3/4 and 1/4, a gap, then logits: 0 and 1, a gap.
    np.testing.assert_allclose(
        np.asarray(strip.z, dtype=float)[:, 0], [0.75, 0.25, np.nan, 0.0, 1.0, np.nan]
    )
    assert list(figures["histogram/grad"].layout.yaxis.ticktext) == ["conv1", "logits"]


def test_distance_from_init_of_several_runs_compares_their_totals() -> None:
    logged = metrics(distance_from_init=np.linspace(0, 2, 100))
    figures = instrument_figures([RunView(r, f"run {r}", logged) for r in "ab"])
    assert set(figures) == set(INSTRUMENT_HELP)  # one chart each: every caption applies
    traces = figures["distance_from_init"].data
    assert [t.name for t in traces] == ["run a · all layers", "run b · all layers"]
    assert traces[0].line.color != traces[1].line.color


def test_hyperparameter_figure_keeps_varying_columns_and_logs_wide_ranges() -> None:
    rows = [
        {"learning_rate": lr, "batch_size": 64.0, "val_accuracy": acc}
        for lr, acc in [(1e-4, 0.8), (1e-2, 0.9), (1.0, 0.3)]
    ]
    (parcoords,) = hyperparameter_figure(rows, "val_accuracy").data
    labels = [d.label for d in parcoords.dimensions]
    assert labels == ["learning_rate (log)", "val_accuracy"]
    np.testing.assert_allclose(parcoords.dimensions[0].values, [-4, -2, 0])
    assert list(parcoords.dimensions[0].tickvals) == [-4, -3, -2, -1, 0]
    assert list(parcoords.dimensions[0].ticktext) == ["0.0001", "0.001", "0.01", "0.1", "1"]


def test_hyperparameter_figure_draws_strings_as_categories() -> None:
    rows = [
        {"optimizer": "sgd", "learning_rate": 0.1, "val_accuracy": 0.8},
        {"optimizer": "adamw", "learning_rate": 0.1, "weight_decay": 0.01, "val_accuracy": 0.9},
        {"optimizer": "sgd", "learning_rate": 0.1, "weight_decay": 0.02, "val_accuracy": 0.7},
        {"optimizer": "adam", "model": "mlp", "learning_rate": 0.1, "val_accuracy": 0.6},
    ]
    (parcoords,) = hyperparameter_figure(rows, "val_accuracy").data
    dimensions = {d.label: d for d in parcoords.dimensions}
    # Categories first, the target last; the learning rate never varies: it is left out.
    assert list(dimensions) == ["optimizer", "model", "weight_decay", "val_accuracy"]
    optimizer = dimensions["optimizer"]
    assert list(optimizer.ticktext) == ["adam", "adamw", "sgd"]
    assert list(optimizer.tickvals) == [0, 1, 2]
    assert list(optimizer.values) == [2, 1, 2, 0]
    assert list(dimensions["model"].ticktext) == ["mlp", "—"]  # "—": a run without one
    np.testing.assert_array_equal(dimensions["weight_decay"].values, [np.nan, 0.01, 0.02, np.nan])
    # The optimizer that every run shares is still named; a shared number is not drawn.
    (parcoords,) = hyperparameter_figure(rows[:1] * 2, "val_accuracy").data
    assert [d.label for d in parcoords.dimensions] == ["optimizer", "val_accuracy"]
    assert parcoords.dimensions[0].ticktext == ("sgd",)
    assert hyperparameter_figure([], "val_accuracy").data == ()


def test_the_first_axis_leaves_room_left_for_its_longest_tick_label() -> None:
    # Parallel coordinates write tick labels left of each axis: the first axis's were cut
    # at the figure's edge ("projected_gd" as "ojected_gd"; in Chromium, test_browser_compare).
    rows = [{"optimizer": name, "val_accuracy": 0.9} for name in ("sgd", "projected_gd")]
    long = hyperparameter_figure(rows, "val_accuracy").layout.margin.l
    short = hyperparameter_figure(rows[:1], "val_accuracy").layout.margin.l
    assert long >= 7 * len("projected_gd") and short < long


def test_a_run_name_is_shown_as_typed_in_legends_titles_and_hover() -> None:
    """Plotly reads a subset of HTML in names (`<a href>` makes a link) and `%{...}` in
    hover templates; a run's name is neither (issue 11, finding 6)."""
    name = '<a href="http://evil.example/">click</a> %{x} <b>bold</b>'
    runs = [RunView(r, f"{name} {r}", metrics(), [knob(r, 40)]) for r in "ab"]
    figures = live_figures(runs)
    texts = []
    for figure in figures.values():
        texts.append(figure.layout.title.text or "")
        for trace in figure.data:
            texts += [trace.name or "", trace.hovertemplate or "", *(trace.hovertext or ())]
    shown = [text for text in texts if "evil" in text]
    assert shown, "the name is in the charts"
    for text in shown:
        typed = text.split("<br>")[0]  # a hover template's own part follows the name
        assert "<a " not in typed and "<b>" not in typed and "%{x}" not in typed, text
        assert "&lt;a href" in typed


HOSTILE = '<a href="http://evil.example/">click</a> %{x} <b>bold</b>'


def chart_texts(figure: go.Figure) -> list[str]:
    """Every text Plotly renders as HTML: the title, each trace's name, hover template,
    hover texts and custom data, and the axes' tick labels."""
    texts = [figure.layout.title.text or ""]
    for trace in figure.data:
        texts += [getattr(trace, "name", None) or "", getattr(trace, "hovertemplate", None) or ""]
        for extra in ("hovertext", "customdata"):
            values = getattr(trace, extra, None)
            texts += [] if values is None else [str(t) for t in np.ravel(values)]
        for dimension in getattr(trace, "dimensions", None) or ():
            texts += [str(t) for t in dimension.ticktext or ()]
    texts += [str(t) for t in figure.layout.yaxis.ticktext or ()]
    return texts


def assert_shown_as_typed(figures: Iterable[go.Figure]) -> None:
    shown = [text for figure in figures for text in chart_texts(figure) if "evil" in text]
    assert shown, "the hostile text is in the charts"
    for text in shown:
        typed = text.split("<br>")[0]  # a hover template's own part follows the name
        assert "<a " not in typed and "<b>" not in typed and "%{x}" not in typed, text
        assert "&lt;a href" in typed


def test_layer_and_task_names_are_shown_as_typed_in_every_chart() -> None:
    """A layer's or a task's name is the model author's: in legends, hover text, heat
    strips' ticks and hover, it shows as typed (issue 36, item 8)."""
    layers = (HOSTILE, "logits")
    n = 100
    logged = metrics(
        n,
        layers=layers,
        **{f"distance_from_init/{HOSTILE}": np.linspace(0, 1, n)},
        **{f"loss/{HOSTILE}": np.linspace(2, 1, n), f"accuracy/{HOSTILE}": np.full(n, 0.5)},
    )
    run = RunView("a", "run a", logged, [histogram(first=HOSTILE)])
    figures = {**live_figures([run]), **instrument_figures([run])}
    for key in ("step_norm", "sparsity", "task_loss", "accuracy", "distance_from_init"):
        assert_shown_as_typed([figures[key]])
    assert_shown_as_typed([figures["histogram/grad"], figures["histogram/weight"]])


def test_hyperparameter_categories_are_shown_as_typed() -> None:
    """A dataset's name holds its file's path, which its uploader chose."""
    rows = [
        {"dataset": f"npz:/uploads/{HOSTILE}.npz", "val_accuracy": 0.8},
        {"dataset": "mnist-5k", "val_accuracy": 0.9},
    ]
    assert_shown_as_typed([hyperparameter_figure(rows, "val_accuracy")])


def test_a_fork_is_drawn_after_its_parents_line_dotted_in_its_colour() -> None:
    parent = metrics(100)
    fork = Metrics(steps=np.arange(51, 101), series={"loss": np.linspace(1, 0.5, 50)})
    history = parent.rows(0, 50)  # steps 1 to 50
    assert history.steps.tolist() == list(range(1, 51)) and len(history["loss"]) == 50
    figure = training_figures([RunView("f", "fork", fork, history=history)])["loss"]
    before, after = data_traces(figure)
    assert before.line.dash == "dot" and after.line.dash == "solid"
    assert before.line.color == after.line.color and before.showlegend is False
    assert list(before.x) == list(range(1, 51)) and list(after.x) == list(range(51, 101))
    alone = training_figures([RunView("f", "fork", fork)])["loss"]
    assert len(data_traces(alone)) == 1


def test_a_multi_task_run_draws_each_tasks_loss_accuracy_and_gradient_norm() -> None:
    n = 40
    tasks = {
        "loss/digit": np.linspace(2, 0.5, n),
        "loss/parity": np.linspace(0.7, 0.2, n),
        "accuracy/parity": np.linspace(0.5, 0.9, n),
        "val_accuracy/parity": np.where(np.arange(1, n + 1) % 20 == 0, 0.85, np.nan),
        "grad_norm/digit": np.full(n, 2.0),
        "grad_norm/parity": np.full(n, 0.5),
    }
    figures = training_figures([RunView("a", "run a", metrics(n, **tasks), [])])
    assert {"task_loss", "task_grad_norm"} <= set(figures)
    for key in ("task_loss", "task_grad_norm"):
        assert [t.name for t in data_traces(figures[key])] == ["digit", "parity"], key
    accuracy = [t.name for t in data_traces(figures["accuracy"])]
    assert {"run a · parity", "run a · parity validation"} <= set(accuracy)
    single = training_figures([RunView("b", "run b", metrics(n), [])])
    assert not {"task_loss", "task_grad_norm"} & set(single)  # no empty task charts


def test_a_runs_checkpoints_are_marked_on_its_loss_line_to_fork_from() -> None:
    run = RunView("a", "run a", metrics(100), [], checkpoints=[25, 50, 100])
    (marks,) = [t for t in training_figures([run])["loss"].data if t.meta == "checkpoints:a"]
    assert list(marks.x) == [25, 50, 100] and marks.mode == "markers"
    loss = metrics(100)["loss"]
    np.testing.assert_allclose(marks.y, loss[[24, 49, 99]], rtol=1e-6)  # on the line
    assert "Fork or Resume starts here" in marks.hovertemplate and marks.showlegend is False
    plain = training_figures([RunView("b", "run b", metrics(100), [])])["loss"]
    assert not [t for t in plain.data if t.meta]  # no checkpoints, no marks


# Colours --------------------------------------------------------------------------------


def colours(figure: go.Figure) -> dict[str, str]:
    return {t.name: t.line.color for t in data_traces(figure)}


def test_a_runs_series_tell_apart_by_dash_in_its_one_colour_and_runs_by_colour() -> None:
    # Orange was "train" in a one-run chart and a run on the next: a colour means a run.
    for runs in ([RunView("a", "run a", metrics())], three_runs()):
        for key in ("grad_norm",):  # before and after clipping, and the threshold
            traces = [t for t in data_traces(live_figures(runs)[key]) if t.name.startswith("run a")]
            assert {t.line.color for t in traces} == {PALETTE[0]}, key
            assert len({t.line.dash for t in traces}) == len(traces) > 1, key
    together = colours(live_figures(three_runs())["grad_norm"])
    for run in "abc":
        assert (
            len({together[f"run {run} · {what}"] for what in ("before clipping", "after clipping")})
            == 1
        )
    assert len({together[f"run {run} · before clipping"] for run in "abc"}) == 3


def test_a_run_keeps_its_colour_whatever_else_a_chart_shows() -> None:
    book = ColourBook()
    mine = RunView("m", "mine", metrics(), colour=book.colour("m"))
    others = [RunView(r, r, metrics(), colour=book.colour(r)) for r in ("x", "y", "z")]
    for runs in ([mine], [*others, mine], [others[0], mine]):
        figure = live_figures(runs)["loss"]
        assert colours(figure)["mine · train"] == book.colour("m")


def test_the_colour_book_gives_each_run_its_own_colour_and_keeps_it() -> None:
    book = ColourBook()
    first = [book.colour(f"run{i}") for i in range(len(PALETTE))]
    assert first == list(PALETTE)  # eight runs, eight colours
    assert book.colour("run3") == PALETTE[3]  # kept
    assert book.colour("ninth") == PALETTE[0]  # then round again, fewest first


def test_projection_is_marked_where_it_begins_and_the_radius_drawn_over_the_marks() -> None:
    always = metrics(300, projection_active=np.ones(300))
    traces = live_figures([RunView("a", "run a", always)])["param_norm"].data
    names = [t.name for t in traces]
    (projected,) = [t for t in traces if t.name == "run a · projected"]
    assert list(projected.x) == [1] and list(projected.customdata) == [300]
    assert names.index("run a · radius") > names.index("run a · projected")


def test_a_groups_accuracy_reads_in_percent_and_its_band_stays_within_0_and_1() -> None:
    # Two seeds far apart: the t-interval of the mean (t = 12.7) reaches past 0 and 1.
    seeds = [
        Metrics(np.array([1, 2]), {"val_accuracy": np.array([0.1, 0.99]), "loss": np.ones(2)}),
        Metrics(np.array([1, 2]), {"val_accuracy": np.array([0.9, 0.2]), "loss": np.ones(2)}),
    ]
    chart = group_figure({"adamw ×2": seeds}, "val_accuracy")
    band, mean = chart.data
    assert min(band.y) >= 0.0 and max(band.y) <= 1.0
    assert min(band.y) == 0.0 and max(band.y) == 1.0  # it was cut, not merely inside
    np.testing.assert_allclose(mean.y, [0.5, 0.595])
    axis = chart.layout.yaxis
    assert (axis.tickformat, axis.hoverformat) == (PERCENT_TICK_FORMAT, PERCENT_HOVER_FORMAT)
    assert "%{y}" in mean.hovertemplate and "%{y:" not in mean.hovertemplate
    loss_band, _ = group_figure({"adamw ×2": seeds}, "loss").data
    assert group_figure({"a": seeds}, "loss").layout.yaxis.tickformat == TICK_FORMAT
    assert len(loss_band.y) == 4  # a loss is not a share: its band is as wide as it is


def test_seeds_are_categories_one_tick_each_in_numeric_order() -> None:
    rows = [{"seed": seed, "learning_rate": 0.1} for seed in (10, 2, 0)]
    drawn = parallel_rows(rows, "val_accuracy", [0.9, 0.8, 0.7])
    assert [row["seed"] for row in drawn] == ["10", "2", "0"]
    (parcoords,) = hyperparameter_figure(drawn, "val_accuracy").data
    (seed, _) = parcoords.dimensions
    assert (seed.label, list(seed.ticktext)) == ("seed", ["0", "2", "10"])
    assert list(seed.values) == [2, 1, 0]


def test_one_legend_for_a_view_names_each_run_once_and_each_series_once() -> None:
    runs = three_runs()
    colours = {run.text: run.tint(i) for i, run in enumerate(runs)}
    training = view_legend(training_figures(runs).values(), colours)
    assert training.runs == colours and not training.layers
    styles = {style.name: style for style in training.styles}
    assert {"train", "validation", "before clipping", "after clipping", "clip threshold"} <= set(
        styles
    )
    assert (styles["validation"].dash, styles["validation"].markers) == ("dash", True)
    assert (styles["train"].dash, styles["train"].markers) == ("solid", False)
    assert not any(name.startswith("run ") for name in styles)  # the runs are said apart
    per_layer = view_legend(layer_figures(runs).values(), colours)
    assert per_layer.layers and [s.name for s in per_layer.styles][:2] == ["conv1", "conv2"]


def test_the_view_legend_shows_names_as_typed_and_runs_no_markup() -> None:
    hostile = "<img src=x onerror=alert(1)> & co"
    run = RunView("a", hostile, metrics())
    legend = view_legend(training_figures([run]).values(), {run.text: run.tint(0)})
    names = [trace.name for trace in legend_figure(legend).data]
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; co" in names
    assert not any("<img" in name for name in names)


def test_the_view_legend_is_a_figure_of_a_legend_alone_a_colour_a_run_a_line_a_series() -> None:
    runs = three_runs()
    colours = {run.text: run.tint(i) for i, run in enumerate(runs)}
    figure = legend_figure(view_legend(training_figures(runs).values(), colours))
    assert figure.layout.meta == LEGEND_ONLY and figure.layout.legend.orientation == "h"
    assert not figure.layout.xaxis.visible and not figure.layout.yaxis.visible
    traces = {trace.name: trace for trace in figure.data}
    assert {name: traces[name].marker.color for name in colours} == colours
    assert (traces["validation"].line.dash, traces["validation"].mode) == ("dash", "lines+markers")
    assert (traces["train"].line.dash, traces["train"].mode) == ("solid", "lines")
    series = [trace for trace in figure.data if trace.name not in colours]
    assert {trace.line.color for trace in series} - {TOTAL_COLOUR} == {NEUTRAL}  # runs' colours
    assert LAYERS_SAID not in traces
    per_layer = legend_figure(view_legend(layer_figures(runs).values(), colours))
    shades = [trace.line.color for trace in per_layer.data if trace.name in ("conv1", "conv2")]
    assert len(set(shades)) == 2 and NEUTRAL not in shades  # a layer a shade of grey
    assert per_layer.data[-1].name == LAYERS_SAID
