"""What a sweep varies: `Dimension`s over run fields and optimizer knobs, checked by `Knob`.

A `Dimension` names a setting and gives either a range (`low`, `high`, `log`) or a list of
`choices`; whether a range holds integers or floats comes from the setting's `Knob`, and so
do the bounds it must stay within. A `SearchSpace` resolves its dimensions against a base
`RunConfig` into `Axis`es, refusing every bad one at once with errors named by the setting
and the part of it, like `learning_rate, low`: what the user wrote (a table row, a
`--param`), not where it sits in a list.

Importing this module imports neither TensorFlow nor Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from core.knobs import InvalidInput, Knob
from core.training.config import FIELDS

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

    from core.engine import RunConfig

#: Knob types a dimension can vary; text and rules have no order to search along.
SWEEPABLE_TYPES = frozenset({"float", "int", "bool", "choice"})
#: Run fields a sweep cannot vary: the optimizer fixes which knobs exist, and the rest
#: label or locate a run rather than change how it trains.
FIXED_FIELDS = frozenset({"name", "optimizer", "data_dir"})
MAX_POINTS = 100
SPACE = "search space"  # what errors about the space as a whole are named
RUN_FIELDS: Mapping[str, Knob] = {knob.name: knob for knob in FIELDS}


@dataclass(frozen=True)
class Dimension:
    """One setting a sweep varies, as the user wrote it.

    Attributes:
        name: A run field (`batch_size`, `seed`, ...) or a knob of the base config's
            optimizer (`learning_rate`, `radius`, ...).
        low, high: The range, inclusive; within the knob's own range. Integers for an
            integer knob.
        log: Sample (and lay out grid points) evenly in log space; needs `low > 0`.
        choices: The values to pick from, instead of a range. A bool or choice knob given
            neither takes all its values.
        points: How many grid points a range contributes to a grid search, spread evenly
            (in log space when `log`) from `low` to `high`. Other samplers ignore it.
    """

    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    points: int = 5

    def __post_init__(self) -> None:
        if isinstance(self.choices, list):  # keeps the dimension hashable
            object.__setattr__(self, "choices", tuple(self.choices))

    @property
    def categorical(self) -> bool:
        return bool(self.choices)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values; `from_dict(to_dict())` gives an equal dimension."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "choices": list(self.choices)
        }

    def to_row(self) -> dict[str, Any]:
        """The table row `SearchSpace.from_rows` reads back as this dimension: its choices
        as comma-separated text, a range's bounds empty when it has choices."""
        return {
            "name": self.name,
            "low": None if self.categorical else self.low,
            "high": None if self.categorical else self.high,
            "log": self.log,
            "points": self.points,
            "choices": ", ".join(str(choice) for choice in self.choices),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Dimension:
        """The dimension `values` describe. Raises `InvalidInput` for a missing
        name, unknown keys and choices that are not a list; `SearchSpace.axes` checks the
        values themselves."""
        errors = {}
        if "name" not in values:
            errors["name"] = "is required"
        if unknown := sorted(set(values) - {f.name for f in fields(cls)}):
            errors["fields"] = f"unknown field(s) {unknown}"
        choices = values.get("choices", ())
        if isinstance(choices, str | bytes) or not isinstance(choices, Sequence):
            errors["choices"] = f"must be a list (got {choices!r})"
        if errors:
            raise InvalidInput(errors)
        return cls(**{**values, "choices": tuple(choices)})


@dataclass(frozen=True)
class Axis:
    """A checked dimension with its knob: what Optuna samples, and where the value goes.

    `dimension` is normalized: bounds have the knob's type, and a bool or choice knob
    given neither range nor choices carries all its values as choices.
    """

    dimension: Dimension
    knob: Knob
    is_run_field: bool

    @property
    def name(self) -> str:
        return self.dimension.name

    def distribution(self) -> BaseDistribution:
        """The Optuna distribution of this axis."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        d = self.dimension
        if d.categorical:
            return CategoricalDistribution(d.choices)
        if self.knob.type == "int":
            return IntDistribution(int(d.low), int(d.high), log=d.log)
        return FloatDistribution(float(d.low), float(d.high), log=d.log)

    def grid(self) -> list[Any]:
        """The values a grid search tries: the choices, or `points` values from `low` to
        `high` (log-spaced when `log`), without repeats once rounded to the knob's type."""
        d = self.dimension
        if d.categorical:
            return list(d.choices)
        spread = np.geomspace if d.log else np.linspace
        values = spread(d.low, d.high, d.points).tolist()
        if self.knob.type == "int":
            return list(dict.fromkeys(min(max(round(v), d.low), d.high) for v in values))
        # 12 significant digits drop the spacing's float noise: 0.01, not 0.010000000000000002.
        return list(dict.fromkeys(min(max(float(f"{v:.12g}"), d.low), d.high) for v in values))


@dataclass(frozen=True)
class SearchSpace:
    """The dimensions of a sweep; `axes` checks them against a base config."""

    dimensions: tuple[Dimension, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimensions", tuple(self.dimensions))

    def axes(self, config: RunConfig) -> tuple[Axis, ...]:
        """The dimensions resolved against `config`'s run fields and optimizer knobs.

        Raises `InvalidInput` naming every bad part by its setting, e.g.
        `learning_rate, low`: an unknown or unsweepable name, a repeated name, bounds
        outside the knob's range or in the wrong order, `log` with `low <= 0`, a bad
        choice or grid size.
        """
        knobs = sweepable_knobs(config.optimizer)
        errors: dict[str, str] = {}
        if not self.dimensions:
            errors[SPACE] = "give at least one setting to vary"
        axes, seen = [], set()
        for i, dimension in enumerate(self.dimensions):
            if not isinstance(dimension, Dimension):
                errors[f"{SPACE}, setting {i + 1}"] = f"must be a Dimension (got {dimension!r})"
                continue
            named = isinstance(dimension.name, str) and dimension.name.strip()
            where = dimension.name if named else f"{SPACE}, setting {i + 1}"
            knob = knobs.get(dimension.name) if named else None
            if knob is None:
                errors[where] = _unknown_name(dimension.name, config.optimizer)
                continue
            if dimension.name in seen:
                errors[f"{where} (twice)"] = "is already varied by another row: keep one"
                continue
            seen.add(dimension.name)
            try:
                normalized = _check(dimension, knob)
            except InvalidInput as exc:
                errors |= {f"{where}, {part}": why for part, why in exc.errors.items()}
                continue
            axes.append(Axis(normalized, knob, dimension.name in RUN_FIELDS))
        if errors:
            raise InvalidInput(errors)
        return tuple(axes)

    def to_dict(self) -> dict[str, Any]:
        return {"dimensions": [dimension.to_dict() for dimension in self.dimensions]}

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> SearchSpace:
        """The space a table describes (the Sweep page's editor), one dimension a row:
        `name`, then a comma-separated list of `choices` (numbers, true/false or names),
        or else a range: `low`, `high`, `log` and grid `points` (default 5). Rows without
        a name are skipped; empty cells (None or NaN) are missing values, which `axes`
        refuses by name."""
        dimensions = []
        for row in rows:
            name = row.get("name")
            if not isinstance(name, str) or not name:
                continue
            cell = row.get("choices")
            texts = cell.split(",") if isinstance(cell, str) else ()  # NaN: an empty cell
            choices = tuple(_choice(text) for text in texts if text.strip())
            if choices:
                dimensions.append(Dimension(name, choices=choices))
                continue
            points = _cell_number(row.get("points"))
            dimensions.append(
                Dimension(
                    name,
                    low=_cell_number(row.get("low")),
                    high=_cell_number(row.get("high")),
                    log=bool(row.get("log")),
                    points=5 if points is None else int(points),
                )
            )
        return cls(tuple(dimensions))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SearchSpace:
        """The space `values` describe; raises `InvalidInput` naming each bad entry."""
        items = values.get("dimensions", ())
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidInput({"dimensions": f"must be a list (got {items!r})"})
        dimensions, errors = [], {}
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                errors[f"dimensions[{i}]"] = f"must be a mapping (got {item!r})"
                continue
            try:
                dimensions.append(Dimension.from_dict(item))
            except InvalidInput as exc:
                errors |= {f"dimensions[{i}].{part}": why for part, why in exc.errors.items()}
        if errors:
            raise InvalidInput(errors)
        return cls(tuple(dimensions))


def sweepable_knobs(optimizer: str) -> dict[str, Knob]:
    """Every setting a sweep of `optimizer` can vary, by name: run fields first, then the
    optimizer's knobs."""
    return {name: knob for name, knob in _settings(optimizer).items() if _sweepable(knob)}


def starting_dimension(knob: Knob) -> Dimension:
    """A range to start a sweep of `knob` from, valid for it: every value of a bool or
    choice knob; else a decade either side of its default on a log scale (of 1 without
    one), or half to twice its default; or its whole declared range. Kept inside the
    knob's range (an open end is approached halfway), and whole for an integer knob."""
    if knob.type in ("bool", "choice"):
        return Dimension(knob.name, choices=knob.choices or (False, True))
    default = knob.default
    centre: float | None = None
    if isinstance(default, int | float) and not isinstance(default, bool) and default > 0:
        centre = float(default)
    elif knob.log_scale or knob.low is None or knob.high is None:
        centre = 1.0
    spread = 10.0 if knob.log_scale else 2.0
    low = centre / spread if centre is not None else knob.low
    high = centre * spread if centre is not None else knob.high
    assert low is not None and high is not None  # a centre unless both ends are known
    if knob.low is not None and low <= knob.low:
        inside = high if centre is None else centre
        low = (knob.low + inside) / 2 if knob.low_open else knob.low
    if knob.high is not None and high >= knob.high:
        inside = low if centre is None else centre
        high = (knob.high + inside) / 2 if knob.high_open else knob.high
    if knob.log_scale and low <= 0:
        low = high / 100
    if knob.type == "int":
        low, high = math.ceil(low), math.floor(high)
        low = max(low, 1) if knob.log_scale else low
        return Dimension(knob.name, low, max(low, high), knob.log_scale)
    # 12 significant digits drop float noise: 0.001, not 0.0010000000000000002.
    return Dimension(knob.name, float(f"{low:.12g}"), float(f"{high:.12g}"), knob.log_scale)


def _settings(optimizer: str) -> dict[str, Knob]:
    """Every run field, then every knob of `optimizer` (a knob named as a run field, as a
    plugin's may be, is left to the run field)."""
    from core.optimizers import get_spec

    knobs = {knob.name: knob for knob in get_spec(optimizer).knobs if knob.name not in RUN_FIELDS}
    return {**RUN_FIELDS, **knobs}


def _sweepable(knob: Knob) -> bool:
    return knob.type in SWEEPABLE_TYPES and knob.name not in FIXED_FIELDS


def _unknown_name(name: Any, optimizer: str) -> str:
    """Why `name` names no sweepable setting, for an error already keyed by it."""
    settings = _settings(optimizer)
    if isinstance(name, str) and name in settings:
        return "cannot be swept"
    known = ", ".join(name for name, knob in settings.items() if _sweepable(knob))
    return f"is not a run field or a {optimizer} knob (got {name!r}; sweepable: {known})"


def _check(dimension: Dimension, knob: Knob) -> Dimension:
    """`dimension` with values of the knob's type; raises with errors keyed by attribute."""
    if dimension.categorical or knob.type in ("bool", "choice"):
        return _check_choices(dimension, knob)
    errors: dict[str, str] = {}
    bounds = {}
    for part in ("low", "high"):
        value = getattr(dimension, part)
        try:
            if value is None:
                raise ValueError("is required for a range (or give choices)")
            bounds[part] = knob.validate(value)
        except ValueError as exc:
            errors[part] = str(exc)
    if not isinstance(dimension.log, bool):
        errors["log"] = f"must be true or false (got {dimension.log!r})"
    elif dimension.log and "low" in bounds and bounds["low"] <= 0:
        errors["low"] = f"must be above 0 on a log scale (got {bounds['low']!r})"
    elif dimension.log and knob.type == "int" and "low" in bounds and bounds["low"] < 1:
        errors["low"] = f"must be at least 1 for integers on a log scale (got {bounds['low']!r})"
    if len(bounds) == 2 and bounds["low"] > bounds["high"]:
        errors["high"] = f"must be at least low ({bounds['low']!r}; got {bounds['high']!r})"
    points = dimension.points
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_POINTS:
        errors["points"] = f"must be a whole number in [1, {MAX_POINTS}] (got {points!r})"
    if errors:
        raise InvalidInput(errors)
    return Dimension(dimension.name, bounds["low"], bounds["high"], dimension.log, (), points)


def _check_choices(dimension: Dimension, knob: Knob) -> Dimension:
    errors: dict[str, str] = {}
    if dimension.low is not None or dimension.high is not None:
        errors["low"] = (
            "give either a range or choices, not both"
            if dimension.categorical
            else f"{knob.name} takes choices, not a range"
        )
    if dimension.log:
        errors["log"] = "applies to a range, not to choices"
    choices = dimension.choices or (knob.choices if knob.type == "choice" else (False, True))
    values = []
    for j, choice in enumerate(choices):
        try:
            value = knob.validate(choice)
        except ValueError as exc:
            errors[f"choice {j + 1}"] = str(exc)
            continue
        if value in values:
            errors[f"choice {j + 1}"] = f"repeats {choice!r}"
            continue
        values.append(value)
    if errors:
        raise InvalidInput(errors)
    return Dimension(dimension.name, choices=tuple(values), points=len(values))


def _choice(text: str) -> Any:
    """A typed choice: true/false as a bool, an integer or float as a number, else text."""
    text = text.strip()
    if text.lower() in {"true", "false"}:
        return text.lower() == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text else number


def _cell_number(value: Any) -> float | None:
    """A table cell as a number; None for an empty one (None, NaN, pandas' NA)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else number
