"""`trajectory`: the path one of the lab's optimizers takes on a surface, as a pure function
of its inputs: (surface, optimizer, knob values, start, steps) → points, losses, each
step's flags and whether it diverged.

Its inputs are checked before anything is computed, by the lab's own validation (the
optimizer's `Knob`s), and a bad one raises `InvalidInput` naming the field; TensorFlow is
imported only once they are good. The compiled loops (`runner.Runner`) are kept, the
most recently used `KEPT` of them, so that a knob moved on the page costs only the steps:
see `runner` for which changes reuse a loop and which compile another.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from core.knobs import InvalidInput
from core.optimizers.optimizer_catalog import OptimizerSpec, get_spec
from core.playground.surfaces import SURFACES, Surface, get_surface
from core.training import tf_import

if TYPE_CHECKING:
    from core.playground.runner import Runner

#: The steps a trajectory takes unless told otherwise, and the most it may take.
DEFAULT_STEPS = 500
MAX_STEPS = 10_000
#: Compiled loops kept (see the module's docstring), each with its optimizer and variable:
#: a page's optimizers on each surface, and the values of a traced knob tried last.
KEPT = 64


@dataclass(frozen=True)
class Trajectory:
    """The path optimizer `optimizer` took on surface `surface`.

    Attributes:
        surface, optimizer: Their names.
        knobs: Every knob's value, as validated (defaults filled in).
        points: Shape (n + 1, 2), float64 holding float32 values: the start, then the
            point after each step taken. Stepping stops at the first point that
            diverges; that point is the last one kept when it and its loss are finite (a
            path leaving the bounds: a chart draws it leaving the view), and left out when
            not (there is nothing to draw).
        losses: Shape (n + 1,): the loss at each point.
        projected: Shape (n,): whether step k (from points[k] to points[k + 1]) was
            projected back onto the ball of `radius` (always false without one).
        clipped: Shape (n,): whether step k's gradient was clipped to `clip_norm`.
        diverged: Whether the path diverged: a coordinate or the loss stopped being finite,
            or the point left the surface's bounds (`Surface.bounds`).
        diverged_at: The step whose point diverged (counted from 1), or None.
    """

    surface: str
    optimizer: str
    knobs: Mapping[str, Any]
    points: np.ndarray
    losses: np.ndarray
    projected: np.ndarray
    clipped: np.ndarray
    diverged: bool
    diverged_at: int | None

    @property
    def divergence(self) -> str | None:
        """How it diverged, in words (None if it did not): `diverged at step 12: the
        path left the bounds x ∈ [-6, 6], y ∈ [-5, 7]`, or `...: the loss or a coordinate
        stopped being finite`."""
        if self.diverged_at is None:
            return None
        if len(self.points) > self.diverged_at:  # the point that diverged is kept: finite
            how = f"the path left the bounds {SURFACES[self.surface].bounds.text()}"
        else:
            how = "the loss or a coordinate stopped being finite"
        return f"diverged at step {self.diverged_at}: {how}"

    def to_json(self) -> dict[str, Any]:
        """The trajectory as JSON-ready values (what `optlab playground --json` prints),
        each number the shortest decimal that reads back as the float32 computed."""
        return {
            "surface": self.surface,
            "optimizer": self.optimizer,
            # Only a `rules` knob's value is a tuple (of `LayerRule`s).
            "knobs": {
                name: [rule.to_dict() for rule in value] if isinstance(value, tuple) else value
                for name, value in self.knobs.items()
            },
            "points": [[_shortest(x), _shortest(y)] for x, y in self.points],
            "losses": [_shortest(loss) for loss in self.losses],
            "projected": self.projected.tolist(),
            "clipped": self.clipped.tolist(),
            "diverged": self.diverged,
            "diverged_at": self.diverged_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trajectory:
        """The trajectory `to_json` gave `data` for (another process's: the page's worker,
        `core.playground.worker`); a `rules` knob keeps its rules as dicts."""
        return cls(
            surface=data["surface"],
            optimizer=data["optimizer"],
            knobs=dict(data["knobs"]),
            points=_frozen(np.asarray(data["points"], np.float64).reshape(-1, 2)),
            losses=_frozen(np.asarray(data["losses"], np.float64)),
            projected=_frozen(np.asarray(data["projected"], bool)),
            clipped=_frozen(np.asarray(data["clipped"], bool)),
            diverged=bool(data["diverged"]),
            diverged_at=data["diverged_at"],
        )


def trajectory(
    surface: str,
    optimizer: str,
    knobs: Mapping[str, Any] | None = None,
    start: Sequence[float] | None = None,
    steps: int = DEFAULT_STEPS,
) -> Trajectory:
    """The path of `optimizer` with `knobs` on `surface`, from `start`, of `steps` steps.

    A pure function of its arguments: the same arguments give the same path, bit for bit,
    on the same machine, whatever was computed before. The first call for an optimizer and
    surface compiles its loop (about half a second on 2 cores); later ones that change only
    live knobs, the start or the steps (up to the length compiled, see `runner.capacity`)
    take a millisecond or two.

    Args:
        surface: A name of `SURFACES`.
        optimizer: A name of the optimizer catalog (plugins included).
        knobs: Knob values by name, the rest at the optimizer's defaults; a value given
            as text is read as its knob's type (`Knob.from_text`), as a form's or a
            `--set KNOB=VALUE` flag's.
        start: (x, y) within the surface's bounds; by default the surface's start.
        steps: How many steps, 1 to `MAX_STEPS`.

    Raises:
        InvalidInput: Naming every bad field (`surface`, `optimizer`, a knob, `start`,
            `steps`), before anything is computed.
    """
    where, spec, values, point, steps = checked(surface, optimizer, knobs, start, steps)
    live = {k.name: values[k.name] for k in spec.knobs if k.live and values[k.name] is not None}
    path = _runner(where, spec, values).run(live, point, steps)
    kept = len(path.points) - 1  # the steps taken; when it diverged, the last is the one
    diverged_at = kept if path.diverged else None
    if path.diverged and not _finite(path.points[-1], path.losses[-1]):
        kept -= 1  # nothing to draw
    return Trajectory(
        surface=where.name,
        optimizer=spec.name,
        knobs=values,
        points=_frozen(path.points[: kept + 1].astype(np.float64)),
        losses=_frozen(path.losses[: kept + 1].astype(np.float64)),
        projected=_frozen(path.projected[:kept]),
        clipped=_frozen(path.clipped[:kept]),
        diverged=path.diverged,
        diverged_at=diverged_at,
    )


def checked(
    surface: str,
    optimizer: str,
    knobs: Mapping[str, Any] | None,
    start: Sequence[float] | None,
    steps: object,
) -> tuple[Surface, OptimizerSpec, dict[str, Any], tuple[float, float], int]:
    """`trajectory`'s arguments, checked: the surface, the optimizer's spec, every knob's
    value, the start and the steps. Raises `InvalidInput` naming every bad field."""
    errors: dict[str, str] = {}
    where = spec = None
    try:
        where = get_surface(surface)
    except InvalidInput as exc:
        errors |= exc.errors
    try:
        spec = get_spec(optimizer)
    except InvalidInput as exc:
        errors |= exc.errors
    values: dict[str, Any] = {}
    if spec is not None:
        try:
            values = read_knobs(spec, knobs or {})
        except InvalidInput as exc:
            errors |= exc.errors
    point = (0.0, 0.0)
    if where is not None:
        try:
            point = _start(where, start)
        except ValueError as exc:
            errors["start"] = str(exc)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        errors["steps"] = f"must be a whole number from 1 to {MAX_STEPS:,} (got {steps!r})"
    if errors or where is None or spec is None or not isinstance(steps, int):
        raise InvalidInput(errors)
    return where, spec, values, point, steps


def read_knobs(spec: OptimizerSpec, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Every knob's value for `spec`: those of `knobs` (text read as the knob's type) and
    the defaults. Raises `InvalidInput` naming each bad or unknown knob, and `telemetry`,
    which the playground sets itself."""
    if "telemetry" in knobs:
        raise InvalidInput({"telemetry": "is not a knob: the playground always records the steps"})
    by_name = {knob.name: knob for knob in spec.knobs}
    read = {
        name: by_name[name].from_text(value)
        if name in by_name and isinstance(value, str)
        else value
        for name, value in knobs.items()
    }
    return spec.validate(read)


