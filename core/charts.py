"""Plotly figures of runs' metrics: what the Live and Compare pages draw.

Figures are built here, from stored metrics and events, so that the pages stay thin and
the cost of a refresh can be measured without a browser (`make bench`). Every series is
downsampled to about `series.MAX_POINTS` points, keeping spikes. Every chart

- writes numbers one way: ticks as `TICK_FORMAT` (0.001, 0.25, 1e+6), hover values as
  `HOVER_FORMAT`, shares (accuracy, sparsity) in percent; log axes label whole decades;
- takes its y range from where most points lie (`series.robust_range`), so that a run
  that diverges leaves the top of the chart instead of flattening the others; reference
  lines (the radius, the clip threshold, 2/η) always stay in view;
- marks every live knob change and divergence of the runs it draws with a dotted line and
  a marker at the top that says what happened on hover;
- keeps a fixed `uirevision`, so that a user's zoom survives refreshes.

Per-layer charts are drawn once per run when several runs are shown (keys `<chart>/<run
id>`), all on the same y range, so that the small charts compare at a glance.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import plotly.graph_objects as go

from core.engine.instruments import INSTRUMENTS
from core.engine.landscape import Landscape
from core.engine.lr_find import RangeTest
from core.escaping import escape_html
from core.group_comparison import mean_band
from core.series import downsample, flags_to_steps, robust_range
from core.store import DIVERGED_EVENT, HISTOGRAM_EVENT, KNOB_EVENT, Event, Metrics

PALETTE = ("#f5a524", "#4cc9f0", "#f72585", "#80ed99", "#b388eb", "#ff8c42", "#90a4ae", "#ffd166")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
TOTAL_COLOUR = "#e0e0e0"  # a sum over layers, drawn among the layers' palette colours
# The `meta` of a trace that draws a reference (a radius, a threshold): always in range.
REFERENCE = "reference"

# d3-format: up to 6 significant digits on ticks and 4 on hover, trailing zeros trimmed.
TICK_FORMAT = "~g"
HOVER_FORMAT = ".4~g"
PERCENT_TICK_FORMAT = "~%"
PERCENT_HOVER_FORMAT = ".2~%"
STEP_HOVER_FORMAT = ","  # 12,345

Scale = Literal["linear", "log", "percent"]
Traces = Callable[["RunView", int], list[dict[str, Any]]]  # one run's, given its index


@dataclass(frozen=True)
class RunView:
    """One run to draw: a short label, its metrics and its events."""

    run_id: str
    label: str
    metrics: Metrics
    events: Sequence[Event] = ()
    batch_size: int | None = None  # drawn beside the gradient noise scale
    # A fork's: what its parent (and theirs) logged up to where it branched off, drawn
    # dotted in its colour before its own line.
    history: Metrics | None = None
    checkpoints: Sequence[int] = ()  # the steps it can be forked or resumed from

    @property
    def text(self) -> str:
        """The label as a chart shows it: as typed (see `escape_html`)."""
        return escape_html(self.label)


def training_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The training charts, every run overlaid: `loss`, `accuracy`, `grad_norm`,
    `param_norm`, `learning_rate`; when a run is a regression, `mae`; and when a run is
    multi-task, `task_loss` and `task_grad_norm`, each task's (its accuracy joins the
    accuracy chart)."""
    charts = {
        "loss": Chart("Loss", _loss, "log"),
        "accuracy": Chart("Accuracy", _accuracy, "percent"),
        "grad_norm": Chart("Gradient global norm, before and after clipping", _grad_norm, "log"),
        "param_norm": Chart("Parameter norm ‖θ'‖ before projection, and the radius", _param_norm),
        "learning_rate": Chart("Learning rate η of each step: its schedule and live changes", _lr),
    }
    if runs and all("mae" in run.metrics and "accuracy" not in run.metrics for run in runs):
        del charts["accuracy"]  # regressions only: no class to be right about
    if any("mae" in run.metrics for run in runs):  # a regression's
        charts |= {
            "mae": Chart(
                "Mean absolute error", functools.partial(_train_and_validation, key="mae"), "log"
            )
        }
    if any(key.startswith(TASK_LOSS) for run in runs for key in run.metrics.keys):
        charts |= {
            "task_loss": Chart("Loss per task", _per_layer("loss"), "log", split=True),
            "task_grad_norm": Chart(
                "Gradient norm per task, before weighting",
                _per_layer("grad_norm"),
                "log",
                split=True,
            ),
        }
    return _draw(charts, runs)


