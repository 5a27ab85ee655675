"""`race_figure`: the Playground's chart, every trajectory of a race over its surface's
contour, the loss against the step beside it, with play/pause and a step slider.

What the knobs do is drawn as geometry: the ball of `radius` as a circle in the lane's
colour with each projected step ringed; each clipped step marked with a diamond; weight
decay (or coupled L2) as an arrow from the start toward the origin, where it pulls; a
diverging path leaving the view (the axes stay on the surface's view).

Playing needs no rerun of the page: the figure names the steps of its frames
(`frame_steps`, the slider's steps) and the chart that draws it (`ui.playground_chart`)
makes each frame by cutting every trace marked `ANIMATED` at that step, read from the
first column of the trace's `customdata`. The figure itself holds each path whole.

Its inputs are the playground's `Surface` and `Trajectory` (`core.playground`), read as
they are: charts and the playground are sibling layers, neither imports the other.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import plotly.graph_objects as go
from PIL import Image

from core.charts.layout import log_ticks
from core.charts.style import HOVER_FORMAT, PALETTE, STEP_HOVER_FORMAT

if TYPE_CHECKING:
    from core.playground import Surface, Trajectory

#: Added to a loss before its log: the contour of log₁₀(f + ε) (f ≥ 0) keeps its levels
#: apart from the valley floor up to the cliffs, where levels of f crowd the minimum.
EPSILON: Final = 1e-3
LEVELS: Final = 24  # the contour's bands
RASTER: Final = 400  # the contour image's pixels a side
CLICKABLE: Final = 61  # the points a side of the grid a click picks the start from
FRAMES: Final = 60  # the animation's frames, at most (each a step of the slider)
FRAME_MS: Final = 40  # how long a frame shows while playing
#: The `meta` of a trace the animation cuts at each frame's step.
ANIMATED: Final = "animated"
#: Labels of the figure's buttons (`ui.playground_chart` plays and pauses on them).
PLAY, PAUSE = "▶ Play", "❚❚ Pause"
DIVIDE: Final = 0.68  # the contour takes the figure's width up to here, the loss beside
MARK_COLOUR: Final = "#f0f0f0"
TEXT: Final = "#e6eaf1"  # the slider's current step, in the page's type colour
#: The lowest loss the loss axis reaches down to, in decades below the highest: a path
#: that reaches a minimum ends in float32's noise, 10⁻¹² and below.
DECADES: Final = 14
# Dark, so that the racers' colours stand out; the minima darkest.
CONTOUR_COLOURS: Final = [[0.0, "#07111f"], [0.6, "#233a57"], [1.0, "#5b7699"]]


@dataclass(frozen=True)
class Lane:
    """One racer: a trajectory, how the legend names it, and its colour."""

    label: str
    path: Trajectory
    colour: str


def lanes(labelled: Sequence[tuple[str, Trajectory]]) -> list[Lane]:
    """The racers in palette colours, in order."""
    return [
        Lane(label, path, PALETTE[i % len(PALETTE)]) for i, (label, path) in enumerate(labelled)
    ]


def frame_steps(steps: int, count: int = FRAMES) -> list[int]:
    """The steps the animation shows a frame at: 0, the last, and evenly between, at most
    `count` + 1 of them."""
    return sorted({round(k) for k in np.linspace(0, steps, min(steps, count) + 1)})


def frame_at(steps: int, step: int | None) -> int:
    """The index in `frame_steps(steps)` of the last frame at or before `step` (None: the
    last frame)."""
    shown = frame_steps(steps)
    if step is None:
        return len(shown) - 1
    return max(i for i, k in enumerate(shown) if k <= max(step, 0))


def levelled(f: np.ndarray) -> np.ndarray:
    """What the contour's levels are evenly spaced in: log₁₀(f + ε) for a surface that is
    never negative; for one that is (the saddle), the signed log₁₀(1 + |f|), log-spaced
    either side of 0."""
    if f.min() >= 0:
        return np.log10(f + EPSILON)
    return np.sign(f) * np.log10(1 + np.abs(f))


def contour_image(surface: Surface, size: int = RASTER) -> str:
    """The surface's filled contour over its view as a PNG (a `data:` URI): `LEVELS`
    bands of `levelled` loss, dark to light, edged in lighter lines.

    An image under the plot, not a contour trace: Plotly's animation, which redraws only
    the traces it moves, took a contour (or heatmap) trace off the plot at the first
    frame, and redrawing it each frame took 80 ms of a 2-core machine's."""
    z = levelled(surface.grid(size)[2])[::-1]  # the image's first row is the view's top
    low, high = float(z.min()), float(z.max())
    band = np.clip(((z - low) / (high - low or 1.0) * LEVELS).astype(int), 0, LEVELS - 1)
    stops = np.array([stop for stop, _ in CONTOUR_COLOURS])
    rgb = np.array([[int(c[k : k + 2], 16) for k in (1, 3, 5)] for _, c in CONTOUR_COLOURS])
    middle = (np.arange(LEVELS) + 0.5) / LEVELS
    palette = np.stack([np.interp(middle, stops, rgb[:, k]) for k in range(3)], axis=1)
    pixels = palette[band]
    # A line where the band steps by one; where it steps by more (a steep wall, a narrow
    # valley) the lines would merge into a pale smear, and the colours say it already.
    edge = np.zeros(band.shape, bool)
    edge[:, 1:] |= np.abs(band[:, 1:] - band[:, :-1]) == 1
    edge[1:, :] |= np.abs(band[1:, :] - band[:-1, :]) == 1
    pixels[edge] = pixels[edge] * 0.7 + 255 * 0.3
    encoded = io.BytesIO()
    Image.fromarray(pixels.round().astype(np.uint8), "RGB").save(encoded, "PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(encoded.getvalue()).decode()


def race_figure(
    surface: Surface,
    racers: Sequence[Lane],
    *,
    step: int | None = None,
    height: int = 460,
) -> go.Figure:
    """The race over `surface`: its contour, minima and saddles; each racer's path from
    the start, with its projected and clipped steps; its ball and its decay's pull;
    the losses beside; the slider at `step` (None: the last)."""
    steps = max((len(lane.path.points) - 1 for lane in racers), default=0)
    data: list[go.BaseTraceType] = [
        _clickable(surface),
        *_points("minimum", surface.minima, "star", 13),
        *_points("saddle point", surface.saddles, "x-thin-open", 11),
    ]
    if racers:
        data += _points("start", [tuple(racers[0].path.points[0])], "circle-open", 14)
    if any(_pulled(lane) or lane.path.knobs.get("radius") for lane in racers):
        data += _points("origin", [(0.0, 0.0)], "cross-thin-open", 10)
    log_loss = surface.grid(CLICKABLE)[2].min() >= 0
    for lane in racers:
        data += _lane_traces(lane, log_loss)
    view = surface.view
    layout: dict[str, Any] = {
        "title": {"text": f"{surface.name}: {surface.formula}", "font": {"size": 14}},
        "uirevision": surface.name,  # a zoom survives a knob's change, not a new surface
        "height": height,
        "margin": {"l": 40, "r": 15, "t": 60, "b": 70},
        "hovermode": "closest",
        # Across the top, under the title: at the loss's side it pushed the margin out
        # by its own width, and the plots shrank by as much.
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
        "xaxis": {
            "domain": [0, DIVIDE],
            "range": [view.x_low, view.x_high],
            "constrain": "domain",
            "showgrid": False,
            "zeroline": False,
        },
        # Equal units on both axes: the ball is a circle, a step's length and direction
        # are what they look.
        "yaxis": {
            "range": [view.y_low, view.y_high],
            "scaleanchor": "x",
            "scaleratio": 1,
            "constrain": "domain",
            "showgrid": False,
            "zeroline": False,
        },
        "xaxis2": {
            "domain": [DIVIDE + 0.12, 1],
            "anchor": "y2",
            "title": {"text": "step"},
            "range": [0, max(steps, 1)],
            "tickformat": STEP_HOVER_FORMAT,
        },
        "yaxis2": {"anchor": "x2", "title": {"text": "loss"}, **_loss_axis(racers, log_loss)},
        "images": [
            {
                "source": contour_image(surface),
                "xref": "x",
                "yref": "y",
                "x": view.x_low,
                "y": view.y_high,
                "sizex": view.x_high - view.x_low,
                "sizey": view.y_high - view.y_low,
                "sizing": "stretch",
                "layer": "below",
            }
        ],
        "shapes": [_ball(lane) for lane in racers if lane.path.knobs.get("radius")],
        "annotations": [_pull(lane) for lane in racers if _pulled(lane)],
    }
    if racers:
        layout |= _animation(steps, step)
    return go.Figure(data=data, layout=layout)


def _loss_axis(racers: Sequence[Lane], log: bool) -> dict[str, Any]:
    """The loss axis over every racer's whole loss (fixed, so that it holds still while
    the race plays): log over its decades (at most `DECADES`) where the loss is never
    negative, else linear."""
    losses = np.concatenate([lane.path.losses for lane in racers] or [np.zeros(1)])
    losses = losses[np.isfinite(losses) & ((losses > 0) | (not log))]
    if not len(losses):
        return {"type": "log" if log else "linear"}
    low, high = float(losses.min()), float(losses.max())
    if not log:
        pad = 0.05 * (high - low or 1.0)
        return {"type": "linear", "range": [low - pad, high + pad]}
    high = np.log10(high)
    low = max(np.log10(low), high - DECADES)
    pad = 0.05 * (high - low or 1.0)
    return {"type": "log", "range": [low - pad, high + pad], **log_ticks(high - low, low)}


def _clickable(surface: Surface) -> go.Scatter:
    """Unseen points over the view, `CLICKABLE` a side, each hovered with its loss: a
    click anywhere on the plot is a click on the nearest (Plotly reports clicks on
    points only), which the chart makes the start."""
    xs, ys, f = surface.grid(CLICKABLE)
    x, y = np.meshgrid(xs, ys)
    return go.Scatter(
        x=x.ravel(),
        y=y.ravel(),
        customdata=f.ravel(),
        mode="markers",
        marker={"size": 1, "opacity": 0},
        hovertemplate=f"(%{{x:.2f}}, %{{y:.2f}}) loss %{{customdata:{HOVER_FORMAT}}}"
        "<extra>click: start here</extra>",
        name="surface",
        showlegend=False,
    )


def _points(name: str, points: Sequence[tuple[float, float]], symbol: str, size: int) -> list:
    """Markers at `points` (none for none), named on hover and in the legend."""
    if not points:
        return []
    xs, ys = zip(*points, strict=True)
    return [
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            name=name,
            marker={"symbol": symbol, "size": size, "color": MARK_COLOUR, "line": {"width": 2}},
            hovertemplate=f"{name} (%{{x:.3f}}, %{{y:.3f}})<extra></extra>",
            showlegend=False,
        )
    ]


