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


def live_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """Every chart of the Live page, by key, for one or more runs overlaid."""
    charts: dict[str, tuple[str, bool, Callable[[RunView, int], list[dict]]]] = {
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
    marks = _knob_change_marks(runs)
    return {
        key: _figure(
            key,
            title,
            [trace for i, run in enumerate(runs) for trace in traces(run, i)],
            log=log,
            marks=marks,
        )
        for key, (title, log, traces) in charts.items()
    }


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
    shape: str = "linear",
) -> list[dict]:
    if key not in run.metrics:
        return []
    steps, values = downsample(run.metrics.steps, run.metrics[key])
    if len(steps) == 0:
        return []
    return [
        {
            "type": "scatter",
            "x": steps,
            "y": values,
            "name": f"{run.label} · {what}",
            "legendgroup": run.run_id,
            "mode": "lines+markers" if markers else "lines",
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