def layer_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The per-layer charts `step_norm`, `update_ratio` and `sparsity`: one chart under
    that key for a single run, or one per run under `<key>/<run id>` for several (but a
    single empty one under `<key>` while none of them has logged the series)."""
    return _draw(
        {
            "step_norm": Chart(
                "Step norm ‖Δθ‖ per layer", _per_layer("step_norm"), "log", split=True
            ),
            "update_ratio": Chart(
                "Update / parameter ratio ‖Δθ‖/‖θ‖ per layer",
                _per_layer("update_ratio"),
                "log",
                split=True,
            ),
            "sparsity": Chart(
                "Sparsity per layer", _per_layer("sparsity"), "percent", covers=(0, 1), split=True
            ),
        },
        runs,
    )


def live_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The training charts, then the per-layer ones (see both)."""
    return training_figures(runs) | layer_figures(runs)


# One sentence on how to read each chart of the Instruments panel, shown under it: the
# instruments' own, after distance from init (a telemetry series, not an instrument).
INSTRUMENT_HELP = {
    "distance_from_init": "How far the weights have moved from where they started: a "
    "layer that stays near 0 is not learning; one that keeps growing may be overfitting.",
    **{key: text for cls in INSTRUMENTS.values() for key, text in cls.help.items()},
}


def instrument_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The Instruments panel, by the keys of `INSTRUMENT_HELP`: the four scalar
    instruments with every run overlaid (distance from init per layer for a single run,
    in total for several), and heat strips of the first run's gradient and weight
    histograms."""
    figures = _draw(
        {
            "distance_from_init": Chart(
                "Distance from the initial weights ‖θ − θ₀‖",
                _distance_from_init,
                overlaid=_distance_from_init_total,
            ),
            "alpha": Chart("α: where each step landed in its valley", _alpha, guides=(-1, 0, 1)),
            "sharpness": Chart("Sharpness (top Hessian eigenvalue) against 2/η", _sharpness, "log"),
            "noise_scale": Chart(
                "Gradient noise scale B against the batch size", _noise_scale, "log"
            ),
        },
        runs,
    )
    histograms = [e for e in runs[0].events if e.kind == HISTOGRAM_EVENT] if runs else []
    for kind, title in (
        ("grad", "Gradient magnitudes per layer"),
        ("weight", "Weight magnitudes per layer"),
    ):
        figures[f"histogram/{kind}"] = _heat_strips(histograms, kind, title)
    return figures


def hyperparameter_figure(rows: Sequence[Mapping[str, float | str]], target: str) -> go.Figure:
    """Parallel coordinates of hyperparameters against `target` (e.g. final validation
    accuracy), one line per run, coloured by `target`.

    `rows` holds one mapping per run, column → value, e.g. `{"optimizer": "adamw",
    "learning_rate": 1e-3, "batch_size": 64.0, "val_accuracy": 0.91}`; a run may lack
    columns that others have. A column with a string in any row is categorical (one tick
    per category; a run without it shows "—"), drawn even when every run has the same
    (it says which optimizer these runs share); the others are numeric (NaN where
    missing), on a log₁₀ axis labelled in full when they span more than 100×, and left out
    when they never vary. Categorical columns come first, `target` last.
    """
    columns = list(dict.fromkeys(key for row in rows for key in row if key != target))
    values = {key: [row.get(key) for row in rows] for key in columns}
    categorical = [key for key in columns if any(isinstance(v, str) for v in values[key])]
    dimensions = [
        *(_categorical_dimension(key, values[key]) for key in categorical),
        *(_numeric_dimension(key, values[key]) for key in columns if key not in categorical),
        _numeric_dimension(target, [row.get(target) for row in rows], target=True),
    ]
    traces = []
    if rows:
        colour = np.nan_to_num(np.array([row.get(target, np.nan) for row in rows], dtype=float))
        traces.append(
            {
                "type": "parcoords",
                # Room above the axes for their labels, and right of them for the colour bar.
                "domain": {"x": [0, 0.85], "y": [0, 0.8]},
                "dimensions": [d for d in dimensions if d is not None],
                "line": {
                    "color": colour,
                    "colorscale": "Viridis",
                    "showscale": True,
                    "colorbar": {"title": {"text": target, "side": "right"}},
                },
            }
        )
    return _figure(f"hyperparameters/{target}", f"Hyperparameters and {target}", traces)


def range_test_figure(curve: RangeTest) -> go.Figure:
    """A learning-rate range test: each step's loss and the smoothed loss against the
    rate (log axis), the suggested rate starred. The y range ends a little above the
    smoothed loss before its lowest point, so that the explosion leaves the chart top."""
    traces: list[dict[str, Any]] = []
    yaxis: dict[str, Any] = {"title": {"text": "loss"}, "tickformat": TICK_FORMAT}
    if len(curve.rates):
        lowest = int(np.argmin(curve.smoothed))
        top, bottom = float(curve.smoothed[: lowest + 1].max()), float(curve.smoothed.min())
        if top > bottom:  # else (it never fell) Plotly's own range
            yaxis["range"] = [bottom - 0.1 * (top - bottom), top + 0.25 * (top - bottom)]
        hover = "rate %{x:.3~g}<br>loss %{y:" + HOVER_FORMAT + "}<extra>%{fullData.name}</extra>"
        traces = [
            {
                "type": "scatter",
                "x": curve.rates,
                "y": curve.losses,
                "mode": "markers",
                "name": "loss",
                "marker": {"size": 4, "color": PALETTE[6], "opacity": 0.6},
                "hovertemplate": hover,
            },
            {
                "type": "scatter",
                "x": curve.rates,
                "y": curve.smoothed,
                "mode": "lines",
                "name": "smoothed",
                "line": {"color": PALETTE[0], "width": 2},
                "hovertemplate": hover,
            },
        ]
    if curve.suggested_at is not None:
        traces.append(
            {
                "type": "scatter",
                "x": [curve.suggestion],
                "y": [curve.smoothed[curve.suggested_at]],
                "mode": "markers+text",
                "name": "suggested",
                "text": [f"{curve.suggestion:.3g}"],
                "textposition": "top right",
                "marker": {"size": 14, "symbol": "star", "color": PALETTE[2]},
                "hovertemplate": hover.replace("<extra>", " (suggested)<extra>"),
            }
        )
    xaxis = {"type": "log", "title": {"text": "learning rate"}, "tickformat": TICK_FORMAT}
    xaxis |= _log_ticks(None)
    xaxis["hoverformat"] = HOVER_FORMAT
    return _figure("lr_find", "Loss as the learning rate grows", traces, xaxis=xaxis, yaxis=yaxis)


def group_figure(groups: Mapping[str, Sequence[Metrics]], key: str) -> go.Figure:
    """Each group of repeats (label → its runs' metrics) as the mean of `key` over its runs,
    with a band of the 95% t-interval of that mean at each step (`mean_band`)."""
    traces: list[dict[str, Any]] = []
    for i, (label, series) in enumerate(groups.items()):
        steps, mean, margin = mean_band(series, key)
        if not len(steps):
            continue
        colour = _run_colour(i)
        name = f"{escape_html(label)} ({len(series)} runs)"
        if not np.isnan(margin).all():
            traces.append(
                {
                    "type": "scatter",
                    "x": np.concatenate([steps, steps[::-1]]),
                    "y": np.concatenate([mean + margin, (mean - margin)[::-1]]),
                    "fill": "toself",
                    "fillcolor": colour,
                    "opacity": 0.2,
                    "line": {"width": 0},
                    "hoverinfo": "skip",
                    "name": f"{name}: 95% interval of the mean",
                    "legendgroup": label,
                    "showlegend": False,
                }
            )
        traces.append(
            {
                "type": "scatter",
                "x": steps,
                "y": mean,
                "mode": "lines",
                "name": name,
                "legendgroup": label,
                "line": {"color": colour},
                "hovertemplate": "step %{x:,}<br>mean %{y:"
                + HOVER_FORMAT
                + "}<extra>%{fullData.name}</extra>",
            }
        )
    title = f"{key}: group means, 95% t-bands"  # the legend says how many runs each
    yaxis = {"title": {"text": key}, "tickformat": TICK_FORMAT}
    return _figure(f"groups/{key}", title, traces, yaxis=yaxis)


def landscape_figures(landscape: Landscape) -> dict[str, go.Figure]:
    """A checkpoint's loss landscape (`core.engine.landscape`): the two 1-D slices, and
    the surface over the plane of two random directions as a contour, with the run's
    checkpoints projected on it."""
    hover = "%{x:.3~g}: loss %{y:" + HOVER_FORMAT + "}<extra>%{fullData.name}</extra>"
    slices = [
        {
            "type": "scatter",
            "x": landscape.offsets,
            "y": values,
            "mode": "lines",
            "name": name,
            "line": {"color": colour},
            "hovertemplate": hover,
        }
        for name, values, colour in (
            ("along the update", landscape.along_update, PALETTE[0]),
            ("along a random direction", landscape.along_random, PALETTE[1]),
        )
    ]
    xaxis = {"title": {"text": "distance (filter-normalized)"}, "hoverformat": HOVER_FORMAT}
    top = float(
        np.nanpercentile(np.concatenate([landscape.along_update, landscape.along_random]), 90)
    )
    yaxis: dict[str, Any] = {"title": {"text": "loss"}, "tickformat": TICK_FORMAT}
    if np.isfinite(top) and top > 0:  # a blow-up at the far ends leaves the chart
        yaxis["range"] = [0, top * 1.1]
    surface = [
        {
            "type": "contour",
            "x": np.linspace(-1, 1, landscape.surface.shape[1]),
            "y": np.linspace(-1, 1, landscape.surface.shape[0]),
            "z": np.log10(np.maximum(landscape.surface, 1e-12)),
            "colorscale": "Viridis",
            "colorbar": {"title": {"text": "log₁₀ loss", "side": "right"}},
            "hovertemplate": "(%{x:.2f}, %{y:.2f}): log₁₀ loss %{z:.3f}<extra></extra>",
        },
        {
            "type": "scatter",
            "x": landscape.trajectory[:, 0],
            "y": landscape.trajectory[:, 1],
            "mode": "lines+markers",
            "name": "checkpoints",
            "text": [f"step {s:,}" for s in landscape.trajectory_steps],
            "marker": {"color": PALETTE[2], "size": 7},
            "line": {"color": PALETTE[2]},
            "hovertemplate": "%{text}<extra>projected</extra>",
        },
    ]
    plane = {"title": {"text": "random direction δ"}}
    return {
        "landscape/slices": _figure(
            "landscape/slices",
            f"Loss along two directions from step {landscape.step:,}",
            slices,
            xaxis=xaxis,
            yaxis=yaxis,
        ),
        "landscape/surface": _figure(
            "landscape/surface",
            f"Loss around step {landscape.step:,}, and the run's checkpoints",
            surface,
            xaxis=plane,
            yaxis={"title": {"text": "random direction η"}},
        ),
    }


# What a chart is, and how the figures are drawn -------------------------------------------


@dataclass(frozen=True)
class Chart:
    """One chart of every run: its title, each run's traces, and its y axis."""

    title: str
    traces: Traces
    scale: Scale = "linear"
    guides: tuple[float, ...] = ()  # values marked by a dotted horizontal line
    covers: tuple[float, ...] = ()  # values the y range always includes (as guides do)
    split: bool = False  # one chart per run when there are several
    overlaid: Traces | None = None  # each run's traces when several share the chart


@dataclass(frozen=True)
class Mark:
    """Something that happened to a run at a step, marked on its charts."""

    step: int
    kind: str  # the event's kind: KNOB_EVENT or DIVERGED_EVENT
    text: str  # shown on hover


# How each kind of mark looks: line colour, line dash, marker symbol.
MARK_STYLES = {
    KNOB_EVENT: ("#9e9e9e", "dot", "triangle-down"),
    DIVERGED_EVENT: ("#ff4d4d", "dash", "x"),
}

# A horizontal legend under the plot: a chart keeps its whole width for the lines.
LEGEND = {
    "orientation": "h",
    "x": 0,
    "xanchor": "left",
    "y": -0.3,  # below the axis title "step"
    "yanchor": "top",
    "font": {"size": 10},
}

NO_DATA = {
    "text": "no data yet",
    "showarrow": False,
    "x": 0.5,
    "y": 0.5,
    "xref": "paper",
    "yref": "paper",
}


def _draw(charts: Mapping[str, Chart], runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The figures of `charts` for `runs`: each chart once with every run, or once per run
    when it is `split` and several runs have something to draw in it; every figure shows
    only its runs' marks."""
    several = len(runs) > 1
    marks = [_marks(run) for run in runs]
    figures = {}
    for key, chart in charts.items():
        traces_of = (chart.overlaid if several else None) or chart.traces
        traces = [traces_of(run, i) for i, run in enumerate(runs)]
        every = [t for run_traces in traces for t in run_traces]
        yaxis = _y_axis(chart, every)  # over every run: charts side by side share a scale
        if not (chart.split and several and every):
            figures[key] = _figure(
                key,
                chart.title,
                every,
                yaxis=yaxis,
                guides=chart.guides,
                marks=[m for run_marks in marks for m in run_marks],
            )
            continue
        xaxis = _shared_x_axis(every)
        for run, run_traces, run_marks in zip(runs, traces, marks, strict=True):
            figures[f"{key}/{run.run_id}"] = _figure(
                f"{key}/{run.run_id}",
                f"{chart.title} · {run.text}",
                run_traces,
                xaxis=xaxis,
                yaxis=yaxis,
                guides=chart.guides,
                marks=run_marks,
            )
    return figures


def _y_axis(chart: Chart, traces: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The y axis of `chart`: its scale, number formats and a range that keeps most
    points, the reference lines among `traces`, the guides and `covers` in view."""
    log = chart.scale == "log"
    reference = [t["y"] for t in traces if t.get("meta") == REFERENCE]
    data = [t["y"] for t in traces if t.get("meta") != REFERENCE]
    bounds = robust_range(
        np.concatenate(data) if data else np.empty(0),
        log=log,
        include=np.concatenate([*reference, chart.guides, chart.covers]),
    )
    percent = chart.scale == "percent"
    axis: dict[str, Any] = {
        "type": "log" if log else "linear",
        "tickformat": PERCENT_TICK_FORMAT if percent else TICK_FORMAT,
        "hoverformat": PERCENT_HOVER_FORMAT if percent else HOVER_FORMAT,
    }
    if bounds is not None:
        axis["range"] = list(bounds)
    if log:
        axis |= _log_ticks(None if bounds is None else bounds[1] - bounds[0])
    return axis


def _log_ticks(decades: float | None) -> dict[str, Any]:
    """Where a log axis spanning `decades` (None: no data yet) puts its ticks; the tick
    format labels each in full. Left to Plotly, an axis over a few decades labels 2 and 5
    between them with their mantissas alone."""
    if decades is not None and decades < 1:
        return {}  # Plotly's own ticks within a decade: 0.2, 0.3, 0.4 …
    if decades is not None and decades < 3:
        return {"dtick": "D2"}  # 1, 2 and 5 of each decade
    # Whole decades, about 8 labels at most, with unlabelled minor ticks between.
    minor = {"dtick": "D1", "ticks": "outside", "ticklen": 3, "showgrid": False}
    return {"dtick": max(1, round((decades or 0) / 8)), "minor": minor}


def _shared_x_axis(traces: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """An x axis over every step of `traces`, for charts drawn side by side."""
    steps = [t["x"] for t in traces if len(t["x"])]
    if not steps:
        return None
    return {"range": [int(min(s[0] for s in steps)), int(max(s[-1] for s in steps))]}


def _figure(
    key: str,
    title: str,
    traces: list[dict[str, Any]],
    *,
    xaxis: Mapping[str, Any] | None = None,
    yaxis: Mapping[str, Any] | None = None,
    guides: Iterable[float] = (),
    marks: Sequence[Mark] = (),
    height: int = 340,
) -> go.Figure:
    """One figure, built in a single call: Plotly validates a figure once this way, where
    adding traces and shapes one by one costs a validation (and a copy) each. Marks are
    drawn only on a chart with data."""
    mark_shapes, mark_traces = _mark_layers(marks) if traces else ([], [])
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "uirevision": key,  # keep the user's zoom and legend choices across refreshes
        "height": height,
        "margin": {"l": 55, "r": 15, "t": 40, "b": 40},
        "legend": LEGEND,
        "hovermode": "closest",
        "xaxis": {"title": {"text": "step"}, "hoverformat": STEP_HOVER_FORMAT, **(xaxis or {})},
        "yaxis": yaxis or {},
        "shapes": [*(_guide(y) for y in guides), *mark_shapes],
        "annotations": [] if traces else [NO_DATA],
    }
    if mark_traces:
        # The marks' own y axis spans 0 to 1 whatever the data's range or zoom, so their
        # markers stay at the top of the plot.
        layout["yaxis2"] = {
            "overlaying": "y",
            "range": [0, 1],
            "visible": False,
            "fixedrange": True,
        }
    return go.Figure(data=[*traces, *mark_traces], layout=layout)


# The traces of one run, per chart ---------------------------------------------------------


def _loss(run: RunView, i: int) -> list[dict[str, Any]]:
    return _train_and_validation(run, i, "loss") + _checkpoint_markers(run, _run_colour(i))


#: The `meta` of a run's checkpoint markers, then its id.
CHECKPOINTS = "checkpoints:"


def _checkpoint_markers(run: RunView, colour: str) -> list[dict[str, Any]]:
    """A diamond on the loss line at each of the run's checkpoints (at the loss last
    logged by then): where a fork can start."""
    if not run.checkpoints or "loss" not in run.metrics:
        return []
    logged = ~np.isnan(run.metrics["loss"])
    steps, loss = run.metrics.steps[logged], run.metrics["loss"][logged]
    at = np.asarray(run.checkpoints)
    last = np.searchsorted(steps, at, side="right") - 1  # the last logged step ≤ each
    drawn = last >= 0
    trace = _scatter(
        run, "checkpoint", at[drawn], loss[last[drawn]], colour, mode="markers",
        meta=CHECKPOINTS + run.run_id,
    )  # fmt: skip
    trace["marker"] = {"color": colour, "size": 10, "symbol": "diamond-open"}
    trace["showlegend"] = False
    trace["hovertemplate"] = (
        f"{run.text} · checkpoint of step %{{x}}<br>Fork or Resume starts here<extra></extra>"
    )
    return [trace]


def _accuracy(run: RunView, i: int) -> list[dict[str, Any]]:
    """The accuracy, and a multi-task run's other tasks' (dotted, after their name)."""
    traces = _train_and_validation(run, i, "accuracy")
    others = sorted(key for key in run.metrics.keys if key.startswith("accuracy/"))
    for key in others:
        task = key.removeprefix("accuracy/")
        traces += _line(run, key, task, _run_colour(i), dash="dot")
        traces += _line(run, f"val_{key}", f"{task} validation", _run_colour(i), dash="dashdot")
    return traces


def _train_and_validation(run: RunView, i: int, key: str) -> list[dict[str, Any]]:
    colour = _run_colour(i)
    return [
        *_line(run, key, "train", colour),
        *_line(run, f"val_{key}", "validation", colour, dash="dash", markers=True),
    ]


def _grad_norm(run: RunView, i: int) -> list[dict[str, Any]]:
    colour = _run_colour(i)
    traces = _line(run, "grad_norm", "before clipping", colour)
    if "clip_norm" in run.metrics:
        traces += _line(run, "grad_norm_clipped", "after clipping", colour, dash="dash")
        traces += _reference_line(run, "clip_norm", "clip threshold", colour)
    return traces


def _lr(run: RunView, i: int) -> list[dict[str, Any]]:
    return _line(run, "learning_rate", "η", _run_colour(i))


def _param_norm(run: RunView, i: int) -> list[dict[str, Any]]:
    """‖θ'‖ before the projection, against the radius (runs logged before
    `param_norm_proposed` existed show ‖θ‖ after the projection)."""
    colour = _run_colour(i)
    proposed = "param_norm_proposed" in run.metrics
    key = "param_norm_proposed" if proposed else "param_norm"
    if "radius" not in run.metrics:
        return _line(run, key, "‖θ‖", colour)
    return [
        *_line(run, key, "‖θ'‖ before projection" if proposed else "‖θ‖ after projection", colour),
        *_reference_line(run, "radius", "radius", colour),
        *_projection_markers(run, key, colour),
    ]


#: A multi-task run logs each task's loss as `loss/<task>`.
TASK_LOSS = "loss/"


def _per_layer(kind: str) -> Traces:
    """Traces of `kind/<layer>` for every layer (or task) of a run, named by the layer
    alone, each with its own colour (and, past the palette, its own dash)."""
    prefix = f"{kind}/"

    def traces(run: RunView, i: int) -> list[dict[str, Any]]:
        del i  # layers, not runs, get the colours: a chart of layers draws a single run
        layers = [key.removeprefix(prefix) for key in run.metrics.keys if key.startswith(prefix)]
        return [
            trace
            for j, layer in enumerate(layers)
            for trace in _line(
                run,
                prefix + layer,
                layer,
                PALETTE[j % len(PALETTE)],
                dash=DASHES[j // len(PALETTE) % len(DASHES)],
                legend=layer,
            )
        ]

    return traces


def _distance_from_init(run: RunView, i: int) -> list[dict[str, Any]]:
    return [
        *_line(run, "distance_from_init", "all layers", TOTAL_COLOUR, legend="all layers"),
        *_per_layer("distance_from_init")(run, i),
    ]


def _distance_from_init_total(run: RunView, i: int) -> list[dict[str, Any]]:
    return _line(run, "distance_from_init", "all layers", _run_colour(i))


def _alpha(run: RunView, i: int) -> list[dict[str, Any]]:
    return _line(run, "alpha", "α", _run_colour(i), markers=True, lines=False)


def _sharpness(run: RunView, i: int) -> list[dict[str, Any]]:
    colour = _run_colour(i)
    traces = _line(run, "sharpness", "sharpness", colour, markers=True)
    if traces and "learning_rate" in run.metrics:
        steps, rates = downsample(run.metrics.steps, run.metrics["learning_rate"])
        traces.append(_reference(run, "2/η", steps, 2.0 / rates, colour))
    return traces


def _noise_scale(run: RunView, i: int) -> list[dict[str, Any]]:
    colour = _run_colour(i)
    traces = _line(run, "noise_scale", "B", colour, markers=True)
    if traces and run.batch_size:
        steps = run.metrics.steps
        ends = np.array([steps[0], steps[-1]])
        traces.append(_reference(run, "batch size", ends, np.full(2, run.batch_size), colour))
    return traces


def _heat_strips(events: Sequence[Event], kind: str, title: str) -> go.Figure:
    """One heatmap: a band of magnitude bins per layer, stacked, with steps across."""
    key = f"histogram/{kind}"
    if not events:
        return _figure(key, title, [])
    edges = events[0].payload["edges"]
    layers = list(events[0].payload[kind])
    shown = [escape_html(layer) for layer in layers]  # names the model's author chose
    bins = len(edges) - 1
    columns = []
    for event in events:
        column = []
        for layer in layers:
            counts = np.asarray(event.payload[kind][layer], dtype=float)
            column.extend(counts / max(counts.sum(), 1.0))
            column.append(np.nan)  # a gap between layers
        columns.append(column)
    labels = [f"{layer} 1e{edges[b]:+.0f}" for layer in shown for b in range(bins)]
    rows = [
        label
        for j, layer in enumerate(shown)
        for label in (*labels[j * bins : (j + 1) * bins], f"{layer} ·")
    ]
    strip = {
        "type": "heatmap",
        "x": [e.step for e in events],
        "y": list(range(len(rows))),
        "z": np.array(columns).T,
        "colorscale": "Viridis",
        "zmin": 0,
        "zmax": 1,
        "customdata": np.array([rows] * len(events)).T,
        "hovertemplate": "%{customdata}: %{z:.1%} at step %{x}<extra></extra>",
        "colorbar": {"title": {"text": "share"}},
    }
    middles = [j * (bins + 1) + bins // 2 for j in range(len(layers))]
    return _figure(
        key,
        title,
        [strip],
        yaxis={"tickvals": middles, "ticktext": shown},
        height=max(340, 26 * len(layers) * 4),
    )


# Pieces ---------------------------------------------------------------------------------


def _run_colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _line(
    run: RunView,
    key: str,
    what: str,
    colour: str,
    *,
    dash: str = "solid",
    markers: bool = False,
    lines: bool = True,
    legend: str | None = None,
) -> list[dict[str, Any]]:
    """The series `key` of `run`, downsampled, as a list of one trace (none if unlogged);
    for a fork, after its parent's line up to the fork, dotted."""
    if key not in run.metrics:
        return []
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    if len(steps) == 0:
        return []
    mode = "+".join(m for m, on in (("lines", lines), ("markers", markers)) if on)
    traces = [_scatter(run, what, steps, values, colour, dash=dash, mode=mode, legend=legend)]
    if run.history is not None and key in run.history:
        steps, values = downsample(run.history.steps, run.history[key])
        before = _scatter(run, f"{what} before the fork", steps, values, colour, dash="dot")
        before["showlegend"] = False
        traces.insert(0, before)
    return traces


def _reference_line(run: RunView, key: str, what: str, colour: str) -> list[dict[str, Any]]:
    """A knob's value over time (e.g. the radius), as a reference line."""
    if key not in run.metrics:
        return []
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    return [_reference(run, what, steps, values, colour)] if len(steps) else []


def _reference(
    run: RunView, what: str, steps: np.ndarray, values: np.ndarray, colour: str
) -> dict[str, Any]:
    """A dotted step line that the y range always covers."""
    return _scatter(run, what, steps, values, colour, dash="dot", shape="hv", meta=REFERENCE)


def _scatter(
    run: RunView,
    what: str,
    steps: np.ndarray,
    values: np.ndarray,
    colour: str,
    *,
    dash: str = "solid",
    mode: str = "lines",
    shape: str = "linear",
    legend: str | None = None,
    meta: str | None = None,
) -> dict[str, Any]:
    """A trace named `<run> · <what>` in the legend (or `legend`, in a chart of one run,
    which then toggles alone); hover values use the axes' formats. `what` and `legend`
    may be a layer's or a task's name, which the model's author chose: shown as typed."""
    what = escape_html(what)
    legend = None if legend is None else escape_html(legend)
    trace = {
        "type": "scatter",
        "x": _compact(steps),
        "y": np.asarray(values, dtype=np.float32),
        "name": legend or f"{run.text} · {what}",
        "legendgroup": legend or run.run_id,
        "mode": mode,
        "line": {"color": colour, "dash": dash, "shape": shape, "width": 1.6},
        "marker": {"color": colour, "size": 5},
        "hovertemplate": f"{run.text} · {what}<br>%{{y}} at step %{{x}}<extra></extra>",
    }
    if meta is not None:
        trace["meta"] = meta
    return trace


def _compact(steps: np.ndarray) -> np.ndarray:
    """Steps as 32-bit integers when they fit: Plotly ships arrays to the browser in their
    own width, and every open tab decodes them every second."""
    steps = np.asarray(steps)
    fits = steps.size == 0 or (steps.dtype.kind in "iu" and steps.max() < 2**31)
    return steps.astype(np.int32) if fits else steps


def _projection_markers(run: RunView, key: str, colour: str) -> list[dict[str, Any]]:
    """A cross on the norm series `key` at every step where the projection acted."""
    if "projection_active" not in run.metrics:
        return []
    steps = flags_to_steps(run.metrics.steps, run.metrics["projection_active"])
    if len(steps) == 0:
        return []
    norms = run.metrics[key][np.searchsorted(run.metrics.steps, steps)]
    trace = _scatter(run, "projected", steps, norms, colour, mode="markers")
    trace["marker"] = {"symbol": "x-thin", "size": 7, "line": {"width": 1.5, "color": colour}}
    return [trace]


def _guide(y: float) -> dict[str, Any]:
    """A dotted horizontal line across the plot at `y`."""
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"dash": "dot", "width": 1, "color": "#888"},
    }


