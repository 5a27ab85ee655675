"""Plotly figures of runs' metrics: what the Live and Compare pages draw.

Figures are built here, from stored metrics and events, so that the pages stay thin and
the cost of a refresh can be measured without a browser (`make bench`). Every series is
downsampled to about `series.MAX_POINTS` points, keeping spikes; every live knob change is
marked on every chart at the step it took effect; each figure keeps a fixed `uirevision`
so that a user's zoom survives refreshes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from core.series import downsample, flags_to_steps
from core.store import Event, Metrics

PALETTE = ("#f5a524", "#4cc9f0", "#f72585", "#80ed99", "#b388eb", "#ff8c42", "#90a4ae", "#ffd166")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


@dataclass(frozen=True)
class RunView:
    """One run to draw: a short label, its metrics and its events."""

    run_id: str
    label: str
    metrics: Metrics
    events: Sequence[Event] = ()
    batch_size: int | None = None  # drawn beside the gradient noise scale


def live_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """Every chart of the Live page, by key, for one or more runs overlaid."""
    charts: dict[str, Chart] = {
        "loss": ("Loss", True, _loss),
        "accuracy": ("Accuracy", False, _accuracy),
        "grad_norm": ("Gradient global norm, before and after clipping", True, _grad_norm),
        "param_norm": ("Parameter norm ‖θ‖ against the radius", False, _param_norm),
        "step_norm": ("Step norm ‖Δθ‖ per layer", True, _per_layer("step_norm")),
        "update_ratio": (
            "Update / parameter ratio ‖Δθ‖/‖θ‖ per layer",
            True,
            _per_layer("update_ratio"),
        ),
        "sparsity": ("Sparsity per layer", False, _per_layer("sparsity")),
    }
    return _overlaid(charts, runs)


# One sentence on how to read each instrument, shown under its chart.
INSTRUMENT_HELP = {
    "distance_from_init": "How far the weights have moved from where they started: a "
    "layer that stays near 0 is not learning; one that keeps growing may be overfitting.",
    "alpha": "Where each step lands along its own direction: about −1 barely moved, 0 hit "
    "the valley's floor, +1 jumped to the far side; mostly > 0 means the steps are too big.",
    "sharpness": "The largest Hessian eigenvalue: when it reaches 2/η (dotted) plain "
    "gradient descent is at the edge of stability and the loss starts to oscillate.",
    "noise_scale": "The gradient noise scale B: batches much larger than B (dotted: the "
    "batch size) waste compute; much smaller ones make noisy steps.",
    "histogram/grad": "Gradient magnitudes per layer over time (colour: share of entries "
    "per power of ten): a band sliding to the bottom means vanishing gradients.",
    "histogram/weight": "Weight magnitudes per layer over time: pruning and weight decay "
    "push mass to the bottom; exploding weights climb to the top.",
}


def instrument_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The Instruments panel: the four scalar instruments, and heat strips of the first
    run's gradient and weight histograms."""
    charts: dict[str, Chart] = {
        "distance_from_init": (
            "Distance from the initial weights ‖θ − θ₀‖",
            False,
            _distance_from_init,
        ),
        "alpha": ("α: where each step landed in its valley", False, _alpha),
        "sharpness": ("Sharpness (top Hessian eigenvalue) against 2/η", True, _sharpness),
        "noise_scale": ("Gradient noise scale B against the batch size", True, _noise_scale),
    }
    figures = _overlaid(charts, runs)
    figures["alpha"].update_layout(
        shapes=[
            *figures["alpha"].layout.shapes,
            *(
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": y,
                    "y1": y,
                    "line": {"dash": "dot", "width": 1, "color": "#888"},
                }
                for y in (-1, 0, 1)
            ),
        ]
    )
    histograms = [e for e in runs[0].events if e.kind == "histogram"] if runs else []
    for kind, title in (
        ("grad", "Gradient magnitudes per layer"),
        ("weight", "Weight magnitudes per layer"),
    ):
        figures[f"histogram/{kind}"] = _heat_strips(histograms, kind, title)
    return figures


def hyperparameter_figure(rows: Sequence[dict[str, float]], target: str) -> go.Figure:
    """Parallel coordinates of numeric hyperparameters against `target` (e.g. final
    validation accuracy), one line per run. Columns that never vary are left out."""
    columns = [key for key in rows[0] if key != target] if rows else []
    dimensions = []
    for key in [*columns, target]:
        values = np.array([row.get(key, np.nan) for row in rows], dtype=float)
        if np.all(np.isnan(values)):
            continue
        if key != target and np.nanmin(values) == np.nanmax(values):
            continue
        low, high = np.nanmin(values), np.nanmax(values)
        log = key != target and low > 0 and high / low > 100
        dimensions.append(
            {"label": f"log₁₀ {key}" if log else key, "values": np.log10(values) if log else values}
        )
    traces = []
    if rows:
        colour = np.nan_to_num(np.array([row.get(target, np.nan) for row in rows], dtype=float))
        traces.append(
            {
                "type": "parcoords",
                "dimensions": dimensions,
                "line": {
                    "color": colour,
                    "colorscale": "Viridis",
                    "showscale": True,
                    "colorbar": {"title": {"text": target}},
                },
            }
        )
    return _figure(f"hyperparameters/{target}", f"Hyperparameters and {target}", traces)


