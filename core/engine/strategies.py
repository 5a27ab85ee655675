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
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multiworker":
        return _multiworker()
    raise ValueError(f"strategy: unknown strategy {name!r}")


@functools.cache
def _multiworker() -> tf.distribute.Strategy:
    # TensorFlow allows one collective setup per process: every multiworker run shares it.
    return tf.distribute.MultiWorkerMirroredStrategy()
