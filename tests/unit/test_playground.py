"""The playground (issue 54): each trajectory is the lab's own optimizer class stepped on a
2-element variable, equal to the same class stepped by hand and to the float64 NumPy
reference, and it shows the closed forms a teacher draws on the board: gradient descent's
divergence above η = 2/λmax, Polyak's heavy-ball β, the projection's constrained minimum,
clipping's cap on a step."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy.optimize import minimize

from core import playground
from core.knobs import InvalidInput
from core.optimizers.optimizer_catalog import get_spec
from tests.imports import heavy_modules_after
from tests.optimizer_reference import Reference

SURFACES = playground.SURFACES
#: Each built-in optimizer with knobs that make its own stage act on the surface.
CASES = {
    "sgd": {"learning_rate": 1e-2},
    "momentum": {"learning_rate": 5e-3, "momentum": 0.8},
    "nesterov": {"learning_rate": 5e-3, "nesterov": True},
    "adam": {"learning_rate": 0.05},
    "adamw": {"learning_rate": 0.05, "weight_decay": 0.5},
    "clipped_adam": {"learning_rate": 0.05, "clip_norm": 5.0},
    "projected_gd": {"learning_rate": 1e-2, "radius": 2.0},
}
OPTIMIZER = {"nesterov": "momentum"}
ALGORITHM = {"adamw": "adam", "clipped_adam": "adam", "projected_gd": "sgd", "nesterov": "momentum"}
START = (-1.0, -1.0)
# Steps of the paths compared: both comparisons share one compiled loop per optimizer.
STEPS = 60


def by_hand(surface: str, name: str, knobs: dict, start: tuple, steps: int) -> np.ndarray:
    """The points of a plain eager loop of `optimizer.apply` on a `keras.Variable`."""
    loss = SURFACES[surface].loss
    optimizer = get_spec(name).build(**knobs)
    point = keras.Variable(np.array(start, np.float32))
    points = [point.numpy()]
    for _ in range(steps):
        with tf.GradientTape() as tape:
            value = loss(point[0], point[1])
        optimizer.apply([tape.gradient(value, point)], [point])
        points.append(point.numpy())
    return np.array(points)


def himmelblau_gradient(p: np.ndarray) -> np.ndarray:
    """∇f of (x² + y − 11)² + (x + y² − 7)², written out."""
    x, y = p
    a, b = x * x + y - 11, x + y * y - 7
    return np.array([4 * x * a + 2 * b, 2 * a + 4 * y * b])


@pytest.mark.parametrize("case", list(CASES))
def test_the_path_is_the_class_stepped_by_hand(case: str) -> None:
    name, knobs = OPTIMIZER.get(case, case), CASES[case]
    # A second path with another learning rate from another start, on the same compiled
    # loop: each starts afresh from the knobs it is given.
    for rate, start in ((knobs["learning_rate"], START), (knobs["learning_rate"] / 2, (1.0, 1.0))):
        given = knobs | {"learning_rate": rate}
        path = playground.trajectory("himmelblau", name, given, start, steps=STEPS)
        assert len(path.points) == STEPS + 1 and not path.diverged
        # XLA fuses the step's arithmetic, so the two agree to float32 rounding, not bits.
        np.testing.assert_allclose(
            path.points, by_hand("himmelblau", name, given, start, STEPS), rtol=1e-6, atol=1e-6
        )


@pytest.mark.parametrize("case", list(CASES))
def test_the_path_matches_the_float64_reference(case: str) -> None:
    name, knobs = OPTIMIZER.get(case, case), CASES[case]
    path = playground.trajectory("himmelblau", name, knobs, START, steps=STEPS)
    reference = Reference(
        ALGORITHM.get(case, case), get_spec(name).validate(knobs), [np.array(START)], ["xy"]
    )
    expected = [reference.params[0]]
    for _ in range(STEPS):
        reference.step([himmelblau_gradient(reference.params[0])])
        expected.append(reference.params[0])
    np.testing.assert_allclose(path.points, np.array(expected), rtol=0, atol=1e-4)
    # The knob each case turns on acts in it: the reference would not notice otherwise.
    assert path.clipped.any() == (case == "clipped_adam")
    assert path.projected.any() == (case == "projected_gd")


def test_gradient_descent_diverges_exactly_above_two_over_the_largest_curvature() -> None:
    # ½(x² + 100y²): y is multiplied by 1 − 100η each step, whose size passes 1 at η = 2/100.
    edge, steps = 2 / 100, 5000
    below, above = (
        playground.trajectory("ill_conditioned", "sgd", {"learning_rate": rate}, steps=steps)
        for rate in (edge * 0.999, edge * 1.001)
    )
    for path in (below, above):
        ys = path.points[:, 1]
        np.testing.assert_allclose(ys[1:40] / ys[:39], 1 - 100 * path.knobs["learning_rate"], 1e-5)
    assert not below.diverged and len(below.points) == steps + 1
    assert abs(below.points[-1, 1]) < abs(below.points[0, 1]) * 0.999 ** (steps - 1)
    assert above.diverged and above.diverged_at == len(above.points) - 1 < steps
    assert abs(above.points[-1, 1]) > SURFACES["ill_conditioned"].bounds.y_high


def steps_to(path: playground.Trajectory, fraction: float) -> float:
    """The first step whose loss is at most `fraction` of the start's (inf: never)."""
    reached = np.flatnonzero(path.losses <= fraction * path.losses[0])
    return float(reached[0]) if len(reached) and not path.diverged else math.inf


