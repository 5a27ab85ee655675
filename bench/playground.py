"""Figure 20: the playground redrawn after a knob moves (issue 54).

A knob's change on the Playground page recomputes every trajectory it shows: here three
optimizers × 500 steps on Rosenbrock's valley, from the change to their points and losses
(`core.playground.trajectory`). Each sample moves the learning rate of all three to values
no sample used before, so nothing computed earlier can be reused but the compiled loops,
which the first (untimed) call of each optimizer compiles, as a page's first draw would;
the detail gives that first draw's time, and that of a change to a knob the loop reads
when it is traced (momentum's μ), which compiles another loop.
"""

from __future__ import annotations

import itertools
import statistics
import time

from bench.figures import Settings
from bench.rows import Measured, Quantity
from core import playground
from core.training import tf_import

SURFACE, STEPS = "rosenbrock", 500
#: Each optimizer with its learning rate before the knob moves.
RATES = {"sgd": 1e-3, "momentum": 5e-4, "adam": 2e-2}
#: Samples of the figure: each costs milliseconds.
SAMPLES = 31


def knob_change(settings: Settings) -> Measured:
    """Median seconds from a learning-rate change to the three trajectories' data."""
    del settings  # the workload is the target's; a sample is milliseconds, so take many
    scales = itertools.count(1)

    def redraw() -> float:
        scale = 1 + next(scales) / 1000  # a new value every time
        started = time.perf_counter()
        paths = [
            playground.trajectory(SURFACE, name, {"learning_rate": rate * scale}, steps=STEPS)
            for name, rate in RATES.items()
        ]
        seconds = time.perf_counter() - started
        assert all(len(path.points) == STEPS + 1 for path in paths)  # none diverged
        return seconds

    tf_import.load()  # TensorFlow and Keras, which a page's process imports once
    started = time.perf_counter()
    redraw()  # compiles the three loops
    first = time.perf_counter() - started
    seconds = statistics.median(redraw() for _ in range(SAMPLES))
    # A knob read when the loop is traced (momentum's μ) compiles another loop for its value.
    recompiles = []
    for momentum in (0.8, 0.85, 0.95):
        started = time.perf_counter()
        playground.trajectory(
            SURFACE, "momentum", {"learning_rate": RATES["momentum"], "momentum": momentum}
        )
        recompiles.append(time.perf_counter() - started)
    return Measured(
        a=Quantity(seconds, "s"),
        detail=(
            f"{len(RATES)} trajectories ({', '.join(RATES)}) × {STEPS} steps on {SURFACE}, "
            f"median of {SAMPLES} learning-rate changes; the first draw, which compiles the "
            f"three loops, took {first:.2f} s; a change of momentum's μ, a knob the loop "
            f"reads when it is traced, compiles another: {statistics.median(recompiles):.2f} "
            "s (median of 3)."
        ),
    )
