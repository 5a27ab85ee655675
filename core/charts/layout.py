"""`figure`: one Plotly figure with the layout every chart shares (title, legend, step
axis, guides, marks, a fixed `uirevision` so that a user's zoom survives refreshes), and
the ticks of a log axis."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from core.charts.marks import Mark, mark_layers
from core.charts.style import STEP_HOVER_FORMAT
from core.charts.traces import Trace
from core.escaping import escape_html

# A horizontal legend under the plot: a chart keeps its whole width for the lines. It sits
# at the figure's foot (placed in the container), and the plot shrinks to make room for
# it: placed below the plot instead, by a fraction of the plot's height, it overlapped
# the axis title "step" whenever the plot was short or the legend's type large.
LEGEND = {
    "orientation": "h",
    "x": 0,
    "xanchor": "left",
    "y": 0,
    "yref": "container",
    "yanchor": "bottom",
    "font": {"size": 11},
}

NO_DATA = {
    "text": "no data yet",
    "showarrow": False,
    "x": 0.5,
    "y": 0.5,
    "xref": "paper",
    "yref": "paper",
}


def figure(
    key: str,
    title: str,
    traces: list[Trace],
    *,
    xaxis: Mapping[str, Any] | None = None,
    yaxis: Mapping[str, Any] | None = None,
    guides: Iterable[float] = (),
    marks: Sequence[Mark] = (),
    height: int = 340,
    empty: str = NO_DATA["text"],
) -> go.Figure:
    """One figure, built in a single call: Plotly validates a figure once this way, where
    adding traces and shapes one by one costs a validation (and a copy) each. Marks are
    drawn only on a chart with data; a chart without any says `empty` (why, where known)."""
    mark_shapes, mark_traces = mark_layers(marks) if traces else ([], [])
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "uirevision": key,  # keep the user's zoom and legend choices across refreshes
        "height": height,
        "margin": {"l": 55, "r": 15, "t": 40, "b": 40},
        "legend": LEGEND,
        "hovermode": "closest",
        "xaxis": {
            "title": {"text": "step"},
            # 12,000 rather than Plotly's 12k, or 1.2×10⁴ (the template's powers of ten)
            "tickformat": STEP_HOVER_FORMAT,
            "hoverformat": STEP_HOVER_FORMAT,
            **(xaxis or {}),
        },
        "yaxis": yaxis or {},
        "shapes": [*(guide(y) for y in guides), *mark_shapes],
        "annotations": [] if traces else [{**NO_DATA, "text": empty}],
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


def guide(y: float) -> dict[str, Any]:
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


def said(why: str, width: int = 48) -> str:
    """A sentence on an empty chart (why it is empty), capitalised and in lines of at most
    `width` characters: a Plotly annotation does not wrap, and a long one is cut."""
    lines = textwrap.wrap(escape_html(why[:1].upper() + why[1:]), width)
    return "<br>".join(lines)


def log_ticks(decades: float | None, low: float | None = None) -> dict[str, Any]:
    """Where a log axis spanning `decades` from log₁₀ `low` (None: no data yet) puts its
    ticks; the tick format labels each in full. Left to Plotly, an axis over a few decades
    labels 2 and 5 between them with their mantissas alone, and one within a decade labels
    every digit, 0.8 and 0.9 overlapping in a projector's type."""
    if decades is not None and decades < 1:
        if low is None:
            return {}
        return {"tickvals": _within_a_decade(low, low + decades)}
    if decades is not None and decades < 3:
        return {"dtick": "D2"}  # 1, 2 and 5 of each decade
    # Whole decades, about 8 labels at most, with unlabelled minor ticks between, labelled
    # 10⁻⁶ … 1, 10, 10² (a tick format would write 0.000001, or 1e+6).
    minor = {"dtick": "D1", "ticks": "outside", "ticklen": 3, "showgrid": False}
    powers = {"tickformat": "", "exponentformat": "power"}
    return {"dtick": max(1, round((decades or 0) / 8)), "minor": minor, **powers}


def _within_a_decade(low: float, high: float) -> list[float]:
    """Ticks for a log axis from log₁₀ `low` to `high`, less than a decade apart: the
    round values 1, 2, 3 and 5 of each decade in range (at least 0.18 decade apart), or,
    for a span so short that fewer than two fall in it, every digit's."""
    decades = range(math.floor(low), math.ceil(high) + 1)
    for mantissas in ((1, 2, 3, 5), tuple(range(1, 10))):
        ticks = [m * 10.0**d for d in decades for m in mantissas]
        shown = [t for t in ticks if low <= math.log10(t) <= high]
        if len(shown) >= 2:
            return shown
    return shown