def _lane_traces(lane: Lane, log_loss: bool) -> list[go.Scatter]:
    """A racer's path, its projected and clipped steps (each ringed at the point it led
    to), and its loss on the second axes: each cut by the animation."""
    path = lane.path
    steps = np.arange(len(path.points))
    custom = np.column_stack([steps, path.losses])
    hover = (
        f"{lane.label} · step %{{customdata[0]:{STEP_HOVER_FORMAT}}}<br>(%{{x:.3f}}, %{{y:.3f}})"
        f"<br>loss %{{customdata[1]:{HOVER_FORMAT}}}<extra></extra>"
    )
    common = {"legendgroup": lane.label, "meta": ANIMATED, "hovertemplate": hover}
    traces = [
        go.Scatter(
            x=path.points[:, 0],
            y=path.points[:, 1],
            customdata=custom,
            mode="lines+markers",
            name=lane.label,
            line={"color": lane.colour, "width": 2},
            marker={"size": 3, "color": lane.colour},
            **common,
        )
    ]
    for flags, symbol, size, what in (
        (path.projected, "circle-open", 10, "projected onto the ball"),
        (path.clipped, "diamond-open", 6, "gradient clipped"),
    ):
        reached = np.flatnonzero(flags) + 1  # step k's flag marks the point it led to
        if len(reached):
            traces.append(
                go.Scatter(
                    x=path.points[reached, 0],
                    y=path.points[reached, 1],
                    customdata=custom[reached],
                    mode="markers",
                    name=f"{lane.label}: {what}",
                    marker={"symbol": symbol, "size": size, "color": lane.colour},
                    showlegend=False,
                    **common,
                )
            )
    losses = path.losses if not log_loss else np.where(path.losses > 0, path.losses, np.nan)
    traces.append(
        go.Scatter(
            x=steps,
            y=losses,
            customdata=custom,
            xaxis="x2",
            yaxis="y2",
            mode="lines",
            name=f"{lane.label}: loss",
            line={"color": lane.colour, "width": 2},
            showlegend=False,
            **common,
        )
    )
    return traces


