"""Figure 20: the playground redrawn after a knob moves (issue 54).

A knob's change on the Playground page recomputes every trajectory it shows: here three
optimizers × 500 steps on Rosenbrock's valley, from the change to their points and losses,
as the page has them: from the page server's worker process (`core.playground.worker`,
which runs `core.playground.trajectory`), the socket's round trip included. Each sample
moves the learning rate of all three to values no sample used before, so nothing computed
earlier can be reused but the compiled loops, which the first (untimed) call of each
optimizer compiles, as a page's first draw would; the detail gives that first draw's
time, and that of a change to a knob the loop reads when it is traced (momentum's μ),
which compiles another loop.
"""

from __future__ import annotations

import itertools
import statistics
import time

from bench.figures import Settings
from bench.rows import Measured, Quantity
from core.playground.worker import Worker

SURFACE, STEPS = "rosenbrock", 500
#: Each optimizer with its learning rate before the knob moves.
RATES = {"sgd": 1e-3, "momentum": 5e-4, "adam": 2e-2}
#: Samples of the figure: each costs milliseconds.
SAMPLES = 31


def knob_change(settings: Settings) -> Measured:
    """Median seconds from a learning-rate change to the three trajectories' data, as the
    page gets them: from the page server's worker process (`core.playground.worker`)."""
    del settings  # the workload is the target's; a sample is milliseconds, so take many
    worker = Worker()
    try:
        return _measured(worker)
    finally:
        worker.close()


def _measured(worker: Worker) -> Measured:
    scales = itertools.count(1)

    def redraw() -> float:
        scale = 1 + next(scales) / 1000  # a new value every time
        started = time.perf_counter()
        paths = [
            worker.trajectory(SURFACE, name, {"learning_rate": rate * scale}, steps=STEPS)
            for name, rate in RATES.items()
        ]
        seconds = time.perf_counter() - started
        assert all(len(path.points) == STEPS + 1 for path in paths)  # none diverged
        return seconds

    started = time.perf_counter()
    redraw()  # starts the worker (TensorFlow's import) and compiles the three loops
    first = time.perf_counter() - started
    seconds = statistics.median(redraw() for _ in range(SAMPLES))
    # A knob read when the loop is traced (momentum's μ) compiles another loop for its value.
    recompiles = []
    for momentum in (0.8, 0.85, 0.95):
        started = time.perf_counter()
        worker.trajectory(
            SURFACE, "momentum", {"learning_rate": RATES["momentum"], "momentum": momentum}
        )
        recompiles.append(time.perf_counter() - started)
    return Measured(
        a=Quantity(seconds, "s"),
        detail=(
            f"{len(RATES)} trajectories ({', '.join(RATES)}) × {STEPS} steps on {SURFACE}, "
            f"from the worker process, median of {SAMPLES} learning-rate changes; the first "
            f"draw, which starts the worker (TensorFlow's import) and compiles the three "
            f"loops, took {first:.2f} s; a change of momentum's μ, a knob the loop reads when "
            f"it is traced, compiles another: {statistics.median(recompiles):.2f} s (median "
            "of 3)."
        ),
    )
