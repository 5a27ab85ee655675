"""A population's figures (`core.population.lineage.PopulationView`), drawn with the
charts' layout and style: its lineage, each member's knob schedule, and its best objective
over time."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from core.charts.layout import figure, log_ticks
from core.charts.style import HOVER_FORMAT, TICK_FORMAT, number, run_colour
from core.escaping import escape_html
from core.population.lineage import PopulationView, Stretch

COLOURSCALE = "Viridis"
EXPLOIT_COLOUR = "#9e9e9e"


def lineage_figure(view: PopulationView, knob: str) -> go.Figure:
    """Members against steps: each run of the population a bar along its member's row
    from the step it began to its step now, coloured by `knob`'s value (on the knob's
    searched range, log-scaled if it was searched so); each exploit an arrow from the
    member copied to the member that copied it, at the step it happened."""
    scale = _Scale(view, knob)
    traces: list[Any] = []
    for stretch in view.stretches:
        value = stretch.run.knobs.get(knob)
        traces.append(
            {
                "type": "scatter",
                "x": [stretch.start, max(stretch.end, stretch.start)],
                "y": [stretch.member, stretch.member],
                "mode": "lines+markers",
                "line": {"color": scale.colour(value), "width": 10},
                "marker": {"size": 4, "color": scale.colour(value)},
                "showlegend": False,
                "hovertemplate": f"{escape_html(stretch.run.name)}<br>{knob} {number(value)}"
                f"<br>{view.metric} {_value(stretch)}<br>step %{{x:,}}<extra></extra>",
            }
        )
    for exploit in view.exploits:
        traces.append(
            {
                "type": "scatter",
                "x": [exploit.step, exploit.step],
                "y": [exploit.source, exploit.member],
                "mode": "lines+markers",
                "line": {"color": EXPLOIT_COLOUR, "width": 1.5, "dash": "dot"},
                "marker": {"symbol": ["circle", "arrow"], "angleref": "previous", "size": 9},
                "showlegend": False,
                "hovertemplate": f"step {exploit.step:,}: m{exploit.member} copies "
                f"m{exploit.source}<extra></extra>",
            }
        )
    if traces:
        traces.append(scale.colour_bar())
    members = sorted({stretch.member for stretch in view.stretches})
    return figure(
        f"population/{view.name}/lineage",
        f"Lineage, coloured by {knob}",
        traces,
        yaxis={
            "tickvals": members,
            "ticktext": [f"m{member}" for member in members],
            "autorange": "reversed",
            "title": {"text": "member"},
        },
        height=max(220, 60 + 34 * len(members)),
    )


def schedule_figure(view: PopulationView, knob: str) -> go.Figure:
    """Each member's `knob` against steps along its lineage: the schedule it follows."""
    traces = []
    for member, stretch in sorted(view.current.items()):
        chain = view.chain(member)
        values = [s.run.knobs.get(knob) for s in chain]
        traces.append(
            {
                "type": "scatter",
                "x": [s.start for s in chain] + [stretch.end],
                "y": [*values, values[-1]],
                "mode": "lines",
                "line": {"shape": "hv", "color": run_colour(member)},
                "name": f"m{member}",
                "hovertemplate": f"m{member}: {knob} %{{y:{HOVER_FORMAT}}} from step %{{x:,}}"
                "<extra></extra>",
            }
        )
    scale = _Scale(view, knob)
    yaxis: dict[str, Any] = {"title": {"text": knob}, "tickformat": TICK_FORMAT}
    if scale.log:
        yaxis |= {"type": "log", **log_ticks(scale.high - scale.low, scale.low)}
    return figure(
        f"population/{view.name}/schedule", f"{knob} along each lineage", traces, yaxis=yaxis
    )


def best_figure(view: PopulationView) -> go.Figure:
    """The population's best objective at each step a member validated."""
    best = view.best_over_time()
    traces = []
    if best:
        traces.append(
            {
                "type": "scatter",
                "x": [step for step, _ in best],
                "y": [value for _, value in best],
                "mode": "lines+markers",
                "line": {"color": run_colour(0)},
                "name": f"best {view.metric}",
                "hovertemplate": f"step %{{x:,}}: best {view.metric} %{{y:{HOVER_FORMAT}}}"
                "<extra></extra>",
            }
        )
    return figure(
        f"population/{view.name}/best",
        f"The population's best {view.metric}",
        traces,
        yaxis={"title": {"text": view.metric}, "tickformat": TICK_FORMAT},
        empty="no member has validated yet",
    )


def _value(stretch: Stretch) -> str:
    return "–" if stretch.last_value is None else number(stretch.last_value)


class _Scale:
    """A knob's colours: its searched range (log₁₀ of it, if searched on a log scale)
    onto `COLOURSCALE`."""

    def __init__(self, view: PopulationView, knob: str) -> None:
        dimension = next(d for d in view.plan["space"] if d["name"] == knob)
        self.knob = knob
        self.log = bool(dimension.get("log"))
        self.low, self.high = (self._position(dimension[end]) for end in ("low", "high"))

    def _position(self, value: float) -> float:
        return math.log10(value) if self.log else float(value)

    def colour(self, value: float | None) -> str:
        if value is None or not math.isfinite(value) or (self.log and value <= 0):
            return EXPLOIT_COLOUR
        span = self.high - self.low
        place = (self._position(value) - self.low) / span if span else 0.5
        return sample_colorscale(COLOURSCALE, [min(1.0, max(0.0, place))])[0]

    def ticks(self) -> list[float]:
        """Where the scale is labelled, as positions: round values of the knob (1, 2 and 5
        of each decade on a log scale; five even steps, rounded, on a linear one)."""
        if not self.log:
            return [float(value) for value in np.linspace(self.low, self.high, 5)]
        decades = range(math.floor(self.low), math.ceil(self.high) + 1)
        values = [m * 10.0**d for d in decades for m in (1, 2, 5)]
        inside = [
            math.log10(v) for v in values if self.low - 1e-9 <= math.log10(v) <= self.high + 1e-9
        ]
        return inside if len(inside) >= 2 else [self.low, self.high]

    def colour_bar(self) -> dict[str, Any]:
        """An invisible trace that draws the scale, labelled in the knob's values."""
        ticks = self.ticks()
        return {
            "type": "scatter",
            "x": [None],
            "y": [None],
            "mode": "markers",
            "showlegend": False,
            "hoverinfo": "skip",
            "marker": {
                "colorscale": COLOURSCALE,
                "cmin": self.low,
                "cmax": self.high,
                "color": [self.low],
                "showscale": True,
                "colorbar": {
                    "title": {"text": self.knob, "side": "right"},
                    "tickvals": ticks,
                    "ticktext": [number(10**t if self.log else t) for t in ticks],
                    "thickness": 12,
                },
            },
        }
