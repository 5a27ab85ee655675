"""The playground's loss surfaces: classic two-variable test functions, each with its minima,
the rectangle a chart shows (`view`), the box a trajectory must stay in (`bounds`) and a
default start.

Each loss is a polynomial in x and y, written once and evaluated alike on NumPy arrays (a
chart's contours, in float64) and on TensorFlow tensors (the trajectory, whose gradient
TensorFlow takes): nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.knobs import InvalidInput

Point = tuple[float, float]
#: f(x, y): NumPy arrays in, an array out; or TensorFlow tensors in, a tensor out.
Loss = Callable[[Any, Any], Any]

#: How far `bounds` reaches past the view, on each side, in widths (and heights) of the
#: view: a path that leaves the view may come back, one that goes three times as far
#: has diverged.
BOUNDS_MARGIN = 1.0


@dataclass(frozen=True)
class Box:
    """The rectangle [x_low, x_high] × [y_low, y_high]."""

    x_low: float
    x_high: float
    y_low: float
    y_high: float

    def contains(self, x: float, y: float) -> bool:
        """Whether (x, y) lies in the box, edges included; never for NaN."""
        return self.x_low <= x <= self.x_high and self.y_low <= y <= self.y_high

    def grown(self, margin: float) -> Box:
        """The box with each side moved out by `margin` times its width (or height)."""
        dx, dy = margin * (self.x_high - self.x_low), margin * (self.y_high - self.y_low)
        return Box(self.x_low - dx, self.x_high + dx, self.y_low - dy, self.y_high + dy)

    def text(self) -> str:
        """`x ∈ [-2, 2], y ∈ [-1, 3]`."""
        return f"x ∈ [{self.x_low:g}, {self.x_high:g}], y ∈ [{self.y_low:g}, {self.y_high:g}]"


@dataclass(frozen=True)
class Surface:
    """A loss surface f(x, y).

    Attributes:
        name: How the CLI and the page name it.
        formula: f in Unicode math.
        loss: f itself (see `Loss`).
        minima: Its global minima (f = 0 at each); none for the saddle, unbounded below.
        view: The rectangle a chart shows: the minima and the default start, with room.
        start: The default start.
        saddles: Its saddle points, to mark.
        lesson: What it shows of an optimizer, in a sentence.
    """

    name: str
    formula: str
    loss: Loss
    minima: tuple[Point, ...]
    view: Box
    start: Point
    saddles: tuple[Point, ...] = ()
    lesson: str = ""

    @property
    def bounds(self) -> Box:
        """The box a trajectory must stay in: leaving it is diverging (`BOUNDS_MARGIN`)."""
        return self.view.grown(BOUNDS_MARGIN)

    def grid(self, size: int = 101) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """f over the view, for a contour chart: xs and ys (`size` each, evenly spaced,
        edges included) and the losses, float64, shape (size, size), row i at ys[i]."""
        xs = np.linspace(self.view.x_low, self.view.x_high, size)
        ys = np.linspace(self.view.y_low, self.view.y_high, size)
        x, y = np.meshgrid(xs, ys)
        return xs, ys, np.asarray(self.loss(x, y), dtype=np.float64)


def _rosenbrock(x: Any, y: Any) -> Any:
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def _beale(x: Any, y: Any) -> Any:
    return (1.5 - x + x * y) ** 2 + (2.25 - x + x * y * y) ** 2 + (2.625 - x + x * y * y * y) ** 2


def _himmelblau(x: Any, y: Any) -> Any:
    return (x * x + y - 11) ** 2 + (x + y * y - 7) ** 2


def _saddle(x: Any, y: Any) -> Any:
    return x * x - y * y


def _ill_conditioned(x: Any, y: Any) -> Any:
    return 0.5 * (x * x + 100 * y * y)


#: Every surface, by name, in the order a menu lists them.
SURFACES: dict[str, Surface] = {
    surface.name: surface
    for surface in (
        Surface(
            "rosenbrock",
            "(1 − x)² + 100·(y − x²)²",
            _rosenbrock,
            minima=((1.0, 1.0),),
            view=Box(-2.0, 2.0, -1.0, 3.0),
            start=(-1.2, 1.0),  # Rosenbrock's own (1960)
            lesson="A curved, flat-bottomed valley: easy to reach, slow to follow.",
        ),
        Surface(
            "beale",
            "(1.5 − x + xy)² + (2.25 − x + xy²)² + (2.625 − x + xy³)²",
            _beale,
            minima=((3.0, 0.5),),
            view=Box(-4.5, 4.5, -4.5, 4.5),
            start=(1.0, 1.5),
            lesson="Plateaus beside cliffs: gradients from tiny to huge, where per-parameter "
            "steps (Adam) help.",
        ),
        Surface(
            "himmelblau",
            "(x² + y − 11)² + (x + y² − 7)²",
            _himmelblau,
            minima=(
                (3.0, 2.0),
                (-2.805118, 3.131312),
                (-3.779310, -3.283186),
                (3.584428, -1.848126),
            ),
            view=Box(-5.0, 5.0, -5.0, 5.0),
            start=(0.0, 0.0),
            lesson="Four equal minima: which one a path ends in depends on the optimizer "
            "and the start.",
        ),
        Surface(
            "saddle",
            "x² − y²",
            _saddle,
            minima=(),
            view=Box(-2.0, 2.0, -2.0, 2.0),
            start=(-1.5, 0.001),  # almost on the ridge that leads into the saddle
            saddles=((0.0, 0.0),),
            lesson="Unbounded below: every path leaves; the question is how soon it escapes "
            "the saddle.",
        ),
        Surface(
            "ill_conditioned",
            "½·(x² + 100·y²)",
            _ill_conditioned,
            minima=((0.0, 0.0),),
            view=Box(-2.0, 2.0, -1.0, 1.0),
            start=(-1.8, 0.6),
            lesson="Curvatures 1 and 100 (condition number 100): gradient descent diverges "
            "above η = 2/100 and crawls along x below it; momentum helps.",
        ),
    )
}


def get_surface(name: str) -> Surface:
    """The surface named `name`; raises `InvalidInput` naming `surface` if none."""
    if not isinstance(name, str) or name not in SURFACES:
        known = ", ".join(SURFACES)
        raise InvalidInput({"surface": f"unknown surface {name!r} (known: {known})"})
    return SURFACES[name]