def test_heavy_balls_fastest_beta_is_polyaks() -> None:
    # Curvatures μ = 1 and L = 100: Polyak's η* = 4/(√L + √μ)² and β* = ((√κ − 1)/(√κ + 1))².
    kappa = 100
    eta = 4 / (math.sqrt(100) + 1) ** 2
    polyak = ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2
    grid = (0.3, 0.5, polyak, 0.8, 0.9)
    took = {
        beta: steps_to(
            playground.trajectory(
                "ill_conditioned", "momentum", {"learning_rate": eta, "momentum": beta}, steps=600
            ),
            1e-12,
        )
        for beta in grid
    }
    assert min(took, key=took.__getitem__) == polyak, took
    assert math.isfinite(took[0.9])  # the others converge too, only slower
    # At η*, η·L = 2(1 + β) at β = η*·L/2 − 1 ≈ 0.653: below it the iteration diverges.
    edge = eta * 100 / 2 - 1
    for beta, diverges in ((edge - 0.01, True), (edge + 0.01, False)):
        path = playground.trajectory(
            "ill_conditioned", "momentum", {"learning_rate": eta, "momentum": beta}, steps=600
        )
        assert path.diverged == diverges, beta


@pytest.mark.parametrize(("surface", "radius"), [("himmelblau", 2.0), ("rosenbrock", 0.5)])
def test_projected_descent_reaches_the_minimum_over_the_ball(surface: str, radius: float) -> None:
    loss = SURFACES[surface].loss
    path = playground.trajectory(
        surface, "projected_gd", {"learning_rate": 1e-3, "radius": radius}, steps=4000
    )
    solved = minimize(
        lambda p: loss(p[0], p[1]),
        np.zeros(2),
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda p: radius**2 - p @ p}],
        tol=1e-12,
    )
    assert solved.success
    np.testing.assert_allclose(path.points[-1], solved.x, atol=1e-5)
    norms = np.linalg.norm(path.points[1:], axis=1)
    assert np.all(norms <= radius * (1 + 1e-6))
    # A step marked projected ends on the sphere; the minimum is on it, so the last are.
    np.testing.assert_allclose(norms[path.projected], radius, rtol=1e-6)
    assert path.projected[-100:].all()


def test_clipping_caps_each_step_at_the_rate_times_the_clip_norm() -> None:
    rate, clip = 1e-2, 10.0
    path = playground.trajectory(
        "himmelblau", "sgd", {"learning_rate": rate, "clip_norm": clip}, (-4.5, 4.5), 300
    )
    lengths = np.linalg.norm(np.diff(path.points, axis=0), axis=1)
    assert path.clipped.any() and not path.clipped.all()  # both kinds of step occur
    np.testing.assert_allclose(lengths[path.clipped], rate * clip, rtol=1e-5)
    assert np.all(lengths[~path.clipped] < rate * clip)


