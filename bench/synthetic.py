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

LAYERS = ("conv1", "conv2", "dense1", "dense2", "logits")
FLAG_KEYS = ("clip_active", "projection_active")
STEP_KEYS = (
    "loss",
    "accuracy",
    "learning_rate",
    "weight_decay",
    "distance_from_init",
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
        for stat in ("step_norm", "param_norm", "update_ratio", "sparsity", "distance_from_init")
        for layer in LAYERS
    ),
    "epoch",
    "wall_time",
)
EPOCH_KEYS = ("val_loss", "val_accuracy")
# mnist-5k's 4,000 training images at batch 64.
STEPS_PER_EPOCH = 62
# Steps per second of the made-up run: about LeNet's speed on two cores.
STEPS_PER_SECOND = 250
# Rows per commit: what the writer's default flush interval, 0.5 s, gathers at that speed.
ROWS_PER_FLUSH = STEPS_PER_SECOND // 2


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
