"""The `tf.distribute` strategy a run trains under, by its `RunConfig.strategy` name."""

from __future__ import annotations

import functools

import tensorflow as tf


def make_strategy(name: str) -> tf.distribute.Strategy:
    """`default`: the current (one-device) strategy; `mirrored`: every local GPU, else every
    logical CPU; `multiworker`: `MultiWorkerMirroredStrategy` configured by `TF_CONFIG`."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return tf.distribute.MirroredStrategy([d.name for d in gpus])
        # Collective all-reduce keys restart at the same numbers in every strategy, so a
        # second strategy in one process collides with the first ("shape mismatch in the
        # collective instance"). On CPUs, reducing to one device avoids collectives.
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            cpus, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if name == "multiworker":
        return _multiworker()
    raise ValueError(f"strategy: unknown strategy {name!r}")


def collective() -> bool:
    """Whether this process set up the multi-worker strategy (and its runtime)."""
    return _multiworker.cache_info().currsize > 0


@functools.cache
def _multiworker() -> tf.distribute.Strategy:
    # TensorFlow allows one collective setup per process: every multiworker run shares it.
    return tf.distribute.MultiWorkerMirroredStrategy()
