"""The Instruments panel: distance from init, then every instrument's charts, drawn from
what each declares (`core.training.instruments.specs`): a chart of every run's lines, or a
heat strip of the first run's histograms. A new instrument brings its charts with it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.charts.drawing import Chart, draw
from core.charts.layout import figure
from core.charts.style import DASHES, TOTAL_COLOUR
from core.charts.traces import RunView, Trace, Traces, layer_lines, metric_line, reference
from core.escaping import escape_html
from core.series import downsample
from core.store import HISTOGRAM_EVENT, Event
from core.training.instruments import INSTRUMENTS
from core.training.instruments.specs import ChartSpec, HeatStrip, Line, LineChart, Reference

#: How far the weights have moved from where they started: a telemetry series, not an
#: instrument, drawn first on the panel.
DISTANCE_FROM_INIT = LineChart(
    "Distance from the initial weights ‖θ − θ₀‖",
    help="How far the weights have moved from where they started: a layer that stays near 0 "
    "is not learning; one that keeps growing may be overfitting.",
    lines=(
        Line("distance_from_init", "all layers", total=True),
        Line("distance_from_init", per_layer=True),
    ),
    overlaid=(Line("distance_from_init", "all layers"),),  # the runs' totals compared
)


def instrument_charts() -> dict[str, ChartSpec]:
    """The panel's charts by key: distance from init, then each instrument's, in the order
    of `INSTRUMENTS`."""
    return {
        "distance_from_init": DISTANCE_FROM_INIT,
        **{key: chart for cls in INSTRUMENTS.values() for key, chart in cls.charts.items()},
    }


# One sentence on how to read each chart of the Instruments panel, shown under it.
INSTRUMENT_HELP = {key: chart.help for key, chart in instrument_charts().items()}


def instrument_figures(runs: Sequence[RunView]) -> dict[str, go.Figure]:
    """The Instruments panel, by the keys of `instrument_charts`: each line chart with
    every run overlaid (or its `overlaid` lines for several), each heat strip of the first
    run's histograms."""
    charts = instrument_charts()
    drawn = draw(
        {key: _chart(spec) for key, spec in charts.items() if isinstance(spec, LineChart)}, runs
    )
    histograms = [e for e in runs[0].events if e.kind == HISTOGRAM_EVENT] if runs else []
    first = runs[0].text if runs else ""
    return {
        key: _heat_strip(key, spec, histograms, first)
        if isinstance(spec, HeatStrip)
        else drawn[key]
        for key, spec in charts.items()
    }


def _chart(spec: LineChart) -> Chart:
    """The chart that draws `spec`."""
    overlaid = _traces(spec.overlaid, spec.references) if spec.overlaid else None
    return Chart(
        spec.title,
        _traces(spec.lines, spec.references),
        spec.scale,
        guides=spec.guides,
        overlaid=overlaid,
    )


def _traces(lines: Sequence[Line], references: Sequence[Reference]) -> Traces:
    """A run's `lines`, then, when they show something, its `references`."""

    def traces(run: RunView, i: int) -> list[Trace]:
        drawn = [
            t for k, line in enumerate(lines) for t in _line(run, i, line, DASHES[k % len(DASHES)])
        ]
        if drawn:
            for ref in references:  # dotted step lines in the run's colour
                points = ref.points(run)
                if points is not None:
                    drawn.append(reference(run, ref.name, *downsample(*points), run.tint(i)))
        return drawn

    return traces


def _line(run: RunView, i: int, line: Line, dash: str) -> list[Trace]:
    """The traces of one declared line of `run`, the `i`-th of its chart: in the run's
    colour and `dash`, per layer in shades of it, a total in `TOTAL_COLOUR`."""
    markers, lines = line.markers, line.lines
    if line.per_layer:
        return layer_lines(run, i, line.key, markers=markers, lines=lines)
    if line.total:
        return metric_line(
            run, line.key, line.name, TOTAL_COLOUR, markers=markers, lines=lines, legend=line.name
        )
    return metric_line(
        run, line.key, line.name, run.tint(i), dash=dash, markers=markers, lines=lines
    )


def _heat_strip(key: str, spec: HeatStrip, events: Sequence[Event], run: str) -> go.Figure:
    """One heatmap of the run labelled `run` (as charts show it): a band of magnitude bins
    per layer, stacked, with steps across; its title names the run, since it draws one
    run of those watched."""
    kind, title = spec.kind, f"{spec.title} · {run}" if run else spec.title
    if not events:
        return figure(key, title, [])
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
    return figure(
        key,
        title,
        [strip],
        yaxis={"tickvals": middles, "ticktext": shown},
        height=max(340, 26 * len(layers) * 4),
    )
