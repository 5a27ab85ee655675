"""Figure 14: the total throughput of 8 queued runs as `max_concurrent` grows.

Eight LeNet runs (figure 7's, seeds 0 to 7) are queued at once in an engine that trains at
most `max_concurrent` of them together. A sample is their total steps per second from the
first start to the last end, setup, tracing and validation included: what a user who
queues a batch of runs (a sweep, the demo race with seeds) waits for. One engine per
setting; the engines take turns, round after round, and each setting is compared with the
lab's default (`DEFAULT_MAX_CONCURRENT`) within the same round.
"""

from __future__ import annotations

import functools
import gc
import statistics
import tempfile
from pathlib import Path

from bench.figures import Settings
from bench.machine import available_cores
from bench.rows import Measured
from bench.timing import Paired
from bench.training import QueuedEngine, queued_runs, steps_per_epoch
from core.cli.serving import DEFAULT_MAX_CONCURRENT

RUNS = 8
SETTINGS = (2, 4, 8)
ROUNDS = 5


def at_most_2(settings: Settings) -> Measured:
    """Figure 14a: at most 2 at once (A) vs the default (B)."""
    return against_default(settings)[2]


def at_most_4(settings: Settings) -> Measured:
    """Figure 14b: at most 4 at once (A) vs the default (B)."""
    return against_default(settings)[4]


def at_most_8(settings: Settings) -> Measured:
    """Figure 14c: at most 8 at once (A) vs the default (B)."""
    return against_default(settings)[8]


@functools.cache
def against_default(settings: Settings) -> dict[int, Measured]:
    """Total steps/s of the `RUNS` runs at each of `SETTINGS` (A) and at the default (B),
    by setting."""
    steps = settings.pick(200, 130)
    configs = queued_runs(steps, RUNS)
    first = steps_per_epoch()
    last = (steps - 1) // first * first
    tried = sorted({*SETTINGS, DEFAULT_MAX_CONCURRENT})
    with tempfile.TemporaryDirectory() as folder:
        engines = {
            n: QueuedEngine(Path(folder) / f"at-most-{n}.sqlite", max_concurrent=n) for n in tried
        }
        try:
            rates: dict[int, list[float]] = {n: [] for n in tried}
            # Enough rounds for a result; each takes a minute.
            for round_ in range(settings.warmup + min(settings.pairs, ROUNDS)):
                for n, engine in engines.items():
                    gc.collect()
                    rate = engine.train(configs, first, last)
                    if round_ >= settings.warmup:
                        rates[n].append(rate)
        finally:
            for engine in engines.values():
                engine.engine.close()
    default = rates[DEFAULT_MAX_CONCURRENT]
    return {
        n: Measured.compared(
            Paired(tuple(rates[n]), tuple(default)),
            "steps/s",
            detail=(
                f"{RUNS} runs of {steps} steps; at most {n} at once, a run took "
                f"{engines[n].describe()} (of {available_cores()} cores); rates by "
                f"setting: {_rates(rates)}."
            ),
        )
        for n in SETTINGS
    }


def _rates(rates: dict[int, list[float]]) -> str:
    return ", ".join(f"{n}: {statistics.median(r):.0f} steps/s" for n, r in rates.items())
