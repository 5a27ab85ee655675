"""Runs without instruments, for tests of what happens around training (queues, sweeps,
commands, faults), not of what the instruments measure.

A 20-step run with every instrument due (a short run measures each on most steps, and
each kind of step is traced anew) takes about twice as long as one without: 2.0 against
1.2 s of a tiny MLP run, most of it tracing. Runs keep their instruments where they are
what is tested or shown: `test_instruments`, `test_engine`, `test_checkpoints` (their
state across a resume), the pages (`tests.apptest.SHORT`) and the browser's demo race.
"""

from __future__ import annotations

from core.engine.instruments import INSTRUMENTS

#: Run config fields that turn every instrument off (telemetry stays on).
NO_INSTRUMENTS: dict[str, int] = {f"{name}_every": 0 for name in INSTRUMENTS}
#: The same, as `python -m core train` / `sweep` flags.
NO_INSTRUMENTS_FLAGS: list[str] = [
    flag for name in INSTRUMENTS for flag in (f"--{name.replace('_', '-')}-every", "0")
]
