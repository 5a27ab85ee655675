"""Runs without instruments, for tests of what happens around training (queues, sweeps,
commands, faults), not of what the instruments measure.

A 20-step run with every instrument due (a short run measures each on most steps, and
each kind of step is traced anew) takes about twice as long as one without: 2.0 against
1.2 s of a tiny MLP run, most of it tracing. Runs keep their instruments where they are
what is tested or shown: `test_instruments`, `test_engine`, `test_checkpoints` (their
state across a resume), the pages (`tests.apptest.SHORT`) and the browser's demo race.
"""

from __future__ import annotations

from typing import Any

from core.engine import RunConfig
from core.training.config import INSTRUMENT_FIELDS
from core.training.instruments import INSTRUMENTS

#: Run config fields that turn every instrument off (telemetry stays on).
NO_INSTRUMENTS: dict[str, int] = dict.fromkeys(INSTRUMENT_FIELDS, 0)
#: The same, as `python -m core train` / `sweep` flags.
NO_INSTRUMENTS_FLAGS: list[str] = [
    flag for name in INSTRUMENTS for flag in (f"--{name.replace('_', '-')}-every", "0")
]


def digits_trial(**changes: Any) -> RunConfig:
    """A sweep's trial of sgd on a tiny MLP and 8×8 digits, without instruments: 22 steps
    an epoch at batch 64, validated every 11 steps (a second or so for a few epochs), with
    `changes` (e.g. `max_steps=20_000, epochs=1000` for one the test stops)."""
    fields: dict[str, Any] = {
        "dataset": "digits",
        "model": "mlp",
        "optimizer": "sgd",
        "hyperparameters": {"learning_rate": 0.1},
        "val_every": 11,
        **NO_INSTRUMENTS,
    }
    return RunConfig(**(fields | changes))