def test_a_path_that_diverges_stops_at_the_first_point_out() -> None:
    out = playground.trajectory("rosenbrock", "sgd", {"learning_rate": 1.0}, steps=100)
    assert out.diverged and out.diverged_at == 1 and len(out.points) == 2
    assert not SURFACES["rosenbrock"].bounds.contains(*out.points[-1])
    assert out.divergence.startswith("diverged at step 1: the path left the bounds")
    # Beale's y³ overflows float32 in one step from its bounds' corner: nothing to draw.
    lost = playground.trajectory("beale", "sgd", {"learning_rate": 100.0}, (13.0, 13.0), 10)
    assert lost.diverged and lost.diverged_at == 1 and len(lost.points) == 1
    assert len(lost.losses) == 1 and len(lost.clipped) == len(lost.projected) == 0
    assert "stopped being finite" in lost.divergence
    kept = playground.trajectory("rosenbrock", "sgd", {"learning_rate": 1e-3}, steps=100)
    assert not kept.diverged and kept.diverged_at is None and kept.divergence is None


def test_the_same_arguments_give_the_same_path_bit_for_bit() -> None:
    args = ("beale", "adam", {"learning_rate": "0.1", "beta_1": 0.7}, (1.0, 1.5), 300)
    first = playground.trajectory(*args)
    playground.trajectory("beale", "adam", {"learning_rate": 0.01, "beta_1": 0.7}, (2, 2), 290)
    again = playground.trajectory(*args)
    for name in ("points", "losses", "projected", "clipped"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    assert first.knobs["learning_rate"] == 0.1  # text read as the knob's type
    with pytest.raises(ValueError, match="read-only"):
        first.points[0, 0] = 1.0


def test_bad_input_is_named_field_by_field_before_anything_runs() -> None:
    with pytest.raises(InvalidInput) as raised:
        playground.trajectory("moon", "adamm", {"learning_rate": 1.0}, start=(0.0, 0.0), steps=0)
    assert set(raised.value.errors) == {"surface", "optimizer", "steps"}
    with pytest.raises(InvalidInput) as raised:
        playground.trajectory(
            "saddle",
            "sgd",
            {"learning_rate": "fast", "radius": -1, "telemetry": True},
            start=(100.0, 0.0),
            steps=True,
        )
    assert set(raised.value.errors) == {"telemetry", "start", "steps"}
    with pytest.raises(InvalidInput) as raised:
        playground.trajectory("saddle", "sgd", {"learning_rate": "fast", "radius": -1})
    assert set(raised.value.errors) == {"learning_rate", "radius"}
    for start in ((1.0,), "1,2", (math.nan, 0.0), (True, 0.0)):
        with pytest.raises(InvalidInput, match="start"):
            playground.trajectory("saddle", "sgd", start=start)


@pytest.mark.parametrize("name", list(SURFACES))
def test_each_surface_has_its_minima_inside_its_view(name: str) -> None:
    surface = SURFACES[name]
    for x, y in surface.minima + surface.saddles:
        assert surface.view.contains(x, y)
        step = 1e-6  # a central difference: the gradient vanishes there
        dx = (surface.loss(x + step, y) - surface.loss(x - step, y)) / (2 * step)
        dy = (surface.loss(x, y + step) - surface.loss(x, y - step)) / (2 * step)
        assert abs(dx) < 1e-3 and abs(dy) < 1e-3
    for x, y in surface.minima:
        assert surface.loss(x, y) < 1e-9
        assert surface.loss(x, y) <= surface.grid(201)[2].min() + 1e-9
    assert surface.view.contains(*surface.start)
    xs, ys, losses = surface.grid(51)
    assert losses.shape == (51, 51) and losses[3, 7] == surface.loss(xs[7], ys[3])


def test_the_surfaces_and_the_checks_import_no_tensorflow() -> None:
    code = (
        "from core import playground\n"
        "playground.SURFACES['beale'].grid()\n"
        "from core.playground.trajectory import checked\n"
        "checked('beale', 'adam', {'learning_rate': '0.1'}, (1, 1), 10)"
    )
    assert heavy_modules_after(code) == []