def _pulled(lane: Lane) -> bool:
    """Whether weight decay or coupled L2 pulls the racer toward the origin."""
    return bool(lane.path.knobs.get("weight_decay") or lane.path.knobs.get("l2"))


def _ball(lane: Lane) -> dict[str, Any]:
    """The ball ‖θ‖ ≤ radius, a dashed circle in the racer's colour."""
    r = float(lane.path.knobs["radius"])
    return {
        "type": "circle",
        "xref": "x",
        "yref": "y",
        "x0": -r,
        "x1": r,
        "y0": -r,
        "y1": r,
        "line": {"color": lane.colour, "dash": "dash", "width": 1.5},
        "layer": "above",
    }


def _pull(lane: Lane) -> dict[str, Any]:
    """An arrow from the start a quarter of the way toward the origin: decay's pull."""
    x, y = lane.path.points[0]
    return {
        "x": 0.75 * x,
        "y": 0.75 * y,
        "ax": x,
        "ay": y,
        "xref": "x",
        "yref": "y",
        "axref": "x",
        "ayref": "y",
        "text": "",
        "showarrow": True,
        "arrowhead": 2,
        "arrowwidth": 2,
        "arrowcolor": lane.colour,
        "hovertext": f"{lane.label}: weight decay pulls every step toward the origin",
    }


