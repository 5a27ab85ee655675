"""`Chart` and `draw`: a chart of every run, drawn once with every run overlaid, or once
per run (keys `<chart>/<run id>`, all on the same y range so that the small charts
compare at a glance). The y range comes from where most points lie
(`series.robust_range`), so that a run that diverges leaves the top of the chart instead
of flattening the others; reference lines, guides and `covers` always stay in view. Every
figure marks its runs' live knob changes and divergence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from core.charts.layout import figure, log_ticks
from core.charts.marks import marks_of
from core.charts.style import (
    HOVER_FORMAT,
    PERCENT_HOVER_FORMAT,
    PERCENT_TICK_FORMAT,
    REFERENCE,
    TICK_FORMAT,
)
from core.charts.traces import RunView, Trace, Traces
from core.series import robust_range
from core.training.instruments.specs import Scale


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


def draw(charts: Mapping[str, Chart], runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The figures of `charts` for `runs`: each chart once with every run, or once per run
    when it is `split` and several runs have something to draw in it; every figure shows
    only its runs' marks."""
    several = len(runs) > 1
    marks = [marks_of(run) for run in runs]
    figures = {}
    for key, chart in charts.items():
        traces_of = (chart.overlaid if several else None) or chart.traces
        traces = [traces_of(run, i) for i, run in enumerate(runs)]
        every = [t for run_traces in traces for t in run_traces]
        yaxis = y_axis(chart, every)  # over every run: charts side by side share a scale
        if not (chart.split and several and every):
            figures[key] = figure(
                key,
                chart.title,
                every,
                yaxis=yaxis,
                guides=chart.guides,
                marks=[m for run_marks in marks for m in run_marks],
            )
            continue
        xaxis = shared_x_axis(every)
        for run, run_traces, run_marks in zip(runs, traces, marks, strict=True):
            figures[f"{key}/{run.run_id}"] = figure(
                f"{key}/{run.run_id}",
                f"{chart.title} · {run.text}",
                run_traces,
                xaxis=xaxis,
                yaxis=yaxis,
                guides=chart.guides,
                marks=run_marks,
            )
    return figures


def y_axis(chart: Chart, traces: Sequence[Trace]) -> dict[str, Any]:
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
        axis |= log_ticks(None) if bounds is None else log_ticks(bounds[1] - bounds[0], bounds[0])
    return axis


def shared_x_axis(traces: Sequence[Trace]) -> dict[str, Any] | None:
    """An x axis over every step of `traces`, for charts drawn side by side."""
    steps = [t["x"] for t in traces if len(t["x"])]
    if not steps:
        return None
    return {"range": [int(min(s[0] for s in steps)), int(max(s[-1] for s in steps))]}
