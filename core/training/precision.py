"""A run's numeric precision: the dtype policy its model is built under, and the loss
scaling that float16 needs.

Under `mixed_bfloat16` and `mixed_float16` the layers compute in 16 bits while every
variable, the optimizer's slots included, stays float32 (Keras's master weights), so the
optimizer's update, its telemetry and the instruments work in float32 as before. float16's
narrow range underflows small gradients: its runs scale the loss by a dynamic factor S (a
power of two) before differentiating, and Keras's `LossScaleOptimizer` around the run's
optimizer skips the steps whose gradients overflow and adapts S.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras
import tensorflow as tf

from core.training.config import PRECISIONS


@contextlib.contextmanager
def policy(precision: str) -> Iterator[None]:
    """Layers made inside take `precision`'s dtype policy. Keras keeps the policy per
    thread, so runs training in other threads keep theirs."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)} (got {precision!r})")
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def loss_scaler(
    precision: str, optimizer: keras.optimizers.Optimizer
) -> keras.optimizers.LossScaleOptimizer | None:
    """Keras's dynamic loss scaling around `optimizer` for a float16 run, else None."""
    if precision != "mixed_float16":
        return None
    return keras.optimizers.LossScaleOptimizer(optimizer)


def apply(
    optimizer: keras.optimizers.Optimizer,
    scaler: keras.optimizers.LossScaleOptimizer | None,
    grads: list[tf.Tensor],
    variables: list[tf.Variable],
) -> None:
    """The optimizer's step; a float16 run's through its loss scaling, which skips a step
    whose gradients overflowed and adapts the scale. The gradients are the true ones (see
    `SingleTask.loss_scale`): scaled again, exactly, for the scaler to unscale.

    Args:
        optimizer: The run's optimizer, which steps when there is no scaler.
        scaler: `loss_scaler`'s wrapper of `optimizer` for a float16 run; None for any
            other precision.
        grads: The true (unscaled) gradients, one per variable.
        variables: The trainable variables, in `grads`' order.
    """
    if scaler is None:
        optimizer.apply(grads, variables)
        return
    scale = scaler.dynamic_scale
    scaler.apply([g * tf.cast(scale, g.dtype) for g in grads], variables)


def scaler_variables(scaler: keras.optimizers.LossScaleOptimizer | None) -> list[tf.Variable]:
    """A float16 run's loss scale and its count of finite steps since it last grew."""
    return [] if scaler is None else [scaler.step_counter, scaler.dynamic_scale]
