"""`view_legend`: one legend for a whole view of charts, in place of one under each.

Under each chart, a legend of three runs' train and validation lines took six entries
(about 150 px on a projector), leaving the plot 100 px. Across a view, a colour means a
run and a line style a series, so the view's legend says each once: the runs by colour,
then the series by their dash (train, validation, the clip threshold …) and, where
charts draw layers, the layers, each in a shade of its run's colour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import plotly.graph_objects as go

from core.charts.style import TOTAL_COLOUR

SEPARATOR = " · "  # between a run's label and its series in a trace's name


@dataclass(frozen=True)
class Style:
    """A series as the legend shows it: its name, its dash, whether it has markers and a
    line, its colour when that is not a run's (a total over layers), and whether it is a
    layer (drawn in a shade of its run's colour)."""

    name: str
    dash: str = "solid"
    markers: bool = False
    colour: str | None = None
    line: bool = True
    layer: bool = False


@dataclass(frozen=True)
class ViewLegend:
    """The runs (label → colour) and the series of a view's charts, in order of
    appearance; `layers` when some chart draws a run's layers (their names in `styles`,
    drawn in shades of each run's colour)."""

    runs: dict[str, str] = field(default_factory=dict)
    styles: list[Style] = field(default_factory=list)
    layers: bool = False


def view_legend(figures: Iterable[go.Figure], runs: Mapping[str, str]) -> ViewLegend:
    """The legend of `figures`, whose runs are `runs` (label as charts show it → colour):
    a trace named `<run> · <series>` tells a series of that run; any other named one a
    layer of the run its chart draws, or a total over them. Traces kept out of a chart's
    legend (marks, checkpoints, bands) are kept out of it too."""
    styles: dict[str, Style] = {}
    layers = False
    for figure in figures:
        for trace in figure.data:
            if trace.type != "scatter" or trace.showlegend is False or not trace.name:
                continue
            run = next((r for r in runs if trace.name.startswith(r + SEPARATOR)), None)
            name = trace.name if run is None else trace.name[len(run) + len(SEPARATOR) :]
            colour = trace.line.color
            layer = run is None and colour != TOTAL_COLOUR
            layers |= layer
            styles.setdefault(
                name,
                Style(
                    name,
                    trace.line.dash or "solid",
                    "markers" in (trace.mode or ""),
                    colour if colour == TOTAL_COLOUR else None,
                    "lines" in (trace.mode or "lines"),
                    layer,
                ),
            )
    # Every run watched, even one without a series of its own here (per layer: layers).
    return ViewLegend(dict(runs), list(styles.values()), layers)
