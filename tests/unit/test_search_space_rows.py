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
from core.optimizers import specs
from core.sweep import Dimension, SearchSpace, starting_dimension, sweepable_knobs

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
    assert caught.value.errors == {
        "learning_rate, low": "is required for a range (or give choices)",
        "learning_rate, high": "is required for a range (or give choices)",
    }


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


def test_every_sweepable_knob_starts_from_a_range_it_takes_and_a_row_reads_back() -> None:
    """What picking a knob in the Sweep page's table fills in (issue 39): for every
    setting of every optimizer, plugins' too, a range (or choices) its knob accepts."""
    for spec in specs():
        base = BASE.replace(optimizer=spec.name, hyperparameters={})
        for knob in sweepable_knobs(spec.name).values():
            start = starting_dimension(knob)
            (axis,) = SearchSpace((start,)).axes(base)  # raises naming the part refused
            assert axis.dimension == start or start.categorical, knob.name
            assert SearchSpace.from_rows([start.to_row()]).dimensions == (start,), knob.name


@pytest.mark.parametrize(
    ("optimizer", "name", "expected"),
    [
        ("adamw", "learning_rate", Dimension("learning_rate", 1e-4, 1e-2, log=True)),
        ("adamw", "weight_decay", Dimension("weight_decay", 4e-4, 4e-2, log=True)),
        ("sgd", "clip_norm", Dimension("clip_norm", 0.1, 10.0, log=True)),  # no default: 1
        ("adamw", "beta_1", Dimension("beta_1", 0.45, 0.95)),  # halfway to the open 1
        ("sgd", "top_k", Dimension("top_k", 0.5, 1.0)),  # halfway from the open 0
        ("sgd", "batch_size", Dimension("batch_size", 32, 128)),
        ("sgd", "noise_std", Dimension("noise_std", 0.0, 100.0)),  # its whole range
        ("momentum", "nesterov", Dimension("nesterov", choices=(False, True))),
        ("sgd", "lr_schedule", Dimension("lr_schedule", choices=("constant", "cosine", "step"))),
    ],
)
def test_a_knobs_starting_range(optimizer: str, name: str, expected: Dimension) -> None:
    assert starting_dimension(sweepable_knobs(optimizer)[name]) == expected
