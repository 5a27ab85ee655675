"""Figure 15: how long a user waits for a run's first point.

Each sample is a fresh process, as the engine's is when the dashboard launches it: it
first does what the engine's warm-up does at startup, in the background while the page
paints (TensorFlow's import and one rehearsed step: `core.engine.server.rehearse`), then
opens an engine on a new store and times `Engine.start` of the demo race's AdamW run
(LeNet on mnist-5k, instruments at their defaults) until its first logged step is
committed to the store, where a Live page reads it. The dataset, the model, the
optimizer and the training step's tracing are all inside the window.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Settings
from bench.rows import Measured, Quantity

# Seconds a sample's process may take, TensorFlow's import included.
SAMPLE_TIMEOUT = 180


def start_to_first_point(settings: Settings) -> Measured:
    """The median over fresh processes of seconds from `Engine.start` to the first
    stored step."""
    samples = [_sample() for _ in range(settings.warmup + settings.pairs)][settings.warmup :]
    waits = [sample["first_point"] for sample in samples]
    return Measured(
        a=Quantity(statistics.median(waits), "s"),
        detail=(
            "Of which from `running` to the end of step 1 (dataset, model, tracing and the "
            f"step): {statistics.median(sample['to_step_1'] for sample in samples):.2f} s; the "
            "rest is the engine taking the run and its metrics writer's flush. Per sample: "
            f"{', '.join(f'{wait:.2f}' for wait in waits)} s."
        ),
    )


def _sample() -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.first_point"],
        capture_output=True,
        text=True,
        timeout=SAMPLE_TIMEOUT,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def _measure() -> dict[str, float]:
    """One sample, in this process: prints nothing but its result."""
    from core import data
    from core.engine import Engine, RunConfig
    from core.engine.server import rehearse
    from core.store import Store

    rehearse(data.DEFAULT_DATASET)  # before the clock, as the engine's startup does

    config = RunConfig(
        model="lenet", dataset="mnist-5k", optimizer="adamw", max_steps=200, log_every=1
    )
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "first.sqlite")
        engine = Engine(store, max_concurrent=1)
        try:
            start = time.perf_counter()
            run_id = engine.start(config)
            while store.last_step(run_id) is None:
                time.sleep(0.002)
            first_point = time.perf_counter() - start
            record = store.get_run(run_id)
            assert record is not None and record.started is not None
            step_1 = store.read_metrics(run_id)["wall_time"][0]
            engine.stop(run_id)
        finally:
            engine.close()
    return {"first_point": first_point, "to_step_1": step_1 - record.started}


if __name__ == "__main__":
    print(json.dumps(_measure()))
