"""Figure 6: the store's write rate from a training thread, and the read of a long run.

Both use `core.store.Store` on a temporary file, with rows shaped like a LeNet run's
telemetry (`bench.synthetic`).
"""

from __future__ import annotations

import concurrent.futures
import tempfile
import time
from pathlib import Path

from bench import profiling, synthetic
from bench.figures import Settings
from bench.rows import Measured, Quantity
from bench.timing import median_seconds
from core.store import Store

READ_STEPS = 50_000
READ_RUNS = 5


def write_rate(settings: Settings) -> Measured:
    """Figure 6a: rows per second that a thread appends and the writer commits.

    A thread appends rows as fast as it can for a fixed time, then closes the writer,
    which commits the rest; the rate counts every row over the time until that last
    commit. The rows are made beforehand, so only the store is timed.
    """
    seconds = settings.pick(2.0, 0.5)
    pool = synthetic.rows(synthetic.ROWS_PER_FLUSH * 8)
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "bench.sqlite") as store:
        store.create_run("write", "write", {}, status="running")

        def train() -> tuple[int, float]:
            step = 0
            start = time.perf_counter()
            with store.metrics_writer("write") as writer:
                while time.perf_counter() - start < seconds:
                    step += 1
                    writer.append(step, pool[step % len(pool)][1])
            return step, time.perf_counter() - start

        with concurrent.futures.ThreadPoolExecutor(1, "bench-training") as thread:
            written, elapsed = thread.submit(train).result()
        committed = len(store.read_metrics("write"))
    if committed != written:
        raise RuntimeError(f"{written} rows appended but {committed} committed")
    return Measured(
        a=Quantity(written / elapsed, "rows/s"),
        detail=(
            f"{written:,} rows of {len(synthetic.STEP_KEYS)} keys in {elapsed:.2f} s, "
            "the final commit included."
        ),
    )


def read_time(settings: Settings) -> Measured:
    """Figure 6b: the median time of `read_metrics` on a 50,000-step run, after one warm
    read."""
    del settings  # cheap enough to measure in full even in a quick run
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "bench.sqlite") as store:
        synthetic.write_run(store, "read", READ_STEPS)
        metrics = store.read_metrics("read")
        seconds = median_seconds(lambda: store.read_metrics("read"), runs=READ_RUNS)
        # Profiled now, while the store is open: one read costs about as much as one sample.
        hotspots = profiling.python_hotspots(lambda: store.read_metrics("read"))
    megabytes = len(metrics) * len(metrics.keys) * 8 / 1e6
    return Measured(
        a=Quantity(seconds, "s"),
        diagnose=lambda: f"Profiled with cProfile, the time goes to {hotspots}.",
        detail=(
            f"{len(metrics):,} steps × {len(metrics.keys)} series, {megabytes:.1f} MB of float64."
        ),
    )
