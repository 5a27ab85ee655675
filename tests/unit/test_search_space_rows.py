"""`SearchSpace.from_rows`: the Sweep page's table as dimensions; and the same from the
command line's `sweep --param` values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.cli.exits import UsageError
from core.cli.sweeping import parse_params
from core.engine import RunConfig
from core.knobs import InvalidHyperparameters
from core.sweep import Dimension, SearchSpace

BASE = RunConfig.from_dict({"optimizer": "adamw", "model": "mlp", "dataset": "digits"})


def test_rows_become_ranges_and_choices_typed_as_written() -> None:
    frame = pd.DataFrame(
        [
            {"name": "learning_rate", "low": 1e-4, "high": 1e-2, "log": True, "points": 3},
            {"name": "batch_size", "choices": "32, 64"},
            {"name": "telemetry", "choices": "true,False"},
            {"name": "strategy", "choices": "default"},
            {"name": "weight_decay", "choices": "0.5, 1e-3"},
            {"name": None, "low": 1.0},  # a blank row the editor keeps
        ]
    )
    space = SearchSpace.from_rows(frame.to_dict("records"))
    assert space.dimensions == (
        Dimension("learning_rate", low=1e-4, high=1e-2, log=True, points=3),
        Dimension("batch_size", choices=(32, 64)),
        Dimension("telemetry", choices=(True, False)),
        Dimension("strategy", choices=("default",)),
        Dimension("weight_decay", choices=(0.5, 1e-3)),
    )
    assert [type(c) for c in space.dimensions[1].choices] == [int, int]
    assert len(space.axes(BASE)) == 5


def test_empty_cells_are_missing_values_that_validation_names() -> None:
    rows = [{"name": "learning_rate", "low": math.nan, "high": pd.NA, "points": None}]
    space = SearchSpace.from_rows(rows)
    assert space.dimensions == (Dimension("learning_rate", low=None, high=None, points=5),)
    with pytest.raises(InvalidHyperparameters) as caught:
        space.axes(BASE)
    assert set(caught.value.errors) & {"dimensions[0].low", "dimensions[0].high"}


def test_param_flags_become_ranges_and_choices() -> None:
    space = parse_params(
        [
            "learning_rate=1e-4:1e-1:log",
            "clip_norm=0.1,1,10",
            "radius=1:20:4",
            "weight_decay=0:0.01:log:3",
            "strategy=default",
        ]
    )
    assert space.dimensions == (
        Dimension("learning_rate", low=1e-4, high=1e-1, log=True),
        Dimension("clip_norm", choices=(0.1, 1, 10)),
        Dimension("radius", low=1.0, high=20.0, points=4),
        Dimension("weight_decay", low=0.0, high=0.01, log=True, points=3),
        Dimension("strategy", choices=("default",)),
    )


@pytest.mark.parametrize(
    "text", ["learning_rate", "=1:2", "learning_rate=", "lr=1:x", "lr=1:2:log:3:4", "lr=1:2:ln"]
)
def test_a_malformed_param_flag_is_named(text: str) -> None:
    with pytest.raises(UsageError, match=r"^param: .* is not NAME=LOW:HIGH"):
        parse_params([text])
