"""Figure 12: a run as a Ray actor against the same run as a thread of the engine.

Both engines train the same LeNet run (figure 1's: adamw, telemetry every step, asking
for every core) on one store of their own; the Ray side on a one-node Ray cluster
started here with this machine's cores. The actor's process writes its metrics, so the
steady rate is read from what both sides store: the wall time logged with every step.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.cores import CoreShares, processes
from bench.figures import Settings
from bench.machine import available_cores
from bench.rows import Measured
from bench.training import _config, _wait, _window, interleave_engines
from core.engine import Engine, RunConfig
from core.engine.cluster import own_token

# Ray's processes by command line: the actor's worker, and the cluster's own (idle
# workers, the raylet, GCS and agents, all run from Ray's package folder).
_RAY_PROCESSES = (
    ("the actor", b"ray::RunActor"),
    ("Ray's other processes", b"ray::"),
    ("Ray's other processes", b"/ray/"),
)


def ray_actor_vs_thread(settings: Settings) -> Measured:
    """Figure 12: steady steps/s of a run trained as a Ray actor (A) and as a thread (B),
    from the end of its first epoch to a later epoch's end; interleaved pairs."""
    import ray

    first, last = _window(settings)
    # Every core for the actor, as the thread has them: Ray sets an actor's thread pools
    # (OMP_NUM_THREADS) to the CPUs it asked for.
    config = _config(last, telemetry=True).replace(num_cpus=float(available_cores()))
    # A token of its own: a local cluster would otherwise write ~/.ray/auth_token, which
    # changes what `ray start` does on this machine from then on (see docs/scaling.md).
    with own_token(), tempfile.TemporaryDirectory() as folder:
        ray.init(
            address="local",  # a cluster of its own, even where this machine is in another
            num_cpus=available_cores(),
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        try:
            actors = _Side(Engine(Path(folder) / "ray.sqlite", ray_address="auto"))
            threads = _Side(Engine(Path(folder) / "thread.sqlite"))
            paired = interleave_engines(
                lambda: actors.rate(config, first, last),
                lambda: threads.rate(config, first, last),
                (actors.engine, threads.engine),
                settings,
            )
        finally:
            ray.shutdown()
    return Measured.compared(
        paired,
        "steps/s",
        detail=(
            f"From start to first step: {actors.first_step():.1f} s as an actor (a worker "
            f"process, TensorFlow's import, tracing), {threads.first_step():.1f} s as a thread."
        ),
        diagnose=lambda: (
            f"In the timed steps, of one core: as an actor, {actors.cores}; as a thread, "
            f"{threads.cores}."
        ),
    )


class _Side:
    """One engine of figure 12, the start-to-first-step times its runs took, and where
    the cores went while they trained."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.setup: list[float] = []
        self.cores = CoreShares()

    def rate(self, config: RunConfig, first: int, last: int) -> float:
        """Trains one run; returns its steps/s from step `first` to step `last`."""
        started = time.time()
        run_id = self.engine.start(config)
        # Up to a tenth before `last`: an actor's process may end with its run.
        if self._reaches(run_id, first):
            groups = {"engine": {os.getpid()}, **processes(*_RAY_PROCESSES)}
            with self.cores.window(groups):
                self._reaches(run_id, last - (last - first) // 10)
        _wait(self.engine, run_id)
        metrics = self.engine.store.read_metrics(run_id)
        wall = dict(zip(metrics.steps.tolist(), metrics["wall_time"].tolist(), strict=True))
        self.setup.append(wall[min(wall)] - started)
        return (last - first) / (wall[last] - wall[first])

    def _reaches(self, run_id: str, step: int) -> bool:
        """Waits until the run has stored `step`; False if it ends first."""
        while self.engine.status(run_id).active:
            if (self.engine.store.last_step(run_id) or 0) >= step:
                return True
            time.sleep(0.05)
        return False

    def first_step(self) -> float:
        return statistics.median(self.setup)