def _start(surface: Surface, start: Sequence[float] | None) -> tuple[float, float]:
    if start is None:
        return surface.start
    if isinstance(start, str) or not isinstance(start, Sequence) or len(start) != 2:
        raise ValueError(f"must be two numbers, x and y (got {start!r})")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in start):
        raise ValueError(f"must be two numbers, x and y (got {start!r})")
    x, y = float(start[0]), float(start[1])
    if not surface.bounds.contains(x, y):
        raise ValueError(f"must lie within {surface.name}'s bounds, {surface.bounds.text()}")
    return x, y


_LOCK = threading.Lock()
_RUNNERS: OrderedDict[tuple[Any, ...], Runner] = OrderedDict()


def _runner(surface: Surface, spec: OptimizerSpec, values: Mapping[str, Any]) -> Runner:
    """A runner for these knobs: one kept whose knobs differ at most in live values, or a
    new one (compiled outside the lock, so that other trajectories go on meanwhile)."""
    shape = tuple(
        (knob.name, values[knob.name] is not None if knob.live else values[knob.name])
        for knob in spec.knobs
    )
    key = (surface.name, spec.name, spec.implementation, spec.source, shape)
    with _LOCK:
        if key in _RUNNERS:
            _RUNNERS.move_to_end(key)
            return _RUNNERS[key]
    tf_import.load()
    from core.playground.runner import Runner

    runner = Runner(surface, spec, values)
    with _LOCK:
        runner = _RUNNERS.setdefault(key, runner)  # another thread's, if it was first
        _RUNNERS.move_to_end(key)
        while len(_RUNNERS) > KEPT:
            _RUNNERS.popitem(last=False)
    return runner


def _finite(point: np.ndarray, loss: float) -> bool:
    return bool(np.all(np.isfinite(point)) and math.isfinite(loss))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # a result may be shared (a page's cache): never changed
    return array


def _shortest(value: float) -> float:
    """The shortest decimal that reads back as the float32 `value` (0.1, not
    0.10000000149011612)."""
    return float(str(np.float32(value)))
