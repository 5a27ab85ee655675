"""`RunData`: a run's splits as batches in the run's order, and the steps they make."""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from core import data
from core.training.config import RunConfig

EVAL_BATCH = 500


@dataclass(frozen=True)
class RunData:
    """What a run trains and validates on.

    Attributes:
        dataset: The loaded dataset.
        steps_per_epoch: Full batches per pass over the training split (a DP-SGD run's
            batches, Poisson samples, hold `batch_size` examples on average: as many).
        total_steps: Steps the run will take (epochs, capped by `max_steps`).
        train: The training batches of steps `start + 1` on.
        test: The whole test split, in batches of `EVAL_BATCH`.
        first_batch: The run's first training batch.
        first_batch_sha256: Its digest, which fingerprints the batch order.
        sharpness_batch: The examples sharpness is measured on: the first batch, or with
            `sharpness_examples` the split's first examples in their stored order.
    """

    dataset: data.Dataset
    steps_per_epoch: int
    total_steps: int
    train: tf.data.Dataset
    test: tf.data.Dataset
    first_batch: Any
    first_batch_sha256: str
    sharpness_batch: Any

    @classmethod
    def load(cls, config: RunConfig, start: int = 0) -> RunData:
        """The data of a run of `config` that continues after step `start`; raises
        `ValueError` naming `batch_size` when one batch is more than the training split."""
        dataset = data.load(config.dataset, data_dir=config.data_dir)
        steps_per_epoch = len(dataset.y_train) // config.batch_size
        if steps_per_epoch == 0:
            raise ValueError(
                f"batch_size: larger than the training split ({len(dataset.y_train)} examples)"
            )
        total_steps = config.epochs * steps_per_epoch
        if config.max_steps is not None:
            total_steps = min(total_steps, config.max_steps)
        split = functools.partial(
            data.pipeline, dataset, seed=config.batch_seed, multitask=config.multitask
        )
        batches = functools.partial(
            split,
            "train",
            batch_size=config.batch_size,
            drop_remainder=True,
            epochs=math.ceil(total_steps / steps_per_epoch),
        )
        if config.dp_clip is not None:  # DP-SGD: Poisson samples of batch_size on average
            batches = functools.partial(
                data.poisson_batches,
                dataset,
                rate=config.batch_size / len(dataset.y_train),
                seed=config.batch_seed,
                steps=total_steps,
                multitask=config.multitask,
            )
        train = batches(start=start)
        test = split("test", batch_size=EVAL_BATCH, epochs=1)
        first_batch = next(iter(batches().take(1)))
        sharpness_batch = first_batch
        if config.sharpness_examples is not None:
            if config.sharpness_examples > len(dataset.y_train):
                raise ValueError(
                    f"sharpness_examples: more than the training split "
                    f"({len(dataset.y_train)} examples)"
                )
            stored_order = split("train", batch_size=config.sharpness_examples, shuffle=False)
            sharpness_batch = next(iter(stored_order.take(1)))
        return cls(
            dataset,
            steps_per_epoch,
            total_steps,
            train,
            test,
            first_batch,
            sha256(first_batch),
            sharpness_batch,
        )


def sha256(arrays: Any) -> str:
    """The SHA-256 of a nest of arrays' bytes (a batch, a model's weights)."""
    digest = hashlib.sha256()
    for array in tf.nest.flatten(arrays):
        digest.update(np.ascontiguousarray(np.asarray(array)).tobytes())
    return digest.hexdigest()