Chart = tuple[str, bool, Callable[[RunView, int], list[dict]]]  # title, log y, traces


def _overlaid(charts: dict[str, Chart], runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """One figure per chart, every run's traces overlaid, knob changes marked."""
    marks = _knob_change_marks(runs)
    return {
        key: _figure(
            key,
            title,
            [t for i, run in enumerate(runs) for t in traces(run, i)],
            log=log,
            marks=marks,
        )
        for key, (title, log, traces) in charts.items()
    }


# The traces of one run, per chart ---------------------------------------------------------


def _loss(run: RunView, i: int) -> list[dict]:
    return [
        *_line(run, "loss", i, "train"),
        *_line(run, "val_loss", i, "validation", dash="dash", markers=True),
    ]


def _accuracy(run: RunView, i: int) -> list[dict]:
    return [
        *_line(run, "accuracy", i, "train"),
        *_line(run, "val_accuracy", i, "validation", dash="dash", markers=True),
    ]


def _grad_norm(run: RunView, i: int) -> list[dict]:
    traces = _line(run, "grad_norm", i, "before clipping")
    if "clip_norm" in run.metrics:
        traces += _line(run, "grad_norm_clipped", i, "after clipping", dash="dash")
        traces += _line(run, "clip_norm", i, "clip threshold", dash="dot", shape="hv")
    return traces


def _param_norm(run: RunView, i: int) -> list[dict]:
    traces = _line(run, "param_norm", i, "‖θ‖")
    if "radius" in run.metrics:
        traces += _line(run, "radius", i, "radius", dash="dot", shape="hv")
        traces += _projection_markers(run, i)
    return traces


def _per_layer(kind: str) -> Callable[[RunView, int], list[dict]]:
    """Traces of `kind/<layer>` for every layer: colour by layer, dash by run."""
    prefix = f"{kind}/"

    def traces(run: RunView, i: int) -> list[dict]:
        layers = [key[len(prefix) :] for key in run.metrics.keys if key.startswith(prefix)]
        return [
            trace
            for j, layer in enumerate(layers)
            for trace in _line(
                run,
                prefix + layer,
                i,
                layer,
                color=PALETTE[j % len(PALETTE)],
                dash=DASHES[i % len(DASHES)],
            )
        ]

    return traces


def _distance_from_init(run: RunView, i: int) -> list[dict]:
    return [
        *_line(run, "distance_from_init", i, "all layers"),
        *_per_layer("distance_from_init")(run, i),
    ]


def _alpha(run: RunView, i: int) -> list[dict]:
    return _line(run, "alpha", i, "α", markers=True, lines=False)


def _sharpness(run: RunView, i: int) -> list[dict]:
    traces = _line(run, "sharpness", i, "sharpness", markers=True)
    if traces and "learning_rate" in run.metrics:
        steps, rates = downsample(run.metrics.steps, run.metrics["learning_rate"])
        traces.append(
            {
                "type": "scatter",
                "x": steps,
                "y": 2.0 / rates,
                "name": f"{run.label} · 2/η",
                "legendgroup": run.run_id,
                "mode": "lines",
                "line": {"color": PALETTE[i % len(PALETTE)], "dash": "dot", "shape": "hv"},
            }
        )
    return traces


def _noise_scale(run: RunView, i: int) -> list[dict]:
    traces = _line(run, "noise_scale", i, "B", markers=True)
    if traces and run.batch_size:
        steps = run.metrics.steps
        traces.append(
            {
                "type": "scatter",
                "x": [steps[0], steps[-1]],
                "y": [run.batch_size] * 2,
                "name": f"{run.label} · batch size",
                "legendgroup": run.run_id,
                "mode": "lines",
                "line": {"color": PALETTE[i % len(PALETTE)], "dash": "dot"},
            }
        )
    return traces


def _heat_strips(events: Sequence[Event], kind: str, title: str) -> go.Figure:
    """One heatmap: a band of magnitude bins per layer, stacked, with steps across."""
    key = f"histogram/{kind}"
    if not events:
        return _figure(key, title, [])
    edges = events[0].payload["edges"]
    layers = list(events[0].payload[kind])
    bins = len(edges) - 1
    columns = []
    for event in events:
        column = []
        for layer in layers:
            counts = np.asarray(event.payload[kind][layer], dtype=float)
            column.extend(counts / max(counts.sum(), 1.0))
            column.append(np.nan)  # a gap between layers
        columns.append(column)
    labels = [f"{layer} 1e{edges[b]:+.0f}" for layer in layers for b in range(bins)]
    rows = [
        label
        for j, layer in enumerate(layers)
        for label in (*labels[j * bins : (j + 1) * bins], f"{layer} ·")
    ]
    figure = _figure(
        key,
        title,
        [
            {
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
        ],
    )
    middles = [j * (bins + 1) + bins // 2 for j in range(len(layers))]
    figure.update_yaxes(tickvals=middles, ticktext=layers)
    figure.update_layout(height=max(340, 26 * len(layers) * 4))
    return figure


# Pieces ---------------------------------------------------------------------------------


def _line(
    run: RunView,
    key: str,
    index: int,
    what: str,
    *,
    dash: str = "solid",
    color: str | None = None,
    markers: bool = False,
    lines: bool = True,
    shape: str = "linear",
) -> list[dict]:
    if key not in run.metrics:
        return []
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    if len(steps) == 0:
        return []
    mode = "+".join(m for m, on in (("lines", lines), ("markers", markers)) if on)
    return [
        {
            "type": "scatter",
            "x": steps,
            "y": values,
            "name": f"{run.label} · {what}",
            "legendgroup": run.run_id,
            "mode": mode,
            "line": {
                "color": color or PALETTE[index % len(PALETTE)],
                "dash": dash,
                "shape": shape,
                "width": 1.6,
            },
            "hovertemplate": f"{run.label}<br>{what}: %{{y:.4g}} at step %{{x}}<extra></extra>",
        }
    ]


def _projection_markers(run: RunView, index: int) -> list[dict]:
    if "projection_active" not in run.metrics:
        return []
    steps = flags_to_steps(run.metrics.steps, run.metrics["projection_active"])
    if len(steps) == 0:
        return []
    norms = run.metrics["param_norm"][np.searchsorted(run.metrics.steps, steps)]
    return [
        {
            "type": "scatter",
            "x": steps,
            "y": norms,
            "mode": "markers",
            "name": f"{run.label} · projected",
            "legendgroup": run.run_id,
            "marker": {
                "symbol": "x-thin",
                "size": 7,
                "line": {"width": 1.5},
                "color": PALETTE[index % len(PALETTE)],
            },
            "hovertemplate": "projected at step %{x}<extra></extra>",
        }
    ]


def _knob_change_marks(runs: Sequence[RunView]) -> tuple[list[dict], list[dict]]:
    """(shapes, annotations): a dotted vertical line at every live knob change."""
    shapes, annotations = [], []
    for run in runs:
        for event in run.events:
            if event.kind != "knob":
                continue
            change = event.payload
            shapes.append(
                {
                    "type": "line",
                    "x0": event.step,
                    "x1": event.step,
                    "y0": 0,
                    "y1": 1,
                    "yref": "paper",
                    "line": {"dash": "dot", "width": 1, "color": "#999"},
                }
            )
            annotations.append(
                {
                    "x": event.step,
                    "y": 1,
                    "yref": "paper",
                    "yanchor": "top",
                    "showarrow": False,
                    "text": f"{change['name']} → {_short(change['value'])}",
                    "textangle": -90,
                    "font": {"size": 10},
                }
            )
    return shapes, annotations


def _figure(
    key: str,
    title: str,
    traces: list[dict],
    *,
    log: bool = False,
    marks: tuple[list[dict], list[dict]] = ([], []),
) -> go.Figure:
    """One figure, built in a single call: Plotly validates a figure once this way, where
    adding traces and shapes one by one costs a validation (and a copy) each."""
    shapes, annotations = marks
    if not traces:
        annotations = [
            *annotations,
            {
                "text": "no data yet",
                "showarrow": False,
                "x": 0.5,
                "y": 0.5,
                "xref": "paper",
                "yref": "paper",
            },
        ]
    layout = {
        "title": {"text": title},
        "uirevision": key,  # keep the user's zoom and legend choices across refreshes
        "height": 340,
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "legend": {"font": {"size": 10}},
        "hovermode": "closest",
        "xaxis": {"title": {"text": "step"}},
        "yaxis": {"type": "log" if log else "linear"},
        "shapes": shapes,
        "annotations": annotations,
    }
    return go.Figure(data=traces, layout=layout)


def _short(value: float) -> str:
    return f"{value:.3g}" if isinstance(value, float) and math.isfinite(value) else str(value)
