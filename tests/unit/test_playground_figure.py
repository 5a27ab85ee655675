"""The Playground's chart (issue 54, item 1): each racer's path over its surface's contour,
its knobs drawn as geometry (the ball, projected and clipped steps, decay's pull), the
loss beside on a log axis, and the frames the chart plays, from paths made here."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from core.charts.playground import (
    ANIMATED,
    FRAMES,
    LEVELS,
    contour_image,
    frame_at,
    frame_steps,
    lanes,
    race_figure,
)
from core.playground import SURFACES, Trajectory


def path(points: list[tuple[float, float]], **knobs: Any) -> Trajectory:
    """A path through `points` on Rosenbrock, with `knobs`; `projected` and `clipped`
    (lists of step indices) mark those steps."""
    projected, clipped = knobs.pop("projected", []), knobs.pop("clipped", [])
    xy = np.array(points, float)
    steps = len(points) - 1
    return Trajectory(
        surface="rosenbrock",
        optimizer="sgd",
        knobs={"learning_rate": 0.01, **knobs},
        points=xy,
        losses=np.asarray(SURFACES["rosenbrock"].loss(xy[:, 0], xy[:, 1]), float),
        projected=np.isin(np.arange(steps), projected),
        clipped=np.isin(np.arange(steps), clipped),
        diverged=False,
        diverged_at=None,
    )


LINE = [(-1.2, 1.0), (-0.8, 0.7), (-0.4, 0.3), (0.2, 0.1), (0.6, 0.4)]


def named(figure: Any, name: str) -> list[Any]:
    return [trace for trace in figure.data if trace.name == name]


def test_each_racer_is_a_path_from_the_start_in_its_colour_and_a_loss_beside() -> None:
    racers = lanes([("sgd", path(LINE)), ("adam", path(LINE[:3]))])
    figure = race_figure(SURFACES["rosenbrock"], racers)
    (sgd,) = named(figure, "sgd")
    (adam,) = named(figure, "adam")
    assert list(sgd.x) == [x for x, _ in LINE] and list(adam.y) == [y for _, y in LINE[:3]]
    assert sgd.line.color != adam.line.color
    (loss,) = named(figure, "sgd: loss")
    assert loss.xaxis == "x2" and list(loss.x) == [0, 1, 2, 3, 4]
    assert figure.layout.yaxis2.type == "log"  # Rosenbrock is never negative
    (start,) = named(figure, "start")
    assert (start.x[0], start.y[0]) == LINE[0]
    (minimum,) = named(figure, "minimum")
    assert (minimum.x[0], minimum.y[0]) == (1.0, 1.0)


def test_the_ball_the_projected_and_the_clipped_steps_and_the_pull_are_drawn() -> None:
    projected = path(LINE, radius=1.0, projected=[1, 2])
    clipped = path(LINE, clip_norm=2.0, clipped=[0])
    decayed = path(LINE, weight_decay=0.1)
    figure = race_figure(
        SURFACES["rosenbrock"],
        lanes([("projected", projected), ("clipped", clipped), ("decayed", decayed)]),
    )
    (ball,) = figure.layout.shapes
    assert (ball.type, ball.x0, ball.x1, ball.y0, ball.y1) == ("circle", -1.0, 1.0, -1.0, 1.0)
    (rings,) = named(figure, "projected: projected onto the ball")
    assert list(rings.x) == [LINE[2][0], LINE[3][0]]  # the points steps 1 and 2 led to
    (diamonds,) = named(figure, "clipped: gradient clipped")
    assert list(diamonds.x) == [LINE[1][0]]
    (arrow,) = figure.layout.annotations
    assert (arrow.ax, arrow.ay) == LINE[0] and abs(arrow.x) < abs(LINE[0][0])  # toward 0
    assert named(figure, "origin")


def test_nothing_is_drawn_of_a_knob_that_is_off() -> None:
    figure = race_figure(SURFACES["rosenbrock"], lanes([("plain", path(LINE))]))
    assert not figure.layout.shapes and not figure.layout.annotations
    assert not [trace for trace in figure.data if ":" in (trace.name or "")][:-1]


def test_the_saddle_s_loss_is_drawn_on_a_linear_axis() -> None:
    line = path([(-1.5, 0.001), (-1.0, 0.01), (-0.5, 0.5)])
    saddle = Trajectory(**{**line.__dict__, "surface": "saddle"})
    figure = race_figure(SURFACES["saddle"], lanes([("sgd", saddle)]))
    assert figure.layout.yaxis2.type == "linear"
    assert named(figure, "saddle point")


def test_every_path_and_loss_is_animated_by_its_steps_and_the_slider_names_the_frames() -> None:
    steps = 500
    points = [(-1.2 + k / steps, 1.0) for k in range(steps + 1)]
    figure = race_figure(SURFACES["rosenbrock"], lanes([("sgd", path(points))]), step=250)
    animated = [trace for trace in figure.data if trace.meta == ANIMATED]
    assert {trace.name for trace in animated} == {"sgd", "sgd: loss"}
    assert all(list(trace.customdata[:, 0]) == list(range(steps + 1)) for trace in animated)
    (slider,) = figure.layout.sliders
    names = [step.args[0][0] for step in slider.steps]
    assert names == [str(k) for k in frame_steps(steps)] and len(names) == FRAMES + 1
    assert names[slider.active] == "250"
    assert [button.label for button in figure.layout.updatemenus[0].buttons] == [
        "▶ Play",
        "❚❚ Pause",
    ]


@pytest.mark.parametrize(("steps", "step", "index"), [(10, None, 10), (500, 0, 0), (500, 9, 1)])
def test_a_step_shows_the_last_frame_at_or_before_it(steps: int, step: int | None, index: int):
    assert frame_steps(steps)[0] == 0 and frame_steps(steps)[-1] == steps
    assert frame_at(steps, step) == index


@pytest.mark.parametrize("name", list(SURFACES))
def test_the_contour_is_an_image_of_log_spaced_bands_the_minima_darkest(name: str) -> None:
    surface = SURFACES[name]
    uri = contour_image(surface, size=120)
    assert uri.startswith("data:image/png;base64,")
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
    assert image.shape == (120, 120, 3)
    assert 1 < len(np.unique(image.reshape(-1, 3), axis=0)) <= 2 * LEVELS  # bands, edges
    brightness = image.sum(axis=2)
    view = surface.view
    for x, y in surface.minima:  # each in the darkest tenth (a band's edge is lighter)
        column = round((x - view.x_low) / (view.x_high - view.x_low) * 119)
        row = round((view.y_high - y) / (view.y_high - view.y_low) * 119)
        around = brightness[max(row - 1, 0) : row + 2, max(column - 1, 0) : column + 2]
        assert around.min() <= np.percentile(brightness, 15), (x, y)
