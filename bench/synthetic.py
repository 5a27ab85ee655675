"""Made-up telemetry shaped like a real run's, for the store and dashboard figures.

A LeNet run with `adamw` and telemetry on logs the `STEP_KEYS` at every step and the
`EPOCH_KEYS` at the end of every epoch; `tests/system/test_bench.py` checks this against a real
run with its instruments off. The instruments' series, logged about 20 times a run, are
left out: what the instruments cost is figure 8's. The values are random walks (0/1 for
the flags): the store's cost does not depend on them, and the charts downsample every
series the same way whatever its values (`epoch` and `wall_time` grow as they would).
`write_run` puts such a run through a real `Store` metrics writer, so reading it back
reads what a real run leaves on disk.
"""

from __future__ import annotations

import time

import numpy as np

from core.store import Store
from core.store.metrics import Block

LAYERS = ("conv1", "conv2", "dense1", "dense2", "logits")
FLAG_KEYS = ("clip_active", "projection_active")
STEP_KEYS = (
    "loss",
    "accuracy",
    "learning_rate",
    "weight_decay",
    "distance_from_init",
    "weight_norm",
    "grad_norm",
    "grad_norm_clipped",
    "clip_active",
    "top_k_kept",
    "pruned_frozen",
    "param_norm",
    "param_norm_proposed",
    "projection_active",
    *(
        f"{stat}/{layer}"
        for stat in (
            "step_norm",
            "param_norm",
            "update_ratio",
            "sparsity",
            "distance_from_init",
            "weight_norm",
        )
        for layer in LAYERS
    ),
    "epoch",
    "wall_time",
)
EPOCH_KEYS = ("val_loss", "val_accuracy")
# What the Live page's Training view draws (the per-layer series are another view's).
TRAINING_KEYS = tuple(key for key in STEP_KEYS if "/" not in key)
# mnist-5k's 4,000 training images at batch 64.
STEPS_PER_EPOCH = 62
# Steps per second of the made-up run: about LeNet's speed on two cores.
STEPS_PER_SECOND = 250
# Rows per commit: what the writer's default flush interval, 0.5 s, gathers at that speed.
ROWS_PER_FLUSH = STEPS_PER_SECOND // 2
# Rows per commit of `write_long_run`: a writer's flush at 8,000 steps per second.
BLOCK_ROWS = 4096


def rows(steps: int, *, seed: int = 0) -> list[tuple[int, dict[str, float]]]:
    """`(step, values)` for steps 1 to `steps`, with epoch-end keys every epoch."""
    rng = np.random.default_rng(seed)
    matrix = np.exp(np.cumsum(rng.normal(0.0, 0.01, (steps, len(STEP_KEYS))), axis=0))
    for key in FLAG_KEYS:
        matrix[:, STEP_KEYS.index(key)] = rng.integers(0, 2, steps)
    step_numbers = np.arange(1, steps + 1)
    matrix[:, STEP_KEYS.index("epoch")] = step_numbers / STEPS_PER_EPOCH
    matrix[:, STEP_KEYS.index("wall_time")] = time.time() + step_numbers / STEPS_PER_SECOND
    epoch_values = rng.random((steps // STEPS_PER_EPOCH + 1, len(EPOCH_KEYS)))
    out = []
    for index, values in enumerate(matrix.tolist()):
        step = index + 1
        row = dict(zip(STEP_KEYS, values, strict=True))
        if step % STEPS_PER_EPOCH == 0:
            row |= zip(EPOCH_KEYS, epoch_values[step // STEPS_PER_EPOCH].tolist(), strict=True)
        out.append((step, row))
    return out


def write_run(store: Store, run_id: str, steps: int, *, knob_changes: int = 3) -> None:
    """Creates run `run_id` and writes `steps` steps of telemetry through a metrics
    writer, committing every `ROWS_PER_FLUSH` rows, plus `knob_changes` live learning
    rate changes, evenly spaced, as the engine records them."""
    store.create_run(run_id, run_id, {"model": "lenet", "optimizer": "adamw"}, status="running")
    # A long interval: the background flusher stays out of the way of explicit flushes.
    with store.metrics_writer(run_id, flush_interval=3600.0) as writer:
        for step, values in rows(steps):
            writer.append(step, values)
            if step % ROWS_PER_FLUSH == 0:
                writer.flush()
    for change in range(1, knob_changes + 1):
        previous, value = 1e-3 / 2 ** (change - 1), 1e-3 / 2**change
        payload = {"name": "learning_rate", "value": value, "previous": previous}
        store.add_event(run_id, steps * change // (knob_changes + 1), "knob", payload)
    store.finish(run_id, "completed", {"steps": steps})


def write_long_run(
    store: Store, run_id: str, steps: int, *, keys: tuple[str, ...] = TRAINING_KEYS, seed: int = 0
) -> None:
    """Creates run `run_id` with `steps` steps of `keys` (random walks, 0/1 flags, `epoch`
    and `wall_time` as `rows` makes them) and the `EPOCH_KEYS` at every epoch's end,
    committed `BLOCK_ROWS` rows at a time from NumPy, as a writer's flushes store them:
    ten million steps take about a minute, not the hours a writer's per-row appends would."""
    store.create_run(run_id, run_id, {"model": "lenet", "optimizer": "adamw"}, status="running")
    rng = np.random.default_rng(seed)
    flags = [keys.index(key) for key in FLAG_KEYS if key in keys]
    level = np.ones((len(keys), 1))
    started = time.time()
    for first in range(1, steps + 1, BLOCK_ROWS):
        numbers = np.arange(first, min(first + BLOCK_ROWS, steps + 1))
        walk = level * np.exp(np.cumsum(rng.normal(0.0, 0.01, (len(keys), len(numbers))), axis=1))
        level = walk[:, -1:]
        walk[flags] = rng.integers(0, 2, (len(flags), len(numbers)))
        for key, values in (
            ("epoch", numbers / STEPS_PER_EPOCH),
            ("wall_time", started + numbers / STEPS_PER_SECOND),
        ):
            if key in keys:
                walk[keys.index(key)] = values
        epochs = np.full((len(EPOCH_KEYS), len(numbers)), np.nan)
        ends = numbers % STEPS_PER_EPOCH == 0
        epochs[:, ends] = rng.random((len(EPOCH_KEYS), int(ends.sum())))
        store.append_metrics(
            run_id, Block((*keys, *EPOCH_KEYS), numbers, np.vstack([walk, epochs]))
        )
    store.finish(run_id, "completed", {"steps": steps})