def _animation(steps: int, step: int | None) -> dict[str, Any]:
    """Play and pause (`PLAY`, `PAUSE`: `ui.playground_chart` acts on them), and a step
    slider over `frame_steps(steps)`, at `step`."""
    still = {"mode": "immediate", "frame": {"duration": 0, "redraw": False}, "transition": {}}
    return {
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "showactive": False,
                "x": 0,
                "xanchor": "left",
                "y": -0.12,
                "yanchor": "top",
                "pad": {"t": 10, "r": 10},
                "buttons": [
                    {"label": PLAY, "method": "skip", "args": [None]},
                    {"label": PAUSE, "method": "skip", "args": [None]},
                ],
            }
        ],
        "sliders": [
            {
                "active": frame_at(steps, step),
                "x": 0.36,
                "len": 0.64,
                "y": -0.12,
                "yanchor": "top",
                "pad": {"t": 0},
                "currentvalue": {
                    "prefix": "step ",
                    "font": {"size": 12, "color": TEXT},
                },
                # The steps' own labels crowd under the slider: the current one says it.
                "font": {"color": "rgba(0, 0, 0, 0)"},
                "ticklen": 0,
                "minorticklen": 0,
                "steps": [
                    {"label": f"{k:,}", "method": "animate", "args": [[str(k)], still]}
                    for k in frame_steps(steps)
                ],
            }
        ],
    }
