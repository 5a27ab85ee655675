"""The demo race: one model, one dataset, one seed and the same initial weights, trained by
three optimizers side by side, each set so that a headline chart has something to show.

    sgd            clipped at a global norm of 1 (its gradient norm passes 1 within the first
                   epoch), on a cosine schedule after a warmup: the gradient-norm chart
                   shows the norm before and after clipping, the learning-rate chart a curve
    adamw          with weights below 0.005 frozen: the sparsity charts climb
    projected_gd   on a ball of radius 12 (LeNet starts at a norm of about 17.6): the
                   parameter-norm chart shows each step projected back onto the radius

A race's length is set in epochs, the same on every machine, and named for how long it
trains on the lab's 2-core machine, three runs at once, watched in Chromium: there a race
of 9 epochs ended in 16-17 s, of 33 in 32-35 s and of 65 in 67-71 s (`bench.watching.race`
on 2026-12-04), about 1 s an epoch after a start of a few seconds. A teacher picks the
length for the time a class has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from core.engine.repeats import repeat_configs
from core.training.config import RunConfig

MODEL, DATASET = "lenet", "mnist-5k"


@dataclass(frozen=True)
class RaceLength:
    """How long a race trains: `epochs` of the dataset, about `minutes` on the lab's
    machine."""

    label: str
    epochs: int
    minutes: float


LENGTHS = (
    RaceLength("short", 3, 0.1),
    RaceLength("1 minute", 57, 1.0),
    RaceLength("3 minutes", 175, 3.0),
)
DEFAULT_LENGTH = "1 minute"

#: Each runner's knobs, and the chart they make worth a look.
RUNNERS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "sgd": {
            "hyperparameters": {"learning_rate": 0.05, "clip_norm": 1.0},
            "lr_schedule": "cosine",
            "warmup_steps": 50,
        },
        "adamw": {"hyperparameters": {"learning_rate": 0.001, "prune_threshold": 0.005}},
        "projected_gd": {"hyperparameters": {"learning_rate": 0.05, "radius": 12.0}},
    }
)
SHOWS = MappingProxyType(
    {
        "sgd": "gradient norm before and after its clip at 1, and a cosine learning rate",
        "adamw": "sparsity: the weights that fall below 0.005 are frozen",
        "projected_gd": "parameter norm, projected back onto its radius of 12",
    }
)


def length(label: str) -> RaceLength:
    """The length called `label`; `ValueError` naming `length` for any other."""
    for known in LENGTHS:
        if known.label == label:
            return known
    names = ", ".join(repr(known.label) for known in LENGTHS)
    raise ValueError(f"length: one of {names} (got {label!r})")


def race_configs(label: str = DEFAULT_LENGTH, repeats: int = 1) -> list[RunConfig]:
    """The race's runs, in `RUNNERS`' order; with `repeats` above 1, each runner over that
    many seeds, as a group."""
    epochs = length(label).epochs
    configs = [
        RunConfig.from_dict(
            {
                "model": MODEL,
                "dataset": DATASET,
                "epochs": epochs,
                "seed": 0,
                "log_every": 1,
                "optimizer": name,
                "name": f"demo race · {name}",
                **settings,
            }
        )
        for name, settings in RUNNERS.items()
    ]
    return [copy for config in configs for copy in repeat_configs(config, repeats)]