def _marks(run: RunView) -> list[Mark]:
    """The run's live knob changes and divergence, with what to say about each."""
    marks = []
    for event in run.events:
        if event.kind == KNOB_EVENT:
            change = event.payload
            what = (
                f"{change['name']} {_number(change.get('previous'))} → {_number(change['value'])}"
            )
            text = f"{what} at step {event.step:,} · {run.text}"
            marks.append(Mark(event.step, event.kind, text))
        elif event.kind == DIVERGED_EVENT:
            marks.append(
                Mark(event.step, event.kind, f"{run.text} diverged at step {event.step:,}")
            )
    return marks


def _mark_layers(marks: Sequence[Mark]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(shapes, traces): a vertical line at every marked step, and a marker at its top
    that says what happened on hover (every mark at that step, one per line), instead of
    labels that would overlap where marks crowd."""
    shapes, traces = [], []
    for kind, (colour, dash, symbol) in MARK_STYLES.items():
        texts: dict[int, list[str]] = {}
        for mark in marks:
            if mark.kind == kind:
                texts.setdefault(mark.step, []).append(mark.text)
        if not texts:
            continue
        steps = sorted(texts)
        shapes += [
            {
                "type": "line",
                "x0": step,
                "x1": step,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "layer": "below",
                "line": {"dash": dash, "width": 1, "color": colour},
            }
            for step in steps
        ]
        traces.append(
            {
                "type": "scatter",
                "x": steps,
                "y": [1] * len(steps),
                "yaxis": "y2",
                "name": kind,
                "mode": "markers",
                "marker": {"symbol": symbol, "size": 10, "color": colour},
                "cliponaxis": False,
                "showlegend": False,
                "text": ["<br>".join(texts[step]) for step in steps],
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    return shapes, traces


def _categorical_dimension(key: str, values: Sequence[object]) -> dict[str, Any]:
    """A parallel axis with a tick per category, in sorted order."""
    labels = ["—" if v is None else str(v) for v in values]
    categories = sorted(set(labels))
    return {
        "label": key,
        "values": [categories.index(label) for label in labels],
        "tickvals": list(range(len(categories))),
        "ticktext": [escape_html(category) for category in categories],  # a dataset's path
        "range": [-0.5, len(categories) - 0.5],  # a single category too has an extent
    }


def _numeric_dimension(
    key: str, values: Sequence[object], *, target: bool = False
) -> dict[str, Any] | None:
    """A parallel axis; None if every value is missing, or (unless it is the `target`)
    all are equal. On a log₁₀ axis, with every decade labelled, when its values span more
    than 100×."""
    numbers = np.array([np.nan if v is None else v for v in values], dtype=float)
    if np.all(np.isnan(numbers)):
        return None
    low, high = np.nanmin(numbers), np.nanmax(numbers)
    if target:
        return {"label": key, "values": numbers}
    if low == high:
        return None
    if not (low > 0 and high / low > 100):
        return {"label": key, "values": numbers}
    decades = range(int(np.ceil(np.log10(low))), int(np.floor(np.log10(high))) + 1)
    return {
        "label": f"{key} (log)",
        "values": np.log10(numbers),
        "tickvals": list(decades),
        "ticktext": [_number(10.0**d) for d in decades],
    }


def _number(value: object) -> str:
    """`value` as the hover format writes numbers: 4 significant digits, no trailing
    zeros, exponents without padding (1e-5); "off" for None."""
    if value is None:
        return "off"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return re.sub(r"e([+-])0+(?=\d)", r"e\1", f"{value:.4g}")
