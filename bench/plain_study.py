"""Figure 18's reference: the lab's sweep written as a plain Optuna script, each trial a
`model.fit` in this one process, one after the other.

    python -m bench.plain_study --trials 20 --steps 100 --val-every 20 --seed 0 \\
        --low 1e-3 --high 0.3

It runs the study figure 18 gives `optlab sweep`: the same model (`core.models.build`),
data and batches (`core.data`), batch size, steps, validation interval, and Optuna's
random sampler with the same seed, so both draw the same learning rates; a trial's value
is its best validation accuracy, as a lab trial's is. It prints one JSON line: each
trial's learning rate, value, and start and end (seconds since the epoch, Optuna's own
`datetime_start` and `datetime_complete`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

MODEL = "mlp"
DATASET = "digits"
BATCH = 64


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The study's trials, as `trial_rows` gives them."""
    # Imported in the script's own process: figure 18 imports this module for its names.
    import keras
    import optuna

    from core import data, models

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dataset = data.load(DATASET)

    def objective(trial: optuna.Trial) -> float:
        rate = trial.suggest_float("learning_rate", args.low, args.high, log=True)
        model = models.build(
            MODEL, input_shape=dataset.input_shape, num_classes=dataset.num_classes, seed=0
        )
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        batches = data.pipeline(dataset, "train", batch_size=BATCH, seed=0)  # repeats
        validation = data.pipeline(dataset, "test", batch_size=BATCH, seed=0, epochs=1)
        history = model.fit(
            batches,
            epochs=args.steps // args.val_every,  # a Keras epoch: val_every steps
            steps_per_epoch=args.val_every,
            validation_data=validation,
            shuffle=False,  # the pipeline shuffles already
            verbose=0,
        )
        return max(history.history["val_accuracy"])

    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.RandomSampler(seed=args.seed)
    )
    study.optimize(objective, n_trials=args.trials)
    return trial_rows(study.trials)


def trial_rows(trials: Sequence[Any]) -> list[dict[str, Any]]:
    """Optuna's finished trials as JSON-ready rows: state, learning rate, value, start and
    end in seconds since the epoch. Figure 18 reads the lab's study into the same rows."""
    return [
        {
            "state": trial.state.name,
            "learning_rate": trial.params["learning_rate"],
            "value": trial.value,
            "start": trial.datetime_start.timestamp(),
            "end": trial.datetime_complete.timestamp(),
        }
        for trial in trials
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.plain_study")
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--val-every", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--low", type=float, required=True)
    parser.add_argument("--high", type=float, required=True)
    return parser


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    print(json.dumps(run(_parser().parse_args())))
