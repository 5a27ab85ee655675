"""Runs and trials as rows of settings against a result: what Compare and Sweep tabulate
and draw as parallel coordinates.

A column whose values are all numbers is numeric, unless its numbers name rather than
measure (a seed: seed 3 is not "more" than seed 2); any other column (a bool, a name such
as the optimizer) is categorical, its values as text. Importing this module imports
neither TensorFlow nor Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from core.data import files

#: Run fields that label or locate a run rather than change how it trains.
LABELS: Final = frozenset({"name", "data_dir", "group"})
#: Run fields whose numbers are names: drawn as categories, one tick each.
NAMES: Final = frozenset({"seed"})
Coordinate = float | str


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run config's (`RunConfig.to_dict()`) single-valued settings, flat: the run fields,
    then the hyperparameters. Labels and structured values (`layer_rules`,
    `task_weights`) are left out; a knob that is off stays, as None. A file's dataset is
    named as the Train page names it (`core.data.files.label`), not by the server's path
    to it, which a room would see."""
    hyperparameters = config.get("hyperparameters") or {}
    flat = {k: v for k, v in config.items() if k != "hyperparameters"} | dict(hyperparameters)
    if "dataset" in flat:
        flat["dataset"] = files.label(flat["dataset"])
    return {k: v for k, v in flat.items() if k not in LABELS and _single(v)}


def varying(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys whose value is not the same in every row (a missing key counts as None),
    in the order the rows first name them."""
    keys = dict.fromkeys(key for row in rows for key in row)
    return [key for key in keys if len({_same(row.get(key)) for row in rows}) > 1]


def numeric(rows: Sequence[Mapping[str, Any]], key: str) -> bool:
    """Whether every value of `key` that is set is a number (a bool is not)."""
    return all(_number(row[key]) for row in rows if row.get(key) is not None)


def parallel_rows(
    rows: Sequence[Mapping[str, Any]],
    target: str,
    values: Sequence[float | None],
    keep: Collection[str] = (),
) -> list[dict[str, Coordinate]]:
    """One row per run for `core.charts.hyperparameter_figure`: the `keep` columns and
    every column that varies, numbers as floats and anything else (a bool, a name) as
    text, a categorical axis; then `target` holding `values` (NaN where missing). A
    setting that is off (None) is left out of its row."""
    columns = [*keep, *(key for key in varying(rows) if key not in keep)]
    return [
        {key: _coordinate(key, row[key]) for key in columns if row.get(key) is not None}
        | {target: math.nan if value is None else float(value)}
        for row, value in zip(rows, values, strict=True)
    ]


def _coordinate(key: str, value: Any) -> Coordinate:
    if _number(value) and key not in NAMES:
        return float(value)
    # true/false, as a sweep's choices spell them
    return str(value).lower() if isinstance(value, bool) else str(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _single(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _same(value: Any) -> tuple[bool, Any]:
    # 1, 1.0 and True are equal in a set: 1 and 1.0 are the same setting, True is not.
    return isinstance(value, bool), value
