"""Figures of what a run's analysis found, apart from its training curves: a
learning-rate range test, a checkpoint's loss landscape, and groups of repeats as means
with their confidence bands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from core.charts.layout import figure, log_ticks
from core.charts.style import (
    HOVER_FORMAT,
    PALETTE,
    PERCENT_HOVER_FORMAT,
    PERCENT_TICK_FORMAT,
    TICK_FORMAT,
    run_colour,
)
from core.charts.traces import Trace
from core.engine.landscape import Landscape
from core.engine.lr_find import RangeTest
from core.escaping import escape_html
from core.group_comparison import higher_is_better, mean_band
from core.readable import number
from core.store import Metrics

#: Said on the slices' chart when the update from the checkpoint is zero, which flattens
#: the loss along it (a flat line reads as a broken chart otherwise).
FLAT_UPDATE: dict[str, Any] = {
    "text": "Flat along the update: the optimizer's step from here is zero<br>"
    "(a learning rate of 0, as a cosine schedule's at its last step)",
    "showarrow": False,
    "x": 0.5,
    "y": 1,
    "xref": "paper",
    "yref": "paper",
    "yanchor": "top",
}


def range_test_figure(curve: RangeTest) -> go.Figure:
    """A learning-rate range test: each step's loss and the smoothed loss against the
    rate (log axis), the suggested rate starred. The y range ends a little above the
    smoothed loss before its lowest point, so that the explosion leaves the chart top."""
    traces: list[Trace] = []
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
                "text": [f"{number(curve.suggestion, 3)}"],
                "textposition": "top right",
                "marker": {"size": 14, "symbol": "star", "color": PALETTE[2]},
                "hovertemplate": hover.replace("<extra>", " (suggested)<extra>"),
            }
        )
    xaxis = {"type": "log", "title": {"text": "learning rate"}, "tickformat": TICK_FORMAT}
    xaxis |= log_ticks(None)
    xaxis["hoverformat"] = HOVER_FORMAT
    return figure("lr_find", "Loss as the learning rate grows", traces, xaxis=xaxis, yaxis=yaxis)


def group_figure(groups: Mapping[str, Sequence[Metrics]], key: str) -> go.Figure:
    """Each group of repeats (label → its runs' metrics) as the mean of `key` over its runs,
    with a band of the 95% t-interval of that mean at each step (`mean_band`). An accuracy
    reads in percent, as the verdict's "points" do, and its band stays within 0-100%: an
    interval of few seeds can reach past what an accuracy can be."""
    share = higher_is_better(key)
    traces: list[Trace] = []
    for i, (label, series) in enumerate(groups.items()):
        steps, mean, margin = mean_band(series, key)
        if not len(steps):
            continue
        high, low = mean + margin, mean - margin
        if share:
            high, low = np.minimum(high, 1.0), np.maximum(low, 0.0)
        colour = run_colour(i)
        name = f"{escape_html(label)} ({len(series)} runs)"
        if not np.isnan(margin).all():
            traces.append(
                {
                    "type": "scatter",
                    "x": np.concatenate([steps, steps[::-1]]),
                    "y": np.concatenate([high, low[::-1]]),
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
                "hovertemplate": "step %{x:,}<br>mean %{y}<extra>%{fullData.name}</extra>",
            }
        )
    title = f"{key}: group means, 95% t-bands"  # the legend says how many runs each
    yaxis = {
        "title": {"text": key},
        "tickformat": PERCENT_TICK_FORMAT if share else TICK_FORMAT,
        "hoverformat": PERCENT_HOVER_FORMAT if share else HOVER_FORMAT,
    }
    return figure(f"groups/{key}", title, traces, yaxis=yaxis)


def heatmap_figure(
    key: str,
    title: str,
    values: np.ndarray,
    rows: Sequence[float],
    columns: Sequence[float],
    *,
    axes: tuple[str, str, str],
) -> go.Figure:
    """`values[i, j]` at `rows[i]` (y) and `columns[j]` (x), as a heatmap whose cells say
    their value, lowest darkest; `axes` names y, x and the values. NaN cells (not yet
    known) are left blank."""
    row_name, column_name, value_name = axes
    labels = [f"{v:g}" for v in columns], [f"{v:g}" for v in rows]
    finite = np.where(np.isfinite(values), values, np.nan)
    trace = {
        "type": "heatmap",
        "x": labels[0],
        "y": labels[1],
        "z": finite,
        "colorscale": "Viridis",
        "reversescale": True,
        "texttemplate": "%{z:.3~g}",
        "colorbar": {"title": {"text": value_name, "side": "right"}},
        "hovertemplate": f"{row_name} %{{y}}, {column_name} %{{x}}: {value_name} %{{z:"
        + HOVER_FORMAT
        + "}<extra></extra>",
    }
    return figure(
        key,
        title,
        [trace],
        xaxis={"title": {"text": column_name}, "type": "category"},
        yaxis={"title": {"text": row_name}, "type": "category"},
    )


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
    plane = {"title": {"text": "random direction δ₁"}}
    along = figure(
        "landscape/slices",
        f"Loss along two directions from step {landscape.step:,}",
        slices,
        xaxis=xaxis,
        yaxis=yaxis,
    )
    if landscape.update_is_zero:
        along.add_annotation(FLAT_UPDATE)
    return {
        "landscape/slices": along,
        "landscape/surface": figure(
            "landscape/surface",
            f"Loss around step {landscape.step:,}, and the run's checkpoints",
            surface,
            xaxis=plane,
            yaxis={"title": {"text": "random direction δ₂"}},
        ),
    }
