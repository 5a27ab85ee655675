"""Does ε inside the square root matter more in float16? `python -m bench.epsilon_precision`

The seeds put ε inside √(v + ε) for low precision. Under Keras's mixed precision the
layers compute in float16 while the weights and the optimizer's moments stay float32, so
the question is measured, not assumed: Adam on LeNet/digits, the same seed and batches,
with ε outside and inside the root, in float32 and in mixed_float16; printed is how far
apart the two loss curves of each precision get.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from core.engine import Engine

RUN = {"model": "lenet", "dataset": "digits", "optimizer": "adam", "epochs": 5, "seed": 0}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        engine = Engine(Path(folder) / "lab.sqlite", max_concurrent=1)
        try:
            for precision in ("float32", "mixed_float16"):
                losses, accuracies = [], []
                for inside in (False, True):
                    hyperparameters = {"epsilon_inside_sqrt": inside}
                    config = {**RUN, "precision": precision, "hyperparameters": hyperparameters}
                    run_id = engine.start(config)
                    status = engine.wait(run_id, 600)
                    assert status.status == "completed", status
                    losses.append(engine.store.read_metrics(run_id)["loss"])
                    accuracies.append(status.final_metrics["val_accuracy"])
                gap = float(np.max(np.abs(losses[0] - losses[1])))
                print(
                    f"{precision:>14}: max |Δ training loss| {gap:.3f}, val accuracy "
                    f"{accuracies[0]:.3f} (ε outside) vs {accuracies[1]:.3f} (inside)"
                )
        finally:
            engine.close()


if __name__ == "__main__":
    main()
