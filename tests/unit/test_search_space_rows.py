"""`SearchSpace.from_rows`: the Sweep page's table as dimensions."""

from __future__ import annotations

import math

import pandas as pd
import pytest

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
